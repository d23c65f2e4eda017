"""The lanes layout of the timeline's picture: one lane per follower, coloured by status,
with the moments of Kafka's rule, the monitor's prediction and the ISR changes; and a strip
per partition for its offline, under-min-ISR and metadata blackout periods against the
predicted propagation window."""

from __future__ import annotations

from collections import defaultdict

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from streaming.tools.timeline.facts import IN_SYNC, FollowerKey, Timeline
from streaming.tools.timeline.picture_drawing import (
    LANE,
    PERIOD_COLOURS,
    STATUS_COLOURS,
    WINDOW_COLOUR,
    date_number,
    date_width,
    deadline_marks,
    lane_severity,
    legend,
    time_axis,
    two_panel_figure,
)
from streaming.tools.timeline.report import title
from streaming.tools.timeline.words import plural, tp_name

MAX_PARTITION_ROWS = 24


def lanes_figure(timeline: Timeline, lanes: list[FollowerKey]) -> Figure:
    partitions = _partition_rows(timeline)
    figure, axes, strip = two_panel_figure(len(lanes) + 1, len(partitions))
    figure.suptitle(title(timeline), fontsize=11)
    # worst lanes on top: matplotlib's y grows upwards, so the first lane gets the top row
    order = sorted(lanes, key=lambda k: (-lane_severity(timeline, k), k))
    calm = len(timeline.lanes) - len(lanes)  # followers IN_SYNC throughout: one lane
    rows = len(order) + (1 if calm else 0)
    position = {key: rows - 1 - i for i, key in enumerate(order)}
    if calm:
        axes.broken_barh(
            [(date_number(timeline.start_ms), date_width(timeline.end_ms - timeline.start_ms))],
            (-0.4, 0.8),
            facecolors=STATUS_COLOURS[IN_SYNC],
            linewidth=0,
            label=LANE,
        )
    for key, y in position.items():
        bars = [
            (date_number(s.start_ms), date_width(s.end_ms - s.start_ms))
            for s in timeline.lanes[key]
        ]
        colours = [STATUS_COLOURS.get(s.status, "#ffffff") for s in timeline.lanes[key]]
        axes.broken_barh(bars, (y - 0.4, 0.8), facecolors=colours, linewidth=0, label=LANE)
    for episode in timeline.episodes:
        y_lane = position.get(episode.key)
        if y_lane is None:
            continue
        deadline_marks(axes, episode, y_lane)
        if episode.predicted_ms is not None:
            axes.plot(
                date_number(episode.predicted_ms),
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
                    date_number(change.ts),
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
    troubled = any(lane_severity(timeline, key) > 0 for key in lanes)
    heading = (
        f"one lane per follower that left IN_SYNC ({len(lanes)}), worst first"
        if troubled
        else f"no follower left IN_SYNC ({len(timeline.lanes)} followers)"
    )
    if calm:
        heading += f"; the {plural(calm, 'follower')} IN_SYNC throughout share the last lane"
    axes.set_title(heading, fontsize=9, loc="left")
    _partition_strip(strip, timeline, partitions)
    time_axis(strip, timeline)
    legend(figure, summary_layout=False)
    return figure


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
            [(date_number(period.start_ms), date_width(stop - period.start_ms))],
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
                (date_number(blackout.changed_ms), y - 0.42),
                date_width(max(stop - blackout.changed_ms, 1)),
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
                    (date_number(blackout.earliest_ms), y - 0.45),
                    date_width(max(window, 100)),
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
