"""How long brokers' metadata caches may legitimately show an old ISR.

docs/domain.md#propagation-window.

ZooKeeper mode: a leader records each ISR change in its isrChangeSet; its
isr-change-propagation task runs every 2.5 s and propagates when the set is non-empty
and ``lastIsrChangeMs + 5000 < now`` **or** ``lastIsrPropagationMs + 60000 < now``.
The window is per leader broker: churn on any partition it leads delays all of them.
KRaft mode: no timers; brokers apply a change when they replay the metadata log. Each
change is a record at some offset of ``__cluster_metadata``; a broker has applied it once
it has fetched past that offset, which the quorum leader reports for every replica
(DescribeQuorum: log end offset and last caught-up time, KIP-836). With those reports
(``MetadataLogProgress`` events) the window is Kafka's own: a replica that fetches
normally catches up with the leader at least once per ``controller.quorum.fetch.timeout.ms``
(after that long without a successful fetch, a KRaft replica gives up on its leader:
``QuorumConfig``), so a change appended at ``c`` is due everywhere by ``c + fetch
timeout``; it is overdue once a report taken after that still shows a live broker
behind it. Until such a report, the change is expected, as long as reports keep coming.
Without reports (no DescribeQuorum) the fixed bound ``kraft_propagation_max_ms`` stands.

Each partition's window follows from who made its latest ISR change (``ChangeOrigin``,
kept in the partition table): the controller's LeaderAndIsr comes with its own
UpdateMetadata (no window); a leader's IsrChange waits in that leader's isrChangeSet
(its window moves with the leader's churn, and is frozen once the propagation is seen);
in KRaft mode, the metadata log. The window ends, as observed, when every live broker's
cache holds the change (``state.metadata_cache``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np
import numpy.typing as npt

from state.events import IsrChangePropagation, MetadataLogProgress, TopicPartition
from state.settings import PropagationMode, PropagationSettings

NO_TIME = -1
"""A window bound that has no value (``PartitionTable.frozen_earliest_ms`` and the like)."""


class ChangeOrigin:
    """Who made the latest change of a partition's ISR; decides its propagation window
    (``PartitionTable.change_origin``)."""

    NONE = 0
    CONTROLLER = 1  # LeaderAndIsr: the controller sends UpdateMetadata itself
    LEADER = 2  # IsrChange by the leader, waiting in its isrChangeSet (zk mode)
    PROPAGATED = 3  # IsrChange whose propagation was seen: window frozen at that moment
    METADATA_LOG = 4  # kraft mode: any change, applied by brokers replaying the log


@dataclass(frozen=True)
class BlackoutWindow:
    """The propagation happens strictly after ``earliest_ms`` and by ``latest_ms``."""

    earliest_ms: int
    latest_ms: int


def zk_blackout_window(
    oldest_change_ms: int,
    latest_change_ms: int,
    last_propagation_ms: int | None,
    settings: PropagationSettings,
) -> BlackoutWindow:
    """The window of one leader broker with ``a``, ``c`` and ``p`` of docs/domain.md#propagation-zk.

    Both conditions hold strictly after ``d = min(c + 5000, p + 60000)``; propagation
    happens at the first tick after ``max(a, d)``, tick phase unknown. While no
    propagation of the broker has been seen, ``p = a`` (conservative).
    """
    a, c = oldest_change_ms, latest_change_ms
    p = a if last_propagation_ms is None else last_propagation_ms
    d = min(c + settings.blackout_ms, p + settings.max_delay_ms)
    earliest = max(a, d)
    return BlackoutWindow(earliest, earliest + settings.tick_ms)


def kraft_blackout_window(change_ms: int, settings: PropagationSettings) -> BlackoutWindow:
    return BlackoutWindow(change_ms, change_ms + settings.kraft_propagation_max_ms)


DEFAULT_QUORUM_FETCH_TIMEOUT_MS = 2000
"""Kafka's default ``controller.quorum.fetch.timeout.ms`` (``QuorumConfig``)."""


def has_applied(log_end_offset: int, change_offset: int) -> bool:
    """Whether a replica whose log end offset is ``log_end_offset`` holds the record at
    ``change_offset`` (the log end offset is the offset of the next record to fetch)."""
    return log_end_offset > change_offset


def kraft_observed_window(
    change_ms: int, fetch_timeout_ms: int, reported_behind_ms: int | None, next_report_ms: int
) -> BlackoutWindow:
    """The window of a change appended at ``change_ms``, judged on DescribeQuorum reports.

    ``reported_behind_ms``: the latest report that showed a live broker still behind the
    change (None: none did). Due by ``change_ms + fetch_timeout_ms``; if a report after
    that shows a broker behind, that is the window (overdue). Otherwise the window stays
    open until the next report is due (``next_report_ms``): the monitor cannot call late
    what Kafka has not yet reported.
    """
    deadline = change_ms + fetch_timeout_ms
    if reported_behind_ms is not None and reported_behind_ms > deadline:
        return BlackoutWindow(change_ms, deadline)
    return BlackoutWindow(change_ms, max(deadline, next_report_ms))


def applied_by_ms(change_ms: int, report_ms: int, last_caught_up_ms: int | None) -> int:
    """When a broker that a report at ``report_ms`` shows past a change (appended at
    ``change_ms``) had it: at its last catch-up with the leader if that came after the
    change (it then fetched everything the leader had), else by the report."""
    if last_caught_up_ms is not None and change_ms <= last_caught_up_ms <= report_ms:
        return last_caught_up_ms
    return report_ms


@dataclass
class QuorumProgress:
    """The newest DescribeQuorum report: each replica's log end offset and when it was
    taken; ``next_report_ms`` is when the one after is due. ``last_caught_up_ms``: the
    catch-up with the metadata log this report states for each broker, and for a live
    broker it states none for, the latest an earlier report stated
    (:meth:`keeping_news_of`)."""

    report_ms: int
    log_end_offsets: dict[int, int]
    last_caught_up_ms: dict[int, int]
    fetch_timeout_ms: int
    next_report_ms: int

    @staticmethod
    def of(event: MetadataLogProgress, default_interval_ms: int) -> QuorumProgress:
        """The report an event carries; without its interval, the next is due after
        ``default_interval_ms``."""
        interval = event.interval_ms or default_interval_ms
        return QuorumProgress(
            report_ms=event.ts,
            log_end_offsets={
                r.broker: r.log_end_offset for r in event.replicas if r.log_end_offset >= 0
            },
            last_caught_up_ms={
                r.broker: r.last_caught_up_ms
                for r in event.replicas
                if r.last_caught_up_ms is not None and r.last_caught_up_ms >= 0
            },
            fetch_timeout_ms=event.fetch_timeout_ms or DEFAULT_QUORUM_FETCH_TIMEOUT_MS,
            next_report_ms=event.ts + interval,
        )

    def keeping_news_of(
        self, earlier: QuorumProgress | None, is_live: Callable[[int], bool]
    ) -> QuorumProgress:
        """This report, with each live broker's last catch-up from ``earlier`` where this
        one states none.

        A quorum leader reports a catch-up time only for a replica that has caught up with
        it: a new one (a controller failover) states none for a broker it has not heard
        from, such as a node that died with the old controller (Kafka 4.1.1 reported -1
        for it: docs/real-kafka.md, set x). That says nothing new of the broker; its latest
        news is still the old leader's, which then ages as a paused broker's does
        (docs/domain.md#silent-leader). A broker the cluster no longer counts live (fenced,
        gone) keeps nothing from earlier reports, so what is kept is bounded by the live
        brokers. Log end offsets are this report's only: they judge propagation, which is
        of now."""
        if earlier is None:
            return self
        kept = {
            broker: caught_up
            for broker, caught_up in earlier.last_caught_up_ms.items()
            if broker not in self.last_caught_up_ms and is_live(broker)
        }
        if not kept:
            return self
        return replace(self, last_caught_up_ms={**kept, **self.last_caught_up_ms})


def controller_blackout_window(change_ms: int) -> BlackoutWindow:
    """A LeaderAndIsr change in zk mode: the controller sends UpdateMetadata with it."""
    return BlackoutWindow(change_ms, change_ms)


@dataclass
class LeaderPropagationState:
    """A leader broker's isrChangeSet as seen from outside: what it has not propagated."""

    pending: dict[TopicPartition, int] = field(default_factory=dict)  # -> oldest change
    latest_change_ms: int | None = None
    last_propagation_ms: int | None = None

    def window(self, settings: PropagationSettings) -> BlackoutWindow | None:
        if not self.pending or self.latest_change_ms is None:
            return None
        oldest = min(self.pending.values())
        return zk_blackout_window(oldest, self.latest_change_ms, self.last_propagation_ms, settings)


class PropagationWindows:
    """The zk-mode propagation state of every leader broker, and in KRaft the newest
    DescribeQuorum report."""

    quorum: QuorumProgress | None = None  # class default: states pickled before it existed

    def __init__(self, settings: PropagationSettings) -> None:
        self.settings = settings
        self.leaders: dict[int, LeaderPropagationState] = {}
        self.quorum = None

    @property
    def zk_mode(self) -> bool:
        """ZooKeeper mode: leaders propagate their ISR changes with the 5 s / 60 s rule."""
        return self.settings.mode is PropagationMode.ZK

    def record_isr_change(
        self, leader: int, tp: TopicPartition, ts: int
    ) -> dict[TopicPartition, BlackoutWindow]:
        """The leader changed ``tp``'s ISR at ``ts``.

        Kafka empties the isrChangeSet by the end of its window at the latest. Changes
        still pending here after their window closed were propagated unseen (or late):
        they leave the set, which would otherwise hold ``a`` in the past and make every
        later change of this leader look overdue. Returns their windows, for them to
        be judged against, as :meth:`record_propagation` does.
        """
        state = self.leaders.setdefault(leader, LeaderPropagationState())
        expired: dict[TopicPartition, BlackoutWindow] = {}
        window = state.window(self.settings)
        if window is not None and window.latest_ms < ts:
            expired = dict.fromkeys(state.pending, window)
            state.pending.clear()
        state.pending.setdefault(tp, ts)
        if state.latest_change_ms is None or ts > state.latest_change_ms:
            state.latest_change_ms = ts
        expired.pop(tp, None)
        return expired

    def record_propagation(
        self, leader: int, partitions: tuple[TopicPartition, ...], ts: int
    ) -> dict[TopicPartition, BlackoutWindow]:
        """The broker's task fired at ``ts`` for ``partitions``.

        Returns the window each of those pending partitions had just before: the
        prediction this propagation is judged against.
        """
        state = self.leaders.setdefault(leader, LeaderPropagationState())
        window = state.window(self.settings)
        propagated = {}
        for tp in partitions:
            if state.pending.pop(tp, None) is not None and window is not None:
                propagated[tp] = window
        if state.last_propagation_ms is None or ts > state.last_propagation_ms:
            state.last_propagation_ms = ts
        return propagated

    def registered(self, broker: int, ts: int) -> None:
        """The broker (re-)registered at ``ts``: it started shortly before, and a starting
        ReplicaManager sets its last propagation time to its start (lastIsrPropagationMs
        is initialised to the clock), so the 60 s rule counts from about ``ts``. Counting
        from a propagation seen before the restart would predict it too early."""
        state = self.leaders.setdefault(broker, LeaderPropagationState())
        if state.last_propagation_ms is None or ts > state.last_propagation_ms:
            state.last_propagation_ms = ts

    def window_of(self, leader: int) -> BlackoutWindow | None:
        state = self.leaders.get(leader)
        return state.window(self.settings) if state else None

    def forget(self, tp: TopicPartition) -> None:
        """The partition's change reached every cache: it is no longer waiting anywhere."""
        for state in self.leaders.values():
            state.pending.pop(tp, None)


# --------------------------------------------- each partition's window (partition table)


class WindowColumns(Protocol):
    """What the windows read and write of the partition table (``state.partition_table``):
    the table is built on this module's vocabulary (NO_TIME, ChangeOrigin), so it is named
    by what is used of it rather than imported."""

    @property
    def isr_changed_ms(self) -> npt.NDArray[np.int64]: ...
    @property
    def change_origin(self) -> npt.NDArray[np.int32]: ...
    @property
    def change_broker(self) -> npt.NDArray[np.int32]: ...
    @property
    def frozen_earliest_ms(self) -> npt.NDArray[np.int64]: ...
    @property
    def frozen_latest_ms(self) -> npt.NDArray[np.int64]: ...
    @property
    def isr_change_offset(self) -> npt.NDArray[np.int64]: ...
    @property
    def isr(self) -> list[tuple[int, ...]]: ...
    @property
    def cached_isr(self) -> list[dict[int, frozenset[int]]]: ...
    def live_row_of(self, topic: str, partition: int) -> int: ...
    def topic_partition(self, row: int) -> TopicPartition: ...


def record_isr_change(
    table: WindowColumns,
    windows: PropagationWindows,
    row: int,
    ts: int,
    *,
    by_leader: bool,
    leader: int,
) -> None:
    """The row's ISR changed at ``ts``: by its ``leader`` (IsrChange) or by the controller
    (LeaderAndIsr). Its origin decides its window (:func:`blackout_window_of`)."""
    table.isr_changed_ms[row] = ts
    table.change_broker[row] = leader
    if not windows.zk_mode:
        table.change_origin[row] = ChangeOrigin.METADATA_LOG
    elif by_leader:
        table.change_origin[row] = ChangeOrigin.LEADER
        record_pending_change(table, windows, leader, table.topic_partition(row), ts)
    else:
        # The controller sends UpdateMetadata along with its own LeaderAndIsr; a change
        # the leader made before stays in that leader's isrChangeSet until propagated.
        table.change_origin[row] = ChangeOrigin.CONTROLLER


def controller_change_origin(windows: PropagationWindows) -> int:
    """The origin :func:`record_isr_change` gives a change by the controller."""
    return ChangeOrigin.CONTROLLER if windows.zk_mode else ChangeOrigin.METADATA_LOG


def record_pending_change(
    table: WindowColumns, windows: PropagationWindows, leader: int, tp: TopicPartition, ts: int
) -> None:
    """ZooKeeper mode: ``leader`` put ``tp`` in its isrChangeSet at ``ts`` (the partition
    may be another shard's: the leader's window depends on every partition it leads)."""
    _freeze(table, windows.record_isr_change(leader, tp, ts))


def record_propagation(
    table: WindowColumns, windows: PropagationWindows, event: IsrChangePropagation
) -> None:
    """ZooKeeper mode: the broker's isr-change-propagation task fired."""
    _freeze(table, windows.record_propagation(event.broker, event.partitions, event.ts))


def _freeze(table: WindowColumns, frozen: dict[TopicPartition, BlackoutWindow]) -> None:
    """These partitions left their leader's pending set: keep the window they had."""
    for tp, window in frozen.items():
        row = table.live_row_of(tp.topic, tp.partition)
        if row >= 0 and table.change_origin[row] == ChangeOrigin.LEADER:
            table.change_origin[row] = ChangeOrigin.PROPAGATED
            table.frozen_earliest_ms[row] = window.earliest_ms
            table.frozen_latest_ms[row] = window.latest_ms


def observe_propagated(
    table: WindowColumns, windows: PropagationWindows, row: int, ts: int
) -> int | None:
    """The observed end of the row's window: every live cache has its change at ``ts``.
    Returns the propagation delay (None when the change time is not known)."""
    if table.change_origin[row] == ChangeOrigin.LEADER:
        # Its propagation happened though no IsrChangePropagation event said so.
        windows.forget(table.topic_partition(row))
    changed = int(table.isr_changed_ms[row])
    return None if changed == NO_TIME else ts - changed


def blackout_window_of(
    table: WindowColumns, row: int, windows: PropagationWindows, settings: PropagationSettings
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
        return kraft_observed_window(
            changed,
            windows.quorum.fetch_timeout_ms,
            reported_behind_ms(table, row, windows.quorum),
            windows.quorum.next_report_ms,
        )
    if origin == ChangeOrigin.LEADER:
        return windows.window_of(int(table.change_broker[row]))
    if origin == ChangeOrigin.PROPAGATED and table.frozen_latest_ms[row] != NO_TIME:
        return BlackoutWindow(int(table.frozen_earliest_ms[row]), int(table.frozen_latest_ms[row]))
    return None


def reported_behind_ms(table: WindowColumns, row: int, quorum: QuorumProgress) -> int | None:
    """The time of the newest report if it shows a broker that holds an older ISR still
    behind the row's latest ISR change; else None."""
    offset = int(table.isr_change_offset[row])
    current = frozenset(table.isr[row])
    for broker, isr in table.cached_isr[row].items():
        leo = quorum.log_end_offsets.get(broker)
        if isr != current and leo is not None and not has_applied(leo, offset):
            return quorum.report_ms
    return None
