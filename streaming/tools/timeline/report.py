"""The tables of a timeline: its summary, per-broker figures and detail tables.

Each section is a :class:`Table` of strings built from a :class:`~facts.Timeline` alone;
the Markdown report and the HTML page lay out the same tables (and the same ``moments``),
so they say the same. Long tables are cut, worst first, with a line saying how many rows
were left out.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from state.shrink_rule import STATUS_SEVERITY
from streaming.tools.timeline.facts import FollowerEpisode, Timeline
from streaming.tools.timeline.words import (
    cause_text,
    clock,
    propagation_verdict,
    seconds,
    shrink_actor,
    stamp,
    tp_name,
)

MAX_ROWS = 20
"""Rows of a detail table; the rest is counted, not listed."""


@dataclass(frozen=True)
class Table:
    title: str
    header: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]
    left_out: int = 0  # rows not shown
    note: str = ""


# ---------------------------------------------------------------------- summary


def title(timeline: Timeline) -> str:
    span = seconds(timeline.end_ms - timeline.start_ms)
    return f"isrwatch timeline: {stamp(timeline.start_ms)} to {clock(timeline.end_ms)} UTC ({span})"


def summary(timeline: Timeline) -> Table:
    episodes = timeline.episodes
    behind = [e for e in episodes if e.behind_since_ms is not None]
    by_leader = [s for s in timeline.shrinks if s.by_controller is False]
    by_controller = [s for s in timeline.shrinks if s.by_controller is True]
    unknown = [s for s in timeline.shrinks if s.by_controller is None]
    foreseeable = by_leader + unknown  # the controller's removals follow a broker's death
    predicted = [s for s in foreseeable if s.lead_ms is not None]
    leads = sorted(s.lead_ms for s in predicted if s.lead_ms is not None)
    lead_text = (
        f"lead time {seconds(leads[0])} to {seconds(leads[-1])} "
        f"(median {seconds(round(statistics.median(leads)))})"
        if leads
        else ""
    )
    late = [s for s in timeline.shrinks if s.late_by_ms > 0]
    overdue = timeline.overdue
    worst_overdue = max((o.overdue_by_ms(timeline.end_ms) for o in overdue), default=0)
    expands = sum(len(c.added) for c in timeline.isr_changes)
    verdicts: dict[str, int] = defaultdict(int)
    for blackout in timeline.blackouts:
        verdicts[propagation_verdict(timeline, blackout)[0]] += 1
    rows = [
        (
            "followers that left IN_SYNC",
            str(len({e.key for e in episodes})),
            f"on {_brokers_text({e.broker for e in episodes})}; "
            f"{len({e.key for e in behind})} fell behind the leader"
            if episodes
            else "",
        ),
        (
            "ISR shrinks",
            str(len(timeline.shrinks)),
            f"{len(by_leader)} by leaders, {len(by_controller)} by the controller"
            + (f", {len(unknown)} seen in health records (by whom not known)" if unknown else ""),
        ),
        (
            "shrinks predicted beforehand (all but the controller's)",
            f"{len(predicted)} of {len(foreseeable)}",
            lead_text,
        ),
        (
            "shrinks later than Kafka's deadline",
            str(len(late)),
            f"worst {seconds(max(s.late_by_ms for s in late))}" if late else "",
        ),
        (
            "overdue shrinks (SHRINK_OVERDUE)",
            str(len(overdue)),
            f"longest overdue {seconds(worst_overdue)}, "
            f"{sum(1 for o in overdue if o.resolved_ms is None)} still at the end"
            if overdue
            else "",
        ),
        ("ISR expansions", str(expands), ""),
        (
            "metadata propagations",
            str(len(timeline.blackouts)),
            ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items())),
        ),
    ]
    for kind, label in (
        ("offline", "offline"),
        ("under_min_isr", "under min ISR"),
        ("under_replicated", "under-replicated"),
    ):
        periods = [p for p in timeline.periods if p.kind == kind]
        longest = max((p.duration_ms(timeline.end_ms) for p in periods), default=0)
        partitions = {(p.topic, p.partition) for p in periods}
        rows.append(
            (
                f"partitions {label}",
                str(len(partitions)),
                f"longest {seconds(longest)}" if periods else "",
            )
        )
    return Table("Summary", ("what", "count", "details"), rows)


def _brokers_text(brokers: Iterable[int]) -> str:
    ordered = sorted(brokers)
    return ("broker " if len(ordered) == 1 else "brokers ") + ", ".join(map(str, ordered))


def broker_rows(timeline: Timeline) -> Table:
    """One row per broker that had a follower away from IN_SYNC, worst first."""
    by_broker: dict[int, list[FollowerEpisode]] = defaultdict(list)
    for episode in timeline.episodes:
        by_broker[episode.broker].append(episode)
    shrinks: dict[int, int] = defaultdict(int)
    for shrink in timeline.shrinks:
        shrinks[shrink.follower] += 1
    overdue: dict[int, int] = defaultdict(int)
    for item in timeline.overdue:
        overdue[item.follower] += 1
    away = broker_time_away(timeline)
    order = sorted(by_broker, key=lambda b: (-broker_severity(by_broker[b]), -away[b], b))
    rows = [
        (
            str(b),
            str(len({e.key for e in by_broker[b]})),
            max((e.worst for e in by_broker[b]), key=lambda s: STATUS_SEVERITY.get(s, 0)),
            clock(min(e.behind_since_ms or e.start_ms for e in by_broker[b])),
            str(shrinks[b]),
            str(overdue[b]),
            seconds(away[b]),
        )
        for b in order
    ]
    header = (
        "broker",
        "followers affected",
        "worst status",
        "first away from IN_SYNC",
        "removed from ISR",
        "overdue",
        "time away from IN_SYNC, summed over its followers",
    )
    return _cut(Table("Per broker, worst first", header, rows))


def broker_severity(episodes: Sequence[FollowerEpisode]) -> int:
    return max((STATUS_SEVERITY.get(e.worst, 0) for e in episodes), default=0)


def broker_time_away(timeline: Timeline) -> dict[int, int]:
    """Per broker: the sum over its followers of the time spent away from IN_SYNC."""
    away: dict[int, int] = defaultdict(int)
    for (_, _, broker), spans in timeline.lanes.items():
        away[broker] += sum(s.end_ms - s.start_ms for s in spans if s.status != "IN_SYNC")
    return away


# ---------------------------------------------------------------------- details


def shrink_table(timeline: Timeline) -> Table:
    ordered = sorted(timeline.shrinks, key=lambda s: (-s.late_by_ms, s.lead_ms is not None, s.ts))
    rows = [
        (
            clock(s.ts),
            tp_name(s.topic, s.partition),
            str(s.follower),
            shrink_actor(s),
            clock(s.predicted_ms) if s.predicted_ms is not None else "not predicted",
            seconds(s.lead_ms) if s.lead_ms is not None else "",
            clock(s.deadline_ms)
            if s.deadline_ms is not None and s.by_controller is not True
            else "",
            seconds(s.late_by_ms) if s.late_by_ms else "",
        )
        for s in ordered
    ]
    header = (
        "removed at",
        "partition",
        "follower",
        "by",
        "predicted at",
        "lead time",
        "deadline",
        "late by",
    )
    note = (
        ""
        if all(s.exact for s in timeline.shrinks)
        else (
            "Times inferred from health records are those of the first record without the follower."
        )
    )
    return _cut(
        Table("ISR shrinks (latest past deadline first, then unpredicted)", header, rows, note=note)
    )


def overdue_table(timeline: Timeline) -> Table:
    end = timeline.end_ms
    ordered = sorted(timeline.overdue, key=lambda o: -o.overdue_by_ms(end))
    rows = [
        (
            tp_name(o.topic, o.partition),
            str(o.follower),
            str(o.leader),
            clock(o.deadline_ms),
            clock(o.seen_ms),
            o.resolution or "still overdue at the end",
            seconds(o.overdue_by_ms(end)),
            cause_text(o.cause),
        )
        for o in ordered
    ]
    header = (
        "partition",
        "follower",
        "leader",
        "deadline",
        "seen overdue",
        "ended by",
        "overdue by",
        "cause",
    )
    return _cut(Table("Overdue shrinks: Kafka should have acted", header, rows))


def propagation_table(timeline: Timeline) -> Table:
    rank = {"still stale": 0, "late": 1, "no window": 2, "early": 3, "within": 4}
    judged = [(b, *propagation_verdict(timeline, b)) for b in timeline.blackouts]
    judged.sort(
        key=lambda j: (
            rank[j[1]],
            -j[0].late_by_ms(timeline.overdue_slack_ms, timeline.end_ms),
            j[0].changed_ms,
        )
    )
    rows = [
        (
            tp_name(b.topic, b.partition),
            clock(b.changed_ms),
            f"{clock(b.earliest_ms)} to {clock(b.latest_ms)}"
            if b.earliest_ms is not None and b.latest_ms is not None
            else "",
            clock(b.observed_ms) if b.observed_ms is not None else "",
            seconds((b.observed_ms or timeline.end_ms) - b.changed_ms),
            verdict,
        )
        for b, verdict, _ in judged
    ]
    header = (
        "partition",
        "ISR changed",
        "predicted window",
        "all caches agreed",
        "blackout",
        "verdict",
    )
    note = f"A propagation is within its window up to {seconds(timeline.overdue_slack_ms)} after it closes (the controller's time to send UpdateMetadata)."  # noqa: E501
    return _cut(Table("Metadata propagation: predicted against observed", header, rows, note=note))


def period_table(timeline: Timeline) -> Table:
    labels = {"offline": "offline", "under_min_isr": "under min ISR"}
    periods = [p for p in timeline.periods if p.kind in labels]
    end = timeline.end_ms
    periods.sort(key=lambda p: (list(labels).index(p.kind), -p.duration_ms(end)))
    rows = [
        (
            tp_name(p.topic, p.partition),
            labels[p.kind],
            clock(p.start_ms),
            clock(p.end_ms) if p.end_ms is not None else "still at the end",
            seconds(p.duration_ms(end)),
            cause_text(p.cause),
        )
        for p in periods
    ]
    header = ("partition", "condition", "from", "to", "for", "cause")
    return _cut(Table("Offline and under-min-ISR periods", header, rows))


def episode_table(timeline: Timeline) -> Table:
    """Followers away from IN_SYNC, worst first: when behind, predicted, removed, back."""
    ordered = sorted(
        timeline.episodes, key=lambda e: (-STATUS_SEVERITY.get(e.worst, 0), e.start_ms, e.key)
    )
    rows = [
        (
            tp_name(e.topic, e.partition),
            str(e.broker),
            str(e.leader),
            clock(e.behind_since_ms) if e.behind_since_ms is not None else "",
            clock(e.first_lagging_ms) if e.first_lagging_ms is not None else "",
            clock(e.predicted_ms) if e.predicted_ms is not None else "",
            clock(e.removed_ms) if e.removed_ms is not None else "",
            clock(e.end_ms) if e.end_ms is not None else "not by the end",
            e.worst,
            cause_text(e.cause),
        )
        for e in ordered
    ]
    header = (
        "partition",
        "follower",
        "leader",
        "behind since",
        "seen LAGGING",
        "predicted",
        "removed",
        "IN_SYNC again",
        "worst",
        "cause",
    )
    return _cut(Table("Followers away from IN_SYNC, worst first", header, rows))


def detail_tables(timeline: Timeline) -> list[Table]:
    return [
        broker_rows(timeline),
        episode_table(timeline),
        shrink_table(timeline),
        overdue_table(timeline),
        propagation_table(timeline),
        period_table(timeline),
    ]


def _cut(table: Table) -> Table:
    if len(table.rows) <= MAX_ROWS:
        return table
    return Table(
        table.title, table.header, table.rows[:MAX_ROWS], len(table.rows) - MAX_ROWS, table.note
    )
