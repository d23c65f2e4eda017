"""What cause attribution (``state.causes``) reads: the shape of the cluster, and the
lagging followers of the unhealthy partitions.

The shape gives the denominators of "most" and "every": how many replicas each broker
follows from each leader, how many partitions each broker leads, which brokers are
registered and which are in planned maintenance. Shapes of disjoint sets of partitions
(state shards) add up (:meth:`ClusterShape.merge`), so a sharded job attributes exactly
as one model would.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from state.arrays import I64
from state.cause_kinds import NO_BROKER
from state.health_record import HealthRecord
from state.maintenance import Maintenance
from state.metadata_cache import MetadataState
from state.shrink_rule import FollowerStatus

if TYPE_CHECKING:
    from state.model import ReplicationModel
    from state.partition_health import HealthFrame


@dataclass(frozen=True)
class ClusterShape:
    """How replicas are laid out, for the denominators of "most" and "every".

    ``pair_*``: follower replicas per (follower broker, leader broker); ``led_*``:
    partitions per leader that have at least one follower; ``live``: registered brokers
    (None until the monitor has seen a BrokerChange: every broker counts as live).
    """

    pair_follower: I64
    pair_leader: I64
    pair_count: I64
    led_leader: I64
    led_count: I64
    live: I64 | None
    # brokers in planned maintenance (state.maintenance): broker -> (state, since ms)
    maintenance: dict[int, tuple[str, int]] = field(default_factory=dict)

    @staticmethod
    def of(
        follower_broker: I64,
        leader: I64,
        live: Iterable[int] | None,
        maintenance: Mapping[int, Maintenance] | None = None,
    ) -> ClusterShape:
        """From the follower column of a health frame (NO_BROKER / -1: no follower)."""
        leaders = np.broadcast_to(leader[:, None], follower_broker.shape)
        is_follower = follower_broker >= 0
        pairs, pair_count = _count_pairs(follower_broker[is_follower], leaders[is_follower])
        with_followers = is_follower.any(axis=1) if follower_broker.ndim == 2 else is_follower
        led, led_count = np.unique(leader[with_followers], return_counts=True)
        return ClusterShape(
            pairs[:, 0],
            pairs[:, 1],
            pair_count.astype(np.int64),
            led.astype(np.int64),
            led_count.astype(np.int64),
            None if live is None else np.asarray(sorted(live), dtype=np.int64),
            {b: (m.state.value, m.since_ms) for b, m in (maintenance or {}).items()},
        )

    @staticmethod
    def merge(shapes: Sequence[ClusterShape]) -> ClusterShape:
        """The shape of the union of disjoint sets of partitions (state shards)."""
        if not shapes:
            return ClusterShape.from_json({"pairs": [], "led": [], "live": None})
        follower = np.concatenate([s.pair_follower for s in shapes])
        leader = np.concatenate([s.pair_leader for s in shapes])
        counts = np.concatenate([s.pair_count for s in shapes])
        codes, inverse = np.unique(pair_code(follower, leader), return_inverse=True)
        pairs = pairs_of(codes)
        pair_count = np.bincount(inverse.reshape(-1), weights=counts, minlength=len(pairs))
        led, led_inverse = np.unique(
            np.concatenate([s.led_leader for s in shapes]), return_inverse=True
        )
        led_count = np.bincount(
            led_inverse, weights=np.concatenate([s.led_count for s in shapes]), minlength=len(led)
        )
        lives = [s.live for s in shapes if s.live is not None]
        # Shards see controlled shutdowns only in the partitions they own: the union, and
        # a registration (seen by all alike) wins over a shutdown a shard still holds.
        maintenance: dict[int, tuple[str, int]] = {}
        for shape in shapes:
            for broker, (state, since) in shape.maintenance.items():
                kept = maintenance.get(broker)
                if kept is None or (kept[0], -kept[1]) < (state, -since):
                    maintenance[broker] = (state, since)
        return ClusterShape(
            pairs[:, 0].astype(np.int64),
            pairs[:, 1].astype(np.int64),
            pair_count.astype(np.int64),
            led.astype(np.int64),
            led_count.astype(np.int64),
            np.unique(np.concatenate(lives)) if lives else None,
            maintenance,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "pairs": np.stack(
                [self.pair_follower, self.pair_leader, self.pair_count], axis=1
            ).tolist(),
            "led": np.stack([self.led_leader, self.led_count], axis=1).tolist(),
            "live": None if self.live is None else self.live.tolist(),
            "maintenance": [
                [b, state, since] for b, (state, since) in sorted(self.maintenance.items())
            ],
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> ClusterShape:
        pairs = np.asarray(data["pairs"], dtype=np.int64).reshape(-1, 3)
        led = np.asarray(data["led"], dtype=np.int64).reshape(-1, 2)
        live = data.get("live")
        return ClusterShape(
            pairs[:, 0],
            pairs[:, 1],
            pairs[:, 2],
            led[:, 0],
            led[:, 1],
            None if live is None else np.asarray(live, dtype=np.int64),
            {int(b): (str(state), int(since)) for b, state, since in data.get("maintenance", [])},
        )


def shape_of_model(frame: HealthFrame, model: ReplicationModel) -> ClusterShape:
    """The shape of a model's partitions (a shard's, or all of replay's) at the frame's time."""
    rules = model.settings
    maintenance = model.maintenance.at(
        frame.as_of_ms, rules.maintenance_grace_ms, rules.maintenance_max_shutdown_ms
    )
    return ClusterShape.of(
        frame.follower_broker, frame.leader, model.cluster.live_brokers, maintenance
    )


def _count_pairs(follower: I64, leader: I64) -> tuple[npt.NDArray[np.int64], I64]:
    """Distinct (follower, leader) pairs in that order, and how often each occurs."""
    codes, counts = np.unique(pair_code(follower, leader), return_counts=True)
    return pairs_of(codes), counts.astype(np.int64)


@dataclass(frozen=True)
class LaggingFollowers:
    """Every follower not IN_SYNC of the unhealthy partitions, one element each."""

    partition: I64  # position of its partition in ``UnhealthyPartitions``
    broker: I64
    leader: I64
    status: npt.NDArray[np.int8]


@dataclass(frozen=True)
class UnhealthyPartitions:
    """The unhealthy partitions' facts that a partition cause needs."""

    keys: list[tuple[str, int]]
    leader: I64
    offline: npt.NDArray[np.bool_]
    leader_silent: npt.NDArray[np.bool_]  # no news of its leader (state.leader_news)
    under_replicated: npt.NDArray[np.bool_]
    last_isr: I64  # the ISR's last member (an offline partition waits for it), or -1
    metadata_overdue: npt.NDArray[np.bool_]  # STALE_OVERDUE
    metadata_stale: npt.NDArray[np.bool_]  # STALE_EXPECTED or STALE_OVERDUE
    stale_brokers: list[list[int]]
    followers: LaggingFollowers

    @staticmethod
    def of(records: Sequence[HealthRecord]) -> UnhealthyPartitions:
        """From health records (replay's, or the ones the shards report as unhealthy)."""
        partition: list[int] = []
        broker: list[int] = []
        leader_of: list[int] = []
        status: list[int] = []
        for i, record in enumerate(records):
            for follower in record.followers:
                code = FollowerStatus[follower.status]
                if code != FollowerStatus.IN_SYNC:
                    partition.append(i)
                    broker.append(follower.broker)
                    leader_of.append(record.leader)
                    status.append(code)
        n = len(records)
        return UnhealthyPartitions(
            keys=[(r.topic, r.partition) for r in records],
            leader=np.fromiter((r.leader for r in records), np.int64, n),
            offline=np.fromiter((r.offline for r in records), np.bool_, n),
            leader_silent=np.fromiter(
                (r.leader_silent_since_ms is not None for r in records), np.bool_, n
            ),
            under_replicated=np.fromiter((r.under_replicated for r in records), np.bool_, n),
            last_isr=np.fromiter((r.isr[-1] if r.isr else NO_BROKER for r in records), np.int64, n),
            metadata_overdue=np.fromiter(
                (r.metadata.state == MetadataState.STALE_OVERDUE.name for r in records),
                np.bool_,
                n,
            ),
            metadata_stale=np.fromiter(
                (r.metadata.state != MetadataState.CONSISTENT.name for r in records), np.bool_, n
            ),
            stale_brokers=[list(r.metadata.stale_brokers) for r in records],
            followers=LaggingFollowers(
                np.asarray(partition, dtype=np.int64),
                np.asarray(broker, dtype=np.int64),
                np.asarray(leader_of, dtype=np.int64),
                np.asarray(status, dtype=np.int8),
            ),
        )


def pair_code(follower: I64, leader: I64) -> I64:
    # broker ids are int32 in Kafka; leaders may be -1 (no leader): shift into 32 bits.
    # Codes sort as the pairs do (follower, then leader).
    return (follower.astype(np.int64) << 32) + (leader.astype(np.int64) + 1)


def pairs_of(codes: I64) -> npt.NDArray[np.int64]:
    """The (follower, leader) rows of pair codes (``_pair_code``)."""
    follower = codes >> 32
    return np.stack([follower, (codes - (follower << 32)) - 1], axis=1).astype(np.int64)
