"""What Kafka itself recorded during a lab run, read back after it: the ground truth the log
corpus matrix (bench/log_corpus_matrix.py) writes its expectations from.

* ZooKeeper mode: ZooKeeper's transaction log (``<dataDir>/version-2/log.*``), every write
  the controller and the brokers made, decoded here from ZooKeeper's own jute format
  (``org.apache.zookeeper.server.persistence.FileTxnLog``: a file header, then per
  transaction a CRC, the ``TxnHeader`` and the transaction record, and an ``EOR`` byte).
  Each znode's version counts its writes: the partition state's version is Kafka's
  ``zkVersion`` (the partition epoch of the contract).
* KRaft: ``__cluster_metadata``, printed by Kafka's own
  ``kafka.tools.DumpLogSegments --cluster-metadata-decoder`` and read here.

Neither reader looks at a broker's log: the expectations are what Kafka stored.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streaming.tools.lab.metadata_dump import LEADER_CHANGE, dumped_records

__all__ = [
    "BrokerRegistration",
    "ControllerElection",
    "GroundTruth",
    "PartitionVersion",
    "TopicAssignment",
    "TopicCreation",
    "TopicDeletion",
    "from_metadata_dump",
    "from_zookeeper_log",
    "zookeeper_transactions",
]


@dataclass(frozen=True)
class PartitionVersion:
    """One state of a partition as Kafka stored it (the ZooKeeper znode
    ``/brokers/topics/T/partitions/P/state`` at one version, or KRaft's partition after a
    ``PartitionRecord`` / ``PartitionChangeRecord``)."""

    ts: int
    topic: str
    partition: int
    partition_epoch: int  # zkVersion (ZooKeeper) or partitionEpoch (KRaft)
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]


@dataclass(frozen=True)
class ControllerElection:
    ts: int
    controller_id: int
    controller_epoch: int  # /controller_epoch (ZooKeeper); the Raft leader epoch (KRaft)


@dataclass(frozen=True)
class BrokerRegistration:
    ts: int
    broker: int
    epoch: int  # czxid of /brokers/ids/N (ZooKeeper); brokerEpoch (KRaft)
    ended: int | None = None  # when the registration went (ZooKeeper session closed)


@dataclass(frozen=True)
class TopicCreation:
    ts: int
    topic: str
    assignment: Mapping[int, tuple[int, ...]]


@dataclass(frozen=True)
class TopicAssignment:
    """A write of a topic's replica assignment (ZooKeeper's ``/brokers/topics/T``; a
    reassignment writes it at its start and its end)."""

    ts: int
    topic: str
    assignment: Mapping[int, tuple[int, ...]]


@dataclass(frozen=True)
class TopicDeletion:
    ts: int  # when the topic's metadata went (ZooKeeper: /brokers/topics/T deleted)
    topic: str


@dataclass
class GroundTruth:
    elections: list[ControllerElection] = field(default_factory=list)
    registrations: list[BrokerRegistration] = field(default_factory=list)
    creations: list[TopicCreation] = field(default_factory=list)
    assignments: list[TopicAssignment] = field(default_factory=list)
    deletions: list[TopicDeletion] = field(default_factory=list)
    partitions: list[PartitionVersion] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "elections": [vars(e) for e in self.elections],
            "registrations": [vars(r) for r in self.registrations],
            "creations": [
                {
                    "ts": c.ts,
                    "topic": c.topic,
                    "assignment": {str(p): list(r) for p, r in sorted(c.assignment.items())},
                }
                for c in self.creations
            ],
            "assignments": [
                {
                    "ts": a.ts,
                    "topic": a.topic,
                    "assignment": {str(p): list(r) for p, r in sorted(a.assignment.items())},
                }
                for a in self.assignments
            ],
            "deletions": [vars(d) for d in self.deletions],
            "partitions": [
                {**vars(v), "isr": list(v.isr), "replicas": list(v.replicas)}
                for v in self.partitions
            ],
        }

    def live_brokers(self, at: int) -> dict[int, int]:
        """Broker id -> epoch of the registrations alive at ``at``."""
        live = {}
        for registration in self.registrations:
            if registration.ts <= at and (registration.ended is None or registration.ended > at):
                live[registration.broker] = registration.epoch
        return live

    def version(self, topic: str, partition: int, epoch: int) -> PartitionVersion | None:
        for version in self.partitions:
            if (version.topic, version.partition, version.partition_epoch) == (
                topic,
                partition,
                epoch,
            ):
                return version
        return None

    def previous(self, version: PartitionVersion) -> PartitionVersion | None:
        """The version before ``version`` of its partition (same topic incarnation)."""
        before = None
        for candidate in self.partitions:
            if candidate is version:
                return before
            if (candidate.topic, candidate.partition) == (version.topic, version.partition):
                before = candidate
        return None


# ----------------------------------------------------------------- ZooKeeper's transactions

# ZooDefs.OpCode
_CREATE, _DELETE, _SET_DATA, _CHECK, _MULTI, _CREATE2 = 1, 2, 5, 13, 14, 15
_CREATE_CONTAINER, _CREATE_TTL, _CLOSE_SESSION, _ERROR = 19, 21, -11, -1
_LOG_MAGIC = 0x5A4B4C47  # "ZKLG": FileTxnLog.TXNLOG_MAGIC


@dataclass(frozen=True)
class ZooKeeperWrite:
    """One znode write of a committed transaction (a ``multi`` gives several)."""

    zxid: int
    ts: int
    session: int
    op: str  # "create", "set", "delete", "close" (a session closed: its ephemerals went)
    path: str
    data: bytes = b""
    version: int = 0  # the znode's version after a set
    ephemeral: bool = False


class _Jute:
    """org.apache.jute.BinaryInputArchive: big-endian ints and longs, length-prefixed
    strings and buffers (-1: null)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def read_int(self) -> int:
        (value,) = struct.unpack_from(">i", self.data, self.at)
        self.at += 4
        return int(value)

    def read_long(self) -> int:
        (value,) = struct.unpack_from(">q", self.data, self.at)
        self.at += 8
        return int(value)

    def read_boolean(self) -> bool:
        self.at += 1
        return self.data[self.at - 1] != 0

    def read_buffer(self) -> bytes:
        length = self.read_int()
        if length < 0:
            return b""
        self.at += length
        return self.data[self.at - length : self.at]

    def read_string(self) -> str:
        return self.read_buffer().decode("utf-8")

    def skip_acls(self) -> None:
        for _ in range(max(self.read_int(), 0)):
            self.read_int()  # perms
            self.read_string()  # scheme
            self.read_string()  # id


def zookeeper_transactions(data_dir: Path) -> list[ZooKeeperWrite]:
    """Every write in ZooKeeper's transaction logs under ``data_dir``, in zxid order."""
    writes: list[ZooKeeperWrite] = []
    for path in sorted((data_dir / "version-2").glob("log.*")):
        writes += _read_log(path.read_bytes())
    return sorted(writes, key=lambda w: w.zxid)


def _read_log(data: bytes) -> Iterator[ZooKeeperWrite]:
    jute = _Jute(data)
    if jute.read_int() != _LOG_MAGIC:
        raise ValueError("not a ZooKeeper transaction log")
    jute.read_int()  # version
    jute.read_long()  # dbid
    while jute.at + 12 <= len(data):
        jute.read_long()  # the entry's CRC
        entry = jute.read_buffer()
        if not entry:
            return  # the zeros the log is preallocated with
        jute.at += 1  # "EOR"
        record = _Jute(entry)
        session, _cxid, zxid, ts, kind = (
            record.read_long(),
            record.read_int(),
            record.read_long(),
            record.read_long(),
            record.read_int(),
        )
        if kind == _MULTI:
            for _ in range(record.read_int()):
                inner_kind = record.read_int()
                inner = _Jute(record.read_buffer())
                yield from _write(inner_kind, inner, zxid, ts, session)
        else:
            yield from _write(kind, record, zxid, ts, session)


def _write(kind: int, record: _Jute, zxid: int, ts: int, session: int) -> Iterator[ZooKeeperWrite]:
    if kind in (_CREATE, _CREATE2):
        path, data = record.read_string(), record.read_buffer()
        record.skip_acls()
        ephemeral = record.read_boolean()
        yield ZooKeeperWrite(zxid, ts, session, "create", path, data, 0, ephemeral)
    elif kind in (_CREATE_CONTAINER, _CREATE_TTL):
        path, data = record.read_string(), record.read_buffer()
        yield ZooKeeperWrite(zxid, ts, session, "create", path, data)
    elif kind == _DELETE:
        yield ZooKeeperWrite(zxid, ts, session, "delete", record.read_string())
    elif kind == _SET_DATA:
        path, data, version = record.read_string(), record.read_buffer(), record.read_int()
        yield ZooKeeperWrite(zxid, ts, session, "set", path, data, version)
    elif kind == _CLOSE_SESSION:
        yield ZooKeeperWrite(zxid, ts, session, "close", "")
    # check, error, createSession, setACL: no znode changes what the corpus states


_STATE_PATH = re.compile(r"/brokers/topics/(?P<topic>[^/]+)/partitions/(?P<partition>\d+)/state")
_TOPIC_PATH = re.compile(r"/brokers/topics/(?P<topic>[^/]+)")
_BROKER_PATH = re.compile(r"/brokers/ids/(?P<broker>\d+)")


def from_zookeeper_log(writes: Iterable[ZooKeeperWrite]) -> GroundTruth:
    """Kafka's znodes' history -> the ground truth. The controller epoch is
    ``/controller_epoch``'s value when ``/controller`` is created (KafkaController.elect
    writes the epoch and the controller znode in one multi since 2.2; before, the epoch
    right after)."""
    truth = GroundTruth()
    assignments: dict[str, dict[int, tuple[int, ...]]] = {}
    # (topic, partition) -> the target replicas of a reassignment under way, and whether
    # the ISR has held all of them yet
    targets: dict[tuple[str, int], tuple[tuple[int, ...], bool]] = {}
    open_registrations: dict[int, tuple[int, BrokerRegistration]] = {}  # broker -> session
    pending_controller: tuple[int, int] | None = None  # (ts, id) waiting for its epoch
    controller_epoch = 0
    for write in writes:
        if write.op == "close":
            for broker, (session, registration) in list(open_registrations.items()):
                if session == write.session:
                    _end_registration(truth, registration, write.ts)
                    del open_registrations[broker]
            continue
        path = write.path
        if path == "/controller_epoch" and write.op in ("create", "set"):
            controller_epoch = int(write.data.decode())
            if pending_controller is not None:
                ts, controller = pending_controller
                truth.elections.append(ControllerElection(ts, controller, controller_epoch))
                pending_controller = None
        elif path == "/admin/reassign_partitions" and write.op == "create":
            # 0.10 to 2.3 (and ReassignPartitionsCommand --zookeeper later): the targets
            for entry in json.loads(write.data)["partitions"]:
                key = (str(entry["topic"]), int(entry["partition"]))
                targets[key] = (tuple(int(b) for b in entry["replicas"]), False)
        elif path == "/admin/reassign_partitions" and write.op == "delete":
            targets.clear()  # every reassignment of the znode completed
        elif path == "/controller" and write.op == "create":
            controller = int(json.loads(write.data)["brokerid"])
            pending_controller = (write.ts, controller)
        elif match := _BROKER_PATH.fullmatch(path):
            broker = int(match["broker"])
            if write.op == "create":
                registration = BrokerRegistration(write.ts, broker, write.zxid)
                truth.registrations.append(registration)
                open_registrations[broker] = (write.session, registration)
            elif write.op == "delete" and broker in open_registrations:
                _end_registration(truth, open_registrations.pop(broker)[1], write.ts)
        elif match := _STATE_PATH.fullmatch(path):
            if write.op in ("create", "set"):
                topic, partition = match["topic"], int(match["partition"])
                state = json.loads(write.data)
                isr = tuple(int(b) for b in state["isr"])
                replicas = assignments.get(topic, {}).get(partition, ())
                target = targets.get((topic, partition))
                if target is not None and target[1]:
                    # KafkaController.onPartitionReassignment (2.4 to 3.9; the same steps
                    # before): once the ISR holds every target replica the controller sets
                    # the replicas to the target in memory and sends them with each new
                    # state; the topic znode follows only when the reassignment completes.
                    replicas = target[0]
                if target is not None and set(target[0]) <= set(isr):
                    targets[(topic, partition)] = (target[0], True)
                truth.partitions.append(
                    PartitionVersion(
                        ts=write.ts,
                        topic=topic,
                        partition=partition,
                        partition_epoch=write.version,
                        leader=int(state["leader"]),
                        leader_epoch=int(state["leader_epoch"]),
                        isr=isr,
                        replicas=replicas,
                    )
                )
        elif match := _TOPIC_PATH.fullmatch(path):
            topic = match["topic"]
            if write.op in ("create", "set"):
                znode = json.loads(write.data)
                partitions = znode["partitions"]
                assignment = {int(p): tuple(int(b) for b in r) for p, r in partitions.items()}
                # 2.4+: a reassignment under way lists the replicas it removes
                for p, removing in (znode.get("removing_replicas") or {}).items():
                    if removing:
                        kept = tuple(b for b in assignment[int(p)] if b not in removing)
                        targets[(topic, int(p))] = (kept, False)
                if "removing_replicas" in znode and not any(znode["removing_replicas"].values()):
                    for key in [key for key in targets if key[0] == topic]:
                        del targets[key]  # the reassignment completed
                if write.op == "create":
                    truth.creations.append(TopicCreation(write.ts, topic, assignment))
                truth.assignments.append(TopicAssignment(write.ts, topic, assignment))
                assignments[topic] = assignment
            elif write.op == "delete":
                truth.deletions.append(TopicDeletion(write.ts, topic))
                assignments.pop(topic, None)
    if pending_controller is not None:  # /controller_epoch written before /controller
        ts, controller = pending_controller
        truth.elections.append(ControllerElection(ts, controller, controller_epoch))
    return truth


def _end_registration(truth: GroundTruth, registration: BrokerRegistration, ts: int) -> None:
    index = truth.registrations.index(registration)
    truth.registrations[index] = BrokerRegistration(
        registration.ts, registration.broker, registration.epoch, ts
    )


# ----------------------------------------------------------------- KRaft's metadata log


def from_metadata_dump(text: str) -> GroundTruth:
    """``DumpLogSegments --cluster-metadata-decoder`` output -> the ground truth.

    A ``PartitionChangeRecord`` carries only what changed; the partition epoch grows by
    one with every change and the leader epoch when the record names a leader
    (org.apache.kafka.metadata.PartitionRegistration.merge, 3.3 to 4.1: the controller
    names the leader again when it means to bump the epoch without moving leadership).
    The controller epoch is the Raft epoch of the leader's ``LeaderChange`` record.
    """
    truth = GroundTruth()
    names: dict[str, str] = {}  # topic id -> name
    assignments: dict[str, dict[int, tuple[int, ...]]] = {}  # topic id -> its creation's
    current: dict[tuple[str, int], PartitionVersion] = {}
    for dumped in dumped_records(text):
        batch_ts, kind, data = dumped.ts_ms, dumped.kind, dumped.data
        if kind == LEADER_CHANGE:
            leader = int(data.get("leaderId", -1))
            if leader >= 0:
                truth.elections.append(ControllerElection(batch_ts, leader, dumped.quorum_epoch))
            continue
        if kind == "TOPIC_RECORD":
            names[data["topicId"]] = data["name"]
            assignments[data["topicId"]] = {}
            truth.creations.append(
                TopicCreation(batch_ts, data["name"], assignments[data["topicId"]])
            )
        elif kind == "REMOVE_TOPIC_RECORD":
            topic = names.get(data["topicId"], data["topicId"])
            truth.deletions.append(TopicDeletion(batch_ts, topic))
            current = {key: v for key, v in current.items() if key[0] != topic}
        elif kind == "PARTITION_RECORD":
            topic = names[data["topicId"]]
            version = PartitionVersion(
                ts=batch_ts,
                topic=topic,
                partition=int(data["partitionId"]),
                partition_epoch=int(data["partitionEpoch"]),
                leader=int(data["leader"]),
                leader_epoch=int(data["leaderEpoch"]),
                isr=tuple(data["isr"]),
                replicas=tuple(data["replicas"]),
            )
            current[(topic, version.partition)] = version
            truth.partitions.append(version)
            assignments[data["topicId"]][version.partition] = version.replicas
        elif kind == "PARTITION_CHANGE_RECORD":
            topic = names[data["topicId"]]
            before = current[(topic, int(data["partitionId"]))]
            leader, leader_epoch = before.leader, before.leader_epoch
            if "leader" in data and int(data["leader"]) != -2:  # -2: NO_LEADER_CHANGE
                leader, leader_epoch = int(data["leader"]), before.leader_epoch + 1
            version = PartitionVersion(
                ts=batch_ts,
                topic=topic,
                partition=before.partition,
                partition_epoch=before.partition_epoch + 1,
                leader=leader,
                leader_epoch=leader_epoch,
                isr=tuple(data["isr"]) if data.get("isr") is not None else before.isr,
                replicas=(
                    tuple(data["replicas"]) if data.get("replicas") is not None else before.replicas
                ),
            )
            current[(topic, version.partition)] = version
            truth.partitions.append(version)
        elif kind == "REGISTER_BROKER_RECORD":
            truth.registrations.append(
                BrokerRegistration(batch_ts, int(data["brokerId"]), int(data["brokerEpoch"]))
            )
    return truth
