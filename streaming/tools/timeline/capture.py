"""A capture replayed through the monitor's model, as a stream of timeline items.

The model evaluates every ``step_ms`` of event time (what the job does per micro-batch) and
right after each ISR or broker change; only partitions whose health changed since the
previous evaluation yield a record, as the job writes them. ISR changes and propagations
are read off the model as the events are applied, at their exact times:

* an ``IsrChange`` (the leader's shrink or expand) or a ``LeaderAndIsr`` (the controller's
  decision) that changes a known partition's ISR, with the deadline each removed follower
  had just before (Kafka's ``Partition.maybeShrinkIsr`` rule, ``state.shrink_rule``);
* an ``UpdateMetadata`` after which no live broker's cache differs from the controller's
  any more, with the blackout window the model predicted just before it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from state import (
    NEVER,
    NO_TIME,
    ApplyReport,
    HealthFrame,
    ReplicationModel,
    blackout_window_of,
    shrink_deadline_ms,
)
from state.events import (
    BrokerChange,
    DeadLetter,
    Event,
    IsrChange,
    LeaderAndIsr,
    UpdateMetadata,
)
from state.settings import RuleSettings
from streaming.tools.replay import read_envelope
from streaming.tools.timeline import facts
from streaming.tools.timeline.facts import TimelineItem

DEFAULT_STEP_MS = 1_000


@dataclass
class CaptureReplay:
    """Replays ``lines`` (the replay contract: ``{"source", "value"}`` per line)."""

    settings: RuleSettings
    step_ms: int = DEFAULT_STEP_MS
    events: int = 0
    evaluations: int = 0
    first_ms: int | None = None  # the capture's earliest and latest event times
    last_ms: int | None = None
    dead_letters: Counter[str] = field(default_factory=Counter)
    model: ReplicationModel = field(init=False)

    def __post_init__(self) -> None:
        self.model = ReplicationModel(self.settings)
        self._pending: list[tuple[int, Event]] = []
        self._previous: tuple[np.ndarray, np.ndarray] | None = None

    def items(self, lines: Iterable[str]) -> Iterator[TimelineItem]:
        """The timeline items of the capture, in time order."""
        next_eval: int | None = None
        changed_at: int | None = None  # an evaluation is due right after this time
        last_ts: int | None = None
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            event = read_envelope(number, line)
            if isinstance(event, DeadLetter):
                self.dead_letters[event.reason.value] += 1
                continue
            self.events += 1
            ts = event.ts
            if next_eval is None:
                next_eval = ts - ts % self.step_ms + self.step_ms
            # every evaluation due strictly before this event, in time order
            while True:
                due = [t for t in (changed_at, next_eval) if t is not None and t < ts]
                if not due:
                    break
                now = min(due)
                yield from self._evaluate(now)
                if changed_at == now:
                    changed_at = None
                if next_eval == now:
                    next_eval += self.step_ms
            last_ts = ts if last_ts is None else max(last_ts, ts)
            self.first_ms = ts if self.first_ms is None else min(self.first_ms, ts)
            self.last_ms = last_ts
            if isinstance(event, IsrChange | LeaderAndIsr):
                change = self._apply_isr_event(number, event)
                if change is not None:
                    yield change
                    changed_at = ts
            elif isinstance(event, UpdateMetadata):
                yield from self._apply_update_metadata(number, event)
            else:
                self._pending.append((number, event))
                if isinstance(event, BrokerChange):
                    changed_at = ts
        if last_ts is not None:
            yield from self._evaluate(last_ts)

    # ------------------------------------------------------------------ applying

    def _flush(self) -> ApplyReport:
        report = self.model.apply(self._pending)
        self._pending = []
        for reason in report.rejected_reasons:
            self.dead_letters[reason.value] += 1
        return report

    def _apply_one(self, number: int, event: Event) -> bool:
        """Apply everything pending, then ``event``; whether the model took it."""
        self._flush()
        self._pending.append((number, event))
        return not self._flush().rejected_ids

    def _apply_isr_event(
        self, number: int, event: IsrChange | LeaderAndIsr
    ) -> facts.IsrChange | None:
        table = self.model.table
        self._flush()
        row = table.live_row_of(event.topic, event.partition)
        old = table.isr[row] if row >= 0 else ()
        deadlines = self._deadlines(row) if row >= 0 else {}
        if not self._apply_one(number, event) or not old:
            return None  # rejected, or a partition's creation
        row = table.live_row_of(event.topic, event.partition)
        new = table.isr[row] if row >= 0 else ()
        if set(new) == set(old):
            return None
        removed = set(old) - set(new)
        return facts.IsrChange(
            event.ts,
            event.topic,
            event.partition,
            int(event.leader),
            tuple(old),
            tuple(new),
            by_controller=isinstance(event, LeaderAndIsr),
            exact=True,
            deadlines_ms={b: d for b, d in deadlines.items() if b in removed},
        )

    def _deadlines(self, row: int) -> dict[int, int]:
        """Each ISR follower's last ms in the ISR under Kafka's rule, as the model has it."""
        table, cluster = self.model.table, self.model.cluster
        brokers = table.replica_broker[row].astype(np.int64)
        leader = np.array([int(table.leader[row])], dtype=np.int64)
        t = int(cluster.lag_time_max_of(leader, self.settings.replica_lag_time_max_ms)[0])
        caught_up = table.last_caught_up_ms[row]
        deadline = shrink_deadline_ms(
            caught_up, np.full_like(caught_up, t), table.isr_since_ms[row]
        )
        return {
            int(b): int(d)
            for b, d, c, member in zip(brokers, deadline, caught_up, table.in_isr[row], strict=True)
            if b >= 0 and b != leader[0] and member and c != NEVER  # followers only
        }

    def _apply_update_metadata(
        self, number: int, event: UpdateMetadata
    ) -> Iterator[facts.Propagation]:
        model = self.model
        table = model.table
        self._flush()
        stale_before = {}
        for state in event.partitions:
            row = table.live_row_of(state.topic, state.partition)
            if row >= 0 and model.caches.stale_brokers(row, model.cluster):
                window = blackout_window_of(table, row, model.windows, self.settings.propagation)
                changed = int(table.isr_changed_ms[row])
                stale_before[row] = (state.topic, state.partition, changed, window)
        self._apply_one(number, event)
        for row, (topic, partition, changed, window) in stale_before.items():
            if table.exists[row] and not model.caches.stale_brokers(row, model.cluster):
                yield facts.Propagation(
                    event.ts,
                    topic,
                    partition,
                    changed_ms=None if changed == NO_TIME else changed,
                    earliest_ms=window.earliest_ms if window else None,
                    latest_ms=window.latest_ms if window else None,
                    exact=True,
                )

    # ------------------------------------------------------------------ evaluating

    def _evaluate(self, now: int) -> Iterator[TimelineItem]:
        self._flush()
        self.evaluations += 1
        frame = self.model.evaluate(now)
        for i in self._changed_rows(frame):
            yield facts.EvaluatedHealth(frame.record(int(i)), int(frame.lag_time_max_ms[i]))

    def _changed_rows(self, frame: HealthFrame) -> Iterable[int]:
        """Positions whose health changed since the previous evaluation (all at first)."""
        latest = np.array([-1 if v is None else v for v in frame.blackout_latest_ms], np.int64)
        signature = np.column_stack(
            [
                frame.leader,
                frame.leader_epoch,
                frame.under_replicated,
                frame.under_min_isr,
                frame.offline,
                frame.predicted_under_replicated,
                frame.metadata_state,
                latest,
                frame.follower_status,
                frame.follower_in_isr,
            ]
        ).astype(np.int64)
        previous, self._previous = self._previous, (frame.rows.copy(), signature)
        if (
            previous is None
            or not np.array_equal(previous[0], frame.rows)
            or previous[1].shape != signature.shape
        ):
            return range(len(frame))
        return np.flatnonzero((previous[1] != signature).any(axis=1)).tolist()
