"""The demo's terminal view of cluster health, drawn with rich from the job's own output.

The ``render_*`` functions turn a snapshot of ``ClusterHealth`` (``cluster_health``: what
the job's sink hands over after every micro-batch) into rich renderables.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from streaming.tools.cluster_health import HealthSnapshot

STATUS_STYLE = {
    "IN_SYNC": "green",
    "LAGGING": "yellow",
    "SHRINK_ELIGIBLE": "bold dark_orange",
    "SHRINK_OVERDUE": "bold red",
    "CATCHING_UP": "cyan",
    "OUT_OF_SYNC": "magenta",
    "OFFLINE": "bold red",
}
STATUS_ORDER = list(STATUS_STYLE)
# ------------------------------------------------------------------ rendering
#
# The view fits the terminal: what matters comes first and gets the lines it needs, what
# follows gets the lines left (the first rows, then "... and N more"), and a section with
# nothing to show is not drawn. Every row is one line (no wrapping), so lines are counted.


def clock(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S.%f")[:-3]


def seconds(ms: int | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.1f}s"


def shown(value: object) -> str:
    """A value of the record as text: ``-`` where it is unknown (null)."""
    return "-" if value is None else str(value)


def leader_of(record: dict[str, Any]) -> str:
    return "-" if record["leader"] < 0 else str(record["leader"])  # -1: no leader


def partition_name(record: dict[str, Any]) -> str:
    return f"{record['topic']}-{record['partition']}"


def lag_bar(lag_ms: int, lag_max_ms: int, width: int = 24) -> Text:
    """Lag time on a 0 .. 2 T scale with marks at T and 1.5 T (the shrink rule)."""
    scale = 2 * lag_max_ms
    filled = min(width, round(width * lag_ms / scale)) if scale else width
    t_mark, one_and_half = width // 2, width * 3 // 4
    bar = Text()
    for i in range(width):
        char = "|" if i in (t_mark, one_and_half) else ("█" if i < filled else "·")
        style = "red" if i >= one_and_half else "dark_orange" if i >= t_mark else "yellow"
        bar.append(char, style=style if i < filled or char == "|" else "grey50")
    return bar


Cell = str | Text


@dataclass
class Section:
    """A titled table of rows; the view draws the first ``rows`` that fit, and the title
    says how many there are."""

    title: str
    columns: tuple[str, ...]
    rows: list[tuple[Cell, ...]]
    style: str = "bold"

    def lines(self, rows: int) -> int:
        return 2 + rows  # the title, the column names, the rows

    def heading(self, rows: int) -> Text:
        total = len(self.rows)
        count = f"{total}" if rows >= total else f"{rows} of {total}"
        return Text(f"{self.title} ({count})", style=self.style, no_wrap=True, overflow="ellipsis")

    def table(self, rows: int) -> Table:
        table = Table(
            box=None,
            padding=(0, 1),
            pad_edge=False,
            show_edge=False,
            header_style="dim",
            expand=False,
        )
        for name in self.columns:
            table.add_column(name, no_wrap=True, overflow="ellipsis")
        for row in self.rows[:rows]:
            table.add_row(*row)
        return table


def _followers(
    snapshot: HealthSnapshot, *statuses: str
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [
        (record, follower)
        for record in snapshot.unhealthy
        for follower in record["followers"]
        if follower["status"] in statuses
    ]


def _until(ms: int | None, now: int | None) -> int | None:
    return None if ms is None or now is None else ms - now


def predicted_shrinks(snapshot: HealthSnapshot) -> Section:
    """SHRINK_ELIGIBLE followers, soonest first, with the time left until Kafka's deadline
    (``shrink_by_ms``: by then its isr-expiration task has removed them)."""
    now = snapshot.now_ms
    found = _followers(snapshot, "SHRINK_ELIGIBLE")
    found.sort(key=lambda rf: (rf[1].get("shrink_by_ms") is None, rf[1].get("shrink_by_ms") or 0))
    rows: list[tuple[Cell, ...]] = [
        (
            partition_name(r),
            str(f["broker"]),
            leader_of(r),
            Text(seconds(_until(f.get("shrink_by_ms"), now)), style="bold dark_orange"),
            seconds(f["lag_time_ms"]),
            shown(f["lag_messages"]),
        )
        for r, f in found
    ]
    return Section(
        "Predicted shrinks: Kafka removes these followers from the ISR",
        ("partition", "follower", "leader", "removed in", "lag time", "lag msgs"),
        rows,
        "bold dark_orange",
    )


def overdue_shrinks(snapshot: HealthSnapshot) -> Section:
    """SHRINK_OVERDUE followers, most overdue first: past Kafka's deadline, still in the ISR."""
    now = snapshot.now_ms
    found = _followers(snapshot, "SHRINK_OVERDUE")
    found.sort(key=lambda rf: rf[1].get("shrink_by_ms") or 0)
    rows: list[tuple[Cell, ...]] = []
    for r, f in found:
        late = _until(f.get("shrink_by_ms"), now)
        rows.append(
            (
                partition_name(r),
                str(f["broker"]),
                leader_of(r),
                Text(seconds(None if late is None else -late), style="bold red"),
                seconds(f["lag_time_ms"]),
                shown(f["lag_messages"]),
            )
        )
    return Section(
        "Overdue shrinks: past Kafka's deadline, still in the ISR",
        ("partition", "follower", "leader", "overdue by", "lag time", "lag msgs"),
        rows,
        "bold red",
    )


def _partitions(title: str, records: list[dict[str, Any]], style: str) -> Section:
    rows: list[tuple[Cell, ...]] = [
        (partition_name(r), leader_of(r), shown(r["isr"]), shown(r["replicas"])) for r in records
    ]
    return Section(title, ("partition", "leader", "isr", "replicas"), rows, style)


def offline_partitions(snapshot: HealthSnapshot) -> Section:
    records = [r for r in snapshot.unhealthy if r["offline"]]
    return _partitions("Offline: no live leader", records, "bold red")


def under_min_isr_partitions(snapshot: HealthSnapshot) -> Section:
    records = [r for r in snapshot.unhealthy if r["under_min_isr"] and not r["offline"]]
    return _partitions("Under min ISR: acks=all producers fail", records, "red")


def under_replicated_partitions(snapshot: HealthSnapshot) -> Section:
    worse = ("under_min_isr", "offline")  # shown in their own sections
    records = [
        r for r in snapshot.unhealthy if r["under_replicated"] and not any(r[w] for w in worse)
    ]
    return _partitions("Under-replicated", records, "dark_orange")


def other_followers(snapshot: HealthSnapshot, width: int) -> Section:
    """The other followers not in sync, worst status first, then the longest lag."""
    found = _followers(snapshot, "LAGGING", "OFFLINE", "OUT_OF_SYNC", "CATCHING_UP")
    found.sort(key=lambda rf: (-STATUS_ORDER.index(rf[1]["status"]), -(rf[1]["lag_time_ms"] or 0)))
    bar = width >= 110  # room for the lag against T and 1.5 T
    rows: list[tuple[Cell, ...]] = []
    for r, f in found:
        lag, lag_max = f["lag_time_ms"], int(r.get("replica_lag_time_max_ms", 0))
        row: tuple[Cell, ...] = (
            partition_name(r),
            str(f["broker"]),
            leader_of(r),
            Text(f["status"], style=STATUS_STYLE[f["status"]]),
            seconds(lag),
            shown(f["lag_messages"]),
        )
        if bar:
            row += (lag_bar(lag, lag_max) if lag is not None and lag_max else "-",)
        rows.append(row)
    columns: tuple[str, ...] = ("partition", "follower", "leader", "status", "lag time", "lag msgs")
    if bar:
        columns += ("0 .. T | 1.5T .. 2T",)
    return Section("Other followers not in sync", columns, rows, "yellow")


def stale_metadata(snapshot: HealthSnapshot) -> Section:
    now = snapshot.now_ms
    rows: list[tuple[Cell, ...]] = []
    for r in snapshot.unhealthy:
        metadata = r["metadata"]
        state = metadata["state"]
        if state == "CONSISTENT":
            continue
        style = "bold red" if state == "STALE_OVERDUE" else "cyan"
        rows.append(
            (
                partition_name(r),
                Text(state, style=style),
                shown(metadata["stale_brokers"]),
                _relative(metadata["blackout_earliest_ms"], now),
                _relative(metadata["blackout_latest_ms"], now),
            )
        )
    return Section(
        "Metadata stale: brokers still caching an old ISR",
        ("partition", "state", "stale brokers", "window opens", "closes"),
        rows,
        "cyan",
    )


def sections(snapshot: HealthSnapshot, width: int) -> list[Section]:
    """Every section, in the order of what matters (empty ones included)."""
    return [
        predicted_shrinks(snapshot),
        overdue_shrinks(snapshot),
        offline_partitions(snapshot),
        under_min_isr_partitions(snapshot),
        under_replicated_partitions(snapshot),
        other_followers(snapshot, width),
        stale_metadata(snapshot),
    ]


def _relative(ms: int | None, now: int | None) -> str:
    if ms is None or now is None:
        return "-"
    delta = (ms - now) / 1000
    return f"in {delta:.1f}s" if delta >= 0 else f"{-delta:.1f}s ago"


def render_summary(snapshot: HealthSnapshot) -> Text:
    """Two lines: partitions by condition, followers by status."""
    totals = snapshot.totals
    text = Text()
    text.append(f"{snapshot.partitions} partitions:", style="bold")
    for condition, label, style in (
        ("under_replicated", "under-replicated", "dark_orange"),
        ("under_min_isr", "under-min-ISR", "red"),
        ("offline", "offline", "bold red"),
        ("predicted_under_replicated", "predicted", "yellow"),
    ):
        count = totals[condition]
        text.append(f" {label} ")
        text.append(str(count), style=style if count else "green")
    stale = totals["metadata_stale_expected"] + totals["metadata_stale_overdue"]
    text.append(" stale ")
    text.append(str(stale), style="cyan" if stale else "green")
    text.append("\nfollowers:", style="bold")
    for status in STATUS_ORDER:
        if snapshot.followers[status]:
            text.append(f" {status} {snapshot.followers[status]}", style=STATUS_STYLE[status])
    return text


@dataclass
class HealthView:
    """The whole view, laid out for the size of the terminal at each refresh."""

    snapshot: HealthSnapshot
    header: str
    facts: Sequence[dict[str, Any]] = ()
    facts_title: str = "What the simulated cluster did"

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        # Live keeps its cursor on the line below the view: one line less than the height.
        budget = (options.height or console.height) - 1
        as_of = clock(self.snapshot.now_ms)[:8]
        top = Text(
            f"{self.header} | monitor {as_of}", style="bold", no_wrap=True, overflow="ellipsis"
        )
        summary = render_summary(self.snapshot)
        summary.no_wrap, summary.overflow = True, "ellipsis"
        yield top
        yield summary
        budget -= 3
        drawn = [s for s in sections(self.snapshot, width) if s.rows]
        if not drawn:
            yield Text("every follower is in sync, every partition healthy", style="green")
            budget -= 1
        for section, rows in zip(drawn, allot(drawn, budget), strict=True):
            if rows == 0:
                continue
            yield section.heading(rows)
            yield section.table(rows)
            budget -= section.lines(rows)
        facts = fact_lines(self.facts)
        if facts and budget >= 2:
            yield Text(self.facts_title, style="bold", no_wrap=True)
            for line in facts[-(budget - 1) :]:
                yield Text(line, no_wrap=True, overflow="ellipsis")


def allot(drawn: Sequence[Section], budget: int) -> list[int]:
    """Rows for each section in ``budget`` lines: in order, each gets its title, column
    names and one row while they fit; then, in order, as many more rows as fit."""
    rows = [0] * len(drawn)
    for i, section in enumerate(drawn):
        if budget >= section.lines(1):
            rows[i], budget = 1, budget - section.lines(1)
    for i, section in enumerate(drawn):
        if rows[i]:
            more = min(len(section.rows) - rows[i], budget)
            rows[i], budget = rows[i] + more, budget - more
    return rows


def describe_fact(fact: dict[str, Any]) -> str | None:
    """One line for the facts worth showing next to the monitor's view."""
    kind = fact["kind"]
    where = f"{fact.get('topic')}-{fact.get('partition')}"
    match kind:
        case "isr_shrink":
            return f"leader {fact['leader']} dropped {fact['follower']} from {where}'s ISR"
        case "isr_expand":
            return f"leader {fact['leader']} added {fact['follower']} back to {where}'s ISR"
        case "shrink_failed":
            return f"leader {fact['leader']} failed to drop {fact['follower']} from {where}"
        case "propagation":
            return f"broker {fact['broker']} propagated {len(fact['changes'])} ISR change(s)"
        case "broker_crash" | "broker_restart":
            return f"broker {fact['broker']} {kind.split('_')[1]}ed"
        case "controller_change":
            return f"controller is now {fact['controller_id']} (epoch {fact['controller_epoch']})"
        case "leader_and_isr" if fact["reason"] != "topic created":
            return f"controller: {where} leader {fact['leader']} isr {fact['isr']}"
        case "lab_fault" if "broker" in fact:
            return f"{fact['fault']} broker {fact['broker']}"
        case "lab_fault":
            return f"{fact['fault']} {fact['topic']}"
        case "topic_created" | "topic_deleted":
            return f"topic {fact['topic']} {kind.split('_')[1]}"
    return None


def fact_lines(facts: Sequence[dict[str, Any]]) -> list[str]:
    return [
        f"{clock(fact['ts'])}  {line}"
        for fact in facts
        if (line := describe_fact(fact)) is not None
    ]


def render_facts(facts: Sequence[dict[str, Any]], limit: int = 6) -> Panel:
    lines = fact_lines(facts)[-limit:]
    return Panel("\n".join(lines) or "nothing yet", title="What the simulated cluster did")


def render(
    snapshot: HealthSnapshot,
    header: str,
    facts: Sequence[dict[str, Any]],
    facts_title: str = "What the simulated cluster did",
) -> RenderableType:
    return HealthView(snapshot, header, facts, facts_title)


def show_live(
    console: Console,
    view: Callable[[], RenderableType],
    finished: Callable[[], str | None],
    every_s: float = 0.5,
) -> str:
    """Redraw ``view()`` in place until ``finished()`` says why it is over.

    rich's Live would send what is written to sys.stdout and sys.stderr meanwhile to the
    terminal, above the view; the demo sends those to its log instead.
    """
    with Live(
        console=console,
        auto_refresh=False,
        redirect_stdout=False,
        redirect_stderr=False,
        vertical_overflow="crop",
    ) as live:
        while (reason := finished()) is None:
            live.update(view(), refresh=True)
            time.sleep(every_s)
    return reason


PLAIN_EVERY_S = 10


def show_until_finished(
    console: Console,
    live: bool,
    view: Callable[[], RenderableType],
    snapshot: Callable[[], HealthSnapshot],
    finished: Callable[[], str | None],
) -> str:
    """The view until ``finished()`` says why it is over: redrawn in place on a terminal
    (``live``), else one plain line every ``PLAIN_EVERY_S`` (logs, CI). Returns why."""
    if live:
        return show_live(console, view, finished)
    last = 0.0
    while (reason := finished()) is None:
        if time.monotonic() - last >= PLAIN_EVERY_S:
            console.print(plain_line(snapshot()), highlight=False)
            last = time.monotonic()
        time.sleep(0.25)
    return reason


def plain_line(snapshot: HealthSnapshot) -> str:
    """The view as one line, for terminals that are not interactive (logs, CI)."""
    totals = snapshot.totals
    followers = " ".join(
        f"{s}={snapshot.followers[s]}" for s in STATUS_ORDER if snapshot.followers[s]
    )
    return (
        f"as of {clock(snapshot.now_ms)}: {snapshot.partitions} partitions, "
        f"under-replicated={totals['under_replicated']} "
        f"under-min-isr={totals['under_min_isr']} offline={totals['offline']} "
        f"predicted={totals['predicted_under_replicated']} "
        f"stale={totals['metadata_stale_expected']}/{totals['metadata_stale_overdue']} "
        f"followers: {followers or '-'}; batches {snapshot.batches}"
    )
