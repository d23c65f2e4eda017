"""The fuzz as a fault of the campaign: hostile records through the running job
(``faults.fuzz``, docs/faults-fuzz-and-scrapes.md), its checks as the campaign's."""

from __future__ import annotations

from pathlib import Path

from .fault import Fault, FaultResult, Mode
from .fuzz import run_fuzz

RECORDS = {Mode.SHORT: 300, Mode.LONG: 10_000}


def run(mode: Mode, workdir: Path, seed: int) -> FaultResult:
    report = run_fuzz(RECORDS[mode], seed=seed, workdir=workdir, log=False)
    result = FaultResult("fuzzed input")
    result.malformed_tried = sum(not sent.valid for sent in report.sent)
    result.crashes = int(report.watch.dead) + report.query_failures
    failures = report.failures()
    result.comparison.check(
        "no crash, and every malformed record in the dead-letter topic with its reason",
        not failures,
        "; ".join(failures) or f"{len(report.sent)} records, all accounted for",
    )
    result.notes.append(f"{len(report.sent)} sent, {len(report.delivered)} taken by Kafka")
    return result


FAULT = Fault("fuzz", "structure-aware mutations, bad UTF-8, 10 MB values, deep nesting", run)
