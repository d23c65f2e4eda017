"""Health of every partition of a shard at a time ``now`` (semantics.md section 4).

:func:`evaluate` works on whole columns; :meth:`HealthFrame.records` turns rows of the
result into the partition health records of events.md, field for field.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from state.cluster_state import ClusterState
from state.events import NO_LEADER
from state.lag_time import (
    LagTimeUnknown,
    caught_up_known,
    lag_time_known,
    shrink_deadline_known,
    time_or_none,
)
from state.metadata_cache import (
    MetadataCaches,
    MetadataState,
    blackout_window_of,
    metadata_state,
)
from state.partition_table import BOOL, I64, UNKNOWN_OFFSET, PartitionTable
from state.propagation_window import PropagationWindows
from state.settings import RuleSettings
from state.shrink_rule import (
    STATUS_NAMES,
    FollowerFacts,
    FollowerStatus,
    classify,
    lag_time_ms,
    shrink_deadline_ms,
)

NO_FOLLOWER = -1
"""``follower_status`` of a replica slot that holds no follower (empty, or the leader)."""

HealthRecord = dict[str, Any]


@dataclass(frozen=True)
class HealthFrame:
    """Columns of the health of ``len(rows)`` partitions, sorted by topic then partition."""

    as_of_ms: int
    rows: I64
    topic: list[str]
    partition: I64
    leader: I64
    leader_epoch: I64
    replicas: list[tuple[int, ...]]
    isr: list[tuple[int, ...]]
    high_watermark: I64
    leader_leo: I64
    under_replicated: BOOL
    under_min_isr: BOOL
    at_min_isr: BOOL
    offline: BOOL
    predicted_under_replicated: BOOL
    lag_time_max_ms: I64
    min_insync_replicas: I64  # of the topic (TopicConfig, else the configured default)
    # One column per replica slot, NO_FOLLOWER where the slot is not a follower.
    follower_broker: I64
    follower_status: npt.NDArray[np.int8]
    follower_in_isr: BOOL
    follower_fetch_offset: I64
    follower_last_caught_up_ms: I64
    follower_lag_time_ms: I64
    follower_lag_time_known: BOOL  # state.lag_time: False where the record says null
    follower_shrink_by_ms: I64
    follower_shrink_by_known: BOOL
    metadata_state: npt.NDArray[np.int8]
    stale_brokers: list[list[int]]
    blackout_earliest_ms: list[int | None]
    blackout_latest_ms: list[int | None]

    def __len__(self) -> int:
        return len(self.rows)

    def status_counts(self) -> dict[str, int]:
        """Followers by status over the whole frame."""
        counts = np.bincount(
            self.follower_status[self.follower_status >= 0].astype(np.int64),
            minlength=len(STATUS_NAMES),
        )
        return dict(zip(STATUS_NAMES, counts.tolist(), strict=True))

    def records(self, indices: Sequence[int] | None = None) -> Iterator[HealthRecord]:
        """Health records (events.md) of the given positions, all by default."""
        for i in range(len(self)) if indices is None else indices:
            yield self.record(i)

    def record(self, i: int) -> HealthRecord:
        leader_leo = int(self.leader_leo[i])
        caught_up = caught_up_known(self.follower_last_caught_up_ms[i])
        followers = []
        for k in np.flatnonzero(self.follower_status[i] >= 0).tolist():
            status = FollowerStatus(int(self.follower_status[i, k]))
            offset = int(self.follower_fetch_offset[i, k])
            lag_known = bool(self.follower_lag_time_known[i, k])
            follower: HealthRecord = {
                "broker": int(self.follower_broker[i, k]),
                "in_isr": bool(self.follower_in_isr[i, k]),
                "fetch_offset": None if offset == UNKNOWN_OFFSET else offset,
                "last_caught_up_ms": time_or_none(
                    self.follower_last_caught_up_ms[i, k], caught_up[k]
                ),
                "lag_time_ms": time_or_none(self.follower_lag_time_ms[i, k], lag_known),
                "lag_time_unknown": None if lag_known else LagTimeUnknown.NEVER_CAUGHT_UP.value,
                "lag_messages": None if offset == UNKNOWN_OFFSET else max(0, leader_leo - offset),
                "status": status.name,
            }
            if status in (FollowerStatus.SHRINK_ELIGIBLE, FollowerStatus.SHRINK_OVERDUE):
                follower["shrink_by_ms"] = time_or_none(
                    self.follower_shrink_by_ms[i, k], self.follower_shrink_by_known[i, k]
                )
            followers.append(follower)
        return {
            "topic": self.topic[i],
            "partition": int(self.partition[i]),
            "as_of_ms": self.as_of_ms,
            "leader": int(self.leader[i]),
            "leader_epoch": int(self.leader_epoch[i]),
            "replicas": list(self.replicas[i]),
            "isr": list(self.isr[i]),
            "min_insync_replicas": int(self.min_insync_replicas[i]),
            "high_watermark": int(self.high_watermark[i]),
            "leader_leo": leader_leo,
            "under_replicated": bool(self.under_replicated[i]),
            "under_min_isr": bool(self.under_min_isr[i]),
            "at_min_isr": bool(self.at_min_isr[i]),
            "offline": bool(self.offline[i]),
            "predicted_under_replicated": bool(self.predicted_under_replicated[i]),
            "followers": followers,
            "metadata": {
                "stale_brokers": self.stale_brokers[i],
                "state": MetadataState(int(self.metadata_state[i])).name,
                "blackout_earliest_ms": self.blackout_earliest_ms[i],
                "blackout_latest_ms": self.blackout_latest_ms[i],
            },
        }


def evaluate(
    table: PartitionTable,
    cluster: ClusterState,
    caches: MetadataCaches,
    windows: PropagationWindows,
    settings: RuleSettings,
    now_ms: int,
) -> HealthFrame:
    rows = _sorted_live_rows(table)
    leader = table.leader[rows].astype(np.int64)
    leader_live = (leader != NO_LEADER) & cluster.live_mask(leader)
    lag_time_max = cluster.lag_time_max_of(leader, settings.replica_lag_time_max_ms)
    min_isr = cluster.min_isr_of(
        table.topic_id[rows], table.topic_names, settings.min_insync_replicas
    )
    n_isr, n_replicas = table.n_isr[rows], table.n_replicas[rows]

    broker = table.replica_broker[rows].astype(np.int64)
    is_follower = (broker >= 0) & (broker != leader[:, None])
    leader_leo = table.leader_leo[rows]
    facts = FollowerFacts(
        in_isr=table.in_isr[rows],
        broker_live=cluster.live_mask(broker),
        leader_live=np.broadcast_to(leader_live[:, None], broker.shape),
        log_end_offset=table.log_end_offset[rows],
        leader_leo=np.broadcast_to(leader_leo[:, None], broker.shape),
        high_watermark=np.broadcast_to(table.high_watermark[rows][:, None], broker.shape),
        epoch_start_offset=np.broadcast_to(table.epoch_start_offset[rows][:, None], broker.shape),
        last_caught_up_ms=table.last_caught_up_ms[rows],
        lag_time_max_ms=np.broadcast_to(lag_time_max[:, None], broker.shape),
        isr_since_ms=table.isr_since_ms[rows],
    )
    status = np.where(is_follower, classify(facts, now_ms, settings.warn_ratio), NO_FOLLOWER)
    shrinking = (status == FollowerStatus.SHRINK_ELIGIBLE) | (
        status == FollowerStatus.SHRINK_OVERDUE
    )
    under_replicated = n_isr < n_replicas

    metadata = np.zeros(len(rows), dtype=np.int8)
    stale_brokers: list[list[int]] = [[] for _ in range(len(rows))]
    earliest: list[int | None] = [None] * len(rows)
    latest: list[int | None] = [None] * len(rows)
    if caches.mismatched:
        position = {int(r): i for i, r in enumerate(rows.tolist()) if r in caches.mismatched}
        for row, i in position.items():
            stale = caches.stale_brokers(row, cluster)
            if not stale:
                continue
            window = blackout_window_of(table, row, windows, settings.propagation)
            stale_brokers[i] = stale
            metadata[i] = metadata_state(window, now_ms, settings.propagation)
            if window is not None:
                earliest[i], latest[i] = window.earliest_ms, window.latest_ms

    return HealthFrame(
        as_of_ms=now_ms,
        rows=rows,
        topic=[table.topic_names[t] for t in table.topic_id[rows].tolist()],
        partition=table.partition[rows].astype(np.int64),
        leader=leader,
        leader_epoch=table.leader_epoch[rows].astype(np.int64),
        replicas=[table.replicas[r] for r in rows.tolist()],
        isr=[table.isr[r] for r in rows.tolist()],
        high_watermark=table.high_watermark[rows],
        leader_leo=leader_leo,
        under_replicated=under_replicated,
        under_min_isr=n_isr < min_isr,
        at_min_isr=n_isr == min_isr,
        offline=~leader_live,
        predicted_under_replicated=~under_replicated & shrinking.any(axis=1),
        lag_time_max_ms=lag_time_max,
        min_insync_replicas=min_isr,
        follower_broker=np.where(is_follower, broker, NO_FOLLOWER),
        follower_status=status.astype(np.int8),
        follower_in_isr=facts.in_isr,
        follower_fetch_offset=facts.log_end_offset,
        follower_last_caught_up_ms=facts.last_caught_up_ms,
        follower_lag_time_ms=lag_time_ms(facts, now_ms),
        follower_lag_time_known=lag_time_known(
            facts.last_caught_up_ms, facts.log_end_offset, facts.leader_leo
        ),
        follower_shrink_by_ms=shrink_deadline_ms(
            facts.last_caught_up_ms, facts.lag_time_max_ms, facts.isr_since_ms
        ),
        follower_shrink_by_known=shrink_deadline_known(facts.last_caught_up_ms, facts.isr_since_ms),
        metadata_state=metadata,
        stale_brokers=stale_brokers,
        blackout_earliest_ms=earliest,
        blackout_latest_ms=latest,
    )


def _sorted_live_rows(table: PartitionTable) -> I64:
    rows = table.live_rows()
    names = np.asarray(table.topic_names, dtype=object)
    topic_rank = np.argsort(np.argsort(names, kind="stable"), kind="stable")
    order = np.lexsort((table.partition[rows], topic_rank[table.topic_id[rows]]))
    return rows[order]
