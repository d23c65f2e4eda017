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

import pandas as pd

from state.causes import Attribution, ClusterShape, UnhealthyPartitions, attribute, with_causes
from streaming.shard_state import HEALTH, TOMBSTONE
from streaming.shard_stats import ShardStats


def unhealthy_records(stats: Sequence[ShardStats]) -> list[dict[str, Any]]:
    """The unhealthy records the shards reported, as health records."""
    return [
        {k: v for k, v in record.items() if k != "replica_lag_time_max_ms"}
        for shard in stats
        for record in shard.unhealthy
    ]


def attribute_shards(
    stats: Sequence[ShardStats],
) -> tuple[list[dict[str, Any]], Attribution]:
    """The shards' unhealthy records and the attribution over the whole cluster."""
    records = unhealthy_records(stats)
    shape = ClusterShape.merge(
        [ClusterShape.from_json(s.cause_shape) for s in stats if s.cause_shape is not None]
    )
    return records, attribute(UnhealthyPartitions.of(records), shape)


class CauseAnnotator:
    """Adds causes to a batch's health rows; re-emits records whose cause changed."""

    def __init__(self) -> None:
        self._written: dict[str, str] = {}  # key -> causes last written, unhealthy only

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
                emit(key, json.loads(value))
        written = set(out_keys)
        for record in records:
            key = f"{record['topic']}:{record['partition']}"
            if key in written:
                continue
            annotated = with_causes(record, causes.get((record["topic"], record["partition"])))
            if self._written.get(key) != _signature(annotated):
                emit(key, record)
        frame = pd.DataFrame({"kind": out_kinds, "key": out_keys, "value": out_values})
        return frame, attribution


def _signature(record: Mapping[str, Any]) -> str:
    """The causes of a record: what decides whether it is written again."""
    followers = [(f["broker"], f["cause"]) for f in record["followers"]]
    return json.dumps([record["cause"], followers], sort_keys=True)
