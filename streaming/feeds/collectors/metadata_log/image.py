"""The metadata image a broker builds by replaying ``__cluster_metadata``, as far as
isrwatch needs it: topics, partitions, broker registrations, configs, the quorum leader.

Replay follows Kafka's own image classes (``org.apache.kafka.image``):

* ``PartitionRecord`` sets a partition's whole state (``PartitionRegistration(record)``);
* ``PartitionChangeRecord`` merges into it (``PartitionRegistration.merge``): a field the
  record leaves null (tagged field absent) keeps its value; a ``Leader`` other than -2
  (``NO_LEADER_CHANGE``) sets the leader **and** adds one to the leader epoch; the
  partition epoch grows by one at every record. The replay rule is the same in every
  version from 3.0 to 4.x: what varies with ``metadata.version`` is the controller's
  choice of when to write ``Leader`` (``PartitionChangeBuilder``: before 3.6-IV0 an ISR
  shrink also bumped the leader epoch), and that choice is in the record itself;
* ``RemoveTopicRecord`` drops the topic and all its partitions (``TopicsDelta``);
* ``RegisterBrokerRecord`` replaces a broker's registration (its epoch is the offset of
  the record), ``UnregisterBrokerRecord`` removes it, ``FenceBrokerRecord`` /
  ``UnfenceBrokerRecord`` (3.0-3.2) and ``BrokerRegistrationChangeRecord`` (``Fenced``
  1 / -1, ``InControlledShutdown`` 1) change its state (``ClusterDelta``);
* ``ConfigRecord`` sets a config, or removes it when ``Value`` is null (``ConfigurationsDelta``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

NO_LEADER_CHANGE = -2  # PartitionChangeRecord.Leader: the leader did not change

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

    def to_json(self) -> list[Any]:
        return [
            list(self.replicas),
            list(self.isr),
            self.leader,
            self.leader_epoch,
            self.partition_epoch,
        ]

    @staticmethod
    def from_json(data: list[Any]) -> PartitionState:
        replicas, isr, leader, leader_epoch, partition_epoch = data
        return PartitionState(tuple(replicas), tuple(isr), leader, leader_epoch, partition_epoch)


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

    def replay_partition(self, fields: Mapping[str, Any]) -> tuple[str, int, PartitionState]:
        state = PartitionState(
            tuple(fields["Replicas"]),
            tuple(fields["Isr"]),
            fields["Leader"],
            fields["LeaderEpoch"],
            fields["PartitionEpoch"],
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
        )
        self.partitions[fields["TopicId"]][fields["PartitionId"]] = after
        return before, after

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


def _int(values: Mapping[str, str], name: str) -> int | None:
    text = values.get(name)
    return int(text) if text is not None and text.strip().isdigit() and int(text) > 0 else None
