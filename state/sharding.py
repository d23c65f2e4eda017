"""Which shard of the streaming job holds a partition.

The job groups its state by shard, not by partition (docs/architecture.md: per-group calls
cost too much at 100,000 partitions). The hash must be stable across processes and
runs (it decides where checkpointed state lives), so it is CRC-32, not ``hash()``.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


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


class ShardLookup:
    """:func:`shard_of` for whole columns: each topic's partitions are hashed once (per
    process), then a batch is one gather. Partition numbers are below 1,000,000 (the
    fetch-responses schema)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._tables: dict[str, npt.NDArray[np.int32]] = {}

    def _table(self, topic: str, size: int) -> npt.NDArray[np.int32]:
        table = self._tables.get(topic)
        if table is None or len(table) < size:
            size = max(size, 1024, 0 if table is None else 2 * len(table))
            prefix = zlib.crc32(f"{topic}:".encode())
            table = np.fromiter(
                (zlib.crc32(str(p).encode(), prefix) % self.count for p in range(size)),
                dtype=np.int32,
                count=size,
            )
            self._tables[topic] = table
        return table

    def shards(
        self,
        topic_codes: npt.NDArray[np.intp],
        topic_names: Sequence[str],
        partitions: npt.NDArray[np.int64],
    ) -> npt.NDArray[np.int32]:
        """The shard of each ``(topic_names[topic_codes[i]], partitions[i])``."""
        if len(partitions) == 0:
            return np.zeros(0, dtype=np.int32)
        needed = np.zeros(len(topic_names), dtype=np.int64)
        np.maximum.at(needed, topic_codes, partitions + 1)
        tables = [
            self._table(name, int(size)) for name, size in zip(topic_names, needed, strict=True)
        ]
        base = np.cumsum([0] + [len(t) for t in tables[:-1]])
        return np.concatenate(tables)[base[topic_codes] + partitions]


_LOOKUPS: dict[int, ShardLookup] = {}


def shard_lookup(count: int) -> ShardLookup:
    """The process-wide lookup for ``count`` shards (Spark reuses its Python workers)."""
    return _LOOKUPS.setdefault(count, ShardLookup(count))
