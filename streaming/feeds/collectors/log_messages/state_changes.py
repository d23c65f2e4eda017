"""``state.change.logger`` (TRACE): the partition states a broker took from the controller's
UpdateMetadata and LeaderAndIsr requests, one line per partition."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from streaming.feeds.collectors.log_messages.wording import (
    MalformedError,
    Marker,
    ids,
    split_topic_partition,
)


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
    replicas_in_order: bool = True
    """False for Kafka 0.10's wording ("Broker N received LeaderAndIsr request ..."): its
    LeaderAndIsrRequest.PartitionState holds the replicas in a Set, printed in the set's
    order, not the assignment's (a real 0.10.2.2 broker printed replicas=[1, 2, 3] for
    a partition assigned [3, 1, 2]); the preferred replica is not stated."""


@dataclass(frozen=True, slots=True)
class PartitionStateApplied:
    """kafka.server.ReplicaManager applying a metadata change (KRaft, 3.3 to 4.1; ZooKeeper
    mode 3.x for a LeaderAndIsr request), state.change.logger, INFO: the broker already
    leads or follows at that leader epoch, and logs the new state in full ("Skipped the
    become-leader state change for T-P with topic id Some(ID) and partition state
    LeaderAndIsrPartitionState(...) since it is already the leader with leader epoch E").
    KRaft has no controller epoch (``controllerEpoch=-1``) and the line names no
    controller."""

    ts: int
    broker: int
    state: PartitionState


@dataclass(frozen=True, slots=True)
class LeadershipStarted:
    """kafka.cluster.Partition.makeLeader / makeFollower, through state.change.logger,
    INFO (3.x to 4.1, both modes): the broker became leader or follower at a new leader
    epoch. "Leader T-P with topic id Some(ID) starts at leader epoch E from offset O with
    partition epoch P, high watermark H, ISR [..], adding replicas [..] and removing
    replicas [..]" names the ISR; "Follower T-P starts at leader epoch E from offset O
    with partition epoch P and high watermark H. Current leader is L" the leader. Neither
    names the replicas."""

    ts: int
    broker: int
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...] | None  # the leader's line only


@dataclass(frozen=True, slots=True)
class PartitionLeaderChosen:
    """kafka.controller.PartitionStateMachine (ZooKeeper mode), state.change.logger, TRACE
    up to 2.4, INFO from 2.8: the controller's new state of a partition, "[Controller id=N
    epoch=E] Changed partition T-P from NewPartition to OnlinePartition with state
    LeaderAndIsr(leader=L, leaderEpoch=E, isr=List(..), zkVersion=V)" (3.5+:
    "isrWithBrokerEpoch=List(BrokerState(...)), leaderRecoveryState=R, partitionEpoch=V").
    It names no replicas: the partial LeaderAndIsr, the first leadership of a partition
    at cluster start with the default (INFO) logging."""

    ts: int
    controller_id: int
    controller_epoch: int
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int


StateChangeRecord = (
    CachedLeaderInfo
    | DeletedFromCache
    | LeaderAndIsrReceived
    | PartitionStateApplied
    | LeadershipStarted
    | PartitionLeaderChosen
)

RECORD_KINDS: Final[Mapping[type[object], str]] = {
    CachedLeaderInfo: "cached_leader_info",
    DeletedFromCache: "deleted_from_cache",
    LeaderAndIsrReceived: "leader_and_isr",
    PartitionStateApplied: "partition_state_applied",
    LeadershipStarted: "leadership_started",
    PartitionLeaderChosen: "partition_leader_chosen",
}
"""The metrics label of each record type."""

_BROKER = r"\[Broker id=(?P<broker>\d+)\] "
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

# ReplicaManager (KRaft: applyLocalLeadersDelta / applyLocalFollowersDelta; Partition.makeLeader
# and makeFollower answer that nothing changed): the new state, in full.
_APPLIED = re.compile(
    _BROKER + r"Skipped the become-(?:leader|follower) state change for (?P<tp>\S+)"
    r"(?: with topic id \S+)? and partition state (?P<state>\w*PartitionState\(.*?\))"
    r" since it is already .*"
)
# Partition.makeLeader / makeFollower. The tail after the first sentence differs by
# version: ". Previous leader epoch was E." (3.3 to 3.6), ". Previous leader Some(L) and
# previous leader epoch was E." (3.7+), and 3.9 puts a space before the leader's period.
_LEADER_STARTS = re.compile(
    _BROKER + r"Leader (?P<tp>\S+) with topic id \S+ starts at leader epoch (?P<epoch>\d+)"
    r" from offset \d+ with partition epoch (?P<pepoch>\d+), high watermark \d+,"
    r" ISR \[(?P<isr>[\d,]*)\], adding replicas \[[\d,]*\] and removing replicas"
    r" \[[\d,]*\]\s?\..*"
)
_FOLLOWER_STARTS = re.compile(
    _BROKER + r"Follower (?P<tp>\S+) starts at leader epoch (?P<epoch>\d+) from offset \d+"
    r" with partition epoch (?P<pepoch>\d+) and high watermark \d+\."
    r" Current leader is (?P<leader>-?\d+)\..*"
)

_LEADER_CHOSEN = re.compile(
    r"\[Controller id=(?P<cid>\d+) epoch=(?P<cepoch>\d+)\] Changed partition (?P<tp>\S+) from"
    r" \w+ to OnlinePartition with state LeaderAndIsr\(leader=(?P<leader>-?\d+),"
    r" leaderEpoch=(?P<epoch>\d+), .*(?:zkVersion|partitionEpoch)=(?P<pepoch>\d+)\)"
)

# "name=value" up to the next ", name=" (values may hold commas: "isr=1,2" up to 2.3)
_STATE_FIELD = re.compile(r"(\w+)=(.*?)(?=, \w+=|$)")


def _cached(ts: int, message: str) -> CachedLeaderInfo | None:
    if match := _CACHED.fullmatch(message):
        state = _partition_state(match["state"], match["tp"])
        return CachedLeaderInfo(
            ts,
            int(match["broker"]),
            int(match["cid"]),
            int(match["cepoch"]),
            int(match["corr"]),
            state,
        )
    return None


def _deleted(ts: int, message: str) -> DeletedFromCache | None:
    if match := _DELETED.fullmatch(message):
        topic, partition = split_topic_partition(match["tp"])
        return DeletedFromCache(
            ts,
            int(match["broker"]),
            int(match["cid"]),
            int(match["cepoch"]),
            int(match["corr"]),
            topic,
            partition,
        )
    return None


def _received(ts: int, message: str) -> LeaderAndIsrReceived | None:
    if match := _RECEIVED.fullmatch(message):
        state = _partition_state(match["state"], match["tp"])
        if state.partition_epoch is None:
            raise MalformedError("a LeaderAndIsr state has a zkVersion or partitionEpoch")
        broker = match["broker"] if match["broker"] is not None else match["broker0"]
        in_order = match["broker"] is not None
        return LeaderAndIsrReceived(
            ts, int(broker), int(match["cid"]), int(match["cepoch"]), state, in_order
        )
    return None


def _applied(ts: int, message: str) -> PartitionStateApplied | None:
    if match := _APPLIED.fullmatch(message):
        state = _partition_state(match["state"], match["tp"])
        if state.partition_epoch is None:
            raise MalformedError("an applied state has its partitionEpoch")
        return PartitionStateApplied(ts, int(match["broker"]), state)
    return None


def _leadership_started(ts: int, message: str) -> LeadershipStarted | None:
    if match := _LEADER_STARTS.fullmatch(message):
        broker = int(match["broker"])
        leader, isr = broker, ids(match["isr"])
    elif match := _FOLLOWER_STARTS.fullmatch(message):
        broker, leader, isr = int(match["broker"]), int(match["leader"]), None
    else:
        return None  # Kafka 2.x's "T-P starts at leader epoch E from offset O" (no epoch)
    topic, partition = split_topic_partition(match["tp"])
    return LeadershipStarted(
        ts, broker, topic, partition, leader, int(match["epoch"]), int(match["pepoch"]), isr
    )


def _leader_chosen(ts: int, message: str) -> PartitionLeaderChosen | None:
    if match := _LEADER_CHOSEN.fullmatch(message):
        topic, partition = split_topic_partition(match["tp"])
        return PartitionLeaderChosen(
            ts,
            int(match["cid"]),
            int(match["cepoch"]),
            topic,
            partition,
            int(match["leader"]),
            int(match["epoch"]),
            int(match["pepoch"]),
        )
    return None


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
            raise MalformedError("no topic and partition")
        if topic_partition is not None and (topic, partition) != split_topic_partition(
            topic_partition
        ):
            raise MalformedError("the state is for another partition")
        epoch_text = fields.get("partitionEpoch", fields.get("zkVersion"))
        return PartitionState(
            topic=topic,
            partition=partition,
            leader=int(fields["leader"]),
            leader_epoch=int(fields["leaderEpoch"]),
            isr=ids(fields["isr"]),
            replicas=ids(fields["replicas"]),
            offline_replicas=ids(fields.get("offlineReplicas", "[]")),
            partition_epoch=int(epoch_text) if epoch_text is not None else None,
        )
    except KeyError as missing:
        raise MalformedError(f"no {missing}") from None


MARKERS: Final[tuple[Marker[StateChangeRecord], ...]] = (
    Marker("Cached leader info ", CachedLeaderInfo, _cached),
    Marker("] Deleted partition ", DeletedFromCache, _deleted),
    Marker("eceived LeaderAndIsr request ", LeaderAndIsrReceived, _received),
    Marker("Skipped the become-", PartitionStateApplied, _applied),
    Marker(" starts at leader epoch ", LeadershipStarted, _leadership_started, shared=True),
    Marker(
        " to OnlinePartition with state LeaderAndIsr(",
        PartitionLeaderChosen,
        _leader_chosen,
    ),
)
