"""The scoreboard against real Apache Kafka: each scenario on each Kafka setup, one lab run
each (``isrwatch lab``, exactly as a user runs it), scored against Kafka's own decisions.

    python bench/real_kafka.py                                   # every scenario, 4.1 ELR on
    python bench/real_kafka.py --setups 4.1,4.1-elr-off --scenarios paused-follower
    python bench/real_kafka.py --out scoreboard.json             # also the rows as JSON

It prints one markdown row per run (docs/real-kafka.md#the-scoreboard keeps the table)
and keeps each run's directory (the cluster's logs, metadata logs, health records) under
``--workdir``. One run is a 3-broker cluster, the collectors and Spark on this machine:
about 40 s to start plus the scenario; run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from streaming.tools.lab.scenarios import SCENARIOS
from streaming.tools.lab.scoreboard import score_workdir

SETUPS = {
    "4.1": ("4.1", "on"),
    "4.1-elr-off": ("4.1", "off"),
    "3.9": ("3.9", "on"),  # ZooKeeper mode: --elr does not apply
}
# after the scenario's last step: what it set off (a shrink in (T, 1.5 T], a fence at the
# lab's 2 T session timeout, an election), then a poll, a trigger and a busy batch
SETTLE_AFTER_2T_S = 15.0
# the first fault this long after the job's first micro-batch: the Spark JVM's compiler
# threads took 11.5 s of CPU in the 40 s from its 40th second, 3.1 s from its 160th, on
# a 2-core machine that also runs the brokers (docs/real-kafka.md#warm-up)
WARM_UP_S = 90.0


def run_one(
    setup: str, scenario: str, workdir: Path, lag_time_max_ms: int, warm_up_s: float
) -> dict[str, object]:
    kafka, elr = SETUPS[setup]
    steps = SCENARIOS[scenario]
    settle = 2 * lag_time_max_ms / 1000 + SETTLE_AFTER_2T_S
    ends = ["--seconds", str(settle)] if not steps else ["--after-scenario", str(settle)]
    command = [
        sys.executable,
        "-m",
        "streaming.cli",
        "lab",
        "--kafka",
        kafka,
        *(["--elr", elr] if kafka == "4.1" else []),
        "--scenario",
        scenario,
        *ends,
        "--warm-up",
        str(warm_up_s),
        "--lag-time-max-ms",
        str(lag_time_max_ms),
        "--no-live",
        "--workdir",
        str(workdir),
    ]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    row: dict[str, object] = {"setup": setup, "scenario": scenario}
    if done.returncode != 0:
        said = (done.stdout + done.stderr).splitlines()
        # the lab's own words (librdkafka's and Spark's lines come between them)
        row["error"] = [
            line for line in said if line.startswith(("Error", "error", "Stopping"))
        ] or said[-1:]
        return row
    return row | scored(workdir) | {"wall s": round(time.monotonic() - started)}


def scored(workdir: Path) -> dict[str, object]:
    """The row of the lab run kept in ``workdir``, and what its JSON adds to the table."""
    score, _truth = score_workdir(workdir)
    row: dict[str, object] = score.row()
    row["final differs"] = [f"{t}-{p}: {why}" for (t, p), why in score.final_differs]
    row["changes back to the state shown"] = [
        f"{c.topic}-{c.partition} at {c.ts_ms}" for c in score.restored_changes
    ]
    # each follower named SHRINK_ELIGIBLE or worse, and what Kafka did about it
    row["predictions"] = [
        f"{p.topic}-{p.partition} follower {p.follower} at {p.named_ms}: {p.outcome}"
        for p in score.predictions
    ]
    return row


COLUMNS = (
    "setup",
    "scenario",
    "shrinks committed",
    "by the leader's rule",
    "flagged before commit",
    "named eligible before commit",
    "median lead ms",
    "shrink_by median error ms (n)",
    "shrink_at median error ms (n)",
    "false predictions",
    "final state equal",
    "commit to record p99 ms",
    "batch p99 ms",
    "changes never seen",
    "gated stops (under min ISR)",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setups", default="4.1", help=f"comma-separated: {', '.join(SETUPS)}")
    parser.add_argument(
        "--scenarios",
        default=",".join(name for name in SCENARIOS if name not in ("none", "tour")),
        help="comma-separated scenario names",
    )
    parser.add_argument("--lag-time-max-ms", type=int, default=10_000)
    parser.add_argument(
        "--warm-up",
        type=float,
        default=WARM_UP_S,
        help="seconds from the job's first micro-batch to the scenario's first step",
    )
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/isrwatch-real-kafka"))
    parser.add_argument("--out", type=Path, default=None, help="also write the rows as JSON")
    parser.add_argument(
        "--rescore",
        action="store_true",
        help="score the runs kept under --workdir again, starting nothing",
    )
    options = parser.parse_args()
    rows = []
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for setup in options.setups.split(","):
        for scenario in options.scenarios.split(","):
            workdir = options.workdir / f"{setup}-{scenario}"
            if workdir.exists() and not options.rescore:
                shutil.rmtree(workdir)
            if options.rescore:
                if not (workdir / "cluster.json").exists():
                    continue
                row = {"setup": setup, "scenario": scenario} | scored(workdir)
            else:
                row = run_one(setup, scenario, workdir, options.lag_time_max_ms, options.warm_up)
            rows.append(row)
            if "error" in row:
                print(f"| {setup} | {scenario} | failed: {row['error']} |", flush=True)
            else:
                print("| " + " | ".join(str(row.get(c)) for c in COLUMNS) + " |", flush=True)
    if options.out is not None:
        options.out.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
