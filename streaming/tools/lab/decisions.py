"""What Kafka itself decided, read from Kafka's own records: the judge of the scoreboard.

Nothing here reads isrwatch's output or decodes with isrwatch's decoders:

* KRaft: ``kafka.tools.DumpLogSegments --cluster-metadata-decoder`` (Kafka's own decoding
  of ``__cluster_metadata``) prints every record as JSON with its batch's ``CreateTime``,
  the active controller's clock when it wrote the change. Replaying ``TopicRecord``,
  ``PartitionRecord``, ``PartitionChangeRecord`` (4.1.1: ``isr``, ``leader``,
  ``eligibleLeaderReplicas``, ``lastKnownElr``, absent fields unchanged), ``ClearElrRecord``
  and ``RemoveTopicRecord`` gives each partition's state after every change;
  ``BrokerRegistrationChangeRecord`` / ``FenceBrokerRecord`` give the fences.
* The leaders' ``server.log``: ``Shrinking ISR from A to B. ... Out of sync replicas:
  (brokerId: N, ...)`` (``Partition.scala``, 3.9.1 and 4.1.1), logged by the leader's
  ``isr-expiration`` check before it asks the controller: a shrink with such a line is
  the leader's rule; one without is the controller's (fence, shutdown, election).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streaming.tools.lab.ground_truth import GroundTruth
from streaming.tools.lab.metadata_dump import LEADER_CHANGE, dumped_records

__all__ = [
    "Fence",
    "IsrChange",
    "LeaderShrinkLine",
    "MetadataTruth",
    "dump_metadata_log",
    "from_zookeeper",
    "leader_shrink_lines",
    "parse_metadata_dump",
    "read_metadata_log",
]


@dataclass(frozen=True)
class IsrChange:
    """One partition change Kafka committed, with the state after it."""

    ts_ms: int  # the batch's CreateTime: the controller's clock at the commit
    offset: int
    topic: str
    partition: int
    leader: int
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    last_known_elr: tuple[int, ...]
    replicas: tuple[int, ...]
    removed: tuple[int, ...]  # replicas that left the ISR with this change
    added: tuple[int, ...]
    leader_changed: bool
    created: bool  # the PartitionRecord of a new partition


@dataclass(frozen=True)
class Fence:
    ts_ms: int
    broker: int
    fenced: bool  # False: unfenced again


@dataclass
class MetadataTruth:
    changes: list[IsrChange] = field(default_factory=list)
    fences: list[Fence] = field(default_factory=list)
    deleted_topics: dict[str, int] = field(default_factory=dict)  # topic -> when deleted

    def until(self, ts_ms: int) -> MetadataTruth:
        """What Kafka had decided by ``ts_ms``."""
        return MetadataTruth(
            [change for change in self.changes if change.ts_ms <= ts_ms],
            [fence for fence in self.fences if fence.ts_ms <= ts_ms],
            dict(self.deleted_topics),
        )

    def final_state(self) -> dict[tuple[str, int], IsrChange]:
        last: dict[tuple[str, int], IsrChange] = {}
        for change in self.changes:
            last[(change.topic, change.partition)] = change
        return {key: value for key, value in last.items() if key[0] not in self.deleted_topics}


def dump_metadata_log(java: str, classpath: str, log_dir: Path) -> list[tuple[int, int, Any]]:
    """Kafka's own decoding of every segment of ``log_dir`` (``__cluster_metadata-0``):
    (offset, CreateTime, record) in log order."""
    segments = sorted(log_dir.glob("*.log"))
    if not segments:
        return []
    done = subprocess.run(
        [
            java,
            "-Xmx256m",
            "-cp",
            classpath,
            "kafka.tools.DumpLogSegments",
            "--cluster-metadata-decoder",
            "--files",
            ",".join(str(segment) for segment in segments),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return parse_metadata_dump(done.stdout)


def parse_metadata_dump(text: str) -> list[tuple[int, int, Any]]:
    """The metadata records of ``DumpLogSegments --cluster-metadata-decoder``'s output
    (``metadata_dump``) as (offset, CreateTime, record)."""
    return [
        (r.offset, r.ts_ms, {"type": r.kind, "version": r.version, "data": r.data})
        for r in dumped_records(text)
        if r.kind != LEADER_CHANGE
    ]


def read_metadata_log(records: Iterable[tuple[int, int, Any]]) -> MetadataTruth:
    """Replay Kafka's decoded records into each partition's state after each change."""
    truth = MetadataTruth()
    topics: dict[str, str] = {}  # topic id -> name
    state: dict[tuple[str, int], dict[str, Any]] = {}
    for offset, ts, record in records:
        kind, data = record.get("type"), record.get("data", {})
        if kind == "TOPIC_RECORD":
            topics[data["topicId"]] = data["name"]
        elif kind == "REMOVE_TOPIC_RECORD":
            name = topics.get(data["topicId"])
            if name is not None:
                truth.deleted_topics[name] = ts
        elif kind in ("PARTITION_RECORD", "PARTITION_CHANGE_RECORD"):
            name = topics.get(data["topicId"], data["topicId"])
            key = (name, int(data["partitionId"]))
            created = kind == "PARTITION_RECORD"
            before = {} if created else dict(state.get(key, {}))
            after = dict(before)
            for source, target in (
                ("replicas", "replicas"),
                ("isr", "isr"),
                ("leader", "leader"),
                ("eligibleLeaderReplicas", "elr"),
                ("lastKnownElr", "last_known_elr"),
            ):
                if source in data:
                    after[target] = data[source]
            state[key] = after
            truth.changes.append(_change(ts, offset, key, before, after, created))
        elif kind == "CLEAR_ELR_RECORD":
            # 4.0+ (ClearElrRecord.json): one field, TopicName; empty clears every topic's
            for key, after in state.items():
                if data.get("topicName") and data["topicName"] != key[0]:
                    continue
                if after.get("elr") or after.get("last_known_elr"):
                    before = dict(after)
                    after["elr"], after["last_known_elr"] = [], []
                    truth.changes.append(_change(ts, offset, key, before, after, False))
        elif kind == "FENCE_BROKER_RECORD":
            truth.fences.append(Fence(ts, int(data["id"]), True))
        elif kind == "UNFENCE_BROKER_RECORD":
            truth.fences.append(Fence(ts, int(data["id"]), False))
        elif kind == "BROKER_REGISTRATION_CHANGE_RECORD" and data.get("fenced", 0) != 0:
            # fenced: 1 fenced, -1 unfenced, 0 unchanged (BrokerRegistrationFencingChange)
            truth.fences.append(Fence(ts, int(data["brokerId"]), data["fenced"] == 1))
    return truth


def _change(
    ts: int,
    offset: int,
    key: tuple[str, int],
    before: dict[str, Any],
    after: dict[str, Any],
    created: bool,
) -> IsrChange:
    old_isr, new_isr = set(before.get("isr", [])), set(after.get("isr", []))
    return IsrChange(
        ts_ms=ts,
        offset=offset,
        topic=key[0],
        partition=key[1],
        leader=int(after.get("leader", -1)),
        isr=tuple(after.get("isr", [])),
        elr=tuple(after.get("elr", [])),
        last_known_elr=tuple(after.get("last_known_elr", [])),
        replicas=tuple(after.get("replicas", [])),
        removed=tuple(sorted(old_isr - new_isr)) if not created else (),
        added=tuple(sorted(new_isr - old_isr)) if not created else (),
        leader_changed=not created and before.get("leader") != after.get("leader"),
        created=created,
    )


@dataclass(frozen=True)
class LeaderShrinkLine:
    """A leader's ``Shrinking ISR`` line: its isr-expiration check found followers out of
    sync (``Partition.maybeShrinkIsr``)."""

    ts_ms: int
    leader: int
    topic: str
    partition: int
    out_of_sync: tuple[int, ...]
    last_caught_up_ms: dict[int, int]


_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] ")
_SHRINKING = re.compile(
    r"\[Partition (?P<tp>\S+) broker=(?P<broker>\d+)\] Shrinking ISR from \S+ to \S+\. "
    r".*?Out of sync replicas: (?P<replicas>.*)\. \(kafka\.cluster\.Partition\)"
)
_OUT_OF_SYNC = re.compile(r"\(brokerId: (\d+), endOffset: -?\d+, lastCaughtUpTimeMs: (-?\d+)\)")


def leader_shrink_lines(server_logs: Sequence[Path]) -> list[LeaderShrinkLine]:
    """Every ``Shrinking ISR`` line of these logs (stamped in UTC: the lab's brokers run
    with ``-Duser.timezone=UTC``)."""
    found = []
    for path in server_logs:
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            stamp, shrink = _STAMP.match(line), _SHRINKING.search(line)
            if not stamp or not shrink:
                continue
            when = datetime.strptime(stamp[1], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC)
            topic, _, partition = shrink["tp"].rpartition("-")
            replicas = {
                int(broker): int(caught_up)
                for broker, caught_up in _OUT_OF_SYNC.findall(shrink["replicas"])
            }
            found.append(
                LeaderShrinkLine(
                    ts_ms=int(when.timestamp() * 1000),
                    leader=int(shrink["broker"]),
                    topic=topic,
                    partition=int(partition),
                    out_of_sync=tuple(sorted(replicas)),
                    last_caught_up_ms=replicas,
                )
            )
    return sorted(found, key=lambda line: line.ts_ms)


def from_zookeeper(truth: GroundTruth) -> MetadataTruth:
    """ZooKeeper mode: Kafka's decisions from ZooKeeper's own transaction log, as
    ``ground_truth.from_zookeeper_log`` reads it: each write of a partition's state znode
    (leader, ISR; its time is ZooKeeper's commit time) in order, and a broker's fence is
    the end of its registration (its session expired or closed)."""
    result = MetadataTruth()
    last: dict[tuple[str, int], dict[str, Any]] = {}
    for version in truth.partitions:
        key = (version.topic, version.partition)
        before = last.get(key)
        after = {"isr": list(version.isr), "leader": version.leader}
        after["replicas"] = list(version.replicas)
        last[key] = after
        result.changes.append(
            _change(version.ts, version.partition_epoch, key, before or {}, after, before is None)
        )
    for registration in truth.registrations:
        result.fences.append(Fence(registration.ts, registration.broker, False))
        if registration.ended is not None:
            result.fences.append(Fence(registration.ended, registration.broker, True))
    result.fences.sort(key=lambda fence: fence.ts_ms)
    result.deleted_topics = {deletion.topic: deletion.ts for deletion in truth.deletions}
    return result
