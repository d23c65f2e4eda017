"""Planning a micro-batch from offsets alone: how far each partition advances under the read
limits, and the input partitions Spark hands to the readers."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from state.events import MOST_ROWS_PER_PACK
from streaming.job.kafka_source.options import SOURCE_NAME

log = logging.getLogger("isrwatch.kafka_source")


def offset_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def split_offset_key(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition(":")
    return topic, int(partition)


def offsets_of(value: Mapping[str, Any] | None) -> dict[str, int]:
    return {str(key): int(offset) for key, offset in (value or {}).items()}


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    """Records ``start <= offset < end`` of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int


def per_partition_cap(limit: ReadLimit, default: int) -> int | None:
    """Spark's read limits have no per-partition kind: ``ReadMaxRows(n)`` is read as at most
    ``n`` records per topic-partition, ``ReadAllAvailable`` (Trigger.Once) lifts the cap,
    and any other limit gets the configured ``default``."""
    if isinstance(limit, ReadAllAvailable):
        return None
    if isinstance(limit, ReadMaxRows):
        return max(1, int(limit.max_rows))
    return default


def advance(
    start: Mapping[str, int],
    ends: Mapping[str, int],
    beginnings: Mapping[str, int],
    exact: set[str],
    cap: int | None,
) -> dict[str, int]:
    """The next micro-batch's end offsets: each known partition moves towards its end, by at
    most ``cap`` records; a new partition is registered at its beginning (read from the
    next micro-batch); one whose exact end went behind what was read (topic re-created,
    records lost) starts again from its beginning."""
    result = dict(start)  # partitions not seen this time keep their offset
    for key, end in ends.items():
        first = start.get(key)
        if first is None:
            if key in beginnings:  # new: registered now, read from the next micro-batch
                result[key] = beginnings[key]
                log.info("%s: new partition %s from offset %d", SOURCE_NAME, key, result[key])
        elif end < first:
            if key in exact and key in beginnings:
                log.warning(
                    "%s: %s ends at offset %d, before offset %d already read (topic "
                    "re-created or records lost?): reading again from offset %d",
                    SOURCE_NAME,
                    key,
                    end,
                    first,
                    beginnings[key],
                )
                result[key] = beginnings[key]
        else:
            result[key] = end if cap is None else min(end, first + cap)
    return result


def cap_events(
    start: Mapping[str, int],
    planned: Mapping[str, int],
    cap: int,
    events_per_record: Callable[[str, int, int], float | None],
) -> dict[str, int]:
    """``planned`` (at most ``cap`` records a partition: ``advance``) cut so that each
    partition reads about ``cap`` events at the most. A JSON record is one event, a fetch
    pack one record of up to ``MOST_ROWS_PER_PACK``: only a partition planned to read
    more records than ``cap / MOST_ROWS_PER_PACK`` can hold more than ``cap`` events, and
    only there is the mean number of events per record asked (``events_per_record(key,
    start, end)``, from the records at its start). A partition that reads then gets
    ``cap / mean`` records, at least one."""
    capped = dict(planned)
    for key, end in planned.items():
        first = start.get(key)
        if first is None or end - first <= cap // MOST_ROWS_PER_PACK:
            continue
        mean = events_per_record(key, first, end)
        if mean is not None and mean > 1:
            capped[key] = min(end, first + max(1, math.floor(cap / mean)))
    return capped


def records_to_read(start: Mapping[str, int], ends: Mapping[str, int]) -> dict[str, int]:
    """The records each partition reads from ``start`` to ``ends``, for the partitions
    that read any (not one only registered, with no start, nor one going back)."""
    return {key: end - start[key] for key, end in ends.items() if key in start and end > start[key]}


def planned_events(
    start: Mapping[str, int],
    ends: Mapping[str, int],
    events_per_record: Callable[[str], float | None],
) -> float:
    """The events read from ``start`` to ``ends``, estimated: each partition's records
    times its mean events per record (``events_per_record(key)``; one where unknown)."""
    return sum(
        records * (events_per_record(key) or 1.0)
        for key, records in records_to_read(start, ends).items()
    )


def planned_partitions(
    start: Mapping[str, int], end: Mapping[str, int]
) -> list[KafkaInputPartition]:
    """One input partition per topic-partition with records between ``start`` and ``end``;
    a partition only registered (no start) or with nothing new has none."""
    planned = []
    for key in sorted(end):
        first, stop = start.get(key), end[key]
        if first is None or first >= stop:  # registered, or nothing new
            continue
        topic, partition = split_offset_key(key)
        planned.append(KafkaInputPartition(topic, partition, first, stop))
    return planned


def share_out(start: Mapping[str, int], end: Mapping[str, int], limit: int) -> dict[str, int]:
    """``end`` cut so that about ``limit`` records are read from ``start`` in all, as
    Spark's Kafka source shares ``maxOffsetsPerTrigger`` (``KafkaMicroBatchStream``
    ``rateLimit``): a partition with ``n`` of the ``total`` records to read gets
    ``limit * n / total`` of them, rounded down, or one if that is below one (so no
    partition starves; the sum may pass ``limit`` by at most one per partition).
    Partitions with nothing to read (new, or going back to their beginning) are as in
    ``end``."""
    sizes = records_to_read(start, end)
    total = sum(sizes.values())
    if total <= limit:
        return dict(end)
    shared = dict(end)
    for key, size in sizes.items():
        share = limit * size / total
        shared[key] = start[key] + min(size, math.ceil(share) if share < 1 else math.floor(share))
    return shared
