"""What both layouts of the timeline's picture share: the colours of the statuses and
conditions, the marks of Kafka's rule on a lane, the time axis and the legend."""

from __future__ import annotations

import matplotlib.dates as mdates
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from state.shrink_rule import STATUS_SEVERITY
from streaming.tools.timeline.facts import FollowerEpisode, FollowerKey, Timeline

MAX_LANES = 40
"""Past this many follower lanes, the picture summarises per broker."""

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


def date_number(ms: int | float) -> float:
    """A matplotlib date number (days since the epoch) of epoch ms."""
    return float(ms) / 86_400_000.0


def date_width(ms: int | float) -> float:
    """A duration of ms in matplotlib date units (days)."""
    return float(ms) / 86_400_000.0


def two_panel_figure(lane_rows: int, strip_rows: int) -> tuple[Figure, Axes, Axes]:
    """The lanes above, the partition strip below, on one time axis; each as tall as its
    rows."""
    top = max(2.0, 0.32 * lane_rows + 0.6)
    bottom = max(1.4, 0.26 * strip_rows + 0.6)
    figure = Figure(figsize=(14, top + bottom + 1.6), layout="constrained")
    lanes_axes, strip_axes = figure.subplots(
        2, 1, sharex=True, gridspec_kw={"height_ratios": [top, bottom]}
    )
    return figure, lanes_axes, strip_axes


def time_axis(axes: Axes, timeline: Timeline) -> None:
    end = max(timeline.end_ms, timeline.start_ms + 1_000)  # a range of one instant: 1 s wide
    axes.set_xlim(date_number(timeline.start_ms), date_number(end))
    locator = mdates.AutoDateLocator(minticks=6, maxticks=14)  # type: ignore[no-untyped-call]
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))  # type: ignore[no-untyped-call]
    axes.set_xlabel("time (UTC)")
    axes.grid(axis="x", color="#e0e0e0", linewidth=0.6)


def deadline_marks(axes: Axes, episode: FollowerEpisode, y: float) -> None:
    """Kafka's rule on a lane: eligible for removal T after the follower last caught up
    (dashed), removed by 1.5 T at the latest (solid)."""
    if episode.eligible_from_ms is None or episode.deadline_ms is None:
        return
    axes.vlines(
        date_number(episode.eligible_from_ms),
        y - 0.45,
        y + 0.45,
        colors=T_COLOUR,
        linestyles="dashed",
        linewidth=1.4,
        label=T_MARK,
    )
    axes.vlines(
        date_number(episode.deadline_ms),
        y - 0.45,
        y + 0.45,
        colors=DEADLINE_COLOUR,
        linewidth=1.8,
        label=DEADLINE_MARK,
    )


def lane_severity(timeline: Timeline, key: FollowerKey) -> int:
    return max((STATUS_SEVERITY.get(s.status, 0) for s in timeline.lanes[key]), default=0)


def legend(figure: Figure, summary_layout: bool) -> None:
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
