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
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Final

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


@dataclass(frozen=True, slots=True)
class ControllerElected:
    """kafka.controller.KafkaController.elect (ZooKeeper) or
    org.apache.kafka.controller.QuorumController (KRaft), INFO."""

    ts: int
    controller_id: int
    controller_epoch: int


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
class Continuation:
    """A line that continues the previous entry (no header)."""


@dataclass(frozen=True, slots=True)
class Ignored:
    """An entry of a kind the collector does not use (most of a broker's log)."""


@dataclass(frozen=True, slots=True)
class Unparseable:
    """A header that is not a valid time, or a supported message in an unexpected shape."""

    reason: str


LineResult = Record | Continuation | Ignored | Unparseable

CONTINUATION: Final = Continuation()
IGNORED: Final = Ignored()

# --------------------------------------------------------------------------- header

_HEADER = re.compile(
    r"\[(?P<date>\d{4}-\d{2}-\d{2})[ T](?P<time>\d{2}:\d{2}:\d{2})[,.](?P<millis>\d{3})\]"
    r"\s+(?P<level>TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\s(?P<message>.*)"
)
_LOGGER = re.compile(r"\s+\([A-Za-z_][\w.$]*\)\s*$")


@dataclass(frozen=True, slots=True)
class Entry:
    ts: int
    level: str
    message: str  # without the trailing "(logger.name)"


def parse_header(line: str, zone: tzinfo) -> Entry | Continuation | Unparseable:
    """The entry a header line starts, read in the time zone ``zone``."""
    match = _HEADER.fullmatch(line.rstrip("\r\n"))
    if match is None:
        return CONTINUATION
    try:
        local = datetime.fromisoformat(f"{match['date']}T{match['time']}")
    except ValueError:
        return Unparseable("bad_timestamp")
    ts = int(local.replace(tzinfo=zone).timestamp()) * 1000 + int(match["millis"])
    message = _LOGGER.sub("", match["message"]).strip()
    return Entry(ts, match["level"], message)


# --------------------------------------------------------------------------- messages

_IDS = r"\d+(?:,\d+)*"
_BROKER = r"\[Broker id=(?P<broker>\d+)\] "
# kafka.cluster.Partition's logIdent: "[Partition foo-0 broker=1] " (2.x, 3.x) or
# "Partition [foo,0] on broker 1: " (1.x).
_PARTITION = (
    r"(?:\[Partition (?P<tp>\S+) broker=(?P<broker>\d+)\] "
    r"|Partition \[(?P<topic>[^,\]]+),(?P<partition>\d+)\] on broker (?P<broker1>\d+): )"
)
_CONTROLLER = r"\[Controller id=(?P<controller>\d+)\] "
_UPDATE_METADATA_SOURCE = (
    r" in response to UpdateMetadata request sent by controller (?P<cid>\d+)"
    r" epoch (?P<cepoch>\d+) with correlation id (?P<corr>-?\d+)"
)

# ZkMetadataCache.updateMetadata (MetadataCache before 3.0)
_CACHED = re.compile(
    _BROKER
    + r"Cached leader info (?P<state>\w*PartitionState\(.*\)) for partition (?P<tp>\S+)"
    + _UPDATE_METADATA_SOURCE
)
_DELETED = re.compile(
    _BROKER + r"Deleted partition (?P<tp>\S+) from metadata cache" + _UPDATE_METADATA_SOURCE
)
# ReplicaManager.becomeLeaderOrFollower
_RECEIVED = re.compile(
    _BROKER + r"Received LeaderAndIsr request (?P<state>\w*PartitionState\(.*\)) correlation id"
    r" (?P<corr>-?\d+) from controller (?P<cid>\d+) epoch (?P<cepoch>\d+)"
)
# Partition.maybeShrinkIsr (the tail after the new ISR varies: Leader: (...). Out of sync
# replicas: (...), with lastCaughtUpTimeMs since 3.x) and Partition.expandIsr (ZooKeeper).
_SHRINK = re.compile(
    _PARTITION + rf"Shrinking ISR from (?P<old>{_IDS}) to (?P<new>{_IDS})(?:\..*)?"
)
_EXPAND = re.compile(_PARTITION + rf"Expanding ISR from (?P<old>{_IDS}) to (?P<new>{_IDS})")
# "ISR updated to [1,2] and zkVersion updated to [7]" (ZooKeeper writes),
# "ISR updated from AlterIsr to 1,2 and version updated to [7]" (2.7, 2.8),
# "ISR updated to 1,2  and version updated to 7", "... to 1 (under-min-isr) and ..." (3.x)
_COMMITTED = re.compile(
    _PARTITION + rf"ISR updated (?:from AlterIsr )?to \[?(?P<isr>{_IDS})\]?"
    r"(?: \(under-min-isr\))?\s+and (?:zkVersion|version) updated to \[?(?P<version>\d+)\]?"
)
_FAILED = re.compile(
    _PARTITION + r"(?:Cached zkVersion \[?\d+\]? not equal to that in zookeeper, skip updating ISR"
    r"|Failed to alter partition to .*)"
)
# KafkaController.elect / QuorumController (the KRaft line's tail differs by version)
_ELECTED = re.compile(
    _CONTROLLER + r"(?P<self>\d+) successfully elected as the controller\. Epoch incremented to"
    r" (?P<epoch>\d+) and epoch zk version is now \d+"
)
_ACTIVE = re.compile(
    r"\[QuorumController id=(?P<controller>\d+)\] Becoming the active controller at epoch"
    r" (?P<epoch>\d+)\b.*"
)
_EPOCHS = re.compile(_CONTROLLER + r"Initialized broker epochs cache: \w*\((?P<pairs>.*)\)")
_EPOCH_PAIR = re.compile(r"(\d+) -> (\d+)")
_BROKERS = re.compile(
    _CONTROLLER + r"Newly added brokers: (?P<added>[\d,]*), deleted brokers: (?P<deleted>[\d,]*),"
    r" bounced brokers: (?P<bounced>[\d,]*), all live brokers: (?P<live>[\d,]*)"
)
_REGISTERED = re.compile(
    r"Registered broker (?P<broker>\d+) at path \S+ with addresses: .*,"
    r" czxid \(broker epoch\): (?P<epoch>\d+)"
)
_NEW_TOPICS = re.compile(
    _CONTROLLER + r"New topics: \[.*\], deleted topics: \[.*\],"
    r" new partition replica assignment \[(?P<assignment>.*)\]"
)
# ReplicaAssignment.toString (Kafka 2.4+): "foo-0 -> ReplicaAssignment(replicas=1,2,3, ..."
_ASSIGNED = re.compile(
    r"(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>\d+)"
    r" -> ReplicaAssignment\(replicas=(?P<replicas>[\d,]*),"
)
_TOPIC_DELETED = re.compile(
    r"\[Topic Deletion Manager (?P<controller>\d+)\] Deletion of topic (?P<topic>\S+)"
    r" successfully completed"
)

# Markers: a message that contains one is expected to match the pattern of its kind.
_MARKERS: Final = (
    ("Cached leader info ", "cached_leader_info"),
    ("] Deleted partition ", "deleted_from_cache"),
    ("Received LeaderAndIsr request ", "leader_and_isr"),
    ("Shrinking ISR from ", "isr_proposal"),
    ("Expanding ISR from ", "isr_proposal"),
    ("ISR updated ", "isr_committed"),
    ("skip updating ISR", "isr_update_failed"),
    ("Failed to alter partition to ", "isr_update_failed"),
    ("successfully elected as the controller", "controller_elected"),
    ("Becoming the active controller at epoch", "controller_elected"),
    ("Initialized broker epochs cache", "broker_epochs"),
    ("Newly added brokers: ", "broker_change"),
    ("czxid (broker epoch)", "broker_registered"),
    ("New topics: ", "topics_created"),
    ("successfully completed", "topic_deleted"),
)

_STATE_FIELD = re.compile(r"(\w+)=('[^']*'|\[[^\]]*\]|[^,)]*)")


class _MalformedError(Exception):
    """Raised inside the parsers; becomes ``Unparseable``."""


def parse_line(line: str, zone: tzinfo) -> LineResult:
    """Parse one line of a broker log; never raises."""
    header = parse_header(line, zone)
    if not isinstance(header, Entry):
        return header
    return parse_message(header.ts, header.message)


def parse_message(ts: int, message: str) -> Record | Ignored | Unparseable:
    """The record a log message (without its header and logger) holds."""
    kind = next((kind for marker, kind in _MARKERS if marker in message), None)
    if kind is None:
        return IGNORED
    try:
        record = _PARSERS[kind](ts, message)
    except (_MalformedError, ValueError):
        return Unparseable(f"malformed_{kind}")
    if record is None:
        if kind == "topic_deleted":  # "successfully completed" is common in other messages
            return IGNORED
        return Unparseable(f"malformed_{kind}")
    return record


def _cached(ts: int, message: str) -> Record | None:
    if match := _CACHED.fullmatch(message):
        state = _partition_state(match["state"], match["tp"])
        return CachedLeaderInfo(
            ts, int(match["broker"]), int(match["cid"]), int(match["cepoch"]),
            int(match["corr"]), state,
        )  # fmt: skip
    return None


def _deleted(ts: int, message: str) -> Record | None:
    if match := _DELETED.fullmatch(message):
        topic, partition = split_topic_partition(match["tp"])
        return DeletedFromCache(
            ts, int(match["broker"]), int(match["cid"]), int(match["cepoch"]),
            int(match["corr"]), topic, partition,
        )  # fmt: skip
    return None


def _received(ts: int, message: str) -> Record | None:
    if match := _RECEIVED.fullmatch(message):
        state = _partition_state(match["state"], None)
        if state.partition_epoch is None:
            raise _MalformedError("a LeaderAndIsr state has a zkVersion or partitionEpoch")
        return LeaderAndIsrReceived(
            ts, int(match["broker"]), int(match["cid"]), int(match["cepoch"]), state
        )
    return None


def _isr_proposal(ts: int, message: str) -> Record | None:
    match = _SHRINK.fullmatch(message) or _EXPAND.fullmatch(message)
    if match is None:
        return None
    broker, topic, partition = _partition_prefix(match)
    return IsrProposal(ts, broker, topic, partition, _ids(match["old"]), _ids(match["new"]))


def _isr_committed(ts: int, message: str) -> Record | None:
    if match := _COMMITTED.fullmatch(message):
        broker, topic, partition = _partition_prefix(match)
        return IsrCommitted(ts, broker, topic, partition, _ids(match["isr"]), int(match["version"]))
    return None


def _isr_update_failed(ts: int, message: str) -> Record | None:
    if match := _FAILED.fullmatch(message):
        broker, topic, partition = _partition_prefix(match)
        return IsrUpdateFailed(ts, broker, topic, partition)
    return None


def _controller_elected(ts: int, message: str) -> Record | None:
    if match := _ELECTED.fullmatch(message):
        if match["self"] != match["controller"]:
            raise _MalformedError("the elected broker is the one logging")
        return ControllerElected(ts, int(match["controller"]), int(match["epoch"]))
    if match := _ACTIVE.fullmatch(message):
        return ControllerElected(ts, int(match["controller"]), int(match["epoch"]))
    return None


def _broker_epochs(ts: int, message: str) -> Record | None:
    if match := _EPOCHS.fullmatch(message):
        pairs = match["pairs"].strip()
        found = _EPOCH_PAIR.findall(pairs)
        if len(found) != (pairs.count("->") if pairs else 0):
            raise _MalformedError("every entry is 'id -> epoch'")
        epochs = {int(broker): int(epoch) for broker, epoch in found}
        return BrokerEpochsInitialized(ts, int(match["controller"]), epochs)
    return None


def _broker_change(ts: int, message: str) -> Record | None:
    if match := _BROKERS.fullmatch(message):
        return BrokerSetChanged(
            ts, int(match["controller"]), _ids(match["added"]), _ids(match["deleted"]),
            _ids(match["bounced"]), _ids(match["live"]),
        )  # fmt: skip
    return None


def _broker_registered(ts: int, message: str) -> Record | None:
    if match := _REGISTERED.fullmatch(message):
        return BrokerRegistered(ts, int(match["broker"]), int(match["epoch"]))
    return None


def _topics_created(ts: int, message: str) -> Record | None:
    match = _NEW_TOPICS.fullmatch(message)
    if match is None:
        return None
    assignment: dict[str, dict[int, tuple[int, ...]]] = {}
    for found in _ASSIGNED.finditer(match["assignment"]):
        replicas = _ids(found["replicas"])
        assignment.setdefault(found["topic"], {})[int(found["partition"])] = replicas
    if not assignment and "ReplicaAssignment(" in match["assignment"]:
        raise _MalformedError("every assignment is 'topic-partition -> ReplicaAssignment(...)'")
    return TopicsCreated(ts, int(match["controller"]), assignment)


def _topic_deleted(ts: int, message: str) -> Record | None:
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
    "broker_epochs": _broker_epochs,
    "broker_change": _broker_change,
    "broker_registered": _broker_registered,
    "topics_created": _topics_created,
    "topic_deleted": _topic_deleted,
}


# --------------------------------------------------------------------------- pieces


def split_topic_partition(text: str) -> tuple[str, int]:
    """``"my-topic-3"`` -> ``("my-topic", 3)``: Kafka's TopicPartition.toString."""
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
    body = text[text.index("(") + 1 : text.rindex(")")]
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
