"""Which shard of the streaming job holds a partition.

The job groups its state by shard, not by partition (architecture.md: per-group calls
cost too much at 100,000 partitions). The hash must be stable across processes and
runs (it decides where checkpointed state lives), so it is CRC-32, not ``hash()``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass


def shard_of(topic: str, partition: int, shards: int) -> int:
    return zlib.crc32(f"{topic}:{partition}".encode()) % shards


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count``: owns the partitions that hash to it."""

    index: int
    count: int

    def owns(self, topic: str, partition: int) -> bool:
        return shard_of(topic, partition, self.count) == self.index

    @property
    def reports_cluster_events(self) -> bool:
        """Events that concern no single partition are counted by shard 0 only."""
        return self.index == 0
