"""Parse the raw Kafka records of a micro-batch and route them to state shards.

A fetch response goes to the shard that owns its partition. A controller event goes to
every shard: each one keeps the cluster-wide state and the leaders' propagation windows,
and the owner of a partition its partition state (``state.model``). A record that breaks
the contract becomes a dead-letter row; it travels with shard 0 to the sinks.

Pure pandas, so that it is tested without Spark; the job runs it with ``mapInPandas``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict

import pandas as pd

from state.event_parser import parse_record
from state.events import DeadLetter, FetchResponse, Source
from state.follower_fetch_state import WIRE_COLUMNS
from state.sharding import shard_of

FETCH = "fetch"
CONTROLLER = "controller"
DEAD = "dead"

ROUTED_SCHEMA = (
    "shard int, kind string, ts long, src_topic string, src_partition int, src_offset long, "
    "source string, value string, reason string, detail string, "
    "topic string, partition long, leader long, follower long, leader_epoch long, "
    "fetch_offset long, leader_leo long, high_watermark long, error string"
)
"""One row per routed event (a controller event once per shard)."""

ROUTED_COLUMNS = [part.strip().split(" ")[0] for part in ROUTED_SCHEMA.split(",")]
FETCH_FIELDS = [name for name in WIRE_COLUMNS if name != "ts"]


def route(records: pd.DataFrame, sources: Mapping[str, Source], shards: int) -> pd.DataFrame:
    """Routed rows of Kafka records (columns of Spark's Kafka source).

    ``sources`` maps each input topic name to what it carries. A dead letter has no
    ``ts``: it has no valid event time, and it must not move the stream's clock.
    """
    rows: list[dict[str, object]] = []
    coordinates = zip(
        records["topic"], records["partition"], records["offset"], records["value"], strict=True
    )
    for topic, kafka_partition, offset, value in coordinates:
        where = {"src_topic": topic, "src_partition": int(kafka_partition),
                 "src_offset": int(offset)}  # fmt: skip
        source = sources[topic]
        parsed = parse_record(source, value)
        if isinstance(parsed, DeadLetter):
            rows.append({
                **where, "shard": 0, "kind": DEAD, "ts": None,
                "source": source.value, "value": parsed.raw, "reason": parsed.reason.value,
                "detail": parsed.detail,
            })  # fmt: skip
            continue
        text = value.decode("utf-8") if isinstance(value, bytes | bytearray) else str(value)
        if isinstance(parsed, FetchResponse):
            fields = asdict(parsed)
            rows.append({
                **where, "shard": shard_of(parsed.topic, parsed.partition, shards),
                "kind": FETCH, "ts": parsed.ts, "source": source.value, "value": text,
                **{name: fields[name] for name in FETCH_FIELDS},
            })  # fmt: skip
        else:
            for shard in range(shards):
                rows.append({
                    **where, "shard": shard, "kind": CONTROLLER, "ts": parsed.ts,
                    "source": source.value, "value": text,
                })  # fmt: skip
    return conform(pd.DataFrame(rows, columns=ROUTED_COLUMNS), ROUTED_SCHEMA)


def conform(frame: pd.DataFrame, schema: str) -> pd.DataFrame:
    """``frame`` with the column types of the DDL ``schema``, as PySpark 4.3 takes them
    back from a pandas UDF under pandas 3: strings as Python objects with None for
    null (an all-NaN float column, or pandas 3's Arrow-backed strings, reach Arrow as a
    ChunkedArray that ``RecordBatch.from_arrays`` refuses), integers as nullable ints."""
    for part in schema.split(","):
        name, kind = part.split()
        if kind == "string":
            column = frame[name].astype("object")
            # pandas-stubs 2.3 does not type None as ``other``; pandas takes it
            frame[name] = column.where(column.notna(), None)  # type: ignore[call-overload]
        elif kind == "int":
            frame[name] = frame[name].astype("Int32")
        elif kind == "long":
            frame[name] = frame[name].astype("Int64")
        else:
            raise ValueError(f"no pandas type for {kind!r} ({name})")
    return frame


def route_batches(
    batches: Iterator[pd.DataFrame], sources: Mapping[str, Source], shards: int
) -> Iterator[pd.DataFrame]:
    """``mapInPandas`` form of :func:`route`."""
    for records in batches:
        yield route(records, sources, shards)
