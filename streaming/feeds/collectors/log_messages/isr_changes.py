"""``kafka.cluster.Partition`` (INFO): the leader's ISR proposals, their commits and their
cancels, in the wordings of every Kafka version (docs/collectors-logs.md has the table)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from streaming.feeds.collectors.log_messages.wording import IDS, Marker, ids, split_topic_partition


class CommitLogging(StrEnum):
    """What a wording tells of how the broker logs the ISR commit (kafka.cluster.Partition).

    * ``trace``: Kafka 0.10 to 2.1 wordings. The ZooKeeper write's success
      (``ISR updated to [..] and zkVersion updated to [..]``) is logged at TRACE, so at
      INFO the proposal is the change, unless ``Cached zkVersion [..] not equal to that
      in zookeeper, skip updating ISR`` follows.
    * ``info``: Kafka 2.4 and later (ZooKeeper writes, AlterIsr, AlterPartition). The
      change is the commit line ``ISR updated to ...``.
    * ``unknown``: a wording that versions of both kinds share: the shrink of 2.2 to 3.5
      (``Shrinking ISR from A to B. Leader: (...)``) and the expansion of 1.0 to 2.7
      (``[Partition t-p broker=N] Expanding ISR from A to B``); up to 2.3 the commit is
      logged at TRACE, from 2.4 at INFO. The translator learns which from the broker's
      other lines.
    """

    TRACE = "trace"
    INFO = "info"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class IsrProposal:
    """kafka.cluster.Partition, INFO: the leader decided to shrink or expand the ISR
    ("Shrinking ISR from ... to ..." / "Expanding ISR from ... to ..."); not yet
    committed (ZooKeeper write or AlterPartition)."""

    ts: int
    broker: int
    topic: str
    partition: int
    old_isr: tuple[int, ...]
    new_isr: tuple[int, ...]
    commit_logging: CommitLogging = field(default_factory=lambda: CommitLogging.UNKNOWN)


@dataclass(frozen=True, slots=True)
class IsrCommitted:
    """kafka.cluster.Partition, INFO: the new ISR is committed ("ISR updated to ... and
    zkVersion updated to ..." in ZooKeeper mode, "... and version updated to ..." after an
    AlterIsr / AlterPartition response)."""

    ts: int
    broker: int
    topic: str
    partition: int
    isr: tuple[int, ...]
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class IsrUpdateFailed:
    """kafka.cluster.Partition, INFO: the proposed ISR change was not committed ("Cached
    zkVersion ... not equal to that in zookeeper, skip updating ISR" / "Failed to alter
    partition to ...")."""

    ts: int
    broker: int
    topic: str
    partition: int
    commit_logging: CommitLogging = field(default_factory=lambda: CommitLogging.UNKNOWN)


IsrRecord = IsrProposal | IsrCommitted | IsrUpdateFailed

RECORD_KINDS: Final[Mapping[type[object], str]] = {
    IsrProposal: "isr_proposal",
    IsrCommitted: "isr_committed",
    IsrUpdateFailed: "isr_update_failed",
}
"""The metrics label of each record type."""

# kafka.cluster.Partition's logIdent: "[Partition foo-0 broker=1] " (1.0 and later) or
# "Partition [foo,0] on broker 1: " (0.10 to 0.11).
_PARTITION = (
    r"(?:\[Partition (?P<tp>\S+) broker=(?P<broker>\d+)\] "
    r"|Partition \[(?P<topic>[^,\]]+),(?P<partition>\d+)\] on broker (?P<broker1>\d+): )"
)
# Partition.maybeShrinkIsr. 0.10: "Shrinking ISR for partition [t,p] from A to B"; 0.11 to
# 2.1: "Shrinking ISR from A to B"; 2.2 and later add ". Leader: (highWatermark: H,
# endOffset: E). Out of sync replicas: (brokerId: R, endOffset: O)." and 3.6 and later
# add ", lastCaughtUpTimeMs: T" to each replica.
_SHRINK = re.compile(
    _PARTITION + rf"Shrinking ISR (?:for partition \S+ )?from (?P<old>{IDS}) to (?P<new>{IDS})"
    r"(?P<tail>\. Leader: .*)?\.?"
)
# Partition.maybeExpandIsr (0.10 to 2.7; "for partition T" in 0.10). Since 2.8 no
# expansion is logged before the commit.
_EXPAND = re.compile(
    _PARTITION + rf"Expanding ISR (?P<for>for partition \S+ )?from (?P<old>{IDS})"
    rf" to (?P<new>{IDS})"
)
# The commit. "ISR updated to [1,2] and zkVersion updated to [7]" (TRACE up to 2.3, INFO
# 2.4 to 3.x ZooKeeper writes), "ISR updated to 1,2 and version updated to 7" (2.7 AlterIsr),
# "... and version updated to [7]" (2.8 to 3.0), "... to 1,2 and version updated to 7"
# (3.1 to 3.4), "ISR updated to 1,2  and version updated to 7" or "to 1 (under-min-isr) and"
# (3.5 and later: Partition.handleAlterPartitionUpdate).
_COMMITTED = re.compile(
    _PARTITION + rf"ISR updated (?:from AlterIsr )?to \[?(?P<isr>{IDS})\]?"
    r"(?: \(under-min-isr\))?\s+and (?:zkVersion|version) updated to \[?(?P<version>\d+)\]?"
)
# The cancels: "Cached zkVersion [7] not equal to that in zookeeper, skip updating ISR"
# (0.10 to 2.3; no brackets from 2.4), "Failed to alter partition to ... since the controller
# rejected the request with ..." (3.3+, INFO). WARN "... Retrying." lines are not cancels.
_FAILED = re.compile(
    _PARTITION + r"(?:Cached zkVersion (?P<zk>\[?)\d+\]? not equal to that in zookeeper,"
    r" skip updating ISR|Failed to alter partition to .*)"
)


def _isr_proposal(ts: int, message: str) -> IsrProposal | None:
    if match := _SHRINK.fullmatch(message):
        tail = match["tail"]
        if tail is None:  # 0.10 to 2.1
            logging = CommitLogging.TRACE
        elif "lastCaughtUpTimeMs" in tail:  # 3.6+
            logging = CommitLogging.INFO
        else:
            logging = CommitLogging.UNKNOWN
    elif match := _EXPAND.fullmatch(message):
        # "for partition" (0.10) or the 0.10-0.11 logIdent
        old_wording = match["for"] is not None or match["tp"] is None
        logging = CommitLogging.TRACE if old_wording else CommitLogging.UNKNOWN
    else:
        return None
    broker, topic, partition = _partition_prefix(match)
    old, new = ids(match["old"]), ids(match["new"])
    return IsrProposal(ts, broker, topic, partition, old, new, logging)


def _isr_committed(ts: int, message: str) -> IsrCommitted | None:
    if match := _COMMITTED.fullmatch(message):
        broker, topic, partition = _partition_prefix(match)
        return IsrCommitted(ts, broker, topic, partition, ids(match["isr"]), int(match["version"]))
    return None


def _isr_update_failed(ts: int, message: str) -> IsrUpdateFailed | None:
    if match := _FAILED.fullmatch(message):
        broker, topic, partition = _partition_prefix(match)
        # brackets around the zkVersion: 0.10 to 2.3, where the commit is logged at TRACE
        logging = CommitLogging.TRACE if match["zk"] == "[" else CommitLogging.INFO
        return IsrUpdateFailed(ts, broker, topic, partition, logging)
    return None


def _partition_prefix(match: re.Match[str]) -> tuple[int, str, int]:
    if match["tp"] is not None:
        topic, partition = split_topic_partition(match["tp"])
        return int(match["broker"]), topic, partition
    return int(match["broker1"]), match["topic"], int(match["partition"])


MARKERS: Final[tuple[Marker[IsrRecord], ...]] = (
    Marker("Shrinking ISR ", IsrProposal, _isr_proposal),
    Marker("Expanding ISR ", IsrProposal, _isr_proposal),
    Marker("ISR updated ", IsrCommitted, _isr_committed),
    Marker("skip updating ISR", IsrUpdateFailed, _isr_update_failed),
    Marker("Failed to alter partition to ", IsrUpdateFailed, _isr_update_failed),
)
