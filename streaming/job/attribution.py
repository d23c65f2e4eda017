"""Cause attribution on the driver, where the reports of every state shard meet.

A shard sees only its own partitions, while a cause is a pattern across all of them
(``state.causes``). So each shard reports its unhealthy partitions' records and the
shape of its partitions (stats row), and the driver attributes over their union before
the records are written: every unhealthy record gets its ``cause``. The shards write the
records of healthy partitions themselves (they have no cause); the driver writes an
unhealthy partition's record when its health changed, and when its cause changed while
its health did not (a broker falls behind on more partitions), so the compacted topic
holds the current cause. After a driver restart every unhealthy record is written once
more.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from state import (
    Attribution,
    Cause,
    ClusterShape,
    HealthRecord,
    UnhealthyPartitions,
    attribute,
    encode_record,
    with_causes,
)
from streaming.job.shard_state import HEALTH
from streaming.job.shard_stats import ShardStats, UnhealthyPartition


def attribute_shards(
    stats: Sequence[ShardStats],
) -> tuple[list[UnhealthyPartition], Attribution]:
    """The unhealthy partitions the shards reported and the attribution over the whole
    cluster."""
    reported = [partition for shard in stats for partition in shard.unhealthy]
    shape = ClusterShape.merge(
        [ClusterShape.from_json(s.cause_shape) for s in stats if s.cause_shape is not None]
    )
    return reported, attribute(UnhealthyPartitions.of([p.record for p in reported]), shape)


CauseSignature = tuple[Cause | None, tuple[tuple[int, Cause | None], ...]]
"""The causes of a record: the partition's, and each follower's by broker."""


class CauseAnnotator:
    """Writes the unhealthy partitions' records with their causes, next to the shards'
    health rows; re-emits records whose cause changed."""

    def __init__(self) -> None:
        self._written: dict[str, CauseSignature] = {}  # key -> causes last written, unhealthy

    def annotate(
        self, health: pd.DataFrame, stats: Sequence[ShardStats]
    ) -> tuple[pd.DataFrame, Attribution]:
        """``health``: the shards' health and tombstone rows, written as they are (a
        healthy record, or a partition gone, has no cause to remember)."""
        reported, attribution = attribute_shards(stats)
        causes = attribution.causes_by_partition()
        for key in health["key"]:
            self._written.pop(key, None)
        keys: list[str] = []
        values: list[str] = []
        for partition in reported:
            record = partition.record
            annotated = with_causes(record, causes.get((record.topic, record.partition)))
            signature = _signature(annotated)
            if partition.changed or self._written.get(record.key) != signature:
                keys.append(record.key)
                values.append(encode_record(annotated).decode())
                self._written[record.key] = signature
        written = pd.DataFrame({"kind": [HEALTH] * len(keys), "key": keys, "value": values})
        frame = pd.concat([health[["kind", "key", "value"]], written], ignore_index=True)
        return frame, attribution


def _signature(record: HealthRecord) -> CauseSignature:
    return record.cause, tuple((f.broker, f.cause) for f in record.followers)
