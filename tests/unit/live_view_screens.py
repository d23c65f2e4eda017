"""The demo's live view on a fixed cluster, in this terminal.

Run: ``python -m tests.unit.live_view_screens``.

The cluster health here is SYNTHETIC, written by hand in the job's stats format so that
every section of the view has a known content (tests/unit/test_live_view_terminal.py runs
this module in a pseudo-terminal and reads the screen). At ``NOW``:

* predicted shrinks: orders-1 follower 3 (deadline NOW + 2 000, lag 43 000, 800 behind)
  and orders-0 follower 2 (deadline NOW + 7 300, lag 37 700, 1 200 behind);
* overdue shrink: payments-0 follower 2 (deadline NOW - 12 000, lag 57 000, offset unknown);
* offline: orders-2 (no leader, ISR [3]);
* under min ISR: orders-3 (leader 2, ISR [2]);
* under-replicated: orders-4 .. orders-9;
* other followers not in sync: 9 (orders-2's, orders-3's two, one per orders-4 .. 9);
* no stale metadata.

While the view runs, it writes to Python's warnings, sys.stderr and file descriptors 1
and 2, as pandas, PySpark and Spark's JVM do: none of it may reach the screen.
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console

from streaming.job.shard_state import STATS
from streaming.job.shard_stats import ShardStats, encode
from streaming.tools.cluster_health import ClusterHealth
from streaming.tools.foreground import output_to_log
from streaming.tools.live_view import render, show_live
from tests.unit.test_metrics import shard_stats

B = 1_700_000_000_000
NOW = B + 100_000
T = 30_000
HEADER = "isrwatch: screens x1 | cluster 22:13:30"
NOISE = "NOISE-THAT-BELONGS-IN-THE-LOG"


def follower(broker: int, status: str, **fields: Any) -> dict[str, Any]:
    record = {
        "broker": broker,
        "in_isr": status.startswith(("SHRINK", "LAGGING")),
        "fetch_offset": None,
        "last_caught_up_ms": None,
        "lag_time_ms": None,
        "lag_time_unknown": "NEVER_CAUGHT_UP",
        "lag_messages": None,
        "status": status,
    }
    record.update(fields)
    if record["lag_time_ms"] is not None:
        record["lag_time_unknown"] = None
    return record


def partition(
    topic: str,
    number: int,
    leader: int,
    isr: list[int],
    replicas: list[int],
    followers: list[dict[str, Any]],
    **flags: bool,
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "topic": topic,
        "partition": number,
        "as_of_ms": NOW,
        "leader": leader,
        "leader_epoch": 3,
        "replicas": replicas,
        "isr": isr,
        "high_watermark": 1_000,
        "leader_leo": 2_000,
        "under_replicated": len(isr) < len(replicas),
        "under_min_isr": False,
        "at_min_isr": False,
        "offline": False,
        "predicted_under_replicated": False,
        "followers": followers,
        "metadata": {
            "stale_brokers": [],
            "state": "CONSISTENT",
            "blackout_earliest_ms": None,
            "blackout_latest_ms": None,
        },
        "replica_lag_time_max_ms": T,
    }
    record.update(flags)
    return record


def unhealthy() -> list[dict[str, Any]]:
    eligible = "SHRINK_ELIGIBLE"
    records = [
        partition(
            "orders",
            0,
            1,
            [1, 2, 3],
            [1, 2, 3],
            [
                follower(
                    2, eligible, lag_time_ms=37_700, lag_messages=1_200, shrink_by_ms=NOW + 7_300
                ),
            ],
            predicted_under_replicated=True,
        ),
        partition(
            "orders",
            1,
            1,
            [1, 2, 3],
            [1, 2, 3],
            [
                follower(
                    3, eligible, lag_time_ms=43_000, lag_messages=800, shrink_by_ms=NOW + 2_000
                ),
            ],
            predicted_under_replicated=True,
        ),
        partition(
            "payments",
            0,
            1,
            [1, 2],
            [1, 2],
            [
                follower(2, "SHRINK_OVERDUE", lag_time_ms=57_000, shrink_by_ms=NOW - 12_000),
            ],
        ),
        partition(
            "orders", 2, -1, [3], [1, 3], [follower(1, "OFFLINE")], offline=True, under_min_isr=True
        ),
        partition(
            "orders",
            3,
            2,
            [2],
            [1, 2, 3],
            [
                follower(1, "OFFLINE"),
                follower(3, "OUT_OF_SYNC", fetch_offset=1_950, lag_messages=50),
            ],
            under_min_isr=True,
        ),
    ]
    for number in range(4, 10):
        lag = 1_000 * number
        records.append(
            partition(
                "orders",
                number,
                1,
                [1, 2],
                [1, 2, 3],
                [
                    follower(3, "CATCHING_UP", lag_time_ms=lag, lag_messages=10 * number),
                ],
            )
        )
    return records


def stats() -> ShardStats:
    records = unhealthy()
    topics: dict[str, dict[str, Any]] = {}
    for record in records:
        gauges = topics.setdefault(
            record["topic"],
            {
                "partitions": 0,
                "followers": Counter(),
                "metadata_stale_expected": 0,
                "metadata_stale_overdue": 0,
            },
        )
        gauges["partitions"] += 1
        for flag in (
            "under_replicated",
            "under_min_isr",
            "at_min_isr",
            "offline",
            "predicted_under_replicated",
        ):
            gauges[flag] = gauges.get(flag, 0) + int(record[flag])
        gauges["followers"].update(f["status"] for f in record["followers"])
        gauges["followers"]["IN_SYNC"] += 1
    for gauges in topics.values():
        gauges["followers"] = dict(gauges["followers"])
    return shard_stats(
        0, now_ms=NOW, partitions=len(records), topics=topics, brokers={}, unhealthy=records
    )


def facts() -> list[dict[str, Any]]:
    return [
        {
            "ts": B + 1_000 * i,
            "kind": "isr_expand",
            "topic": "orders",
            "partition": i,
            "leader": 1,
            "follower": 3,
        }
        for i in range(10)
    ]


def cluster_health() -> ClusterHealth:
    health = ClusterHealth()
    rows = pd.DataFrame([{"kind": STATS, "key": "0", "value": encode(stats())}])
    health.on_batch(0, rows)
    return health


def make_noise(frame: int) -> None:
    warnings.warn(f"{NOISE} {frame}", FutureWarning, stacklevel=1)  # as PySpark's pandas 3 one
    print(f"{NOISE} stdout {frame}", flush=True)
    print(f"{NOISE} stderr {frame}", file=sys.stderr, flush=True)
    os.write(2, f"{NOISE} fd 2 (a Java stack trace) {frame}\n".encode())


def main() -> None:
    health = cluster_health()
    frames = iter(range(4))

    def finished() -> str | None:
        frame = next(frames, None)
        if frame is None:
            return "done"
        make_noise(frame)
        return None

    default = Path(tempfile.gettempdir()) / f"isrwatch-view-{os.getpid()}.log"
    log_path = Path(os.environ.get("ISRWATCH_VIEW_LOG", default))
    with output_to_log(log_path) as terminal:
        console = Console(file=terminal)
        show_live(console, lambda: render(health.snapshot(), HEADER, facts()), finished, 0.1)


if __name__ == "__main__":
    main()
