"""Why a follower is not in sync: the cause, read from the pattern across the cluster.

One lagging follower says little; the same broker lagging on most of what it follows, or
every follower of one leader lagging, says where the trouble is. :func:`attribute` is a
pure function of the health of all partitions: the followers that are not IN_SYNC (from
the unhealthy partitions' health records) and the shape of the cluster (how many
replicas each broker follows from each leader, how many partitions each broker leads,
which brokers are registered), so it must run where every partition is visible: in
replay, or on the driver once every state shard has reported. Shapes of shards add up
(:meth:`ClusterShape.merge`), so a sharded job attributes exactly as one model would.

The rules, with Kafka's reasoning and every threshold, are in docs/causes.md. In order
of precedence, for each follower not IN_SYNC:

1. SHRINK_OVERDUE: Kafka is not acting. Overdue followers under one leader: that
   leader's ISR updates fail (its ``isr-expiration`` task or its ZooKeeper write /
   AlterPartition); under ``many_leaders`` leaders or more: the controller or ZooKeeper.
2. Its broker is not registered (OFFLINE, or absent from the live set): broker down.
3. Its leader is slow to serve: at least ``leader_ratio`` of the partitions the leader
   leads have a lagging follower, on ``many_brokers`` brokers or more.
4. Its broker is behind on most of what it follows (more than ``most_ratio`` of its
   follower replicas) from ``many_leaders`` leaders or more: its fetchers, disk or network.
5. Its broker is behind on most of what it follows from this one leader (more than
   ``most_ratio``, and at least 2 partitions): the replica fetcher from that leader.
6. Otherwise the partition alone lags (a hot partition, or one log): no broker to blame.

An unhealthy partition's cause is its offline leader, else its first follower cause in
that order, else its overdue metadata (one stale broker, or the controller for several),
else ``unexplained``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from state.maintenance import Maintenance, MaintenanceState
from state.model import ReplicationModel
from state.partition_health import HealthFrame
from state.partition_table import I64
from state.shrink_rule import FollowerStatus

NO_BROKER = -1
"""The responsible broker of a cause that blames none (``"broker": null``)."""

Cause = dict[str, Any]
"""``{"kind": str, "broker": int | None, "text": str}`` as in the health record."""


class CauseKind(StrEnum):
    """The vocabulary of causes, in order of precedence (docs/causes.md)."""

    OFFLINE_LEADER = "offline_leader"
    LEADER_NOT_SHRINKING = "leader_not_shrinking"
    CLUSTER_NOT_SHRINKING = "cluster_not_shrinking"
    BROKER_DOWN = "broker_down"
    LEADER_SLOW = "leader_slow"
    FOLLOWER_BROKER_BEHIND = "follower_broker_behind"
    FETCHER_FROM_LEADER = "fetcher_from_leader"
    PARTITION_ALONE = "partition_alone"
    # A follower's own cause before any other but an overdue shrink; as a partition's
    # principal cause it yields to any unplanned one (the partition's problem is that).
    PLANNED_MAINTENANCE = "planned_maintenance"
    METADATA_STALE_ON_BROKER = "metadata_stale_on_broker"
    METADATA_NOT_SENT = "metadata_not_sent"
    METADATA_PROPAGATING = "metadata_propagating"
    UNEXPLAINED = "unexplained"


KINDS: tuple[CauseKind, ...] = tuple(CauseKind)
_RANK = {kind: rank for rank, kind in enumerate(KINDS)}


@dataclass(frozen=True)
class CauseThresholds:
    """What "most", "many" and "every" mean (docs/causes.md)."""

    most_ratio: float = 0.5  # "most": strictly more than this share
    many_leaders: int = 2  # "many leaders": at least this many distinct leaders
    many_brokers: int = 2  # a slow leader's lagging followers sit on this many brokers
    leader_ratio: float = 0.8  # "every partition it leads", allowing idle partitions at LEO


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
        follower_broker: I64, leader: I64, live: Iterable[int] | None,
        maintenance: Mapping[int, Maintenance] | None = None,
    ) -> ClusterShape:  # fmt: skip
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
        codes, inverse = np.unique(_pair_code(follower, leader), return_inverse=True)
        pairs = _pairs_of(codes)
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
    codes, counts = np.unique(_pair_code(follower, leader), return_counts=True)
    return _pairs_of(codes), counts.astype(np.int64)


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
    under_replicated: npt.NDArray[np.bool_]
    last_isr: I64  # the ISR's last member (an offline partition waits for it), or -1
    metadata_overdue: npt.NDArray[np.bool_]  # STALE_OVERDUE
    metadata_stale: npt.NDArray[np.bool_]  # STALE_EXPECTED or STALE_OVERDUE
    stale_brokers: list[list[int]]
    followers: LaggingFollowers

    @staticmethod
    def of(records: Sequence[Mapping[str, Any]]) -> UnhealthyPartitions:
        """From health records (replay's, or the ones the shards report as unhealthy)."""
        partition: list[int] = []
        broker: list[int] = []
        leader_of: list[int] = []
        status: list[int] = []
        for i, record in enumerate(records):
            for follower in record["followers"]:
                code = FollowerStatus[follower["status"]]
                if code != FollowerStatus.IN_SYNC:
                    partition.append(i)
                    broker.append(follower["broker"])
                    leader_of.append(record["leader"])
                    status.append(code)
        return UnhealthyPartitions(
            keys=[(r["topic"], r["partition"]) for r in records],
            leader=np.fromiter((r["leader"] for r in records), np.int64, len(records)),
            offline=np.fromiter((r["offline"] for r in records), np.bool_, len(records)),
            under_replicated=np.fromiter(
                (r["under_replicated"] for r in records), np.bool_, len(records)
            ),
            last_isr=np.fromiter(
                (r["isr"][-1] if r["isr"] else NO_BROKER for r in records), np.int64, len(records)
            ),
            metadata_overdue=np.fromiter(
                (r["metadata"]["state"] == "STALE_OVERDUE" for r in records),
                np.bool_,
                len(records),
            ),
            metadata_stale=np.fromiter(
                (r["metadata"]["state"] != "CONSISTENT" for r in records),
                np.bool_,
                len(records),
            ),
            stale_brokers=[list(r["metadata"]["stale_brokers"]) for r in records],
            followers=LaggingFollowers(
                np.asarray(partition, dtype=np.int64),
                np.asarray(broker, dtype=np.int64),
                np.asarray(leader_of, dtype=np.int64),
                np.asarray(status, dtype=np.int8),
            ),
        )


@dataclass(frozen=True)
class Attribution:
    """The cause of every lagging follower and of every unhealthy partition."""

    partitions: UnhealthyPartitions
    follower_cause: list[Cause]  # parallel to partitions.followers
    partition_cause: list[Cause]  # parallel to partitions.keys
    shape: ClusterShape

    def causes_by_partition(self) -> dict[tuple[str, int], tuple[Cause, dict[int, Cause]]]:
        """(topic, partition) -> (its cause, follower broker -> that follower's cause)."""
        followers: dict[int, dict[int, Cause]] = {}
        positions = self.partitions.followers.partition.tolist()
        brokers = self.partitions.followers.broker.tolist()
        for position, broker, cause in zip(positions, brokers, self.follower_cause, strict=True):
            followers.setdefault(position, {})[broker] = cause
        return {
            key: (cause, followers.get(i, {}))
            for i, (key, cause) in enumerate(
                zip(self.partitions.keys, self.partition_cause, strict=True)
            )
        }

    def planned_under_replicated(self) -> dict[str, int]:
        """Per topic, under-replicated partitions whose principal cause is planned
        maintenance: their under-replication is expected."""
        counts: dict[str, int] = {}
        for (topic, _), cause, under in zip(
            self.partitions.keys, self.partition_cause,
            self.partitions.under_replicated.tolist(), strict=True,
        ):  # fmt: skip
            if under and cause["kind"] == CauseKind.PLANNED_MAINTENANCE:
                counts[topic] = counts.get(topic, 0) + 1
        return counts

    def summary(self) -> list[CauseCount]:
        """Followers and partitions per (kind, responsible broker), with distinct leaders."""
        counts: dict[tuple[str, int], CauseCount] = {}
        leaders: dict[tuple[str, int], set[int]] = {}
        for cause, leader in zip(
            self.follower_cause, self.partitions.followers.leader.tolist(), strict=True
        ):
            key = (cause["kind"], NO_BROKER if cause["broker"] is None else cause["broker"])
            entry = counts.setdefault(key, CauseCount(*key))
            entry.followers += 1
            leaders.setdefault(key, set()).add(leader)
        for cause in self.partition_cause:
            key = (cause["kind"], NO_BROKER if cause["broker"] is None else cause["broker"])
            counts.setdefault(key, CauseCount(*key)).partitions += 1
        for key, entry in counts.items():
            entry.leaders = len(leaders.get(key, ()))
        return sorted(counts.values(), key=lambda c: (_RANK[CauseKind(c.kind)], c.broker))


@dataclass
class CauseCount:
    kind: str
    broker: int  # NO_BROKER: none blamed
    followers: int = 0
    partitions: int = 0
    leaders: int = 0


def cause(kind: CauseKind, broker: int, text: str) -> Cause:
    return {"kind": kind.value, "broker": None if broker == NO_BROKER else broker, "text": text}


def _lookup(keys: I64, table_keys: I64, table_values: I64) -> I64:
    """``table_values`` at the position of each key in ``table_keys`` (0 when absent)."""
    if not len(table_keys):
        return np.zeros(len(keys), dtype=np.int64)
    order = np.argsort(table_keys, kind="stable")
    sorted_keys = table_keys[order]
    position = np.clip(np.searchsorted(sorted_keys, keys), 0, len(sorted_keys) - 1)
    found = sorted_keys[position] == keys
    return np.where(found, table_values[order][position], 0)


def _pair_code(follower: I64, leader: I64) -> I64:
    # broker ids are int32 in Kafka; leaders may be -1 (no leader): shift into 32 bits.
    # Codes sort as the pairs do (follower, then leader).
    return (follower.astype(np.int64) << 32) + (leader.astype(np.int64) + 1)


def _pairs_of(codes: I64) -> npt.NDArray[np.int64]:
    """The (follower, leader) rows of pair codes (``_pair_code``)."""
    follower = codes >> 32
    return np.stack([follower, (codes - (follower << 32)) - 1], axis=1).astype(np.int64)


def _distinct_per(group: I64, value: I64) -> tuple[I64, I64]:
    """For each distinct ``group``, how many distinct ``value`` it has."""
    if not len(group):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    # one sort of int codes (as _pair_code: values are broker ids or positions, >= -1)
    pairs = _pairs_of(np.unique(_pair_code(group, value)))
    groups, counts = np.unique(pairs[:, 0], return_counts=True)
    return groups.astype(np.int64), counts.astype(np.int64)


def attribute(
    unhealthy: UnhealthyPartitions,
    shape: ClusterShape,
    thresholds: CauseThresholds | None = None,
) -> Attribution:
    """The cause of every lagging follower and unhealthy partition (module doc, rules)."""
    th = thresholds or CauseThresholds()
    f = unhealthy.followers
    n = len(f.broker)
    status = f.status
    overdue = status == FollowerStatus.SHRINK_OVERDUE

    # 1. Kafka not acting: overdue followers clustered on one leader, or on many.
    overdue_leaders = np.unique(f.leader[overdue])
    cluster_wide_overdue = len(overdue_leaders) >= th.many_leaders
    overdue_per_leader = _counts(f.leader[overdue])

    # 2. Broker down: not registered (OFFLINE is the status of an unregistered follower).
    live = shape.live
    registered = np.ones(n, dtype=np.bool_) if live is None else np.isin(f.broker, live)
    down = (status == FollowerStatus.OFFLINE) | ~registered

    # 0. Planned maintenance: the follower's broker is shutting down or just came back.
    planned = np.isin(f.broker, np.fromiter(shape.maintenance, np.int64, len(shape.maintenance)))
    # What rules 3 to 5 count: lagging followers, not those absent (down, or planned).
    e = ~(down | planned)
    ev_broker, ev_leader, ev_partition = f.broker[e], f.leader[e], f.partition[e]

    # 3. Leader slow to serve: its partitions with a lagging follower, and on how many brokers.
    led = _lookup(f.leader, shape.led_leader, shape.led_count)
    lagging_led = _lookup(f.leader, *_distinct_per(ev_leader, ev_partition))
    lagging_brokers_of_leader = _lookup(f.leader, *_distinct_per(ev_leader, ev_broker))
    leader_slow = (
        (led > 0)
        & (lagging_led >= th.leader_ratio * led)
        & (lagging_brokers_of_leader >= th.many_brokers)
    )

    # 4. Follower broker behind on most of what it follows, from many leaders.
    followed_brokers, followed = _sum_by(shape.pair_follower, shape.pair_count)
    follows = _lookup(f.broker, followed_brokers, followed)
    behind_on = _lookup(f.broker, *_counts_of(ev_broker))
    lagging_leaders = _lookup(f.broker, *_distinct_per(ev_broker, ev_leader))
    broker_behind = (behind_on > th.most_ratio * follows) & (lagging_leaders >= th.many_leaders)

    # 5. Behind on most of what it follows from this one leader: that fetcher.
    codes = _pair_code(f.broker, f.leader)
    pair_total = _lookup(
        codes, _pair_code(shape.pair_follower, shape.pair_leader), shape.pair_count
    )
    pair_behind = _lookup(codes, *_counts_of(_pair_code(ev_broker, ev_leader)))
    fetcher = (pair_behind > th.most_ratio * pair_total) & (pair_behind >= 2)

    kinds = np.select(
        [
            overdue & cluster_wide_overdue,
            overdue,
            planned,
            down,
            leader_slow,
            broker_behind,
            fetcher,
        ],
        [
            _RANK[k]
            for k in (
                CauseKind.CLUSTER_NOT_SHRINKING,
                CauseKind.LEADER_NOT_SHRINKING,
                CauseKind.PLANNED_MAINTENANCE,
                CauseKind.BROKER_DOWN,
                CauseKind.LEADER_SLOW,
                CauseKind.FOLLOWER_BROKER_BEHIND,
                CauseKind.FETCHER_FROM_LEADER,
            )
        ],
        default=_RANK[CauseKind.PARTITION_ALONE],
    )
    follower_causes: list[Cause] = []
    texts: dict[tuple[int, int, int], Cause] = {}
    for i, (kind_rank, broker, leader) in enumerate(
        zip(kinds.tolist(), f.broker.tolist(), f.leader.tolist(), strict=True)
    ):
        kind = KINDS[kind_rank]
        key = (kind_rank, broker, leader)
        if kind is CauseKind.PLANNED_MAINTENANCE:
            texts.setdefault(key, _planned(broker, shape.maintenance[broker]))
        elif kind is CauseKind.PARTITION_ALONE or key not in texts:
            texts[key] = _follower_cause(
                kind,
                broker,
                leader,
                i,
                unhealthy,
                {
                    "overdue_leaders": len(overdue_leaders),
                    "overdue_here": overdue_per_leader.get(leader, 0),
                    "overdue_total": int(overdue.sum()),
                    "lagging_led": int(lagging_led[i]),
                    "led": int(led[i]),
                    "lagging_brokers": int(lagging_brokers_of_leader[i]),
                    "behind_on": int(behind_on[i]),
                    "follows": int(follows[i]),
                    "lagging_leaders": int(lagging_leaders[i]),
                    "pair_behind": int(pair_behind[i]),
                    "pair_total": int(pair_total[i]),
                },
            )
        follower_causes.append(texts[key])
    return Attribution(
        unhealthy, follower_causes, _partition_causes(unhealthy, kinds, follower_causes), shape
    )


def _counts(values: I64) -> dict[int, int]:
    distinct, counts = np.unique(values, return_counts=True)
    return dict(zip(distinct.tolist(), counts.tolist(), strict=True))


def _counts_of(values: I64) -> tuple[I64, I64]:
    """Each distinct value and how often it occurs."""
    distinct, counts = np.unique(values, return_counts=True)
    return distinct.astype(np.int64), counts.astype(np.int64)


def _sum_by(keys: I64, values: I64) -> tuple[I64, I64]:
    distinct, inverse = np.unique(keys, return_inverse=True)
    sums = np.bincount(inverse.reshape(-1), weights=values, minlength=len(distinct))
    return distinct.astype(np.int64), sums.astype(np.int64)


def _planned(broker: int, maintenance: tuple[str, int]) -> Cause:
    if maintenance[0] == MaintenanceState.SHUTTING_DOWN:
        text = f"broker {broker} is in a controlled shutdown: planned maintenance"
    else:
        text = (
            f"broker {broker} re-registered after a restart and is catching up: planned "
            "maintenance (grace period)"
        )
    return cause(CauseKind.PLANNED_MAINTENANCE, broker, text)


def _follower_cause(
    kind: CauseKind,
    broker: int,
    leader: int,
    i: int,
    unhealthy: UnhealthyPartitions,
    n: Mapping[str, int],
) -> Cause:
    match kind:
        case CauseKind.CLUSTER_NOT_SHRINKING:
            return cause(
                kind,
                NO_BROKER,
                (
                    f"{n['overdue_total']:,} followers past their shrink deadline under "
                    f"{n['overdue_leaders']} leaders: ISR updates fail cluster-wide (controller "
                    "or ZooKeeper)"
                ),
            )
        case CauseKind.LEADER_NOT_SHRINKING:
            return cause(
                kind,
                leader,
                (
                    f"leader {leader} keeps {n['overdue_here']:,} followers in the ISR past their "
                    "shrink deadline: its isr-expiration task or ISR updates are stuck"
                ),
            )
        case CauseKind.BROKER_DOWN:
            return cause(kind, broker, f"broker {broker} is down (not registered)")
        case CauseKind.LEADER_SLOW:
            return cause(
                kind,
                leader,
                (
                    f"leader {leader} is slow to serve: followers on {n['lagging_brokers']} "
                    f"brokers lag in {n['lagging_led']:,} of the {n['led']:,} partitions it leads"
                ),
            )
        case CauseKind.FOLLOWER_BROKER_BEHIND:
            return cause(
                kind,
                broker,
                (
                    f"broker {broker} is behind on {n['behind_on']:,} of the {n['follows']:,} "
                    f"partitions it follows, from {n['lagging_leaders']} leaders"
                ),
            )
        case CauseKind.FETCHER_FROM_LEADER:
            return cause(
                kind,
                broker,
                (
                    f"broker {broker} is behind on {n['pair_behind']:,} of the "
                    f"{n['pair_total']:,} partitions it follows from leader {leader}: its "
                    "fetcher from that leader, or the network between them"
                ),
            )
        case _:
            topic, partition = unhealthy.keys[int(unhealthy.followers.partition[i])]
            return cause(
                CauseKind.PARTITION_ALONE,
                NO_BROKER,
                (
                    f"only {topic}-{partition} lags on broker {broker} (from leader {leader}): "
                    "a hot partition or one log, not the brokers"
                ),
            )


def _partition_causes(
    unhealthy: UnhealthyPartitions, follower_kinds: I64, follower_causes: list[Cause]
) -> list[Cause]:
    """Each unhealthy partition's principal cause (module doc)."""
    best: dict[int, int] = {}  # partition position -> index of its highest-ranked follower
    positions = unhealthy.followers.partition.tolist()
    ranks = follower_kinds.tolist()
    for i, position in enumerate(positions):
        if position not in best or ranks[i] < ranks[best[position]]:
            best[position] = i
    stale_counts: dict[int, int] = {}
    for overdue, stale in zip(
        unhealthy.metadata_overdue.tolist(), unhealthy.stale_brokers, strict=True
    ):
        if overdue and len(stale) == 1:
            stale_counts[stale[0]] = stale_counts.get(stale[0], 0) + 1
    causes: list[Cause] = []
    for position in range(len(unhealthy.keys)):
        leader = int(unhealthy.leader[position])
        stale = unhealthy.stale_brokers[position]
        if unhealthy.offline[position]:
            down = leader if leader >= 0 else int(unhealthy.last_isr[position])
            causes.append(
                cause(
                    CauseKind.OFFLINE_LEADER,
                    down,
                    (
                        f"no live leader: waiting for broker {down}, the last in-sync replica"
                        if leader < 0
                        else f"leader {leader} is down (not registered)"
                    ),
                )
            )
        elif position in best:
            causes.append(follower_causes[best[position]])
        elif unhealthy.metadata_overdue[position] and len(stale) == 1:
            causes.append(
                cause(
                    CauseKind.METADATA_STALE_ON_BROKER,
                    stale[0],
                    (
                        f"broker {stale[0]} still caches an old ISR past the propagation window "
                        f"({stale_counts[stale[0]]:,} partitions): UpdateMetadata did not reach it"
                    ),
                )
            )
        elif unhealthy.metadata_overdue[position]:
            causes.append(
                cause(
                    CauseKind.METADATA_NOT_SENT,
                    NO_BROKER,
                    (
                        f"brokers {_names(stale)} cache an old ISR past the propagation "
                        "window: the controller is slow to send UpdateMetadata"
                    ),
                )
            )
        elif unhealthy.metadata_stale[position]:
            causes.append(
                cause(
                    CauseKind.METADATA_PROPAGATING,
                    NO_BROKER,
                    (
                        f"an ISR change is still reaching brokers {_names(stale)}, within "
                        "Kafka's propagation window"
                    ),
                )
            )
        else:
            causes.append(
                cause(
                    CauseKind.UNEXPLAINED,
                    NO_BROKER,
                    (
                        "unhealthy with every follower in sync and metadata consistent "
                        "(e.g. fewer replicas than min.insync.replicas)"
                    ),
                )
            )
    return causes


def annotate(
    records: Sequence[Mapping[str, Any]], unhealthy: Sequence[int], shape: ClusterShape
) -> list[dict[str, Any]]:
    """Every record with its causes, the positions ``unhealthy`` attributed over ``shape``."""
    attribution = attribute(UnhealthyPartitions.of([records[i] for i in unhealthy]), shape)
    causes = attribution.causes_by_partition()
    return [with_causes(r, causes.get((r["topic"], r["partition"]))) for r in records]


def _names(brokers: Sequence[int]) -> str:
    return ", ".join(map(str, brokers))


def with_causes(
    record: Mapping[str, Any], causes: tuple[Cause, dict[int, Cause]] | None
) -> dict[str, Any]:
    """The health record with its ``cause`` and each follower's (null where healthy)."""
    partition_cause, follower_causes = causes if causes is not None else (None, {})
    followers = [
        {**follower, "cause": follower_causes.get(follower["broker"])}
        for follower in record["followers"]
    ]
    return {**record, "followers": followers, "cause": partition_cause}
