"""The summary layout of the timeline's picture, for more lanes than the lanes layout
draws: one lane per broker, worst first, showing the share of its followers in each status
over time, and the count of partitions in each condition over time."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from state.shrink_rule import STATUS_SEVERITY
from streaming.tools.timeline.facts import FollowerKey, Timeline
from streaming.tools.timeline.picture_drawing import (
    MAX_LANES,
    PERIOD_COLOURS,
    STATUS_COLOURS,
    date_number,
    deadline_marks,
    lane_severity,
    legend,
    time_axis,
    two_panel_figure,
)
from streaming.tools.timeline.report import broker_time_away, title
from streaming.tools.timeline.words import plural

SUMMARY_BINS = 600


def summary_figure(timeline: Timeline) -> Figure:
    by_broker: dict[int, list[FollowerKey]] = defaultdict(list)
    for key in timeline.lanes:
        by_broker[key[2]].append(key)
    away = broker_time_away(timeline)
    severity = {b: max(lane_severity(timeline, k) for k in keys) for b, keys in by_broker.items()}
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
    figure, axes, strip = two_panel_figure(len(groups), 6)
    figure.suptitle(title(timeline), fontsize=11)
    edges = np.linspace(timeline.start_ms, timeline.end_ms, SUMMARY_BINS + 1)
    centres = (edges[:-1] + edges[1:]) / 2
    x = np.array([date_number(t) for t in edges])
    statuses = sorted(STATUS_COLOURS, key=lambda s: -STATUS_SEVERITY[s])  # worst at the bottom
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
                date_number((timeline.start_ms + timeline.end_ms) / 2),
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
            deadline_marks(axes, min(episodes, key=lambda e: e.behind_since_ms or 0), y)
        removals = sorted({s.ts for s in timeline.shrinks if s.follower == broker})
        if removals:
            axes.plot(
                [date_number(t) for t in removals],
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
    time_axis(strip, timeline)
    legend(figure, summary_layout=True)
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
    x = np.array([date_number(t) for t in edges[:-1]])
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
