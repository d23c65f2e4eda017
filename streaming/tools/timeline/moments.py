"""The key moments of a timeline, in time order: a follower fell behind, the monitor
predicted a shrink, Kafka acted (and how late), a follower came back, a partition went
offline or under min ISR, a propagation was late. Moments of one kind about one broker
close together are told as one, naming a few partitions and counting the rest."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from streaming.tools.timeline.facts import Timeline
from streaming.tools.timeline.words import (
    clock,
    propagation_verdict,
    seconds,
    shrink_actor,
    tp_name,
)

MAX_MOMENTS = 40
MOMENT_GROUP_MS = 1_000
"""Moments of one kind about one broker within this much time are told as one."""

MAX_NAMES = 4
"""Partitions named in one grouped moment; the rest are counted."""


@dataclass(frozen=True)
class Moment:
    ts: int
    text: str


def moments(timeline: Timeline) -> tuple[list[Moment], int]:
    """The key moments in time order, grouped; and how many were left out."""
    raw: list[tuple[int, tuple[object, ...], tuple[str, int], str, int | None]] = []
    start, end = timeline.start_ms, timeline.end_ms

    def add(
        ts: int | None,
        key: tuple[object, ...],
        tp: tuple[str, int],
        text: str,
        value: int | None = None,
    ) -> None:
        if ts is not None and start <= ts <= end:
            raw.append((ts, key, tp, text, value))

    for e in timeline.episodes:
        tp = (e.topic, e.partition)
        if e.behind_since_ms is not None:
            add(
                e.behind_since_ms,
                ("behind", e.broker),
                tp,
                f"broker {e.broker} last caught up, then fell behind, on {{tps}}",
            )
        add(
            e.predicted_ms,
            ("predicted", e.broker),
            tp,
            f"isrwatch predicted that Kafka will remove broker {e.broker} from {{tps}}",
        )
    for s in timeline.shrinks:
        who = shrink_actor(s)
        if s.lead_ms is not None:
            how = ", predicted {values} before"
        else:
            how = "" if s.by_controller is True else ", not predicted"
        add(
            s.ts,
            ("shrink", who, s.follower, how),
            (s.topic, s.partition),
            f"{who} removed broker {s.follower} from the ISR of {{tps}}{how}",
            s.lead_ms,
        )
        if s.late_by_ms:
            add(
                s.ts,
                ("late", who, s.follower),
                (s.topic, s.partition),
                f"{who} acted {{values}} past the deadline on {{tps}}",
                s.late_by_ms,
            )
    for o in timeline.overdue:
        tp = (o.topic, o.partition)
        add(
            o.seen_ms,
            ("overdue", o.leader, o.follower),
            tp,
            f"overdue: leader {o.leader} should have removed broker {o.follower} from {{tps}} "
            f"by {clock(o.deadline_ms)}",
        )
    for c in timeline.isr_changes:
        for b in c.added:
            add(
                c.ts,
                ("expand", c.leader, b),
                (c.topic, c.partition),
                f"broker {b} back in the ISR of {{tps}}",
            )
    labels = {"offline": "offline", "under_min_isr": "under min ISR"}
    for p in timeline.periods:
        if p.kind not in labels:
            continue
        tp = (p.topic, p.partition)
        add(p.start_ms, (p.kind, "start"), tp, f"{{tps}} {labels[p.kind]}")
        add(p.end_ms, (p.kind, "end"), tp, f"{{tps}} no longer {labels[p.kind]}")
    for blackout in timeline.blackouts:
        verdict, detail = propagation_verdict(timeline, blackout)
        if verdict in ("late", "still stale"):
            add(
                blackout.observed_ms or blackout.changed_ms,
                ("propagation", verdict),
                (blackout.topic, blackout.partition),
                f"metadata caches of {{tps}}: {detail}",
            )
    raw.sort(key=lambda item: item[0])
    grouped: list[tuple[int, tuple[object, ...], list[tuple[str, int]], str, list[int]]] = []
    open_groups: dict[tuple[object, ...], int] = {}
    for ts, key, tp, text, value in raw:
        index = open_groups.get(key)
        if index is not None and ts - grouped[index][0] <= MOMENT_GROUP_MS:
            grouped[index][2].append(tp)
            if value is not None:
                grouped[index][4].append(value)
            continue
        open_groups[key] = len(grouped)
        grouped.append((ts, key, [tp], text, [] if value is None else [value]))
    told = [
        Moment(ts, text.replace("{tps}", names(tps)).replace("{values}", _range(values)))
        for ts, _, tps, text, values in grouped
    ]
    return told[:MAX_MOMENTS], max(0, len(told) - MAX_MOMENTS)


def _range(values: Sequence[int]) -> str:
    if not values:
        return ""
    low, high = min(values), max(values)
    return seconds(low) if low == high else f"{seconds(low)} to {seconds(high)}"


def names(tps: Iterable[tuple[str, int]]) -> str:
    unique = sorted(set(tps))
    shown = ", ".join(tp_name(*tp) for tp in unique[:MAX_NAMES])
    more = len(unique) - MAX_NAMES
    return shown + (f" and {more} more" if more > 0 else "")
