"""Cause attribution on the driver, where the reports of every state shard meet.

A shard sees only its own partitions, while a cause is a pattern across all of them
(``state.causes``). So each shard reports its unhealthy partitions' records and the
shape of its partitions (stats row), and the driver attributes over their union before
the health records are written: every record gets its ``cause``. A partition's cause can
change while its own health does not (a broker falls behind on more partitions): its
record is then written again, from the shard's report, so the compacted topic holds
the current cause. After a driver restart every unhealthy record is written once more.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import pandas as pd

from state import Attribution, ClusterShape, UnhealthyPartitions, attribute, with_causes
from streaming.job.shard_state import HEALTH, TOMBSTONE
from streaming.job.shard_stats import ShardStats

_DECODER = msgspec.json.Decoder()


LAG_TIME_MAX = "replica_lag_time_max_ms"
"""What a shard's unhealthy record has beyond the health record (for the metrics)."""


def as_health_record(reported: Mapping[str, Any]) -> dict[str, Any]:
    """A shard's unhealthy record as the health record it stands for."""
    return {k: v for k, v in reported.items() if k != LAG_TIME_MAX}


def attribute_shards(
    stats: Sequence[ShardStats],
) -> tuple[list[dict[str, Any]], Attribution]:
    """The unhealthy records the shards reported (with ``replica_lag_time_max_ms``; see
    :func:`as_health_record`) and the attribution over the whole cluster."""
    records = [record for shard in stats for record in shard.unhealthy]
    shape = ClusterShape.merge(
        [ClusterShape.from_json(s.cause_shape) for s in stats if s.cause_shape is not None]
    )
    return records, attribute(UnhealthyPartitions.of(records), shape)


class CauseAnnotator:
    """Adds causes to a batch's health rows; re-emits records whose cause changed."""

    def __init__(self) -> None:
        self._written: dict[str, CauseSignature] = {}  # key -> causes last written, unhealthy

    def annotate(
        self, health: pd.DataFrame, stats: Sequence[ShardStats]
    ) -> tuple[pd.DataFrame, Attribution]:
        records, attribution = attribute_shards(stats)
        causes = attribution.causes_by_partition()
        out_keys: list[str] = []
        out_kinds: list[str] = []
        out_values: list[str | None] = []

        def emit(key: str, record: Mapping[str, Any]) -> None:
            annotated = with_causes(record, causes.get((record["topic"], record["partition"])))
            out_keys.append(key)
            out_kinds.append(HEALTH)
            out_values.append(json.dumps(annotated))
            if annotated["cause"] is None:
                self._written.pop(key, None)
            else:
                self._written[key] = _signature(annotated)

        for kind, key, value in zip(health["kind"], health["key"], health["value"], strict=True):
            if kind == TOMBSTONE:
                out_keys.append(key)
                out_kinds.append(TOMBSTONE)
                out_values.append(None)
                self._written.pop(key, None)
            else:
                emit(key, _DECODER.decode(value))
        written = set(out_keys)
        for reported in records:
            key = f"{reported['topic']}:{reported['partition']}"
            if key in written:
                continue
            record = as_health_record(reported)
            annotated = with_causes(record, causes.get((record["topic"], record["partition"])))
            if self._written.get(key) != _signature(annotated):
                emit(key, record)
        frame = pd.DataFrame({"kind": out_kinds, "key": out_keys, "value": out_values})
        return frame, attribution


CauseSignature = tuple[object, ...]


def _signature(record: Mapping[str, Any]) -> CauseSignature:
    """The causes of a record: what decides whether it is written again (equal exactly
    when the causes are: a cause is a flat dict of str, int and None)."""
    return (
        _items(record["cause"]),
        *((f["broker"], _items(f["cause"])) for f in record["followers"]),
    )


def _items(cause: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...] | None:
    return None if cause is None else tuple(sorted(cause.items()))
