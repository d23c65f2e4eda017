"""The fault campaign's short mode (bench/fault_campaign.py, docs/faults.md): kills of the
job in each phase of a micro-batch, a broker outage through the fault proxy, and a backlog
read in capped batches, after which nothing is lost or doubled. Only its checks are
judged, not its timings."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

CAMPAIGN = Path(__file__).resolve().parents[2] / "bench" / "fault_campaign.py"


@pytest.mark.timeout(2400)  # minutes on a quiet machine; Spark starts slowly on a busy one
def test_short_campaign_loses_and_doubles_nothing(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(CAMPAIGN),
            "--mode",
            "short",
            "--faults",
            "kill,outage,backlog",
            "--workdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=2300,
        check=False,
    )
    output = done.stdout + done.stderr[-3000:]
    assert done.returncode == 0, output
    rows = {
        line.split("  ")[0]: line
        for line in done.stdout.splitlines()
        if line.startswith(("kill -9", "broker outage", "backlog"))
    }
    assert set(rows) == {"kill -9", "broker outage", "backlog"}, output
    # restarts survived, events lost, events doubled (the table's columns 2 to 4)
    kill = re.split(r"\s{2,}", rows["kill -9"])
    assert (kill[1], kill[2], kill[3], kill[-1]) == ("3", "0", "0", "pass"), output
    outage = re.split(r"\s{2,}", rows["broker outage"])
    assert (outage[2], outage[3], outage[4], outage[-1]) == ("0", "0", "45", "pass"), output
    backlog = re.split(r"\s{2,}", rows["backlog"])
    assert (backlog[2], backlog[3], backlog[-1]) == ("0", "0", "pass"), output
    # each phase of a batch was hit once
    for phase in ("mid-batch", "mid-commit", "mid-sink"):
        assert re.search(rf"aimed {phase}, landed {phase} ", done.stdout), output
    assert "[FAIL]" not in done.stdout, output
