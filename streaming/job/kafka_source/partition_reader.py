"""Reading one planned input partition on an executor, with confluent-kafka (librdkafka),
into Arrow record batches of Spark's Kafka source columns."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from streaming.config import librdkafka_names
from streaming.job.kafka_records import VALUE, KafkaRecords
from streaming.job.kafka_source.options import SOURCE_NAME, SourceSettings
from streaming.job.kafka_source.planner import KafkaInputPartition

log = logging.getLogger("isrwatch.kafka_source")

#: Records per poll (and per Arrow batch) when reading.
READ_BATCH_RECORDS = 10_000
READ_BATCH_BYTES = 32 * 1024 * 1024
"""The most bytes of record values in one reader batch (a record larger alone makes one).
Routing decodes a reader batch whole: its columns, their gather into shard order and the
packs it writes all grow with the batch's events. A partition's range in a micro-batch
holds up to the cap's events (``kafka.max_events_per_partition_per_batch``, 3,000,000 by
default); in fetch packs, about 80 bytes an event, that is hundreds of records, which
:data:`READ_BATCH_RECORDS` let through as one batch. In batches of at most 32 MiB (about
400,000 events of packs) routing 4 partitions of 1,000,000 events grew the process by
166 MiB instead of 357, at 0.32 instead of 0.38 us of CPU an event; each batch writes a
pack per shard, so smaller batches cost the shard step more packs to read
(``bench/fetch_path_bench.py --events 4000000``). JSON records, about 200 bytes an
event, meet :data:`READ_BATCH_RECORDS` first."""
FIRST_POLL_RECORDS = 32
"""Records the first poll of a read asks for, before it knows how large they are: 32
records of up to Kafka's default 1 MB (``message.max.bytes``) stay near
:data:`READ_BATCH_BYTES`."""
#: Where read tasks report stalled partitions: a directory next to the status file.
READ_STATUS_SUFFIX = ".reads"
#: librdkafka errors that say the broker is not reachable (a read reports its stall at once).
_UNREACHABLE_ERRORS = ("_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_RESOLVE")


#: The columns of Spark's Kafka source.
SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
)


@cache
def _arrow_schema() -> Any:
    """The Arrow schema Spark expects of a Python data source's record batches (made
    once: each reader batch asks for it, twice on the way to Spark's columns)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(SCHEMA, timezone="UTC")


def read_status_dir(status_file: str | Path) -> Path:
    """The directory where read tasks report stalled partitions (one JSON file each)."""
    return Path(f"{status_file}{READ_STATUS_SUFFIX}")


class ReadStall:
    """A read task's report of its partition to the exporter: ``{"stalled_since": epoch s,
    "error": ...}`` in ``read_status_dir(statusFile)/<topic>-<partition>.json`` while Kafka
    gives nothing although the range holds records; the file is removed once the read
    progresses again. A stall older than the planner's last success is over (the broker
    answered since), whatever a task killed mid-stall left behind."""

    def __init__(self, settings: SourceSettings, topic: str, partition: int) -> None:
        status = settings.status_file
        self.path = read_status_dir(status) / f"{topic}-{partition}.json" if status else None
        self.stalled = False

    def report(self, error: str) -> None:
        if self.stalled or self.path is None:
            return
        self.stalled = True
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_name(self.path.name + ".tmp")
            partial.write_text(
                json.dumps({"stalled_since": time.time(), "error": error}), encoding="utf-8"
            )
            os.replace(partial, self.path)
        except OSError as problem:
            log.warning("%s: cannot write the read status %s: %s", SOURCE_NAME, self.path, problem)

    def progressed(self) -> None:
        if not self.stalled or self.path is None:
            return
        self.stalled = False
        with contextlib.suppress(OSError):
            self.path.unlink()


def librdkafka_config(settings: SourceSettings) -> dict[str, Any]:
    """The reader's consumer settings for confluent-kafka (librdkafka), from the same
    kafka-python client options the driver's clients use (``KafkaSettings``)."""
    config: dict[str, Any] = {
        "bootstrap.servers": ",".join(settings.bootstrap_servers),
        # librdkafka wants a group for a consumer; offsets are assigned, never committed.
        "group.id": "isrwatch-source-reader",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",  # records gone (retention): go on from the first
        "allow.auto.create.topics": False,
        "socket.timeout.ms": settings.request_timeout_ms,
        "fetch.wait.max.ms": 100,
        # librdkafka's default, what a read task fetches ahead of its polls: two polls of
        # READ_BATCH_BYTES (at 256 MB it held a whole range of the cap's events ahead)
        "queued.max.messages.kbytes": 65536,
        "log_level": 3,  # errors only: the reader reports its own failures
    }
    config.update(librdkafka_names(settings.client_options))
    return config


def read_partition(settings: SourceSettings, part: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
    """The records ``part.start <= offset < part.end`` of one topic-partition, in order,
    as Arrow record batches of Spark's Kafka source columns (:func:`read_records`)."""
    for records in read_records(settings, part):
        yield _with_values(records)


def read_records(settings: SourceSettings, part: KafkaInputPartition) -> Iterator[KafkaRecords]:
    """The records ``part.start <= offset < part.end`` of one topic-partition, in order,
    their values as confluent-kafka hands them (``streaming.job.kafka_records``); raises
    RuntimeError when the broker makes no progress for ``settings.read_timeout_ms``.
    Read with confluent-kafka (librdkafka): ten times kafka-python's records/s on one
    core (``bench/stream_bench.py``)."""
    from confluent_kafka import Consumer, KafkaException, Message
    from confluent_kafka import TopicPartition as ConfluentPartition

    where = f"{part.topic}:{part.partition} offsets [{part.start}, {part.end})"
    try:
        consumer = Consumer(librdkafka_config(settings))
    except KafkaException as error:
        raise RuntimeError(
            f"{SOURCE_NAME}: cannot make a Kafka consumer for "
            f"{','.join(settings.bootstrap_servers)} to read {where}: {error}"
        ) from error
    timeout_s = settings.read_timeout_ms / 1000
    stall = ReadStall(settings, part.topic, part.partition)
    try:
        consumer.assign([ConfluentPartition(part.topic, part.partition, part.start)])
        position = part.start
        progress_at = time.monotonic()
        records_read = bytes_read = 0
        while position < part.end:
            # consume() returns once it has this many messages or at the timeout: ask for
            # no more than the range holds, so that a short range costs no waiting.
            wanted = records_wanted(part.end - position, records_read, bytes_read)
            messages = consumer.consume(wanted, timeout=min(1.0, timeout_s))
            records = [m for m in messages if m.error() is None]
            if records:
                offsets = np.fromiter(map(Message.offset, records), np.int64, len(records))
                keep = (offsets >= part.start) & (offsets < part.end)
                if not keep.all():
                    records = [m for m, k in zip(records, keep.tolist(), strict=True) if k]
                    offsets = offsets[keep]
                if records:
                    stall.progressed()
                    values = list(map(Message.value, records))
                    sizes = np.fromiter((len(v or b"") for v in values), np.int64, len(values))
                    records_read += len(records)
                    bytes_read += int(sizes.sum())
                    for start, end in runs_within(sizes, READ_BATCH_BYTES):
                        yield _kafka_records(
                            part.topic,
                            part.partition,
                            records[start:end],
                            offsets[start:end],
                            values[start:end],
                        )
                    position = int(offsets[-1]) + 1
                    progress_at = time.monotonic()
                    continue
            unreachable = _unreachable(messages)
            if unreachable is not None:
                stall.report(unreachable)
            elif time.monotonic() - progress_at > settings.request_timeout_ms / 1000:
                stall.report(f"no records for {settings.request_timeout_ms} ms")
            if time.monotonic() - progress_at > timeout_s:
                errors = "; ".join(str(m.error()) for m in messages if m.error() is not None)
                raise RuntimeError(
                    f"{SOURCE_NAME}: reading {where}: no progress at offset {position} for "
                    f"{timeout_s:.0f} s; is Kafka at {','.join(settings.bootstrap_servers)} "
                    f"answering? {errors} (Spark retries the task)"
                )
    finally:
        with contextlib.suppress(Exception):
            consumer.close()


def records_wanted(remaining: int, records_read: int, bytes_read: int) -> int:
    """How many records a poll asks for: what the range still holds (``remaining``), at
    most :data:`READ_BATCH_RECORDS`, and about :data:`READ_BATCH_BYTES` of values at the
    mean size of the records read so far (:data:`FIRST_POLL_RECORDS` before the first).
    The records a poll returns are held until routed: asked for whole, a range of the
    cap's events in packs was a few hundred MB in each read task."""
    if records_read:
        fits = READ_BATCH_BYTES * records_read // max(1, bytes_read)
    else:
        fits = FIRST_POLL_RECORDS
    return max(1, min(READ_BATCH_RECORDS, remaining, fits))


def runs_within(sizes: npt.NDArray[np.int64], budget: int) -> Iterator[tuple[int, int]]:
    """Consecutive runs ``[start, end)`` of records that cover them all in order, each as
    long as its records' ``sizes`` sum to at most ``budget``; a record larger than
    ``budget`` is a run alone."""
    ends = np.cumsum(sizes)
    start = 0
    while start < len(sizes):
        before = int(ends[start - 1]) if start else 0
        end = int(np.searchsorted(ends, before + budget, side="right"))
        end = max(end, start + 1)
        yield start, end
        start = end


def _unreachable(messages: Sequence[Any]) -> str | None:
    """The first error among ``messages`` that says the broker is not reachable."""
    for message in messages:
        error = message.error()
        if error is not None and error.name() in _UNREACHABLE_ERRORS:
            return str(error)
    return None


def _kafka_records(
    topic: str,
    partition: int,
    messages: Sequence[Any],
    offsets: npt.NDArray[np.int64],
    values: list[bytes | None],
) -> KafkaRecords:
    """confluent-kafka messages as the source's columns, with their ``values`` (Python
    bytes, taken once by the caller, which sized the reader batch by them; one C call per
    field and record)."""
    from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Message

    count = len(messages)
    stamps = list(map(Message.timestamp, messages))  # (type, ms); types 1 create, 2 append
    kinds = np.fromiter((kind for kind, _ in stamps), np.int32, count)
    millis = np.fromiter((ms for _, ms in stamps), np.int64, count)
    missing = kinds == TIMESTAMP_NOT_AVAILABLE
    schema = _arrow_schema()
    coordinates = pa.RecordBatch.from_arrays(
        [
            pa.array(list(map(Message.key, messages)), pa.binary()),
            pa.repeat(pa.scalar(topic), count),
            pa.repeat(pa.scalar(partition, pa.int32()), count),
            pa.array(offsets),
            pa.array(millis * 1000, pa.int64(), mask=missing).cast(pa.timestamp("us", tz="UTC")),
            pa.array(kinds - 1, pa.int32(), mask=missing),  # Spark's 0 create, 1 append
        ],
        schema=schema.remove(schema.get_field_index(VALUE)),
    )
    return KafkaRecords(coordinates, values)


def _with_values(records: KafkaRecords) -> pa.RecordBatch:
    """Spark's Kafka source columns of ``records``."""
    schema = _arrow_schema()
    where = schema.get_field_index(VALUE)
    values = pa.array(records.values, pa.binary())
    return records.coordinates.add_column(where, schema.field(where), values)
