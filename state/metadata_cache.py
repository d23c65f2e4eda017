"""Each broker's MetadataCache, as far as ISRs go, and whether it lags the controller.

Brokers learn partition states only from UpdateMetadata (docs/domain.md#metadata-staleness). A
partition is metadata-stale while some live broker's cached ISR differs from the
controller's; a broker that never cached the partition is not counted.
"""

from __future__ import annotations

from enum import IntEnum

from state.cluster_state import ClusterState
from state.partition_table import NO_TIME, ChangeOrigin, PartitionTable
from state.propagation_window import (
    BlackoutWindow,
    PropagationWindows,
    QuorumProgress,
    controller_blackout_window,
    has_applied,
    kraft_blackout_window,
    kraft_observed_window,
)
from state.settings import PropagationSettings


class MetadataState(IntEnum):
    CONSISTENT = 0
    STALE_EXPECTED = 1
    STALE_OVERDUE = 2


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


def blackout_window_of(
    table: PartitionTable, row: int, windows: PropagationWindows, settings: PropagationSettings
) -> BlackoutWindow | None:
    """When the latest ISR change of this partition should reach every cache."""
    origin = int(table.change_origin[row])
    changed = int(table.isr_changed_ms[row])
    if origin == ChangeOrigin.CONTROLLER:
        return controller_blackout_window(changed)
    if origin == ChangeOrigin.METADATA_LOG:
        offset = int(table.isr_change_offset[row])
        if windows.quorum is None or offset < 0:
            return kraft_blackout_window(changed, settings)
        return kraft_observed_window(changed, windows.quorum.fetch_timeout_ms,
                                     reported_behind_ms(table, row, windows.quorum),
                                     windows.quorum.next_report_ms)  # fmt: skip
    if origin == ChangeOrigin.LEADER:
        return windows.window_of(int(table.change_broker[row]))
    if origin == ChangeOrigin.PROPAGATED and table.frozen_latest_ms[row] != NO_TIME:
        return BlackoutWindow(int(table.frozen_earliest_ms[row]), int(table.frozen_latest_ms[row]))
    return None


def reported_behind_ms(table: PartitionTable, row: int, quorum: QuorumProgress) -> int | None:
    """The time of the newest report if it shows a broker that holds an older ISR still
    behind the row's latest ISR change; else None."""
    offset = int(table.isr_change_offset[row])
    current = frozenset(table.isr[row])
    for broker, isr in table.cached_isr[row].items():
        leo = quorum.log_end_offsets.get(broker)
        if isr != current and leo is not None and not has_applied(leo, offset):
            return quorum.report_ms
    return None


def metadata_state(
    window: BlackoutWindow | None, now_ms: int, settings: PropagationSettings
) -> MetadataState:
    """Of a stale partition: expected up to ``blackout_latest_ms + overdue_slack_ms``."""
    if window is not None and now_ms <= window.latest_ms + settings.overdue_slack_ms:
        return MetadataState.STALE_EXPECTED
    return MetadataState.STALE_OVERDUE
