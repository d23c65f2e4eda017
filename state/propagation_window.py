"""How long brokers' metadata caches may legitimately show an old ISR (semantics.md section 5).

ZooKeeper mode: a leader records each ISR change in its isrChangeSet; its
isr-change-propagation task runs every 2.5 s and propagates when the set is non-empty
and ``lastIsrChangeMs + 5000 < now`` **or** ``lastIsrPropagationMs + 60000 < now``.
The window is per leader broker: churn on any partition it leads delays all of them.
KRaft mode: no timers; brokers apply a change when they replay the metadata log.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from state.events import TopicPartition
from state.settings import PropagationSettings


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
    """The window of one leader broker with ``a``, ``c`` and ``p`` of semantics.md.

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
    """The zk-mode propagation state of every leader broker."""

    def __init__(self, settings: PropagationSettings) -> None:
        self.settings = settings
        self.leaders: dict[int, LeaderPropagationState] = {}

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

    def is_pending(self, leader: int, tp: TopicPartition) -> bool:
        state = self.leaders.get(leader)
        return state is not None and tp in state.pending

    def forget(self, tp: TopicPartition) -> None:
        """The partition's change reached every cache: it is no longer waiting anywhere."""
        for state in self.leaders.values():
            state.pending.pop(tp, None)
