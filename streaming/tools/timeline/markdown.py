"""The timeline as Markdown, to paste into an issue tracker or a postmortem."""

from __future__ import annotations

from streaming.tools.timeline.facts import Timeline
from streaming.tools.timeline.moments import moments
from streaming.tools.timeline.report import Table, detail_tables, summary, title
from streaming.tools.timeline.words import at


def table_markdown(table: Table, level: int = 2) -> list[str]:
    lines = [f"{'#' * level} {table.title}", ""]
    if not table.rows:
        return [*lines, "None.", ""]
    lines.append("| " + " | ".join(table.header) + " |")
    lines.append("|" + "|".join("---" for _ in table.header) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows]
    if table.left_out:
        lines.append(f"\n... and {table.left_out} more rows.")
    if table.note:
        lines.append(f"\n{table.note}")
    return [*lines, ""]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(timeline: Timeline, picture: str | None = "timeline.png") -> str:
    """The whole report; ``picture`` is the image's path relative to the report, if any."""
    lines = [f"# {title(timeline)}", ""]
    lines += [f"- {note}" for note in timeline.notes]
    if timeline.notes:
        lines.append("")
    if picture:
        lines += [f"![timeline]({picture})", ""]
    lines += table_markdown(summary(timeline))
    told, left_out = moments(timeline)
    lines += ["## Key moments", ""]
    lines += [f"- `{at(timeline, m.ts)}` {m.text}" for m in told] or ["None."]
    if left_out:
        lines.append(f"- ... and {left_out} more moments (see the tables below).")
    lines.append("")
    for table in detail_tables(timeline):
        lines += table_markdown(table)
    return "\n".join(lines).rstrip() + "\n"
