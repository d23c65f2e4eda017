"""Health of every partition of a shard at a time ``now`` (docs/domain.md#partition-health).

:func:`evaluate` works on whole columns; :meth:`HealthFrame.records` turns rows of the
result into the partition health records of docs/health-record.md
(``state.health_record``), field for field.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from state.arrays import BOOL, I64
from state.caught_up import UNKNOWN_OFFSET
from state.cluster_state import ClusterState
from state.eligible_leaders import EligibleLeaders
from state.events import NO_LEADER
from state.expiration_schedule import ExpirationSchedules, shrink_at_ms
from state.health_record import (
    FollowerHealth,
    HealthRecord,
    LagTimeUnknownName,
    MetadataHealth,
    OfflineRecoveryName,
)
from state.lag_time import (
    caught_up_known,
    lag_time_known,
    shrink_deadline_known,
)
from state.leader_news import (
    broker_news_ms,
    broker_silent,
    leader_news_ms,
    leader_silent,
    partition_news_ms,
)
from state.metadata_cache import (
    METADATA_STATE_NAMES,
    MetadataCaches,
    MetadataState,
    metadata_state,
)
from state.partition_table import PartitionTable
from state.propagation_window import PropagationWindows, blackout_window_of
from state.settings import RuleSettings
from state.shrink_rule import (
    STATUS_NAMES,
    FollowerFacts,
    FollowerStatus,
    at_leader_leo,
    classify,
    lag_time_ms,
    shrink_deadline_ms,
)


class OfflineRecovery(IntEnum):
    """``offline_recovery`` of the health record (``OfflineRecoveryName``)."""

    ISR = 0
    ELR = 1
    UNCLEAN_ONLY = 2


NOT_OFFLINE = -1
"""``offline_recovery`` of a partition with a leader (null in the record)."""

OFFLINE_RECOVERY_NAMES: dict[int, OfflineRecoveryName | None] = {
    NOT_OFFLINE: None,
    OfflineRecovery.ISR: "ISR",
    OfflineRecovery.ELR: "ELR",
    OfflineRecovery.UNCLEAN_ONLY: "UNCLEAN_ONLY",
}

NO_FOLLOWER = -1
"""``follower_status`` of a replica slot that holds no follower (empty, or the leader)."""


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
    eligible_leaders: list[EligibleLeaders | None]  # Kafka 4.0+; None: never stated
    high_watermark: I64
    high_watermark_frozen: BOOL
    leader_leo: I64
    under_replicated: BOOL
    under_min_isr: BOOL
    at_min_isr: BOOL
    offline: BOOL
    offline_recovery: npt.NDArray[np.int8]  # an OfflineRecovery, NOT_OFFLINE with a leader
    leader_silent: BOOL  # no news of the leader for more than T / 2 (state.leader_news)
    leader_heard_ms: I64  # the latest news of its leader, the partition's or its broker's
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
    # The leader's run that removes it (state.expiration_schedule), where its runs are known
    follower_shrink_at_ms: I64
    follower_shrink_at_known: BOOL
    metadata_state: npt.NDArray[np.int8]
    stale_brokers: list[list[int]]
    blackout_earliest_ms: list[int | None]
    blackout_latest_ms: list[int | None]

    def __len__(self) -> int:
        return len(self.rows)

    def unhealthy(self) -> BOOL:
        """Partitions that are not fully healthy: under-replicated, under min ISR,
        offline, with a silent leader, predicted to shrink, with stale metadata, or with a
        follower not IN_SYNC. Only these get causes (``state.causes``), per-partition metrics series
        (a bounded cardinality), a place in the live view, and a say in the restart
        check; the way Kafka's ``Partition`` owns ``isUnderReplicated``."""
        statuses = self.follower_status
        not_in_sync = ((statuses >= 0) & (statuses != FollowerStatus.IN_SYNC)).any(axis=1)
        unhealthy: BOOL = (
            self.under_replicated
            | self.under_min_isr
            | self.offline
            | self.leader_silent
            | self.predicted_under_replicated
            | (self.metadata_state != MetadataState.CONSISTENT)
            | not_in_sync
        )
        return unhealthy

    def status_counts(self) -> dict[str, int]:
        """Followers by status over the whole frame."""
        counts = np.bincount(
            self.follower_status[self.follower_status >= 0].astype(np.int64),
            minlength=len(STATUS_NAMES),
        )
        return dict(zip(STATUS_NAMES, counts.tolist(), strict=True))

    def records(self, indices: Sequence[int] | None = None) -> Iterator[HealthRecord]:
        """Health records (docs/health-record.md) of the given positions, all by default."""
        return iter(self.records_at(range(len(self)) if indices is None else indices))

    def record(self, i: int) -> HealthRecord:
        return self.records_at([i])[0]

    def records_at(self, indices: Sequence[int]) -> list[HealthRecord]:
        """Health records of the given positions, built column by column: one numpy pass
        per field over all of them, then one struct per record and per follower."""
        rows = np.asarray(indices, dtype=np.int64)
        followers = self._followers(rows)
        leo = self.leader_leo[rows].tolist()
        flags = zip(
            self.under_replicated[rows].tolist(),
            self.under_min_isr[rows].tolist(),
            self.at_min_isr[rows].tolist(),
            self.offline[rows].tolist(),
            self.predicted_under_replicated[rows].tolist(),
            self.high_watermark_frozen[rows].tolist(),
            [OFFLINE_RECOVERY_NAMES[code] for code in self.offline_recovery[rows].tolist()],
            [
                heard if silent else None
                for silent, heard in zip(
                    self.leader_silent[rows].tolist(),
                    self.leader_heard_ms[rows].tolist(),
                    strict=True,
                )
            ],
            strict=True,
        )
        states = [METADATA_STATE_NAMES[m] for m in self.metadata_state[rows].tolist()]
        return [
            HealthRecord(
                topic=self.topic[i],
                partition=partition,
                as_of_ms=self.as_of_ms,
                leader=leader,
                leader_epoch=epoch,
                replicas=list(self.replicas[i]),
                isr=list(self.isr[i]),
                elr=None if (held := self.eligible_leaders[i]) is None else list(held.elr),
                last_known_elr=None if held is None else list(held.last_known_elr),
                min_insync_replicas=min_isr,
                high_watermark=high_watermark,
                high_watermark_frozen=frozen,
                leader_leo=leader_leo,
                under_replicated=under_replicated,
                under_min_isr=under_min_isr,
                at_min_isr=at_min_isr,
                offline=offline,
                offline_recovery=recovery,
                leader_silent_since_ms=silent_since,
                predicted_under_replicated=predicted,
                followers=followers_of,
                metadata=MetadataHealth(
                    stale_brokers=self.stale_brokers[i],
                    state=state,
                    blackout_earliest_ms=self.blackout_earliest_ms[i],
                    blackout_latest_ms=self.blackout_latest_ms[i],
                ),
            )
            for (
                i,
                partition,
                leader,
                epoch,
                min_isr,
                high_watermark,
                leader_leo,
                (
                    under_replicated,
                    under_min_isr,
                    at_min_isr,
                    offline,
                    predicted,
                    frozen,
                    recovery,
                    silent_since,
                ),
                followers_of,
                state,
            ) in zip(
                rows.tolist(),
                self.partition[rows].tolist(),
                self.leader[rows].tolist(),
                self.leader_epoch[rows].tolist(),
                self.min_insync_replicas[rows].tolist(),
                self.high_watermark[rows].tolist(),
                leo,
                flags,
                followers,
                states,
                strict=True,
            )
        ]

    def _followers(self, rows: I64) -> list[list[FollowerHealth]]:
        """The followers' part of the records of ``rows``: the replica slots that hold a
        follower, in slot order."""
        status = self.follower_status[rows]
        present = status >= 0
        owner = np.nonzero(present)[0]

        def column(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
            return values[rows][present]

        def times(values: I64, known: BOOL) -> list[int | None]:
            return [v if k else None for v, k in zip(values.tolist(), known.tolist(), strict=True)]

        offset = column(self.follower_fetch_offset)
        offset_known = offset != UNKNOWN_OFFSET
        last_caught_up = column(self.follower_last_caught_up_ms)
        lag_known = column(self.follower_lag_time_known)
        statuses = status[present].tolist()
        shrinking = {FollowerStatus.SHRINK_ELIGIBLE.value, FollowerStatus.SHRINK_OVERDUE.value}
        lag_messages = np.maximum(0, self.leader_leo[rows][owner] - offset)
        unknown: LagTimeUnknownName = "NEVER_CAUGHT_UP"  # LagTimeUnknown.NEVER_CAUGHT_UP
        flat: list[FollowerHealth] = []
        for broker, in_isr, fetch_offset, caught_up, lag, known, messages, code, by, at in zip(
            column(self.follower_broker).tolist(),
            column(self.follower_in_isr).tolist(),
            times(offset, offset_known),
            times(last_caught_up, caught_up_known(last_caught_up)),
            times(column(self.follower_lag_time_ms), lag_known),
            lag_known.tolist(),
            times(lag_messages, offset_known),
            statuses,
            times(column(self.follower_shrink_by_ms), column(self.follower_shrink_by_known)),
            times(column(self.follower_shrink_at_ms), column(self.follower_shrink_at_known)),
            strict=True,
        ):
            flat.append(
                FollowerHealth(
                    broker=broker,
                    in_isr=in_isr,
                    fetch_offset=fetch_offset,
                    last_caught_up_ms=caught_up,
                    lag_time_ms=lag,
                    lag_time_unknown=None if known else unknown,
                    lag_messages=messages,
                    status=STATUS_NAMES[code],
                    # only a follower Kafka is about to remove has a deadline
                    shrink_by_ms=by if code in shrinking else msgspec.UNSET,
                    shrink_at_ms=at if code in shrinking else msgspec.UNSET,
                )
            )
        ends = np.cumsum(present.sum(axis=1)).tolist()
        return [flat[start:end] for start, end in zip([0, *ends][:-1], ends, strict=True)]


def evaluate(
    table: PartitionTable,
    cluster: ClusterState,
    caches: MetadataCaches,
    windows: PropagationWindows,
    settings: RuleSettings,
    now_ms: int,
    schedules: ExpirationSchedules | None = None,
) -> HealthFrame:
    rows = _sorted_live_rows(table)
    leader = table.leader[rows].astype(np.int64)
    leader_live = (leader != NO_LEADER) & cluster.live_mask(leader)
    # Kafka's controller creates a partition in the NewPartition state and elects its
    # first leader next (PartitionStateMachine: NewPartition -> OnlinePartition, every
    # release). Until then it has no leader epoch: it is not offline (OfflinePartition is
    # a partition whose leader is gone), a leader reports none of its conditions, and no
    # replica follows anyone.
    elected = (leader != NO_LEADER) | (table.leader_epoch[rows] >= 0)
    lag_time_max = cluster.lag_time_max_of(leader, settings.replica_lag_time_max_ms)
    min_isr = cluster.min_isr_of(
        table.topic_id[rows], table.topic_names, settings.min_insync_replicas
    )
    n_isr, n_replicas = table.n_isr[rows], table.n_replicas[rows]

    broker = table.replica_broker[rows].astype(np.int64)
    is_follower = (broker >= 0) & (broker != leader[:, None]) & elected[:, None]
    leader_leo = table.leader_leo[rows]
    broker_live = cluster.live_mask(broker)
    live_follower = is_follower & broker_live
    live_followers = live_follower.sum(axis=1)
    heard = leader_news_ms(
        live_followers,
        partition_news_ms(table.last_fetch_time_ms[rows], live_follower),
        broker_news_ms(leader, windows.quorum, cluster.answered_ms),
    )
    silent = leader_live & leader_silent(live_followers, heard, now_ms, lag_time_max)
    facts = FollowerFacts(
        in_isr=table.in_isr[rows],
        broker_live=broker_live,
        leader_live=np.broadcast_to(leader_live[:, None], broker.shape),
        leader_silent=np.broadcast_to(silent[:, None], broker.shape),
        follower_silent=broker_silent(
            broker_news_ms(broker, windows.quorum, cluster.answered_ms),
            now_ms,
            lag_time_max[:, None],
        ),
        log_end_offset=table.log_end_offset[rows],
        leader_leo=np.broadcast_to(leader_leo[:, None], broker.shape),
        high_watermark=np.broadcast_to(table.high_watermark[rows][:, None], broker.shape),
        epoch_start_offset=np.broadcast_to(table.epoch_start_offset[rows][:, None], broker.shape),
        last_caught_up_ms=table.last_caught_up_ms[rows],
        lag_time_max_ms=np.broadcast_to(lag_time_max[:, None], broker.shape),
        isr_since_ms=table.isr_since_ms[rows],
    )
    status = np.where(is_follower, classify(facts, now_ms, settings.warn_ratio), NO_FOLLOWER)
    deadline_known = shrink_deadline_known(facts.last_caught_up_ms, facts.isr_since_ms)
    anchors = (schedules or ExpirationSchedules()).anchors_of(leader)
    shrink_at, shrink_at_known = shrink_at_ms(
        np.broadcast_to(anchors[:, None], broker.shape),
        facts.lag_time_max_ms,
        facts.last_caught_up_ms,
        facts.isr_since_ms,
    )
    shrinking = (status == FollowerStatus.SHRINK_ELIGIBLE) | (
        status == FollowerStatus.SHRINK_OVERDUE
    )
    under_replicated = elected & (n_isr < n_replicas)
    under_min_isr = elected & (n_isr < min_isr)
    offline = elected & ~leader_live
    eligible_leaders = [table.eligible_leaders[r] for r in rows.tolist()]

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
        eligible_leaders=eligible_leaders,
        high_watermark=table.high_watermark[rows],
        high_watermark_frozen=under_min_isr & settings.high_watermark_frozen_under_min_isr,
        leader_leo=leader_leo,
        under_replicated=under_replicated,
        under_min_isr=under_min_isr,
        at_min_isr=elected & (n_isr == min_isr),
        offline=offline,
        offline_recovery=offline_recovery(offline, n_isr, eligible_leaders),
        leader_silent=silent,
        leader_heard_ms=heard,
        predicted_under_replicated=~under_replicated & shrinking.any(axis=1),
        lag_time_max_ms=lag_time_max,
        min_insync_replicas=min_isr,
        follower_broker=np.where(is_follower, broker, NO_FOLLOWER),
        follower_status=status.astype(np.int8),
        follower_in_isr=facts.in_isr,
        follower_fetch_offset=facts.log_end_offset,
        follower_last_caught_up_ms=facts.last_caught_up_ms,
        follower_lag_time_ms=lag_time_ms(facts, now_ms),
        follower_lag_time_known=lag_time_known(facts.last_caught_up_ms, at_leader_leo(facts)),
        follower_shrink_by_ms=shrink_deadline_ms(
            facts.last_caught_up_ms, facts.lag_time_max_ms, facts.isr_since_ms
        ),
        follower_shrink_by_known=deadline_known,
        follower_shrink_at_ms=shrink_at,
        follower_shrink_at_known=shrink_at_known & deadline_known,
        metadata_state=metadata,
        stale_brokers=stale_brokers,
        blackout_earliest_ms=earliest,
        blackout_latest_ms=latest,
    )


def offline_recovery(
    offline: BOOL,
    n_isr: npt.NDArray[np.integer],
    eligible_leaders: Sequence[EligibleLeaders | None],
) -> npt.NDArray[np.int8]:
    """How each offline partition can get a leader back (:class:`OfflineRecovery`).

    The controller elects, among live replicas, a member of the ISR, or, when the ISR is
    empty, a member of the ELR (``PartitionChangeBuilder.isValidNewLeader``, 4.0+); any
    other replica only by an unclean election. An offline partition's ISR keeps its last
    leader unless the ELR is on (``maybePopulateTargetElr`` empties it, KIP-966), so an
    empty ISR with an empty (or never stated) ELR leaves only an unclean election.
    """
    recovery = np.where(offline, OfflineRecovery.ISR, NOT_OFFLINE).astype(np.int8)
    for i in np.flatnonzero(offline & (n_isr == 0)).tolist():
        held = eligible_leaders[i]
        recovery[i] = OfflineRecovery.ELR if held and held.elr else OfflineRecovery.UNCLEAN_ONLY
    return recovery


def _sorted_live_rows(table: PartitionTable) -> I64:
    rows = table.live_rows()
    names = np.asarray(table.topic_names, dtype=object)
    topic_rank = np.argsort(np.argsort(names, kind="stable"), kind="stable")
    order = np.lexsort((table.partition[rows], topic_rank[table.topic_id[rows]]))
    return rows[order]
