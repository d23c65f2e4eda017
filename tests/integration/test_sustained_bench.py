"""The sustained-load benchmark's short mode runs and prints its figures (no timing is
judged: the machines are shared; the long mode is run by hand, see docs/performance.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

BENCH = Path(__file__).resolve().parents[2] / "bench" / "sustained_bench.py"
FIGURES = (
    "kafka-python + json.loads",
    "confluent-kafka + msgspec",
    "cold start:",
    "failover:",
    "produced",
    "source backlog",
    "slope over the last two thirds",
    "micro-batch p50",
    "end-to-end p99",
    "job CPU per event",
    "detection",
    "peak RSS",
    "state store:",
    "source floor",
    "Spark floor",
    "per-(topic, partition)",
    "job / source floor",
    "job / Spark floor",
    "largest rate R with a bounded backlog",
    "replay agreement",
    "summary",
    "load average",
)


@pytest.mark.timeout(1500)  # a few minutes on a quiet machine; far more on a loaded one
def test_short_mode_prints_every_figure() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--short"],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    missing = [figure for figure in FIGURES if figure not in done.stdout]
    assert missing == [], done.stdout
    assert "NOT within" not in done.stdout, done.stdout
    assert "query failed" not in done.stdout, done.stdout  # every reference ran to a figure
