"""Metadata staleness: each broker's MetadataCache, as far as ISRs go, against the controller.

docs/domain.md#metadata-staleness.

A partition is metadata-stale while some live broker's cached ISR differs from the
controller's; a broker that never cached the partition is not counted. A stale
partition is STALE_EXPECTED within its propagation window (``state.propagation_window``)
plus ``overdue_slack_ms``, STALE_OVERDUE after it.

How caches learn an ISR: in ZooKeeper mode only from UpdateMetadata (the model stores
what each one states); in KRaft mode by replaying the metadata log, where the newest
DescribeQuorum report tells which broker has fetched the record of a change
(:func:`track_metadata_offset`, :func:`apply_quorum_report`).

The module keeps the name of the class checkpoints pickle (``MetadataCaches``), so that
the shard snapshots of earlier releases restore as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import IntEnum
from typing import get_args

import numpy as np

from state.cluster_state import ClusterState
from state.events import LEADER_DURING_DELETE, UpdateMetadata
from state.health_record import MetadataStateName
from state.partition_table import PartitionTable
from state.propagation_window import BlackoutWindow, QuorumProgress, applied_by_ms, has_applied
from state.settings import PropagationSettings


class MetadataState(IntEnum):
    CONSISTENT = 0
    STALE_EXPECTED = 1
    STALE_OVERDUE = 2


METADATA_STATE_NAMES: tuple[MetadataStateName, ...] = get_args(MetadataStateName)
"""Every state name, in MetadataState code order (a test holds the two equal)."""


class MetadataCaches:
    """The cached ISRs live in ``PartitionTable.cached_isr``; this tracks which differ."""

    def __init__(self, table: PartitionTable) -> None:
        self.table = table
        self.mismatched: set[int] = set()  # rows where some broker (live or not) differs

    def refresh(self, row: int) -> None:
        controller_isr = frozenset(self.table.isr[row])
        if any(isr != controller_isr for isr in self.table.cached_isr[row].values()):
            self.mismatched.add(row)
        else:
            self.mismatched.discard(row)

    def store(self, row: int, broker: int, isr: frozenset[int]) -> None:
        self.table.cached_isr[row][broker] = isr

    def evict(self, row: int, broker: int) -> None:
        self.table.cached_isr[row].pop(broker, None)

    def drop_brokers(self, brokers: frozenset[int]) -> None:
        """These brokers restarted (or died): their caches start empty."""
        if not brokers:
            return
        for row in self.table.live_rows().tolist():
            cache = self.table.cached_isr[row]
            if any(b in cache for b in brokers):
                for b in brokers:
                    cache.pop(b, None)
                self.refresh(row)

    def forget_row(self, row: int) -> None:
        self.mismatched.discard(row)

    def stale_brokers(self, row: int, cluster: ClusterState) -> list[int]:
        if row not in self.mismatched:
            return []
        controller_isr = frozenset(self.table.isr[row])
        return sorted(
            broker
            for broker, isr in self.table.cached_isr[row].items()
            if isr != controller_isr and cluster.is_live(broker)
        )


def apply_update_metadata(
    caches: MetadataCaches,
    cluster: ClusterState,
    event: UpdateMetadata,
    owns: Callable[[str, int], bool],
) -> tuple[list[int], int]:
    """ZooKeeper mode: ``event.broker`` caches the partition states it was sent (those of
    the partitions ``owns`` accepts); a deleted partition's state evicts it.

    Returns the rows whose change this update brought to every live cache, and how many
    states were of partitions the table does not hold.
    """
    table = caches.table
    ignored = 0
    was_stale: dict[int, bool] = {}  # rows touched -> stale for a live broker before
    stored: set[int] = set()  # rows this broker now caches (not evicted)
    for state in event.partitions:
        if not owns(state.topic, state.partition):
            continue
        row = table.live_row_of(state.topic, state.partition)
        if row < 0:
            ignored += 1
            continue
        if row not in was_stale:
            was_stale[row] = bool(caches.stale_brokers(row, cluster))
        if state.leader == LEADER_DURING_DELETE:
            caches.evict(row, event.broker)
            stored.discard(row)
        else:
            caches.store(row, event.broker, frozenset(state.isr))
            stored.add(row)
    propagated: list[int] = []
    for row, stale_before in was_stale.items():
        caches.refresh(row)
        # The change reached every cache only if this broker took it (an eviction for a
        # topic deletion is no propagation).
        if stale_before and row in stored and not caches.stale_brokers(row, cluster):
            propagated.append(row)
    return propagated, ignored


def metadata_state(
    window: BlackoutWindow | None, now_ms: int, settings: PropagationSettings
) -> MetadataState:
    """Of a stale partition: expected up to ``blackout_latest_ms + overdue_slack_ms``."""
    if window is not None and now_ms <= window.latest_ms + settings.overdue_slack_ms:
        return MetadataState.STALE_EXPECTED
    return MetadataState.STALE_OVERDUE


# ------------------------------------------------------ KRaft: the metadata log


def track_metadata_offset(
    caches: MetadataCaches,
    quorum: QuorumProgress | None,
    row: int,
    offset: int | None,
    old_isr: Sequence[int],
) -> None:
    """KRaft: the row's latest ISR change is the record at ``offset`` of the metadata log.
    Each broker the newest DescribeQuorum report shows not past it still holds ``old_isr``."""
    table = caches.table
    if offset is None:
        if set(old_isr) != set(table.isr[row]) and table.isr_change_offset[row] >= 0:
            # A change of unknown offset (collect admin): what the reports said of the
            # brokers' caches no longer tells anything about this partition.
            table.isr_change_offset[row] = -1
            table.cached_isr[row] = {}
            caches.refresh(row)
        return
    table.isr_change_offset[row] = offset
    if quorum is None:
        return
    new_isr = frozenset(table.isr[row])
    for broker, log_end_offset in quorum.log_end_offsets.items():
        if has_applied(log_end_offset, offset):
            caches.store(row, broker, new_isr)
        elif broker not in table.cached_isr[row]:
            caches.store(row, broker, frozenset(old_isr))
    caches.refresh(row)


def apply_quorum_report(
    caches: MetadataCaches, cluster: ClusterState, quorum: QuorumProgress
) -> list[tuple[int, int]]:
    """KRaft: each broker holds every change whose record it has fetched.

    Returns ``(row, ms)`` for each row whose change this report shows in every live
    cache, ``ms`` being when the last of them had it (:func:`applied_by_ms`).
    """
    if not quorum.log_end_offsets:
        return []
    table = caches.table
    # A broker that is gone (fenced, dead) holds nothing back: only live ones count.
    live_ends = [e for b, e in quorum.log_end_offsets.items() if cluster.is_live(b)]
    lowest = min(live_ends, default=min(quorum.log_end_offsets.values()))
    pending = np.nonzero(table.exists & (table.isr_change_offset >= lowest))[0].tolist()
    propagated: list[tuple[int, int]] = []
    for row in sorted(set(pending) | caches.mismatched):
        offset = int(table.isr_change_offset[row])
        if offset < 0:
            continue
        stale_before = caches.stale_brokers(row, cluster)
        isr = frozenset(table.isr[row])
        for broker, log_end_offset in quorum.log_end_offsets.items():
            if has_applied(log_end_offset, offset):
                caches.store(row, broker, isr)
        caches.refresh(row)
        if stale_before and not caches.stale_brokers(row, cluster):
            changed = int(table.isr_changed_ms[row])
            done = max(
                applied_by_ms(changed, quorum.report_ms, quorum.last_caught_up_ms.get(b))
                for b in stale_before
            )
            propagated.append((row, done))
    return propagated
