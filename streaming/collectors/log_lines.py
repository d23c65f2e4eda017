"""Kafka broker log lines -> typed records. Pure: no I/O, no state.

A log4j entry starts with a header line ``[yyyy-MM-dd HH:mm:ss,SSS] LEVEL message
(logger)`` (Kafka's ``log4j.properties``; ``.`` before the milliseconds is accepted too).
Lines that do not start with a header continue the previous entry (stack traces,
messages with a newline); the kinds parsed here are all single-line messages, so a
continuation line is skipped, never parsed.

Each supported message is recognised by a marker and then parsed strictly: a line that
has the marker but not the expected shape is ``Unparseable`` with a reason, never an
exception. The formats come from Apache Kafka's source (the class that logs each one is
named on its pattern below) and were checked against real broker logs; the parser tests
hold one sample of each.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import tzinfo
from enum import StrEnum
from typing import Final

from streaming.collectors.log_layouts import (
    CONTINUATION,
    Continuation,
    LineReader,
    Unrecognised,
)

__all__ = ["CONTINUATION", "Continuation"]

# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class PartitionState:
    """A partition state as the controller sent it (UpdateMetadata or LeaderAndIsr)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    partition_epoch: int | None  # zkVersion / partitionEpoch, when the state has one


@dataclass(frozen=True, slots=True)
class CachedLeaderInfo:
    """kafka.server.MetadataCache (ZkMetadataCache in 3.x), state.change.logger, TRACE:
    a broker cached one partition state of an UpdateMetadata request."""

    ts: int
    broker: int
    controller_id: int
    controller_epoch: int
    correlation_id: int
    state: PartitionState


@dataclass(frozen=True, slots=True)
class DeletedFromCache:
    """Same origin: a partition whose UpdateMetadata state had leader -2 (deletion)."""

    ts: int
    broker: int
    controller_id: int
    controller_epoch: int
    correlation_id: int
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class LeaderAndIsrReceived:
    """kafka.server.ReplicaManager.becomeLeaderOrFollower, state.change.logger, TRACE."""

    ts: int
    broker: int
    controller_id: int
    controller_epoch: int
    state: PartitionState


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


@dataclass(frozen=True, slots=True)
class ControllerElected:
    """kafka.controller.KafkaController.elect (ZooKeeper) or
    org.apache.kafka.controller.QuorumController (KRaft), INFO."""

    ts: int
    controller_id: int
    controller_epoch: int


@dataclass(frozen=True, slots=True)
class ControllerSeen:
    """KafkaController.elect (0.11 to 3.x, ZooKeeper mode; ZookeeperLeaderElector.elect in
    0.10), DEBUG, on a broker that lost the election: which broker is the controller. The
    line names no controller epoch."""

    ts: int
    controller_id: int


@dataclass(frozen=True, slots=True)
class PreferredLeaderElected:
    """KafkaController.removePartitionsFromPreferredReplicaElection (0.10 to 3.x, ZooKeeper
    mode), INFO: after a preferred replica election the partition's leader is its
    preferred replica. The line names no epoch, ISR or replicas."""

    ts: int
    controller_id: int
    topic: str
    partition: int
    leader: int


@dataclass(frozen=True, slots=True)
class BrokerEpochsInitialized:
    """KafkaController.initializeControllerContext, INFO: the live brokers and their epochs
    (the czxid of their registration) when this controller took over."""

    ts: int
    controller_id: int
    epochs: Mapping[int, int]


@dataclass(frozen=True, slots=True)
class BrokerSetChanged:
    """KafkaController.processBrokerChange, INFO: new, dead and bounced brokers, and the
    whole live set. The line carries no broker epochs."""

    ts: int
    controller_id: int
    added: tuple[int, ...]
    deleted: tuple[int, ...]
    bounced: tuple[int, ...]
    live: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class BrokerRegistered:
    """kafka.zk.KafkaZkClient.registerBroker, INFO, on the registering broker: its epoch."""

    ts: int
    broker: int
    epoch: int


@dataclass(frozen=True, slots=True)
class TopicsCreated:
    """KafkaController.processTopicChange, INFO: new topics and their replica assignment."""

    ts: int
    controller_id: int
    assignment: Mapping[str, Mapping[int, tuple[int, ...]]]


@dataclass(frozen=True, slots=True)
class TopicDeleted:
    """kafka.controller.TopicDeletionManager, INFO: a topic deletion completed."""

    ts: int
    controller_id: int
    topic: str


Record = (
    CachedLeaderInfo
    | DeletedFromCache
    | LeaderAndIsrReceived
    | IsrProposal
    | IsrCommitted
    | IsrUpdateFailed
    | ControllerElected
    | ControllerSeen
    | PreferredLeaderElected
    | BrokerEpochsInitialized
    | BrokerSetChanged
    | BrokerRegistered
    | TopicsCreated
    | TopicDeleted
)

RECORD_KINDS: Final = {
    CachedLeaderInfo: "cached_leader_info",
    DeletedFromCache: "deleted_from_cache",
    LeaderAndIsrReceived: "leader_and_isr",
    IsrProposal: "isr_proposal",
    IsrCommitted: "isr_committed",
    IsrUpdateFailed: "isr_update_failed",
    ControllerElected: "controller_elected",
    ControllerSeen: "controller_seen",
    PreferredLeaderElected: "preferred_leader_elected",
    BrokerEpochsInitialized: "broker_epochs",
    BrokerSetChanged: "broker_change",
    BrokerRegistered: "broker_registered",
    TopicsCreated: "topics_created",
    TopicDeleted: "topic_deleted",
}
"""The metrics label of each record type."""


def record_kind(record: Record) -> str:
    return RECORD_KINDS[type(record)]


@dataclass(frozen=True, slots=True)
class Ignored:
    """An entry of a kind the collector does not use (most of a broker's log)."""


@dataclass(frozen=True, slots=True)
class Unparseable:
    """A header that is not a valid time, or a supported message in an unexpected shape."""

    reason: str


LineResult = Record | Continuation | Ignored | Unparseable

IGNORED: Final = Ignored()

# --------------------------------------------------------------------------- lines


class LineParser:
    """One file's lines -> results: the layout (``log_layouts``), then the message."""

    def __init__(self, zone: tzinfo, custom_layout: re.Pattern[str] | None = None) -> None:
        self._reader = LineReader(zone, custom_layout)
        self.last_ts: int | None = None  # the time of the latest entry read

    def parse(self, line: str) -> LineResult:
        """Parse one line of a broker log; never raises."""
        read = self._reader.read(line)
        if isinstance(read, Continuation):
            return read
        if isinstance(read, Unrecognised):
            return Unparseable(read.reason)
        self.last_ts = read.ts if self.last_ts is None else max(self.last_ts, read.ts)
        return parse_message(read.ts, read.message)


def parse_line(line: str, zone: tzinfo) -> LineResult:
    """Parse one line in one of the built-in layouts; never raises."""
    return LineParser(zone).parse(line)


# --------------------------------------------------------------------------- messages

_IDS = r"\d+(?:,\d+)*"
_BROKER = r"\[Broker id=(?P<broker>\d+)\] "
# kafka.cluster.Partition's logIdent: "[Partition foo-0 broker=1] " (1.0 and later) or
# "Partition [foo,0] on broker 1: " (0.10 to 0.11).
_PARTITION = (
    r"(?:\[Partition (?P<tp>\S+) broker=(?P<broker>\d+)\] "
    r"|Partition \[(?P<topic>[^,\]]+),(?P<partition>\d+)\] on broker (?P<broker1>\d+): )"
)
# KafkaController's logIdent: "[Controller id=N] " (1.0 and later), "[Controller N]: " (0.10
# to 0.11); its listeners in 0.10: "[BrokerChangeListener on Controller N]: ".
_CONTROLLER = r"\[(?:\w+ on )?Controller(?: id=)? ?(?P<controller>\d+)\]:? "
_UPDATE_METADATA_SOURCE = (
    r" in response to UpdateMetadata request sent by controller (?P<cid>\d+)"
    r" epoch (?P<cepoch>\d+) with correlation id (?P<corr>-?\d+)"
)

# MetadataCache.updateMetadata (1.1 to 2.8; ZkMetadataCache in 3.x): the state is
# UpdateMetadataRequest.PartitionState (1.1 to 2.3) or UpdateMetadataPartitionState (2.4+).
_CACHED = re.compile(
    _BROKER
    + r"Cached leader info (?P<state>\w*PartitionState\(.*\)) for partition (?P<tp>\S+)"
    + _UPDATE_METADATA_SOURCE
)
_DELETED = re.compile(
    _BROKER + r"Deleted partition (?P<tp>\S+) from metadata cache" + _UPDATE_METADATA_SOURCE
)
# ReplicaManager.becomeLeaderOrFollower, one line per partition (TRACE): "Broker N received
# LeaderAndIsr request PartitionState(...) ... for partition [t,p]" (0.10 to 0.11),
# "[Broker id=N] Received LeaderAndIsr request PartitionState(...) ... for partition t-p"
# (1.0 to 2.3), "... LeaderAndIsrPartitionState(topicName='t', partitionIndex=p, ...)"
# (2.4+; zkVersion= up to 3.2, partitionEpoch= from 3.3). The INFO "Handling
# LeaderAndIsr request correlationId ..." summary (2.8+) names no partition state.
_RECEIVED = re.compile(
    r"(?:\[Broker id=(?P<broker>\d+)\] Received|Broker (?P<broker0>\d+) received) LeaderAndIsr"
    r" request (?P<state>\w*PartitionState\(.*\)) correlation id (?P<corr>-?\d+) from"
    r" controller (?P<cid>\d+) epoch (?P<cepoch>\d+)(?: for partition (?P<tp>\S+))?"
)
# Partition.maybeShrinkIsr. 0.10: "Shrinking ISR for partition [t,p] from A to B"; 0.11 to
# 2.1: "Shrinking ISR from A to B"; 2.2 and later add ". Leader: (highWatermark: H,
# endOffset: E). Out of sync replicas: (brokerId: R, endOffset: O)." and 3.6 and later
# add ", lastCaughtUpTimeMs: T" to each replica.
_SHRINK = re.compile(
    _PARTITION + rf"Shrinking ISR (?:for partition \S+ )?from (?P<old>{_IDS}) to (?P<new>{_IDS})"
    r"(?P<tail>\. Leader: .*)?\.?"
)
# Partition.maybeExpandIsr (0.10 to 2.7; "for partition T" in 0.10). Since 2.8 no
# expansion is logged before the commit.
_EXPAND = re.compile(
    _PARTITION + rf"Expanding ISR (?P<for>for partition \S+ )?from (?P<old>{_IDS})"
    rf" to (?P<new>{_IDS})"
)
# The commit. "ISR updated to [1,2] and zkVersion updated to [7]" (TRACE up to 2.3, INFO
# 2.4 to 3.x ZooKeeper writes), "ISR updated to 1,2 and version updated to 7" (2.7 AlterIsr),
# "... and version updated to [7]" (2.8 to 3.0), "... to 1,2 and version updated to 7"
# (3.1 to 3.4), "ISR updated to 1,2  and version updated to 7" or "to 1 (under-min-isr) and"
# (3.5 and later: Partition.handleAlterPartitionUpdate).
_COMMITTED = re.compile(
    _PARTITION + rf"ISR updated (?:from AlterIsr )?to \[?(?P<isr>{_IDS})\]?"
    r"(?: \(under-min-isr\))?\s+and (?:zkVersion|version) updated to \[?(?P<version>\d+)\]?"
)
# The cancels: "Cached zkVersion [7] not equal to that in zookeeper, skip updating ISR"
# (0.10 to 2.3; no brackets from 2.4), "Failed to alter partition to ... since the controller
# rejected the request with ..." (3.3+, INFO). WARN "... Retrying." lines are not cancels.
_FAILED = re.compile(
    _PARTITION + r"(?:Cached zkVersion (?P<zk>\[?)\d+\]? not equal to that in zookeeper,"
    r" skip updating ISR|Failed to alter partition to .*)"
)
# KafkaController.elect: "N successfully elected as the controller. Epoch incremented to E
# and epoch zk version is now V" (2.2+); 1.1 to 2.1 log "Epoch incremented to E" apart, 1.0
# "Incremented epoch to E", and 0.10 to 0.11 "Controller N incremented epoch to E".
_ELECTED = re.compile(
    _CONTROLLER + r"(?P<self>\d+) successfully elected as the controller\. Epoch incremented to"
    r" (?P<epoch>\d+) and epoch zk version is now \d+"
)
_EPOCH_INCREMENTED = re.compile(
    _CONTROLLER + r"(?:Epoch incremented to|Incremented epoch to"
    r"|Controller (?P<self>\d+) incremented epoch to) (?P<epoch>\d+)"
)
# QuorumController (KRaft): "[Controller N] Becoming the active controller at epoch E, ..."
# (3.0 to 3.4), "[QuorumController id=N] Becoming ..." (3.5+); the tail differs by version.
_ACTIVE = re.compile(
    r"\[(?:Quorum)?Controller (?:id=)?(?P<controller>\d+)\] Becoming the active controller at"
    r" epoch (?P<epoch>\d+)\b.*"
)
# KafkaController.elect, when another broker already is the controller (0.11 to 3.x):
# "Broker N has been elected as the controller, so stopping the election process." In 0.10
# ZookeeperLeaderElector (whose only user is KafkaController's controllerElector) logs "Broker
# N has been elected as leader, so stopping ..." and "Broker N was elected as leader instead
# of broker M". All DEBUG.
_CONTROLLER_SEEN = re.compile(
    r"(?:\[(?:\w+ on )?Controller(?: id=)? ?\d+\]:? )?Broker (?P<controller>\d+)"
    r" (?:has been elected as (?:the controller|leader), so stopping the election process\."
    r"|was elected as leader instead of broker \d+)"
)
# KafkaController.removePartitionsFromPreferredReplicaElection (0.10 to 3.x): "Partition T-P
# completed preferred replica leader election. New leader is N" ("[T,P]" in 0.10 to 0.11).
_PREFERRED_ELECTED = re.compile(
    _CONTROLLER + r"Partition (?P<tp>\S+) completed preferred replica leader election\."
    r" New leader is (?P<leader>\d+)"
)
_EPOCHS = re.compile(_CONTROLLER + r"Initialized broker epochs cache: \w*\((?P<pairs>.*)\)")
_EPOCH_PAIR = re.compile(r"(\d+) -> (\d+)")
# KafkaController.processBrokerChange; "bounced brokers" since 2.2.
_BROKERS = re.compile(
    _CONTROLLER + r"Newly added brokers: (?P<added>[\d,]*), deleted brokers: (?P<deleted>[\d,]*),"
    r"(?: bounced brokers: (?P<bounced>[\d,]*),)? all live brokers: (?P<live>[\d,]*)"
)
_REGISTERED = re.compile(
    r"Registered broker (?P<broker>\d+) at path \S+ with addresses: .*,"
    r" czxid \(broker epoch\): (?P<epoch>\d+)"
)
# KafkaController.processTopicChange (TopicChangeListener in 0.10). The assignment:
# "Map([t,0] -> List(1, 2))" (0.10), "Map(t-0 -> Vector(1, 2))" (1.1 to 2.3),
# "Map(t-0 -> ReplicaAssignment(replicas=1,2, ...))" (2.4+, inside TopicIdReplicaAssignment
# from 2.8). A line cut short keeps the entries it holds in full.
_NEW_TOPICS = re.compile(
    _CONTROLLER + r"New topics: \[(?P<topics>.*?)\], deleted topics: \[.*?\],"
    r" new partition replica assignment \[(?P<assignment>.*)"
)
_ASSIGNED = re.compile(
    r"(?:(?P<tp>[A-Za-z0-9._-]+-\d+)|\[(?P<topic>[A-Za-z0-9._-]+),(?P<partition>\d+)\]) -> "
    r"(?:ReplicaAssignment\(replicas=(?P<replicas>[\d,]*),|\w*\((?P<replicas1>[\d, ]*)\))"
)
_TOPIC_NAMES = re.compile(r"[A-Za-z0-9._-]+")
# TopicDeletionManager.completeDeleteTopic; its logIdent ends with ", " up to 2.x.
_TOPIC_DELETED = re.compile(
    r"\[Topic Deletion Manager (?P<controller>\d+)\],? Deletion of topic (?P<topic>\S+)"
    r" successfully completed"
)

# Markers: a message that contains one is expected to match the pattern of its kind.
_MARKERS: Final = (
    ("Cached leader info ", "cached_leader_info"),
    ("] Deleted partition ", "deleted_from_cache"),
    ("eceived LeaderAndIsr request ", "leader_and_isr"),
    ("Shrinking ISR ", "isr_proposal"),
    ("Expanding ISR ", "isr_proposal"),
    ("ISR updated ", "isr_committed"),
    ("skip updating ISR", "isr_update_failed"),
    ("Failed to alter partition to ", "isr_update_failed"),
    ("successfully elected as the controller", "controller_elected"),
    ("ncremented epoch to ", "controller_elected"),
    ("Epoch incremented to ", "controller_elected"),
    ("Becoming the active controller at epoch", "controller_elected"),
    (" so stopping the election process", "controller_seen"),
    ("was elected as leader instead of broker", "controller_seen"),
    ("completed preferred replica leader election", "preferred_leader_elected"),
    ("Initialized broker epochs cache", "broker_epochs"),
    ("Newly added brokers: ", "broker_change"),
    ("czxid (broker epoch)", "broker_registered"),
    ("New topics: ", "topics_created"),
    ("successfully completed", "topic_deleted"),
)

# "name=value" up to the next ", name=" (values may hold commas: "isr=1,2" up to 2.3)
_STATE_FIELD = re.compile(r"(\w+)=(.*?)(?=, \w+=|$)")


class _MalformedError(Exception):
    """Raised inside the parsers; becomes ``Unparseable``."""


IGNORED_RECORD: Final = Ignored()
"""A parser's answer for a message of its kind that carries no fact (not malformed)."""


def parse_message(ts: int, message: str) -> Record | Ignored | Unparseable:
    """The record a log message (without its header and logger) holds."""
    kind = next((kind for marker, kind in _MARKERS if marker in message), None)
    if kind is None:
        return IGNORED
    try:
        record = _PARSERS[kind](ts, message)
    except (_MalformedError, ValueError):
        return Unparseable(f"malformed_{kind}")
    if record is IGNORED_RECORD:
        return IGNORED
    if record is None:
        if kind == "topic_deleted":  # "successfully completed" is common in other messages
            return IGNORED
        return Unparseable(f"malformed_{kind}")
    return record


def _cached(ts: int, message: str) -> Record | Ignored | None:
    if match := _CACHED.fullmatch(message):
        state = _partition_state(match["state"], match["tp"])
        return CachedLeaderInfo(
            ts, int(match["broker"]), int(match["cid"]), int(match["cepoch"]),
            int(match["corr"]), state,
        )  # fmt: skip
    return None


def _deleted(ts: int, message: str) -> Record | Ignored | None:
    if match := _DELETED.fullmatch(message):
        topic, partition = split_topic_partition(match["tp"])
        return DeletedFromCache(
            ts, int(match["broker"]), int(match["cid"]), int(match["cepoch"]),
            int(match["corr"]), topic, partition,
        )  # fmt: skip
    return None


def _received(ts: int, message: str) -> Record | Ignored | None:
    if match := _RECEIVED.fullmatch(message):
        state = _partition_state(match["state"], match["tp"])
        if state.partition_epoch is None:
            raise _MalformedError("a LeaderAndIsr state has a zkVersion or partitionEpoch")
        broker = match["broker"] if match["broker"] is not None else match["broker0"]
        return LeaderAndIsrReceived(ts, int(broker), int(match["cid"]), int(match["cepoch"]), state)
    return None


def _isr_proposal(ts: int, message: str) -> Record | Ignored | None:
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
    old, new = _ids(match["old"]), _ids(match["new"])
    return IsrProposal(ts, broker, topic, partition, old, new, logging)


def _isr_committed(ts: int, message: str) -> Record | Ignored | None:
    if match := _COMMITTED.fullmatch(message):
        broker, topic, partition = _partition_prefix(match)
        return IsrCommitted(ts, broker, topic, partition, _ids(match["isr"]), int(match["version"]))
    return None


def _isr_update_failed(ts: int, message: str) -> Record | Ignored | None:
    if match := _FAILED.fullmatch(message):
        broker, topic, partition = _partition_prefix(match)
        # brackets around the zkVersion: 0.10 to 2.3, where the commit is logged at TRACE
        logging = CommitLogging.TRACE if match["zk"] == "[" else CommitLogging.INFO
        return IsrUpdateFailed(ts, broker, topic, partition, logging)
    return None


def _controller_elected(ts: int, message: str) -> Record | Ignored | None:
    if match := _ELECTED.fullmatch(message) or _EPOCH_INCREMENTED.fullmatch(message):
        if match["self"] is not None and match["self"] != match["controller"]:
            raise _MalformedError("the elected broker is the one logging")
        return ControllerElected(ts, int(match["controller"]), int(match["epoch"]))
    if match := _ACTIVE.fullmatch(message):
        return ControllerElected(ts, int(match["controller"]), int(match["epoch"]))
    if "successfully elected as the controller" in message:
        return IGNORED_RECORD  # 1.0 to 2.1: the epoch comes on its own line
    return None


def _controller_seen(ts: int, message: str) -> Record | Ignored | None:
    if match := _CONTROLLER_SEEN.fullmatch(message):
        return ControllerSeen(ts, int(match["controller"]))
    return None


def _preferred_leader_elected(ts: int, message: str) -> Record | Ignored | None:
    if match := _PREFERRED_ELECTED.fullmatch(message):
        topic, partition = split_topic_partition(match["tp"])
        return PreferredLeaderElected(
            ts, int(match["controller"]), topic, partition, int(match["leader"])
        )
    return None


def _broker_epochs(ts: int, message: str) -> Record | Ignored | None:
    if match := _EPOCHS.fullmatch(message):
        pairs = match["pairs"].strip()
        found = _EPOCH_PAIR.findall(pairs)
        if len(found) != (pairs.count("->") if pairs else 0):
            raise _MalformedError("every entry is 'id -> epoch'")
        epochs = {int(broker): int(epoch) for broker, epoch in found}
        return BrokerEpochsInitialized(ts, int(match["controller"]), epochs)
    return None


def _broker_change(ts: int, message: str) -> Record | Ignored | None:
    if match := _BROKERS.fullmatch(message):
        return BrokerSetChanged(
            ts, int(match["controller"]), _ids(match["added"]), _ids(match["deleted"]),
            _ids(match["bounced"] or ""), _ids(match["live"]),
        )  # fmt: skip
    return None


def _broker_registered(ts: int, message: str) -> Record | Ignored | None:
    if match := _REGISTERED.fullmatch(message):
        return BrokerRegistered(ts, int(match["broker"]), int(match["epoch"]))
    return None


def _topics_created(ts: int, message: str) -> Record | Ignored | None:
    match = _NEW_TOPICS.fullmatch(message)
    if match is None:
        return None
    # "Set(a, b)", "HashSet(a)", "Set()"; only these topics' entries are read
    names = match["topics"].strip()
    names = names[names.find("(") + 1 : names.rfind(")")] if "(" in names else names
    topics = set(_TOPIC_NAMES.findall(names))
    assignment: dict[str, dict[int, tuple[int, ...]]] = {}
    for found in _ASSIGNED.finditer(match["assignment"]):
        if found["tp"] is not None:
            topic, partition = split_topic_partition(found["tp"])
        else:
            topic, partition = found["topic"], int(found["partition"])
        if topic not in topics:
            continue  # an entry of a topic the line does not name as new
        replicas = found["replicas"] if found["replicas"] is not None else found["replicas1"]
        assignment.setdefault(topic, {})[partition] = _ids(replicas)
    if not assignment and "->" in match["assignment"]:
        raise _MalformedError("every assignment is 'topic-partition -> replicas'")
    return TopicsCreated(ts, int(match["controller"]), assignment)


def _topic_deleted(ts: int, message: str) -> Record | Ignored | None:
    if match := _TOPIC_DELETED.fullmatch(message):
        return TopicDeleted(ts, int(match["controller"]), match["topic"])
    return None


_PARSERS: Final = {
    "cached_leader_info": _cached,
    "deleted_from_cache": _deleted,
    "leader_and_isr": _received,
    "isr_proposal": _isr_proposal,
    "isr_committed": _isr_committed,
    "isr_update_failed": _isr_update_failed,
    "controller_elected": _controller_elected,
    "controller_seen": _controller_seen,
    "preferred_leader_elected": _preferred_leader_elected,
    "broker_epochs": _broker_epochs,
    "broker_change": _broker_change,
    "broker_registered": _broker_registered,
    "topics_created": _topics_created,
    "topic_deleted": _topic_deleted,
}


# --------------------------------------------------------------------------- pieces


def split_topic_partition(text: str) -> tuple[str, int]:
    """``"my-topic-3"`` (Kafka's TopicPartition.toString) or ``"[my-topic,3]"``
    (TopicAndPartition, 0.10 to 0.11) -> ``("my-topic", 3)``."""
    if text.startswith("[") and text.endswith("]"):  # "[my-topic,3]": 0.10 to 0.11
        topic, sep, partition = text[1:-1].rpartition(",")
    else:
        topic, sep, partition = text.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise _MalformedError(f"not a topic-partition: {text!r}")
    return topic, int(partition)


def _partition_prefix(match: re.Match[str]) -> tuple[int, str, int]:
    if match["tp"] is not None:
        topic, partition = split_topic_partition(match["tp"])
        return int(match["broker"]), topic, partition
    return int(match["broker1"]), match["topic"], int(match["partition"])


def _ids(text: str) -> tuple[int, ...]:
    text = text.strip().strip("[]")
    return tuple(int(item) for item in text.split(",") if item.strip())


def _partition_state(text: str, topic_partition: str | None) -> PartitionState:
    """A ``...PartitionState(name=value, ...)`` as generated by Kafka's message classes
    (2.4+): ``topicName='A', partitionIndex=1, controllerEpoch=29, leader=2, ...``."""
    body = text[text.index("(") + 1 : text.rindex(")")].strip()
    fields = {name: value.strip() for name, value in _STATE_FIELD.findall(body)}
    try:
        if "topicName" in fields and "partitionIndex" in fields:
            topic, partition = fields["topicName"].strip("'"), int(fields["partitionIndex"])
        elif topic_partition is not None:
            topic, partition = split_topic_partition(topic_partition)
        else:
            raise _MalformedError("no topic and partition")
        if topic_partition is not None and (topic, partition) != split_topic_partition(
            topic_partition
        ):
            raise _MalformedError("the state is for another partition")
        epoch_text = fields.get("partitionEpoch", fields.get("zkVersion"))
        return PartitionState(
            topic=topic,
            partition=partition,
            leader=int(fields["leader"]),
            leader_epoch=int(fields["leaderEpoch"]),
            isr=_ids(fields["isr"]),
            replicas=_ids(fields["replicas"]),
            offline_replicas=_ids(fields.get("offlineReplicas", "[]")),
            partition_epoch=int(epoch_text) if epoch_text is not None else None,
        )
    except KeyError as missing:
        raise _MalformedError(f"no {missing}") from None
