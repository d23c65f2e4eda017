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
    "settings the bench overrides",
    "kafka-python + json.loads",
    "confluent-kafka + msgspec",
    "cold start:",
    "failover:",
    "produced",
    "on the packed wire",
    "on the json wire",
    "producer CPU per event",
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
    "python/packed: largest rate R with a bounded backlog",
    "python/json: largest rate R with a bounded backlog",
    "catch-up on the packed wire",
    "catch-up on the json wire",
    "backlog at restart",
    "drain rate",
    "cold start on a busy topic",
    "replay agreement",
    "packed wire (",
    "json wire (",
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
    assert "does not fit" not in done.stdout, done.stdout  # the catch-up ran
    assert "query failed" not in done.stdout, done.stdout  # every reference ran to a figure
