"""The metadata image a broker builds by replaying ``__cluster_metadata``, as far as
isrwatch needs it: topics, partitions, broker registrations, configs, the quorum leader.

Replay follows Kafka's own image classes (``org.apache.kafka.image``):

* ``PartitionRecord`` sets a partition's whole state (``PartitionRegistration(record)``);
* ``PartitionChangeRecord`` merges into it (``PartitionRegistration.merge``): a field the
  record leaves null (tagged field absent) keeps its value, the ELR's included; a
  ``Leader`` other than -2 (``NO_LEADER_CHANGE``) sets the leader **and** adds one to the
  leader epoch; the partition epoch grows by one at every record. The replay rule is the
  same in every version from 3.0 to 4.x: what varies with ``metadata.version`` is the controller's
  choice of when to write ``Leader`` (``PartitionChangeBuilder``: before 3.6-IV0 an ISR
  shrink also bumped the leader epoch), and that choice is in the record itself;
* ``RemoveTopicRecord`` drops the topic and all its partitions (``TopicsDelta``);
* ``RegisterBrokerRecord`` replaces a broker's registration (its epoch is the offset of
  the record), ``UnregisterBrokerRecord`` removes it, ``FenceBrokerRecord`` /
  ``UnfenceBrokerRecord`` (3.0-3.2) and ``BrokerRegistrationChangeRecord`` (``Fenced``
  1 / -1, ``InControlledShutdown`` 1) change its state (``ClusterDelta``);
* ``ConfigRecord`` sets a config, or removes it when ``Value`` is null (``ConfigurationsDelta``);
* ``ClearElrRecord`` (4.0+) empties the ELR and last known ELR of a topic's partitions, or
  of every partition (``ReplicationControlManager.replay(ClearElrRecord)``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

NO_LEADER_CHANGE = -2  # PartitionChangeRecord.Leader: the leader did not change
ELR_RECORD_VERSION = 2  # PartitionRecord and PartitionChangeRecord carry the ELR from it

# ConfigResource.Type
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
CLUSTER_DEFAULT = ""  # a BROKER resource with an empty name: the cluster-wide default
MIN_INSYNC_REPLICAS = "min.insync.replicas"
REPLICA_LAG_TIME_MAX_MS = "replica.lag.time.max.ms"


@dataclass(slots=True)
class PartitionState:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    # EligibleLeaderReplicas and LastKnownElr (record version 2, metadata version
    # 4.0-IV1+); None while no record of the partition carried them.
    elr: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None

    def to_json(self) -> list[Any]:
        state: list[Any] = [
            list(self.replicas),
            list(self.isr),
            self.leader,
            self.leader_epoch,
            self.partition_epoch,
        ]
        if self.elr is not None and self.last_known_elr is not None:
            state += [list(self.elr), list(self.last_known_elr)]
        return state

    @staticmethod
    def from_json(data: list[Any]) -> PartitionState:
        """Of :meth:`to_json`, or of a release before the ELR (five items)."""
        replicas, isr, leader, leader_epoch, partition_epoch, *eligible = data
        elr, last_known = (tuple(eligible[0]), tuple(eligible[1])) if eligible else (None, None)
        return PartitionState(
            tuple(replicas), tuple(isr), leader, leader_epoch, partition_epoch, elr, last_known
        )


@dataclass(slots=True)
class BrokerState:
    epoch: int
    fenced: bool
    in_controlled_shutdown: bool = False


@dataclass
class MetadataImage:
    topic_names: dict[str, str] = field(default_factory=dict)  # topic id -> name
    partitions: dict[str, dict[int, PartitionState]] = field(default_factory=dict)  # by id
    brokers: dict[int, BrokerState] = field(default_factory=dict)
    configs: dict[tuple[int, str], dict[str, str]] = field(default_factory=dict)
    features: dict[str, int] = field(default_factory=dict)
    controller_id: int | None = None
    controller_epoch: int | None = None

    # ------------------------------------------------------------------ replay

    def replay_partition(
        self, fields: Mapping[str, Any], version: int
    ) -> tuple[str, int, PartitionState]:
        """``PartitionRecord`` of ``version``. From version 2 (metadata version 4.0-IV1) the
        ELR is the record's, and an empty list is written as no field at all
        (``PartitionRegistration.toRecord`` sets it only when non-empty), so an absent one
        is empty; before version 2 Kafka kept none: None."""
        with_elr = version >= ELR_RECORD_VERSION
        state = PartitionState(
            tuple(fields["Replicas"]),
            tuple(fields["Isr"]),
            fields["Leader"],
            fields["LeaderEpoch"],
            fields["PartitionEpoch"],
            tuple(fields.get("EligibleLeaderReplicas") or ()) if with_elr else None,
            tuple(fields.get("LastKnownElr") or ()) if with_elr else None,
        )
        topic_id, partition = fields["TopicId"], fields["PartitionId"]
        self.partitions.setdefault(topic_id, {})[partition] = state
        return topic_id, partition, state

    def replay_partition_change(
        self, fields: Mapping[str, Any]
    ) -> tuple[PartitionState, PartitionState] | None:
        """(before, after) of the partition, or None if the image does not hold it."""
        before = self.partitions.get(fields["TopicId"], {}).get(fields["PartitionId"])
        if before is None:
            return None
        leader, leader_epoch = before.leader, before.leader_epoch
        if fields["Leader"] != NO_LEADER_CHANGE:
            leader, leader_epoch = fields["Leader"], before.leader_epoch + 1
        after = PartitionState(
            before.replicas if fields["Replicas"] is None else tuple(fields["Replicas"]),
            before.isr if fields["Isr"] is None else tuple(fields["Isr"]),
            leader,
            leader_epoch,
            before.partition_epoch + 1,
            _merged(before.elr, fields.get("EligibleLeaderReplicas")),
            _merged(before.last_known_elr, fields.get("LastKnownElr")),
        )
        self.partitions[fields["TopicId"]][fields["PartitionId"]] = after
        return before, after

    def clear_elr(self, topic: str) -> None:
        """``ClearElrRecord``: the partitions of ``topic`` (of every topic when empty) that
        had an ELR or a last known ELR get empty ones, as ``removeTopicElrs`` does."""
        for topic_id, partitions in self.partitions.items():
            name = self.topic_names.get(topic_id)
            if name is None or (topic and name != topic):
                continue
            for partition, state in partitions.items():
                if state.elr or state.last_known_elr:
                    # a new state: events made from the old one keep what it held
                    partitions[partition] = replace(state, elr=(), last_known_elr=())

    def remove_topic(self, topic_id: str) -> str | None:
        self.partitions.pop(topic_id, None)
        return self.topic_names.pop(topic_id, None)

    def set_config(self, resource_type: int, resource: str, name: str, value: str | None) -> None:
        key = (resource_type, resource)
        if value is None:
            self.configs.get(key, {}).pop(name, None)
        else:
            self.configs.setdefault(key, {})[name] = value

    # ------------------------------------------------------------------ views

    def live_brokers(self) -> dict[int, int]:
        """Unfenced registered brokers -> broker epoch: the brokers Kafka's metadata cache
        calls alive (``KRaftMetadataCache``: registered and not fenced)."""
        return {b: s.epoch for b, s in sorted(self.brokers.items()) if not s.fenced}

    def min_insync_replicas(self) -> dict[str, int]:
        """Each topic's effective ``min.insync.replicas`` where the log sets one: the
        topic's own, else the cluster default (static server.properties are not in it)."""
        default = _int(
            self.configs.get((BROKER_RESOURCE, CLUSTER_DEFAULT), {}), MIN_INSYNC_REPLICAS
        )
        out = {}
        for topic in sorted(self.topic_names.values()):
            own = _int(self.configs.get((TOPIC_RESOURCE, topic), {}), MIN_INSYNC_REPLICAS)
            value = own if own is not None else default
            if value is not None:
                out[topic] = value
        return out

    def replica_lag_time_max_ms(self) -> dict[int, int]:
        default = _int(
            self.configs.get((BROKER_RESOURCE, CLUSTER_DEFAULT), {}), REPLICA_LAG_TIME_MAX_MS
        )
        out = {}
        for broker in sorted(self.brokers):
            own = _int(
                self.configs.get((BROKER_RESOURCE, str(broker)), {}), REPLICA_LAG_TIME_MAX_MS
            )
            value = own if own is not None else default
            if value is not None:
                out[broker] = value
        return out

    def topic_partitions(self) -> dict[str, dict[int, PartitionState]]:
        """By topic name (partitions of a topic whose TopicRecord is missing are left out)."""
        return {
            self.topic_names[t]: parts
            for t, parts in self.partitions.items()
            if t in self.topic_names
        }

    def copy(self) -> MetadataImage:
        return copy.deepcopy(self)

    # ------------------------------------------------------------------ state

    def to_json(self) -> dict[str, Any]:
        return {
            "topics": dict(sorted(self.topic_names.items())),
            "partitions": {
                t: {str(p): s.to_json() for p, s in sorted(parts.items())}
                for t, parts in sorted(self.partitions.items())
            },
            "brokers": {
                str(b): [s.epoch, s.fenced, s.in_controlled_shutdown]
                for b, s in sorted(self.brokers.items())
            },
            "configs": [
                [rt, rn, name, value]
                for (rt, rn), values in sorted(self.configs.items())
                for name, value in sorted(values.items())
            ],
            "features": dict(sorted(self.features.items())),
            "controller": [self.controller_id, self.controller_epoch],
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> MetadataImage:
        image = MetadataImage(
            topic_names=dict(data["topics"]),
            partitions={
                t: {int(p): PartitionState.from_json(s) for p, s in parts.items()}
                for t, parts in data["partitions"].items()
            },
            brokers={int(b): BrokerState(e, f, c) for b, (e, f, c) in data["brokers"].items()},
            features=dict(data["features"]),
        )
        for resource_type, resource, name, value in data["configs"]:
            image.set_config(resource_type, resource, name, value)
        image.controller_id, image.controller_epoch = data["controller"]
        return image


def _merged(before: tuple[int, ...] | None, stated: list[int] | None) -> tuple[int, ...] | None:
    """A ``PartitionChangeRecord`` field: null (absent tag) keeps the value before."""
    return before if stated is None else tuple(stated)


def _int(values: Mapping[str, str], name: str) -> int | None:
    text = values.get(name)
    return int(text) if text is not None and text.strip().isdigit() and int(text) > 0 else None
