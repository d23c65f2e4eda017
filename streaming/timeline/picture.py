"""The timeline as a picture (PNG) and as a self-contained HTML page (inline SVG + tables).

matplotlib with its Agg backend draws without a display; the HTML page embeds the same
figure as SVG, so it needs nothing beside it. Two layouts:

* lanes: one lane per follower, coloured by status, with the moments of Kafka's rule (T
  and 1.5 T after it was last caught up), the monitor's prediction, the ISR changes; and a
  strip per partition for its offline, under-min-ISR and metadata blackout periods against
  the predicted propagation window. Used up to :data:`MAX_LANES` lanes: all followers when
  they fit, else those that left IN_SYNC;
* summary, beyond that: one lane per broker, worst first, showing the share of its followers
  in each status over time, and the count of partitions in each condition over time.
"""

from __future__ import annotations

import html
import io
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: files only (set before pyplot is imported)

import matplotlib.dates as mdates
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from streaming.timeline.facts import (
    IN_SYNC,
    SEVERITY,
    FollowerEpisode,
    FollowerKey,
    Timeline,
)
from streaming.timeline.report import (
    Table,
    at,
    broker_time_away,
    detail_tables,
    moments,
    plural,
    summary,
    title,
    tp_name,
)

MAX_LANES = 40
"""Past this many follower lanes, the picture summarises per broker."""

MAX_PARTITION_ROWS = 24
SUMMARY_BINS = 600

STATUS_COLOURS: dict[str, str] = {
    "IN_SYNC": "#a5d6a7",
    "LAGGING": "#ffe082",
    "CATCHING_UP": "#81d4fa",
    "SHRINK_ELIGIBLE": "#ff9800",
    "OUT_OF_SYNC": "#9575cd",
    "OFFLINE": "#424242",
    "SHRINK_OVERDUE": "#d50000",
}
PERIOD_COLOURS = {
    "under_replicated": "#bdbdbd",
    "under_min_isr": "#e53935",
    "offline": "#212121",
}
T_COLOUR, DEADLINE_COLOUR, WINDOW_COLOUR = "#ef6c00", "#b71c1c", "#1565c0"
LANE, T_MARK, DEADLINE_MARK = "_lane", "_T", "_deadline"
"""Labels of the artists (a leading underscore keeps them out of the legend)."""


def _time(ms: int | float) -> float:
    """A matplotlib date number (days since the epoch) of epoch ms."""
    return float(ms) / 86_400_000.0


def _width(ms: int | float) -> float:
    return float(ms) / 86_400_000.0


def lanes_to_draw(timeline: Timeline) -> list[FollowerKey] | None:
    """The follower lanes of the lanes layout, or None for the summary layout: those that
    left IN_SYNC (the others share one lane), or all when none did."""
    keys = list(timeline.lanes)
    away = [k for k in keys if any(s.status != IN_SYNC for s in timeline.lanes[k])]
    if not away:
        return keys if len(keys) <= MAX_LANES else None
    return away if len(away) <= MAX_LANES else None


def render_figure(timeline: Timeline) -> Figure:
    lanes = lanes_to_draw(timeline)
    if lanes is None:
        return _summary_figure(timeline)
    return _lanes_figure(timeline, lanes)


def render_png(timeline: Timeline, path: Path) -> None:
    figure = render_figure(timeline)
    figure.savefig(path, format="png", dpi=110)


def render_html(timeline: Timeline, path: Path) -> None:
    figure = render_figure(timeline)
    svg = io.StringIO()
    figure.savefig(svg, format="svg")
    path.write_text(_page(timeline, svg.getvalue()), encoding="utf-8")


# ---------------------------------------------------------------------- layouts


def _figure(lane_rows: int, strip_rows: int) -> tuple[Figure, Axes, Axes]:
    top = max(2.0, 0.32 * lane_rows + 0.6)
    bottom = max(1.4, 0.26 * strip_rows + 0.6)
    figure = Figure(figsize=(14, top + bottom + 1.6), layout="constrained")
    lanes_axes, strip_axes = figure.subplots(
        2, 1, sharex=True, gridspec_kw={"height_ratios": [top, bottom]}
    )
    return figure, lanes_axes, strip_axes


def _time_axis(axes: Axes, timeline: Timeline) -> None:
    end = max(timeline.end_ms, timeline.start_ms + 1_000)  # a range of one instant: 1 s wide
    axes.set_xlim(_time(timeline.start_ms), _time(end))
    locator = mdates.AutoDateLocator(minticks=6, maxticks=14)  # type: ignore[no-untyped-call]
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))  # type: ignore[no-untyped-call]
    axes.set_xlabel("time (UTC)")
    axes.grid(axis="x", color="#e0e0e0", linewidth=0.6)


def _lanes_figure(timeline: Timeline, lanes: list[FollowerKey]) -> Figure:
    partitions = _partition_rows(timeline)
    figure, axes, strip = _figure(len(lanes) + 1, len(partitions))
    figure.suptitle(title(timeline), fontsize=11)
    # worst lanes on top: matplotlib's y grows upwards, so the first lane gets the top row
    order = sorted(lanes, key=lambda k: (-_lane_severity(timeline, k), k))
    calm = len(timeline.lanes) - len(lanes)  # followers IN_SYNC throughout: one lane
    rows = len(order) + (1 if calm else 0)
    position = {key: rows - 1 - i for i, key in enumerate(order)}
    if calm:
        axes.broken_barh(
            [(_time(timeline.start_ms), _width(timeline.end_ms - timeline.start_ms))],
            (-0.4, 0.8),
            facecolors=STATUS_COLOURS[IN_SYNC],
            linewidth=0,
            label=LANE,
        )
    for key, y in position.items():
        bars = [(_time(s.start_ms), _width(s.end_ms - s.start_ms)) for s in timeline.lanes[key]]
        colours = [STATUS_COLOURS.get(s.status, "#ffffff") for s in timeline.lanes[key]]
        axes.broken_barh(bars, (y - 0.4, 0.8), facecolors=colours, linewidth=0, label=LANE)
    for episode in timeline.episodes:
        y_lane = position.get(episode.key)
        if y_lane is None:
            continue
        _deadline_marks(axes, episode, y_lane)
        if episode.predicted_ms is not None:
            axes.plot(
                _time(episode.predicted_ms),
                y_lane,
                marker="D",
                color="#0d47a1",
                markersize=5,
                linestyle="none",
            )
    for change in timeline.isr_changes:
        for broker, marker in [(b, "v") for b in change.removed] + [(b, "^") for b in change.added]:
            y_change = position.get((change.topic, change.partition, broker))
            if y_change is not None:
                axes.plot(
                    _time(change.ts),
                    y_change,
                    marker=marker,
                    color="black",
                    markersize=7,
                    linestyle="none",
                )
    labels = [
        f"{tp_name(t, p)}  follower {b}  (leader {timeline.leaders.get((t, p), '?')})"
        for t, p, b in position
    ]
    axes.set_yticks([*position.values(), *([0] if calm else [])])
    axes.set_yticklabels(
        [*labels, *([f"{plural(calm, 'other follower')}: IN_SYNC"] if calm else [])]
    )
    axes.set_ylim(-0.7, rows - 0.3)
    troubled = any(_lane_severity(timeline, key) > 0 for key in lanes)
    heading = (
        f"one lane per follower that left IN_SYNC ({len(lanes)}), worst first"
        if troubled
        else f"no follower left IN_SYNC ({len(timeline.lanes)} followers)"
    )
    if calm:
        heading += f"; the {plural(calm, 'follower')} IN_SYNC throughout share the last lane"
    axes.set_title(heading, fontsize=9, loc="left")
    _partition_strip(strip, timeline, partitions)
    _time_axis(strip, timeline)
    _legend(figure, summary_layout=False)
    return figure


def _deadline_marks(axes: Axes, episode: FollowerEpisode, y: float) -> None:
    """Kafka's rule on a lane: eligible for removal T after the follower last caught up
    (dashed), removed by 1.5 T at the latest (solid)."""
    if episode.eligible_from_ms is None or episode.deadline_ms is None:
        return
    axes.vlines(
        _time(episode.eligible_from_ms),
        y - 0.45,
        y + 0.45,
        colors=T_COLOUR,
        linestyles="dashed",
        linewidth=1.4,
        label=T_MARK,
    )
    axes.vlines(
        _time(episode.deadline_ms),
        y - 0.45,
        y + 0.45,
        colors=DEADLINE_COLOUR,
        linewidth=1.8,
        label=DEADLINE_MARK,
    )


def _lane_severity(timeline: Timeline, key: FollowerKey) -> int:
    return max((SEVERITY.get(s.status, 0) for s in timeline.lanes[key]), default=0)


def _partition_rows(timeline: Timeline) -> list[tuple[str, int]]:
    """Partitions with a period or a blackout, worst first, at most MAX_PARTITION_ROWS."""
    weight: dict[tuple[str, int], int] = defaultdict(int)
    rank = {"offline": 3, "under_min_isr": 2, "under_replicated": 1}
    for period in timeline.periods:
        tp = (period.topic, period.partition)
        weight[tp] = max(weight[tp], rank[period.kind])
    for blackout in timeline.blackouts:
        weight.setdefault((blackout.topic, blackout.partition), 0)
    ordered = sorted(weight, key=lambda tp: (-weight[tp], tp))
    return ordered[:MAX_PARTITION_ROWS]


def _partition_strip(axes: Axes, timeline: Timeline, rows: list[tuple[str, int]]) -> None:
    """Per partition: its conditions as bands, its metadata blackouts (hatched) against
    the predicted window (blue frame)."""
    position = {tp: len(rows) - 1 - i for i, tp in enumerate(rows)}
    end = timeline.end_ms
    band = {
        "under_replicated": (0.05, 0.3),
        "under_min_isr": (-0.1, 0.15),
        "offline": (-0.25, 0.15),
    }
    for period in timeline.periods:
        y = position.get((period.topic, period.partition))
        if y is None:
            continue
        offset, height = band[period.kind]
        stop = period.end_ms if period.end_ms is not None else end
        axes.broken_barh(
            [(_time(period.start_ms), _width(stop - period.start_ms))],
            (y + offset, height),
            facecolors=PERIOD_COLOURS[period.kind],
        )
    for blackout in timeline.blackouts:
        y = position.get((blackout.topic, blackout.partition))
        if y is None:
            continue
        stop = blackout.observed_ms if blackout.observed_ms is not None else end
        axes.add_patch(
            Rectangle(
                (_time(blackout.changed_ms), y - 0.42),
                _width(max(stop - blackout.changed_ms, 1)),
                0.26,
                facecolor="#fff59d",
                edgecolor="#616161",
                hatch="////",
                linewidth=0.5,
            )
        )
        if blackout.earliest_ms is not None and blackout.latest_ms is not None:
            window = blackout.latest_ms - blackout.earliest_ms
            axes.add_patch(
                Rectangle(
                    (_time(blackout.earliest_ms), y - 0.45),
                    _width(max(window, 100)),
                    0.32,
                    fill=False,
                    edgecolor=WINDOW_COLOUR,
                    linewidth=1.4,
                )
            )
    axes.set_yticks(list(position.values()))
    axes.set_yticklabels([tp_name(*tp) for tp in position])
    if not rows:
        axes.text(
            0.5,
            0.5,
            "no partition under-replicated, offline or with a metadata blackout",
            transform=axes.transAxes,
            ha="center",
            va="center",
            color="#757575",
        )
    axes.set_ylim(-0.7, max(len(rows), 1) - 0.3)
    left_out = len(
        {(p.topic, p.partition) for p in timeline.periods}
        | {(b.topic, b.partition) for b in timeline.blackouts}
    ) - len(rows)
    axes.set_title(
        "partitions: under-replicated, under min ISR, offline; metadata blackout (hatched) "
        "against the predicted propagation window (blue)"
        + (f"; {left_out} more partitions not drawn" if left_out > 0 else ""),
        fontsize=9,
        loc="left",
    )


def _summary_figure(timeline: Timeline) -> Figure:
    by_broker: dict[int, list[FollowerKey]] = defaultdict(list)
    for key in timeline.lanes:
        by_broker[key[2]].append(key)
    away = broker_time_away(timeline)
    severity = {b: max(_lane_severity(timeline, k) for k in keys) for b, keys in by_broker.items()}
    ranked = sorted(by_broker, key=lambda b: (-severity[b], -away[b], b))
    troubled = [b for b in ranked if severity[b] > 0][:MAX_LANES]
    calm = sorted(b for b in ranked if severity[b] == 0)
    # one lane per troubled broker, worst first; the brokers that stayed IN_SYNC share one
    groups: list[tuple[str, list[FollowerKey], int | None]] = [
        (f"broker {b}  ({len(by_broker[b])} followers)", by_broker[b], b) for b in troubled
    ]
    if calm:
        keys = [k for b in calm for k in by_broker[b]]
        brokers = plural(len(calm), "other broker" if troubled else "broker")
        label = f"{brokers}  ({len(keys)} followers)"
        groups.append((label, keys, None))
    figure, axes, strip = _figure(len(groups), 6)
    figure.suptitle(title(timeline), fontsize=11)
    edges = np.linspace(timeline.start_ms, timeline.end_ms, SUMMARY_BINS + 1)
    centres = (edges[:-1] + edges[1:]) / 2
    x = np.array([_time(t) for t in edges])
    statuses = sorted(STATUS_COLOURS, key=lambda s: -SEVERITY[s])  # worst at the bottom
    for row, (_, keys, broker) in enumerate(groups):
        y = len(groups) - 1 - row
        counts = _status_counts(timeline, keys, centres, statuses)
        total = np.maximum(counts.sum(axis=0), 1)
        base = np.full(SUMMARY_BINS, y - 0.4)
        for status, count in zip(statuses, counts, strict=True):
            top = base + 0.8 * count / total
            if count.any():
                axes.fill_between(
                    x,
                    np.append(base, base[-1]),
                    np.append(top, top[-1]),
                    step="post",
                    color=STATUS_COLOURS[status],
                    linewidth=0,
                )
            base = top
        if broker is None:
            axes.text(
                _time((timeline.start_ms + timeline.end_ms) / 2),
                y,
                f"IN_SYNC throughout: {_ranges(calm)}",
                ha="center",
                va="center",
                fontsize=8,
                color="#1b5e20",
            )
            continue
        episodes = [e for e in timeline.episodes if e.broker == broker and e.deadline_ms]
        if episodes:
            _deadline_marks(axes, min(episodes, key=lambda e: e.behind_since_ms or 0), y)
        removals = sorted({s.ts for s in timeline.shrinks if s.follower == broker})
        if removals:
            axes.plot(
                [_time(t) for t in removals],
                [y + 0.47] * len(removals),
                marker="v",
                color="black",
                markersize=5,
                linestyle="none",
            )
    axes.set_yticks([len(groups) - 1 - i for i in range(len(groups))])
    axes.set_yticklabels([label for label, _, _ in groups])
    axes.set_ylim(-0.7, len(groups) - 0.3 + 0.3)
    left_out = len(by_broker) - len(troubled) - len(calm)
    axes.set_title(
        f"{len(timeline.lanes)} follower lanes summarised per broker, worst first: the share "
        "of each broker's followers in each status"
        + (f"; {left_out} more brokers not drawn" if left_out > 0 else ""),
        fontsize=9,
        loc="left",
    )
    _condition_counts(strip, timeline, edges)
    _time_axis(strip, timeline)
    _legend(figure, summary_layout=True)
    return figure


def _ranges(numbers: list[int]) -> str:
    """``1-6, 8-12`` for sorted broker ids."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def _status_counts(
    timeline: Timeline, keys: list[FollowerKey], centres: np.ndarray, statuses: list[str]
) -> np.ndarray:
    """Followers of ``keys`` in each status at each bin centre (statuses x bins)."""
    counts = np.zeros((len(statuses), len(centres)), dtype=np.int64)
    index = {s: i for i, s in enumerate(statuses)}
    for key in keys:
        for span in timeline.lanes[key]:
            low, high = np.searchsorted(centres, [span.start_ms, span.end_ms], side="left")
            counts[index.get(span.status, 0), low:high] += 1
    return counts


def _condition_counts(axes: Axes, timeline: Timeline, edges: np.ndarray) -> None:
    """Partitions in each condition, and with a metadata blackout, over time."""
    x = np.array([_time(t) for t in edges[:-1]])
    end = timeline.end_ms
    series: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for period in timeline.periods:
        series[period.kind].append(
            (period.start_ms, period.end_ms if period.end_ms is not None else end)
        )
    for blackout in timeline.blackouts:
        stop = blackout.observed_ms if blackout.observed_ms is not None else end
        series["metadata blackout"].append((blackout.changed_ms, stop))
    labels = {
        "under_replicated": "under-replicated",
        "under_min_isr": "under min ISR",
        "offline": "offline",
        "metadata blackout": "metadata blackout",
    }
    colours = {**PERIOD_COLOURS, "under_replicated": "#757575", "metadata blackout": "#f9a825"}
    for kind in labels:
        spans = series.get(kind, [])
        count = np.zeros(len(x), dtype=np.int64)
        for start, stop in spans:
            low, high = np.searchsorted(edges[:-1], [start, stop], side="left")
            count[low:high] += 1
        axes.step(
            x,
            count,
            where="post",
            color=colours[kind],
            linewidth=1.6,
            label=f"{labels[kind]} (max {int(count.max()) if len(count) else 0})",
        )
    axes.set_ylabel("partitions")
    axes.legend(loc="upper left", fontsize=8)
    axes.set_title("partitions in each condition over time", fontsize=9, loc="left")


def _legend(figure: Figure, summary_layout: bool) -> None:
    handles: list[Patch | Line2D] = [
        Patch(facecolor=colour, label=status) for status, colour in STATUS_COLOURS.items()
    ]
    handles += [
        Line2D([], [], color=T_COLOUR, linestyle="dashed", label="T after last caught up"),
        Line2D([], [], color=DEADLINE_COLOUR, label="1.5 T: Kafka's deadline"),
        Line2D([], [], color="black", marker="v", linestyle="none", label="removed from ISR"),
    ]
    if not summary_layout:
        handles += [
            Line2D([], [], color="black", marker="^", linestyle="none", label="back in ISR"),
            Line2D(
                [],
                [],
                color="#0d47a1",
                marker="D",
                linestyle="none",
                label="isrwatch predicted the shrink",
            ),
            Patch(
                facecolor="#fff59d", edgecolor="#616161", hatch="////", label="metadata blackout"
            ),
            Patch(fill=False, edgecolor=WINDOW_COLOUR, label="predicted window"),
        ]
    figure.legend(
        handles=handles,
        loc="outside lower center",
        ncol=min(len(handles), 8),
        fontsize=8,
        frameon=False,
    )


# ---------------------------------------------------------------------- HTML


def _table_html(table: Table) -> str:
    if not table.rows:
        return f"<h2>{html.escape(table.title)}</h2><p>None.</p>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in table.rows
    )
    more = f"<p>... and {table.left_out} more rows.</p>" if table.left_out else ""
    note = f"<p>{html.escape(table.note)}</p>" if table.note else ""
    return f"<h2>{html.escape(table.title)}</h2><table><tr>{head}</tr>{body}</table>{more}{note}"


def _page(timeline: Timeline, svg: str) -> str:
    svg = svg[svg.index("<svg") :]  # drop the XML prologue: the SVG sits inside the page
    told, left_out = moments(timeline)
    items = "".join(
        f"<li><code>{html.escape(at(timeline, m.ts))}</code> {html.escape(m.text)}</li>"
        for m in told
    )
    if left_out:
        items += f"<li>... and {left_out} more moments.</li>"
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in timeline.notes)
    details = "".join(_table_html(t) for t in detail_tables(timeline))
    style = (
        "body{font-family:sans-serif;margin:1.5em;color:#212121}"
        "table{border-collapse:collapse;margin-bottom:1em;font-size:0.9em}"
        "td,th{border:1px solid #bdbdbd;padding:0.2em 0.5em;text-align:left}"
        "th{background:#eeeeee} svg{max-width:100%;height:auto}"
    )
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>{html.escape(title(timeline))}</title><style>{style}</style></head><body>"
        f"<h1>{html.escape(title(timeline))}</h1><ul>{notes}</ul>{svg}"
        f"{_table_html(summary(timeline))}"
        f"<h2>Key moments</h2><ul>{items or '<li>None.</li>'}</ul>{details}</body></html>\n"
    )
