"""Which state shards a controller event goes to, and which part of it each one needs.

A shard keeps the partition state of the partitions it owns and, for all of them, the
cluster-wide state (controller epoch, live brokers, configs) and each leader broker's
propagation window (``state.model``). Copying every controller event to every shard
would cost shards x events at a cold start (one LeaderAndIsr per partition) or a
controller failover (UpdateMetadata of every partition to every broker). Instead:

* LeaderAndIsr goes to the owner of its partition only;
* IsrChange goes to its owner and, as the leader's isrChangeSet lives in every shard
  (ZooKeeper mode: Kafka's ``ReplicaManager.recordIsrChange``), to the others too; it is
  small and an ISR change is rare next to fetches;
* UpdateMetadata and the ``created`` part of TopicChange are split: each shard gets the
  partition states it owns; shard 0 gets a part in any case, as it counts the event;
* the rest (brokers, configs, a controller change, a propagation, a topic deletion)
  concern the whole cluster and go to every shard;
* a shard that an event skips still needs its controller epoch (a broker adopts the
  epoch of any request of a newer controller and fences older ones afterwards:
  ``KafkaController``/``ReplicaManager`` controller epoch checks). Of a batch, only the
  events that raise the largest epoch seen so far in the batch can change a shard's
  epoch; those send a :class:`ControllerEpochSeen` to the shards they skip.

Exactly one part of each event is ``counted``: it is the copy whose outcome (applied,
rejected, late, duplicate) the shard reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from state.events import (
    ControllerEvent,
    IsrChange,
    LeaderAndIsr,
    TopicChange,
    UpdateMetadata,
)
from state.sharding import shard_of

CLUSTER_SHARD = 0
"""The shard that counts events that concern no single partition (``Shard``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerEpochSeen:
    """A controller event of another shard was seen at ``ts``: its epoch, nothing else."""

    ts: int
    controller_id: int | None
    controller_epoch: int


RoutedControllerEvent = ControllerEvent | ControllerEpochSeen


@dataclass(frozen=True, slots=True)
class ShardPart:
    """What one shard receives of one controller event."""

    shard: int
    event: RoutedControllerEvent
    counted: bool


def split_for_shards(event: ControllerEvent, shards: int) -> list[ShardPart]:
    """The parts of ``event`` by shard, the counted one first (no epoch carriers)."""
    match event:
        case LeaderAndIsr():
            return [ShardPart(shard_of(event.topic, event.partition, shards), event, True)]
        case IsrChange():
            owner = shard_of(event.topic, event.partition, shards)
            others = [ShardPart(s, event, False) for s in range(shards) if s != owner]
            return [ShardPart(owner, event, True), *others]
        case UpdateMetadata():
            by_shard: dict[int, list[int]] = {CLUSTER_SHARD: []}
            for i, state in enumerate(event.partitions):
                by_shard.setdefault(shard_of(state.topic, state.partition, shards), []).append(i)
            return [
                ShardPart(
                    shard,
                    replace(event, partitions=tuple(event.partitions[i] for i in rows)),
                    shard == CLUSTER_SHARD,
                )
                for shard, rows in by_shard.items()
            ]
        case TopicChange() if not event.deleted:
            created: dict[int, dict[str, dict[int, tuple[int, ...]]]] = {CLUSTER_SHARD: {}}
            for topic, partitions in event.created.items():
                for partition, replicas in partitions.items():
                    mine = created.setdefault(shard_of(topic, partition, shards), {})
                    mine.setdefault(topic, {})[partition] = replicas
            return [
                ShardPart(shard, replace(event, created=part), shard == CLUSTER_SHARD)
                for shard, part in created.items()
            ]
    return [ShardPart(s, event, s == CLUSTER_SHARD) for s in range(shards)]


def route_controller_events(
    events: Sequence[ControllerEvent], shards: int
) -> list[list[ShardPart]]:
    """The parts of each of ``events`` (in the order the shards apply them), with a
    :class:`ControllerEpochSeen` for every shard skipped by an event that raises the
    largest controller epoch seen so far in ``events``."""
    routed: list[list[ShardPart]] = []
    largest: int | None = None
    for event in events:
        parts = split_for_shards(event, shards)
        epoch = event.controller_epoch
        if epoch is not None and (largest is None or epoch > largest):
            largest = epoch
            reached = {part.shard for part in parts}
            seen = ControllerEpochSeen(
                ts=event.ts, controller_id=event.controller_id, controller_epoch=epoch
            )
            parts += [ShardPart(s, seen, False) for s in range(shards) if s not in reached]
        routed.append(parts)
    return routed
