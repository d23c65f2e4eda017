"""``kafka.controller`` (INFO, ZooKeeper mode) and KRaft's ``QuorumController``: the
controller's elections, the brokers it sees come and go, the topics it creates and deletes;
and ``kafka.zk.KafkaZkClient``'s broker registration, whose epoch the controller caches."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from streaming.feeds.collectors.log_messages.wording import (
    NO_FACT,
    MalformedError,
    Marker,
    NoFact,
    ids,
    split_topic_partition,
)


@dataclass(frozen=True, slots=True)
class ControllerElected:
    """kafka.controller.KafkaController.elect (ZooKeeper) or
    org.apache.kafka.controller.QuorumController and the Raft leader's
    org.apache.kafka.raft.QuorumState (KRaft), INFO."""

    ts: int
    controller_id: int
    controller_epoch: int
    raft_leader: bool = False
    """The Raft layer's line: the node leads the quorum at that epoch, and becomes the
    active controller once its epoch's first record is committed, which may never
    happen (a real 4.0.1 node logged leadership at epoch 2 and lost it to epoch 3 a
    second later, with no LeaderChange of epoch 2 in __cluster_metadata)."""


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
    """KafkaController, INFO: the live brokers and their epochs (the czxid of their
    registration), when this controller took over ("Initialized broker epochs cache",
    initializeControllerContext) and after each broker change ("Updated broker epochs
    cache", processBrokerChange)."""

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


@dataclass(frozen=True, slots=True)
class TopicsDeleted:
    """org.apache.kafka.controller.ReplicationControlManager (KRaft), INFO: "DeleteTopics
    result(s): {id: ID, name: T, result: SUCCESS}, ..." on the active controller (3.5+),
    the topics whose deletion succeeded; "Removed topic T with ID ID." (3.0 to 3.4), on
    every controller as it replays the record (the translator sends a deletion once)."""

    ts: int
    controller_id: int
    topics: tuple[str, ...]


ControllerRecord = (
    ControllerElected
    | ControllerSeen
    | PreferredLeaderElected
    | BrokerEpochsInitialized
    | BrokerSetChanged
    | BrokerRegistered
    | TopicsCreated
    | TopicDeleted
    | TopicsDeleted
)

RECORD_KINDS: Final[Mapping[type[object], str]] = {
    ControllerElected: "controller_elected",
    ControllerSeen: "controller_seen",
    PreferredLeaderElected: "preferred_leader_elected",
    BrokerEpochsInitialized: "broker_epochs",
    BrokerSetChanged: "broker_change",
    BrokerRegistered: "broker_registered",
    TopicsCreated: "topics_created",
    TopicDeleted: "topic_deleted",
    TopicsDeleted: "topics_deleted",
}
"""The metrics label of each record type."""

# KafkaController's logIdent: "[Controller id=N] " (1.0 and later), "[Controller N]: " (0.10
# to 0.11); its listeners in 0.10: "[BrokerChangeListener on Controller N]: ".
_CONTROLLER = r"\[(?:\w+ on )?Controller(?: id=)? ?(?P<controller>\d+)\]:? "
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
# org.apache.kafka.raft.QuorumState (KRaft, INFO), on the node the quorum elected: "[RaftManager
# nodeId=N] Completed transition to Leader(localId=N, epoch=E, ...)" (3.3; "id=N" from 3.5;
# 3.9+ name the node inside "localVoterNode=VoterNode(...)" before the epoch). The Raft
# leader becomes the active controller at the Raft epoch (the translator waits to see it
# keep its leadership): a packaged image that routes org.apache.kafka.controller elsewhere
# still shows this line.
_RAFT_LEADER = re.compile(
    r"\[RaftManager (?:node)?[iI]d=(?P<controller>\d+)\] Completed transition to Leader\("
    r".*?(?<![A-Za-z])epoch=(?P<epoch>\d+)\b.*"
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
# KafkaController.initializeControllerContext ("Initialized", a new controller's view) and
# processBrokerChange ("Updated", right after "Newly added brokers ...": seen on 2.8 and
# 3.9): the live brokers and their epochs.
_EPOCHS = re.compile(
    _CONTROLLER + r"(?:Initialized|Updated) broker epochs cache: \w*\((?P<pairs>.*)\)"
)
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
# ReplicationControlManager.createTopics (KRaft; "[Controller N] " 3.0 to 3.4,
# "[QuorumController id=N] " 3.5+), on the active controller: "CreateTopics result(s):
# CreatableTopic(name='T', numPartitions=-1, replicationFactor=-1, assignments=[
# CreatableReplicaAssignment(partitionIndex=0, brokerIds=[1, 2, 3]), ...], configs=[...]):
# SUCCESS, CreatableTopic(...): ERROR_NAME, ...". A topic created by partition count and
# replication factor has no assignment in the line (the controller chooses it later).
_KRAFT_CONTROLLER = r"\[(?:Quorum)?Controller (?:id=)?(?P<controller>\d+)\] "
_CREATE_TOPICS = re.compile(_KRAFT_CONTROLLER + r"CreateTopics result\(s\): (?P<topics>.*)")
_CREATABLE_TOPIC = re.compile(r"CreatableTopic\(name='(?P<name>[^']+)'")
_CREATABLE_ASSIGNMENT = re.compile(
    r"CreatableReplicaAssignment\(partitionIndex=(?P<partition>\d+),"
    r" brokerIds=\[(?P<replicas>[\d, ]*)\]\)"
)
_TOPIC_RESULT = re.compile(r"\): (?P<result>[A-Z_]+)(?:, )?$")
# ReplicationControlManager.deleteTopics (KRaft): "DeleteTopics result(s): {id: ID, name:
# T, result: SUCCESS}, {...}".
_DELETE_TOPICS = re.compile(_KRAFT_CONTROLLER + r"DeleteTopics result\(s\): (?P<topics>.*)")
_REMOVED_TOPIC = re.compile(_KRAFT_CONTROLLER + r"Removed topic (?P<topic>\S+) with ID \S+\.")
_DELETED_TOPIC = re.compile(r"\{id: \S+, name: (?P<name>[^,}]+), result: (?P<result>[A-Z_]+)\}")
# TopicDeletionManager.completeDeleteTopic; its logIdent ends with ", " up to 2.x. In 0.10
# the line comes from its DeleteTopicsThread, named "delete-topics-thread-<controller id>"
# (a real 0.10.2.2 broker: "[delete-topics-thread-1], Deletion of topic t successfully
# completed").
_TOPIC_DELETED = re.compile(
    r"\[(?:Topic Deletion Manager |delete-topics-thread-)(?P<controller>\d+)\],?"
    r" Deletion of topic (?P<topic>\S+) successfully completed"
)


def _controller_elected(ts: int, message: str) -> ControllerElected | NoFact | None:
    if match := _ELECTED.fullmatch(message) or _EPOCH_INCREMENTED.fullmatch(message):
        if match["self"] is not None and match["self"] != match["controller"]:
            raise MalformedError("the elected broker is the one logging")
        return ControllerElected(ts, int(match["controller"]), int(match["epoch"]))
    if match := _ACTIVE.fullmatch(message):
        return ControllerElected(ts, int(match["controller"]), int(match["epoch"]))
    if match := _RAFT_LEADER.fullmatch(message):
        return ControllerElected(ts, int(match["controller"]), int(match["epoch"]), True)
    if "successfully elected as the controller" in message:
        return NO_FACT  # 1.0 to 2.1: the epoch comes on its own line
    return None


def _controller_seen(ts: int, message: str) -> ControllerSeen | None:
    if match := _CONTROLLER_SEEN.fullmatch(message):
        return ControllerSeen(ts, int(match["controller"]))
    return None


def _preferred_leader_elected(ts: int, message: str) -> PreferredLeaderElected | None:
    if match := _PREFERRED_ELECTED.fullmatch(message):
        topic, partition = split_topic_partition(match["tp"])
        return PreferredLeaderElected(
            ts, int(match["controller"]), topic, partition, int(match["leader"])
        )
    return None


def _broker_epochs(ts: int, message: str) -> BrokerEpochsInitialized | None:
    if match := _EPOCHS.fullmatch(message):
        pairs = match["pairs"].strip()
        found = _EPOCH_PAIR.findall(pairs)
        if len(found) != (pairs.count("->") if pairs else 0):
            raise MalformedError("every entry is 'id -> epoch'")
        epochs = {int(broker): int(epoch) for broker, epoch in found}
        return BrokerEpochsInitialized(ts, int(match["controller"]), epochs)
    return None


def _broker_change(ts: int, message: str) -> BrokerSetChanged | None:
    if match := _BROKERS.fullmatch(message):
        return BrokerSetChanged(
            ts,
            int(match["controller"]),
            ids(match["added"]),
            ids(match["deleted"]),
            ids(match["bounced"] or ""),
            ids(match["live"]),
        )
    return None


def _broker_registered(ts: int, message: str) -> BrokerRegistered | None:
    if match := _REGISTERED.fullmatch(message):
        return BrokerRegistered(ts, int(match["broker"]), int(match["epoch"]))
    return None


def _topics_created(ts: int, message: str) -> TopicsCreated | None:
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
        assignment.setdefault(topic, {})[partition] = ids(replicas)
    if not assignment and "->" in match["assignment"]:
        raise MalformedError("every assignment is 'topic-partition -> replicas'")
    return TopicsCreated(ts, int(match["controller"]), assignment)


def _kraft_topics_created(ts: int, message: str) -> TopicsCreated | NoFact | None:
    match = _CREATE_TOPICS.fullmatch(message)
    if match is None:
        return None
    text = match["topics"]
    starts = [found.start() for found in _CREATABLE_TOPIC.finditer(text)]
    assignment: dict[str, dict[int, tuple[int, ...]]] = {}
    for start, end in zip(starts, [*starts[1:], len(text)], strict=True):
        entry = text[start:end]
        result = _TOPIC_RESULT.search(entry)
        named = _CREATABLE_TOPIC.match(entry)
        if result is None or named is None:
            raise MalformedError("every topic ends with '): RESULT'")
        if result["result"] != "SUCCESS":
            continue
        for found in _CREATABLE_ASSIGNMENT.finditer(entry):
            replicas = ids(found["replicas"])
            assignment.setdefault(named["name"], {})[int(found["partition"])] = replicas
    if not assignment:
        return NO_FACT  # failures, or topics whose replicas the controller picks later
    return TopicsCreated(ts, int(match["controller"]), assignment)


def _kraft_topics_deleted(ts: int, message: str) -> TopicsDeleted | NoFact | None:
    match = _DELETE_TOPICS.fullmatch(message)
    if match is None:
        return None
    results = list(_DELETED_TOPIC.finditer(match["topics"]))
    if not results:
        raise MalformedError("every topic is '{id: ID, name: T, result: R}'")
    topics = tuple(found["name"] for found in results if found["result"] == "SUCCESS")
    return TopicsDeleted(ts, int(match["controller"]), topics) if topics else NO_FACT


def _kraft_topic_removed(ts: int, message: str) -> TopicsDeleted | None:
    if match := _REMOVED_TOPIC.fullmatch(message):
        return TopicsDeleted(ts, int(match["controller"]), (match["topic"],))
    return None


def _topic_deleted(ts: int, message: str) -> TopicDeleted | None:
    if match := _TOPIC_DELETED.fullmatch(message):
        return TopicDeleted(ts, int(match["controller"]), match["topic"])
    return None


MARKERS: Final[tuple[Marker[ControllerRecord], ...]] = (
    Marker("successfully elected as the controller", ControllerElected, _controller_elected),
    Marker("ncremented epoch to ", ControllerElected, _controller_elected),
    Marker("Epoch incremented to ", ControllerElected, _controller_elected),
    Marker("Becoming the active controller at epoch", ControllerElected, _controller_elected),
    Marker("Completed transition to Leader(", ControllerElected, _controller_elected),
    Marker(" so stopping the election process", ControllerSeen, _controller_seen),
    Marker("was elected as leader instead of broker", ControllerSeen, _controller_seen),
    Marker(
        "completed preferred replica leader election",
        PreferredLeaderElected,
        _preferred_leader_elected,
    ),
    Marker("Initialized broker epochs cache", BrokerEpochsInitialized, _broker_epochs),
    Marker("Updated broker epochs cache", BrokerEpochsInitialized, _broker_epochs),
    Marker("Newly added brokers: ", BrokerSetChanged, _broker_change),
    Marker("czxid (broker epoch)", BrokerRegistered, _broker_registered),
    Marker("New topics: ", TopicsCreated, _topics_created),
    Marker("successfully completed", TopicDeleted, _topic_deleted, shared=True),
    Marker("CreateTopics result(s): ", TopicsCreated, _kraft_topics_created),
    Marker("DeleteTopics result(s): ", TopicsDeleted, _kraft_topics_deleted),
    Marker("] Removed topic ", TopicsDeleted, _kraft_topic_removed, shared=True),
)
