"""Cluster health as the job's output tells it, for the demo and its terminal view.

``ClusterHealth`` collects what the job's sink hands over after every micro-batch (each
shard's stats row: gauges and the records of its unhealthy partitions) and the dead
letters; ``snapshot()`` merges the latest report of every shard.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from streaming.job.routing import DEAD
from streaming.job.shard_stats import ShardStats, UnhealthyPartition
from streaming.job.sinks import dead_letters_by_reason, shard_stats_of

CONDITIONS = ("offline", "under_min_isr", "under_replicated", "predicted_under_replicated")
COUNTED = (*CONDITIONS, "metadata_stale_expected", "metadata_stale_overdue")


@dataclass
class HealthSnapshot:
    """The latest report of every shard, merged."""

    batches: int = 0
    now_ms: int | None = None
    partitions: int = 0
    totals: Counter[str] = field(default_factory=Counter)
    followers: Counter[str] = field(default_factory=Counter)
    unhealthy: list[UnhealthyPartition] = field(default_factory=list)
    dead_letters: Counter[str] = field(default_factory=Counter)


class ClusterHealth:
    """Thread-safe collector of the job's per-batch output (the sink's ``on_batch``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shards: dict[int, ShardStats] = {}
        self._batches = 0
        self._dead_letters: Counter[str] = Counter()
        self.peaks: Counter[str] = Counter()  # the most partitions seen in each condition
        self.first_seen_ms: dict[str, int] = {}  # event time each condition first appeared

    def on_batch(self, _batch_id: int, rows: pd.DataFrame) -> None:
        dead = rows[rows["kind"] == DEAD]
        with self._lock:
            for stats in shard_stats_of(rows):
                self._shards[stats.shard] = stats
            for (_source, reason), count in dead_letters_by_reason(dead).items():
                self._dead_letters[reason] += count
            self._batches += 1
            snapshot = self._snapshot()
            for condition in COUNTED:
                count = snapshot.totals[condition]
                self.peaks[condition] = max(self.peaks[condition], count)
                if count and snapshot.now_ms is not None:
                    self.first_seen_ms.setdefault(condition, snapshot.now_ms)

    def snapshot(self) -> HealthSnapshot:
        with self._lock:
            return self._snapshot()

    def _snapshot(self) -> HealthSnapshot:
        snapshot = HealthSnapshot(self._batches, dead_letters=Counter(self._dead_letters))
        for stats in self._shards.values():
            now = stats.now_ms
            snapshot.now_ms = max(now, snapshot.now_ms or now)
            snapshot.partitions += stats.partitions
            for gauges in stats.topics.values():
                for condition in COUNTED:
                    snapshot.totals[condition] += int(getattr(gauges, condition))
                snapshot.followers.update(gauges.followers)
            snapshot.unhealthy.extend(stats.unhealthy)
        snapshot.unhealthy.sort(key=lambda p: (p.record.topic, p.record.partition))
        return snapshot
