"""The timeline as a picture (PNG) and as a self-contained HTML page (inline SVG + tables).

matplotlib with its Agg backend draws without a display; the HTML page embeds the same
figure as SVG, so it needs nothing beside it. Two layouts:

* lanes (``picture_lanes``): one lane per follower, coloured by status, with the moments of
  Kafka's rule, the monitor's prediction and the ISR changes. Used up to
  :data:`~streaming.tools.timeline.picture_drawing.MAX_LANES` lanes: all followers when they fit,
  else those that left IN_SYNC;
* summary (``picture_summary``), beyond that: one lane per broker, worst first, showing the
  share of its followers in each status over time.
"""

from __future__ import annotations

import html
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: files only (set before pyplot is imported)

from matplotlib.figure import Figure

from streaming.tools.timeline.facts import IN_SYNC, FollowerKey, Timeline
from streaming.tools.timeline.moments import moments
from streaming.tools.timeline.picture_drawing import MAX_LANES
from streaming.tools.timeline.picture_lanes import lanes_figure
from streaming.tools.timeline.picture_summary import summary_figure
from streaming.tools.timeline.report import Table, detail_tables, summary, title
from streaming.tools.timeline.words import at


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
        return summary_figure(timeline)
    return lanes_figure(timeline, lanes)


def render_png(timeline: Timeline, path: Path) -> None:
    figure = render_figure(timeline)
    figure.savefig(path, format="png", dpi=110)


def render_html(timeline: Timeline, path: Path) -> None:
    figure = render_figure(timeline)
    svg = io.StringIO()
    figure.savefig(svg, format="svg")
    path.write_text(_page(timeline, svg.getvalue()), encoding="utf-8")


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
