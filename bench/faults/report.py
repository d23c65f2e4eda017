"""The campaign's table of figures and its list of checks."""

from __future__ import annotations

from collections.abc import Sequence

from faults.fault import FaultResult

COLUMNS = (
    "fault",
    "restarts survived",
    "events lost",
    "events doubled",
    "outage s survived",
    "sink duplicates",
    "malformed tried",
    "crashes",
    "scrape p99 ms",
    "series",
    "checks",
)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.0f}"
    return str(value)


def table(results: Sequence[FaultResult]) -> str:
    rows = [COLUMNS] + [
        (
            r.name,
            _cell(r.restarts_survived),
            _cell(r.events_lost),
            _cell(r.events_doubled),
            _cell(r.outage_seconds_survived),
            _cell(r.sink_duplicates),
            _cell(r.malformed_tried),
            _cell(r.crashes),
            _cell(None if r.scrape_p99_s is None else r.scrape_p99_s * 1000),
            _cell(r.series),
            "pass" if r.passed else "FAIL",
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    return "\n".join(line.rstrip() for line in lines)


def checks(results: Sequence[FaultResult]) -> str:
    lines = []
    for result in results:
        for name, ok, detail in result.comparison.checks:
            lines.append(f"[{'ok' if ok else 'FAIL'}] {result.name}: {name}: {detail}")
        lines += [f"       {result.name}: {note}" for note in result.notes]
    return "\n".join(lines)
