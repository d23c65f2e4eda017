"""From the inputs of ``isrwatch timeline`` (a capture, health records, or both) to a
:class:`~streaming.tools.timeline.facts.Timeline`."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from state import HealthRecord
from state.settings import RuleSettings
from streaming.tools.timeline.builder import TimelineBuilder
from streaming.tools.timeline.capture import DEFAULT_STEP_MS, CaptureReplay
from streaming.tools.timeline.facts import Timeline, TimelineFilter, TimelineItem, item_time


@dataclass(frozen=True)
class TimelineRange:
    since_ms: int | None = None
    until_ms: int | None = None


def assemble(
    settings: RuleSettings,
    *,
    capture: Iterable[str] | None = None,
    capture_name: str = "capture",
    health: Sequence[HealthRecord] = (),
    health_name: str = "health records",
    where: TimelineFilter | None = None,
    within: TimelineRange | None = None,
    step_ms: int = DEFAULT_STEP_MS,
) -> Timeline:
    """The timeline of the inputs. With a capture, ISR changes and propagations are its
    exact ones; the health records (time-ordered) add what the job said, causes included."""
    within = within or TimelineRange()
    builder = TimelineBuilder(
        settings.replica_lag_time_max_ms,
        settings.propagation.overdue_slack_ms,
        exact_changes=capture is not None,
        where=where,
    )
    replay = CaptureReplay(settings, step_ms) if capture is not None else None
    streams: list[Iterable[TimelineItem]] = [health]
    if replay is not None and capture is not None:
        streams.insert(0, replay.items(capture))
    items: Iterable[TimelineItem] = heapq.merge(*streams, key=item_time)
    if within.until_ms is not None:
        until = within.until_ms
        items = itertools.takewhile(lambda item: item_time(item) <= until, items)
    builder.add_all(items)
    notes = []
    if replay is not None:
        dead = ", ".join(f"{n} {reason}" for reason, n in sorted(replay.dead_letters.items()))
        notes.append(
            f"Capture {capture_name}: {replay.events} events replayed through the model, "
            f"evaluated every {step_ms / 1000:g} s and after each ISR or broker change"
            + (f"; not applied: {dead}" if dead else "")
        )
    if health:
        notes.append(f"Health records ({health_name}): {len(health)}")
        if capture is None:
            notes.append(
                "ISR changes and propagations are inferred from consecutive health records: "
                "their times are those of the first record that shows them"
            )
    if where is not None and (where.topics or where.partitions or where.brokers):
        parts = [
            f"{label} {', '.join(map(str, sorted(values)))}"
            for label, values in (
                ("topics", where.topics),
                ("partitions", where.partitions),
                ("brokers", where.brokers),
            )
            if values
        ]
        notes.append("Only " + "; ".join(parts))
    start, end = within.since_ms, within.until_ms
    if replay is not None:  # the capture's whole span, even where nothing changed
        start = start if start is not None else _earliest(replay.first_ms, builder.first_ms)
        end = end if end is not None else _latest(replay.last_ms, builder.last_ms)
    return builder.finish(start, end, notes)


def _earliest(*times: int | None) -> int | None:
    return min((t for t in times if t is not None), default=None)


def _latest(*times: int | None) -> int | None:
    return max((t for t in times if t is not None), default=None)
