"""The exporter under scrape load as a part of the campaign (``faults.scrapes``,
docs/faults-fuzz-and-scrapes.md): figures only. Its scrape times are the machine's as
much as the exporter's, so no time is a check; what is checked is that every scrape got
an answer with the series the shards' stats hold."""

from __future__ import annotations

from pathlib import Path

from .fault import Fault, FaultResult, Mode
from .scrapes import run_scrapes

SIZES = {Mode.SHORT: (1_000, 5.0), Mode.LONG: (100_000, 60.0)}  # partitions, seconds


def run(mode: Mode, workdir: Path, seed: int) -> FaultResult:
    partitions, seconds = SIZES[mode]
    figures = run_scrapes(partitions, seconds=seconds, log=False)
    result = FaultResult("scrape load")
    result.scrape_p99_s = figures.p99_s
    result.series = figures.series
    result.notes += figures.lines()
    result.comparison.check(
        "scrapes answered",
        figures.scrapes > 0 and figures.errors < figures.scrapes,
        f"{figures.scrapes - figures.errors} of {figures.scrapes} within the timeout",
    )
    return result


FAULT = Fault("scrapes", "/metrics at the size of a large cluster, 20 scrapes a second", run)
