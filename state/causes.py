"""Why a follower is not in sync: the cause, read from the pattern across the cluster.

One lagging follower says little; the same broker lagging on most of what it follows, or
every follower of one leader lagging, says where the trouble is. :func:`attribute` is a
pure function of the health of all partitions: the followers that are not IN_SYNC (from
the unhealthy partitions' health records) and the shape of the cluster (how many
replicas each broker follows from each leader, how many partitions each broker leads,
which brokers are registered), so it must run where every partition is visible: in
replay, or on the driver once every state shard has reported. Its inputs are in
``state.attribution_inputs``.

The rules, with Kafka's reasoning and every threshold, are in docs/causes.md. In order
of precedence, for each follower not IN_SYNC:

1. SHRINK_OVERDUE: Kafka is not acting. Overdue followers under one leader: that
   leader's ISR updates fail (its ``isr-expiration`` task or its ZooKeeper write /
   AlterPartition); under ``many_leaders`` leaders or more: the controller or ZooKeeper.
2. Its broker is not registered (OFFLINE, or absent from the live set): broker down.
   Else its leader is silent (no news of it: ``state.leader_news``): that leader.
3. Its leader is slow to serve: at least ``leader_ratio`` of the partitions the leader
   leads have a lagging follower, on ``many_brokers`` brokers or more.
4. Its broker is behind on most of what it follows (more than ``most_ratio`` of its
   follower replicas) from ``many_leaders`` leaders or more: its fetchers, disk or network.
5. Its broker is behind on most of what it follows from this one leader (more than
   ``most_ratio``, and at least 2 partitions): the replica fetcher from that leader.
6. Otherwise the partition alone lags (a hot partition, or one log): no broker to blame.

An unhealthy partition's cause is its offline leader, else its first follower cause in
that order, else its silent leader, else its overdue metadata (one stale broker, or the
controller for several), else ``unexplained``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import msgspec
import numpy as np

from state.arrays import I64
from state.attribution_inputs import (
    ClusterShape,
    UnhealthyPartitions,
    pair_code,
    pairs_of,
)
from state.cause_kinds import KINDS, NO_BROKER, RANK, CauseKind
from state.health_record import Cause, HealthRecord, cause
from state.maintenance import MaintenanceState
from state.partition_causes import leader_silent_cause, partition_causes
from state.shrink_rule import FollowerStatus


@dataclass(frozen=True)
class CauseThresholds:
    """What "most", "many" and "every" mean (docs/causes.md)."""

    most_ratio: float = 0.5  # "most": strictly more than this share
    many_leaders: int = 2  # "many leaders": at least this many distinct leaders
    many_brokers: int = 2  # a slow leader's lagging followers sit on this many brokers
    leader_ratio: float = 0.8  # "every partition it leads", allowing idle partitions at LEO


@dataclass(frozen=True)
class Attribution:
    """The cause of every lagging follower and of every unhealthy partition."""

    partitions: UnhealthyPartitions
    follower_cause: list[Cause]  # parallel to partitions.followers
    partition_cause: list[Cause]  # parallel to partitions.keys
    shape: ClusterShape

    def causes_by_partition(self) -> dict[tuple[str, int], tuple[Cause, dict[int, Cause]]]:
        """(topic, partition) -> (its found, follower broker -> that follower's found)."""
        followers: dict[int, dict[int, Cause]] = {}
        positions = self.partitions.followers.partition.tolist()
        brokers = self.partitions.followers.broker.tolist()
        for position, broker, found in zip(positions, brokers, self.follower_cause, strict=True):
            followers.setdefault(position, {})[broker] = found
        return {
            key: (found, followers.get(i, {}))
            for i, (key, found) in enumerate(
                zip(self.partitions.keys, self.partition_cause, strict=True)
            )
        }

    def planned_under_replicated(self) -> dict[str, int]:
        """Per topic, under-replicated partitions whose principal found is planned
        maintenance: their under-replication is expected."""
        counts: dict[str, int] = {}
        for (topic, _), found, under in zip(
            self.partitions.keys,
            self.partition_cause,
            self.partitions.under_replicated.tolist(),
            strict=True,
        ):
            if under and found.kind == CauseKind.PLANNED_MAINTENANCE:
                counts[topic] = counts.get(topic, 0) + 1
        return counts

    def summary(self) -> list[CauseCount]:
        """Followers and partitions per (kind, responsible broker), with distinct leaders."""
        counts: dict[tuple[str, int], CauseCount] = {}
        leaders: dict[tuple[str, int], set[int]] = {}
        for found, leader in zip(
            self.follower_cause, self.partitions.followers.leader.tolist(), strict=True
        ):
            key = (found.kind.value, NO_BROKER if found.broker is None else found.broker)
            entry = counts.setdefault(key, CauseCount(*key))
            entry.followers += 1
            leaders.setdefault(key, set()).add(leader)
        for found in self.partition_cause:
            key = (found.kind.value, NO_BROKER if found.broker is None else found.broker)
            counts.setdefault(key, CauseCount(*key)).partitions += 1
        for key, entry in counts.items():
            entry.leaders = len(leaders.get(key, ()))
        return sorted(counts.values(), key=lambda c: (RANK[CauseKind(c.kind)], c.broker))


@dataclass
class CauseCount:
    kind: str
    broker: int  # NO_BROKER: none blamed
    followers: int = 0
    partitions: int = 0
    leaders: int = 0


def _lookup(keys: I64, table_keys: I64, table_values: I64) -> I64:
    """``table_values`` at the position of each key in ``table_keys`` (0 when absent)."""
    if not len(table_keys):
        return np.zeros(len(keys), dtype=np.int64)
    order = np.argsort(table_keys, kind="stable")
    sorted_keys = table_keys[order]
    position = np.clip(np.searchsorted(sorted_keys, keys), 0, len(sorted_keys) - 1)
    found = sorted_keys[position] == keys
    return np.where(found, table_values[order][position], 0)


def _distinct_per(group: I64, value: I64) -> tuple[I64, I64]:
    """For each distinct ``group``, how many distinct ``value`` it has."""
    if not len(group):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    # one sort of int codes (as _pair_code: values are broker ids or positions, >= -1)
    pairs = pairs_of(np.unique(pair_code(group, value)))
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

    # 2b. Leader silent: no news of it, so nothing is known of how its followers fetch.
    silent = unhealthy.leader_silent[f.partition] if n else np.zeros(0, dtype=np.bool_)

    # 0. Planned maintenance: the follower's broker is shutting down or just came back.
    planned = np.isin(f.broker, np.fromiter(shape.maintenance, np.int64, len(shape.maintenance)))
    # What rules 3 to 5 count: lagging followers, not those absent (down, or planned), nor
    # those of a silent leader, whose lag is not known.
    e = ~(down | planned | silent)
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
    codes = pair_code(f.broker, f.leader)
    pair_total = _lookup(codes, pair_code(shape.pair_follower, shape.pair_leader), shape.pair_count)
    pair_behind = _lookup(codes, *_counts_of(pair_code(ev_broker, ev_leader)))
    fetcher = (pair_behind > th.most_ratio * pair_total) & (pair_behind >= 2)

    kinds = np.select(
        [
            overdue & cluster_wide_overdue,
            overdue,
            planned,
            down,
            silent,
            leader_slow,
            broker_behind,
            fetcher,
        ],
        [
            RANK[k]
            for k in (
                CauseKind.CLUSTER_NOT_SHRINKING,
                CauseKind.LEADER_NOT_SHRINKING,
                CauseKind.PLANNED_MAINTENANCE,
                CauseKind.BROKER_DOWN,
                CauseKind.LEADER_SILENT,
                CauseKind.LEADER_SLOW,
                CauseKind.FOLLOWER_BROKER_BEHIND,
                CauseKind.FETCHER_FROM_LEADER,
            )
        ],
        default=RANK[CauseKind.PARTITION_ALONE],
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
        unhealthy, follower_causes, partition_causes(unhealthy, kinds, follower_causes), shape
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
        case CauseKind.LEADER_SILENT:
            return leader_silent_cause(leader)
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


def annotate(
    records: Sequence[HealthRecord], unhealthy: Sequence[int], shape: ClusterShape
) -> list[HealthRecord]:
    """Every record with its causes, the positions ``unhealthy`` attributed over ``shape``."""
    attribution = attribute(UnhealthyPartitions.of([records[i] for i in unhealthy]), shape)
    causes = attribution.causes_by_partition()
    return [with_causes(r, causes.get((r.topic, r.partition))) for r in records]


def with_causes(
    record: HealthRecord, causes: tuple[Cause, dict[int, Cause]] | None
) -> HealthRecord:
    """The health record with its ``cause`` and each follower's (None where healthy)."""
    partition_cause, follower_causes = causes if causes is not None else (None, {})
    followers = [
        msgspec.structs.replace(follower, cause=follower_causes.get(follower.broker))
        for follower in record.followers
    ]
    return msgspec.structs.replace(record, followers=followers, cause=partition_cause)
