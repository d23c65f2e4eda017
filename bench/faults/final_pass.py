"""The last restart of a fault: ``isrwatch run --available-now`` on the same checkpoint,
in this process, so that its last batch's stats (every shard's checkpointed applied
totals) can be read. Its last batch writes every partition's health evaluated at the
largest event time, which is what replay prints (docs/commands.md)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pandas as pd

from faults.harness import JobSettings
from streaming.config import load_config
from streaming.job.metrics import HealthExporter
from streaming.job.query import run
from streaming.job.shard_state import STATS

ATTEMPTS = 3


def final_pass(settings: JobSettings) -> Counter[str]:
    """Run to the end of the input; the applied totals by event type."""
    config = load_config(None, {**settings.settings(), "metrics.enabled": False}, environ={})
    latest: dict[int, dict[str, Any]] = {}  # shard -> its last stats

    def keep_stats(_batch_id: int, rows: pd.DataFrame) -> None:
        for value in rows[rows["kind"] == STATS]["value"]:
            stats = json.loads(value)
            latest[int(stats["shard"])] = stats

    for attempt in range(1, ATTEMPTS + 1):
        try:
            run(config, available_now=True, exporter=HealthExporter(), on_batch=keep_stats)
            break
        except Exception as error:  # a failed available-now run: run it again
            if attempt == ATTEMPTS:
                raise
            # On a host this busy Spark may fail to start a Python worker in time ("Python
            # worker failed to connect back"); the run goes on from the checkpoint, as the
            # job's own supervisor restarts a failed query.
            print(
                f"   the final run failed ({str(error).splitlines()[0][:200]}); "
                f"running it again from the checkpoint",
                flush=True,
            )
    totals: Counter[str] = Counter()
    for shard in latest.values():
        totals.update(shard["applied_total"])
    return totals
