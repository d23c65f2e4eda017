"""Parse the raw Kafka records of a micro-batch and route them to state shards.

* Fetch responses are decoded and validated as a whole batch (``state.fetch_decoder``)
  and travel as typed columns, without their raw value, to the shard that owns their
  partition: packed, one routed row (kind ``fetches``) per shard per input batch, whose
  ``event`` is an Arrow IPC stream of the fetch columns (:func:`pack_fetches`). Spark
  then moves, shuffles and converts a few rows per micro-batch instead of one per fetch
  (each of its per-row steps cost more than the shard's work on that fetch:
  ``docs/pipeline.md``); the shard reads the packs' columns as they are
  (:func:`read_packs`, ``streaming.job.shard_events``). :func:`unpack_fetches` makes
  them rows again, one per fetch, for tests and benches.
* Controller events are parsed and validated here, once; each shard receives the part
  of an event it needs (``state.controller_routing``), pickled, with a digest of the
  record for duplicate detection. Only the copy that counts the event carries its raw
  text (it is the one that may become a late or duplicate dead letter).
* A record that breaks the contract becomes a dead-letter row with its raw value; it
  travels with shard 0 to the sinks.

Arrow in, Arrow out (the job runs :func:`route_arrow_batches` with ``mapInArrow``, or its
own source reader :func:`route_record_batches` on the records it reads, their values
still Python bytes: ``streaming.job.kafka_records``); the pandas form :func:`route` is
the same function, for tests without Spark.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from state import (
    CLUSTER_SHARD,
    ControllerEpochSeen,
    decode_controller_events,
    decode_fetch_records,
    route_controller_events,
    shard_lookup,
)
from state.events import DeadLetter, Source
from streaming.job.kafka_records import KafkaRecords

FETCH = "fetch"
FETCHES = "fetches"
"""A pack of fetch rows for one shard (``event``: :func:`pack_fetches`)."""
CONTROLLER = "controller"
DEAD = "dead"

ROUTED_SCHEMA = (
    "shard int, kind string, ts long, src_topic string, src_partition int, src_offset long, "
    "src_row int, topic string, partition long, leader long, follower long, leader_epoch long, "
    "fetch_offset long, leader_leo long, high_watermark long, error string, "
    "event binary, counted boolean, digest long, "
    "source string, value string, reason string, detail string"
)
"""One row per routed fetch, per part of a controller event, per dead letter. ``src_row``
is the row of a fetch pack a fetch or dead letter came from (null: a whole record), so
that the rows of one pack keep identities of their own (a dead letter's key)."""

ROUTED_LAYOUT = "routed-v4"
"""Names the routed schema and the state it feeds, for the checkpoint layout guard.
routed-v3: the routed rows of routed-v2, the shard state in ``streaming.job.state_format``
(routed-v2 pickled it), so that a release that pickles refuses the checkpoint by name.
routed-v4: routed-v3 and ``src_row``; the state is as routed-v3's (the routed rows live
within a micro-batch), so a routed-v3 checkpoint restores as it is."""

_ARROW_TYPES = {
    "int": pa.int32(),
    "long": pa.int64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "boolean": pa.bool_(),
}
ROUTED_ARROW_SCHEMA = pa.schema(
    [
        pa.field(name, _ARROW_TYPES[kind])
        for name, kind in (part.split() for part in ROUTED_SCHEMA.split(","))
    ]
)
ROUTED_COLUMNS: list[str] = list(ROUTED_ARROW_SCHEMA.names)


def stable_hash(text: str) -> int:
    """A digest that is the same in every process (``hash()`` of a str is salted per
    process, and Spark may run consecutive batches in different Python workers)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def signed_digest(digest: int) -> int:
    """A :func:`stable_hash` as the signed 64-bit integer a ``long`` column holds."""
    return digest - (1 << 64) if digest >= 1 << 63 else digest


def _batch(count: int, columns: Mapping[str, Any]) -> pa.RecordBatch:
    """A routed batch of ``count`` rows; columns not given are null."""
    arrays = [
        pa.array(columns[f.name], f.type) if f.name in columns else pa.nulls(count, f.type)
        for f in ROUTED_ARROW_SCHEMA
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ROUTED_ARROW_SCHEMA)


def route_arrow(
    records: pa.RecordBatch, sources: Mapping[str, Source], shards: int
) -> list[pa.RecordBatch]:
    """Routed rows of Kafka records (columns of Spark's Kafka source)."""
    return route_records(KafkaRecords.of_arrow(records), sources, shards)


def route_records(
    records: KafkaRecords, sources: Mapping[str, Source], shards: int
) -> list[pa.RecordBatch]:
    """Routed rows of Kafka records."""
    out: list[pa.RecordBatch] = []
    topics = records.coordinates.column("topic")
    names = pc.unique(topics).to_pylist()
    for name in names:
        # A reader's batch is one topic-partition's records: filtering it would copy every
        # record only to keep them all (5 % of the Python workers' CPU at 100,000
        # partitions, bench/pipeline_bench.py --py-spy)
        if len(names) == 1:
            mine = records
        else:
            mine = records.filter(pc.equal(topics, name).to_numpy(zero_copy_only=False))
        if sources[name] is Source.FETCH_RESPONSES:
            out += _route_fetches(mine, shards)
        else:
            out += _route_controller_events(mine, shards)
    return [batch for batch in out if batch.num_rows]


FETCH_PACK_COLUMNS = (
    "ts",
    "src_topic",
    "src_partition",
    "src_offset",
    "src_row",
    "topic",
    "partition",
    "leader",
    "follower",
    "leader_epoch",
    "fetch_offset",
    "leader_leo",
    "high_watermark",
    "error",
)
"""The routed columns a fetch row fills (the others are null on it)."""
FETCH_ROW_SCHEMA = pa.schema([ROUTED_ARROW_SCHEMA.field(name) for name in FETCH_PACK_COLUMNS])
"""The routed columns of a fetch row, as Spark and the state function's frame hold them."""
PACKED_TEXT = pa.dictionary(pa.int32(), pa.string())
FETCH_PACK_SCHEMA = pa.schema(
    [
        pa.field(field.name, PACKED_TEXT) if field.type == pa.string() else field
        for field in FETCH_ROW_SCHEMA
    ]
)
"""The columns of a pack of fetch rows (:func:`pack_fetches`): :data:`FETCH_ROW_SCHEMA`
with its strings (the topic, the Kafka topic read, the error) dictionary-encoded. A
batch's rows share a few of each, and routing gathers every column into shard order:
as strings, that gather was more than half of routing's Arrow work, and most of it the
three string columns (``bench/fetch_path_bench.py``); as codes it moves an int32 a cell.
:func:`plain_fetch_rows` gives the strings back."""
_PACK_WRITING = pa.ipc.IpcWriteOptions(compression="lz4", use_threads=False)
"""Arrow's LZ4 compression of each buffer: a fetch's columns take about 120 bytes, and
every byte of a pack is copied by the JVM several times (Arrow to rows, the shuffle and
its own compression, rows to Arrow, each way across to Python); compressed, a fetch
takes about 15 bytes at a few hundredths of a microsecond to write and read
(``bench/fetch_path_bench.py``). The reader decompresses what the stream says is
compressed. One thread: a Spark task has one core."""
_PACK_READING = pa.ipc.IpcReadOptions(use_threads=False)
"""One thread, as :data:`_PACK_WRITING`: reading ``bench/fetch_path_bench.py``'s 256 shard
packs in a loop took 54 to 96 ms of CPU on one thread, 148 to 256 ms with Arrow's pool
decompressing their buffers in parallel, on cores the stage's other task needs."""


def pack_fetches(fetches: pa.RecordBatch) -> pa.RecordBatch:
    """Fetch rows (routed, kind ``fetch``) as one row per shard: kind ``fetches``, ``ts``
    the latest event time of the pack (what Spark's watermark reads: the stream's clock
    is the same as with one row per fetch), ``event`` the pack's fetch columns as an
    Arrow IPC stream, in input order."""
    if not fetches.num_rows:
        return fetches
    shard = fetches.column("shard")
    order = pc.sort_indices(shard)  # stable: a shard's rows keep their input order
    encoded = [
        _packed_column(fetches.column(field.name), field.type) for field in FETCH_PACK_SCHEMA
    ]
    columns = pa.RecordBatch.from_arrays(encoded, schema=FETCH_PACK_SCHEMA).take(order)
    sorted_shards = shard.take(order).to_numpy()
    starts = np.flatnonzero(np.r_[True, sorted_shards[1:] != sorted_shards[:-1]])
    ends = np.r_[starts[1:], len(sorted_shards)]
    # Every pack's stream into one buffer, which becomes the ``event`` column as it is
    # (a Python bytes object per pack, then an Arrow array of them, copied each pack twice).
    sink = pa.BufferOutputStream()
    bounds = [0]
    latest: list[int] = []
    texts = [i for i, field in enumerate(FETCH_PACK_SCHEMA) if field.type == PACKED_TEXT]
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        part = columns.slice(start, end - start)
        for i in texts:
            part = part.set_column(i, FETCH_PACK_SCHEMA.field(i), _own_names(part.column(i)))
        with pa.ipc.new_stream(sink, FETCH_PACK_SCHEMA, options=_PACK_WRITING) as writer:
            writer.write_batch(part)
        bounds.append(sink.tell())
        latest.append(pc.max(part.column("ts")).as_py())
    count = len(latest)
    if bounds[-1] > np.iinfo(np.int32).max:  # a ``binary`` column's most
        raise ValueError(f"fetch packs of one reader batch too large: {bounds[-1]} bytes")
    offsets = pa.py_buffer(np.asarray(bounds, np.int32))
    packs = pa.Array.from_buffers(pa.binary(), count, [None, offsets, sink.getvalue()])
    return _batch(
        count,
        {
            "shard": pa.array(sorted_shards[starts], pa.int32()),
            "kind": [FETCHES] * count,
            "ts": latest,
            "event": packs,
        },
    )


def _packed_column(column: pa.Array, kind: pa.DataType) -> pa.Array:
    """A fetch column as a pack holds it (routing encodes its strings as it decodes;
    rows of the routed schema, in tests and benches, have them plain)."""
    if column.type == kind:
        return column
    return column.dictionary_encode() if kind == PACKED_TEXT else column.cast(kind)


def _own_names(column: pa.DictionaryArray) -> pa.DictionaryArray:
    """A pack's dictionary column with only the names its rows use. A slice or gather
    of a dictionary column keeps the whole dictionary: every shard's pack would carry
    every topic of the reader batch (thousands of names, on a cluster of many small
    topics) through the JVM."""
    names = len(column.dictionary)
    if names <= 1:
        return column
    codes = column.indices.fill_null(names).to_numpy(zero_copy_only=False)
    used = np.bincount(codes, minlength=names + 1)[:names] > 0
    if used.all():
        return column
    new_code = np.cumsum(used, dtype=np.int32) - 1
    indices = pa.array(new_code[np.minimum(codes, names - 1)], pa.int32(), mask=codes == names)
    return pa.DictionaryArray.from_arrays(indices, column.dictionary.filter(pa.array(used)))


def plain_fetch_rows(fetches: pa.Table) -> pa.Table:
    """Fetch columns (:data:`FETCH_PACK_SCHEMA`, or plain already) with plain strings:
    :data:`FETCH_ROW_SCHEMA`, the routed columns' types."""
    return fetches.cast(FETCH_ROW_SCHEMA)


def unpack_fetches(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with every pack (kind ``fetches``) replaced by its fetch rows, one per
    fetch (kind ``fetch``, the routed columns a fetch leaves empty null), after the
    other rows; the column types those Spark hands to the state function."""
    packed = (rows["kind"] == FETCHES).to_numpy(dtype=np.bool_)
    if not packed.any():
        return rows
    tables = [_read_pack(blob) for blob in rows["event"][packed]]
    fetches = plain_fetch_rows(pa.concat_tables(tables))
    count = fetches.num_rows
    shards = rows["shard"][packed].to_numpy(dtype=np.int32)
    filled = {
        **{name: fetches.column(name) for name in FETCH_PACK_COLUMNS},
        "shard": pa.array(np.repeat(shards, [table.num_rows for table in tables]), pa.int32()),
        "kind": pa.repeat(pa.scalar(FETCH), count),
    }
    table = pa.table(
        [filled.get(f.name, pa.nulls(count, f.type)) for f in ROUTED_ARROW_SCHEMA],
        schema=ROUTED_ARROW_SCHEMA,
    )
    frame: pd.DataFrame = table.to_pandas(types_mapper=pandas_type)
    if packed.all():
        return frame
    others = rows[~packed].astype(frame.dtypes.to_dict())
    return pd.concat([others, frame], ignore_index=True)


def read_packs(packs: Iterable[bytes]) -> pa.Table:
    """The fetch rows of packs (:func:`pack_fetches`), in order, as one table of
    :data:`FETCH_PACK_SCHEMA` (read in place: Arrow's IPC reader does not copy)."""
    tables = [_read_pack(blob) for blob in packs]
    return pa.concat_tables(tables) if tables else FETCH_PACK_SCHEMA.empty_table()


def _read_pack(blob: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(blob), options=_PACK_READING).read_all()


def _route_fetches(records: KafkaRecords, shards: int) -> list[pa.RecordBatch]:
    """JSON records and packs alike (``state.fetch_pack.decode_fetch_records``); a pack's
    rows and dead letters carry their row in it (``src_row``)."""
    decoded = decode_fetch_records(records.values)
    kafka = records.coordinates
    position = pa.array(decoded.position)
    topics = decoded.topics.dictionary_encode()
    codes = topics.indices.to_numpy(zero_copy_only=False).astype(np.intp)
    names = topics.dictionary.to_pylist()
    shard = shard_lookup(shards).shards(codes, names, decoded.ints["partition"])
    columns: dict[str, Any] = {
        "shard": pa.array(shard, pa.int32()),
        "src_topic": kafka.column("topic").dictionary_encode().take(position),
        "src_partition": kafka.column("partition").take(position),
        "src_offset": kafka.column("offset").take(position),
        "src_row": _pack_rows(decoded.pack_row, len(decoded)),
        "topic": topics,
        "error": decoded.errors.dictionary_encode(),
        **{name: pa.array(values, pa.int64()) for name, values in decoded.ints.items()},
    }
    fetches = pa.RecordBatch.from_pydict(columns)
    return [pack_fetches(fetches), _dead_batch(kafka, decoded.dead)]


def _pack_rows(pack_row: npt.NDArray[np.int64] | None, count: int) -> pa.Array:
    """``src_row`` of decoded fetches: a pack's row, null for a JSON record's fetch."""
    if pack_row is None:
        return pa.nulls(count, pa.int32())
    return pa.array(pack_row, pa.int32(), mask=pack_row < 0)


def _dead_batch(kafka: pa.RecordBatch, dead: Sequence[tuple[int, DeadLetter]]) -> pa.RecordBatch:
    """The dead letters of records with Kafka coordinates ``kafka``, by record index."""
    index = pa.array([i for i, _ in dead], pa.int64())
    return _batch(
        len(dead),
        {
            "shard": [CLUSTER_SHARD] * len(dead),
            "kind": [DEAD] * len(dead),
            "src_topic": kafka.column("topic").take(index),
            "src_partition": kafka.column("partition").take(index),
            "src_offset": kafka.column("offset").take(index),
            "src_row": pa.array([letter.pack_row for _, letter in dead], pa.int32()),
            "source": [letter.source for _, letter in dead],
            "value": [letter.raw for _, letter in dead],
            "reason": [letter.reason.value for _, letter in dead],
            "detail": [letter.detail for _, letter in dead],
        },
    )


def _route_controller_events(records: KafkaRecords, shards: int) -> list[pa.RecordBatch]:
    """Parsed once; parts per shard in the order the shards apply them (event time,
    then Kafka coordinates: ``shard_state``)."""
    values = records.values
    kafka = records.coordinates
    where = list(
        zip(
            kafka.column("topic").to_pylist(),
            kafka.column("partition").to_pylist(),
            kafka.column("offset").to_pylist(),
            strict=True,
        )
    )
    events, dead = decode_controller_events(values)
    events.sort(key=lambda item: (item[1].ts, *where[item[0]]))
    rows: dict[str, list[Any]] = {
        name: []
        for name in (
            "shard",
            "ts",
            "src_topic",
            "src_partition",
            "src_offset",
            "event",
            "counted",
            "digest",
            "value",
        )
    }
    routed = route_controller_events([event for _, event in events], shards)
    for (i, _event), parts in zip(events, routed, strict=True):
        value = values[i]
        assert value is not None  # a record without a value is a dead letter, never an event
        text = bytes(value).decode("utf-8")
        digest = signed_digest(stable_hash(text))
        for part in parts:
            topic, kafka_partition, offset = where[i]
            marker = isinstance(part.event, ControllerEpochSeen)
            rows["shard"].append(part.shard)
            rows["ts"].append(part.event.ts)
            rows["src_topic"].append(topic)
            rows["src_partition"].append(kafka_partition)
            rows["src_offset"].append(offset)
            rows["event"].append(pickle.dumps(part.event, protocol=pickle.HIGHEST_PROTOCOL))
            rows["counted"].append(part.counted)
            rows["digest"].append(None if marker else digest)
            rows["value"].append(text if part.counted else None)
    count = len(rows["shard"])
    controller = _batch(
        count,
        {**rows, "kind": [CONTROLLER] * count, "source": [Source.CONTROLLER_EVENTS.value] * count},
    )
    return [controller, _dead_batch(kafka, dead)]


def route(records: pd.DataFrame, sources: Mapping[str, Source], shards: int) -> pd.DataFrame:
    """:func:`route_arrow` over pandas frames (as ``mapInPandas`` would hand them)."""
    batch = pa.RecordBatch.from_pandas(records, preserve_index=False)
    routed = pa.Table.from_batches(route_arrow(batch, sources, shards), ROUTED_ARROW_SCHEMA)
    frame: pd.DataFrame = routed.to_pandas(types_mapper=pandas_type)
    return frame


def pandas_type(kind: pa.DataType) -> Any:
    """Nullable integers, as Spark hands them to the state function."""
    if pa.types.is_integer(kind):
        return pd.Int64Dtype() if kind == pa.int64() else pd.Int32Dtype()
    if pa.types.is_boolean(kind):
        return pd.BooleanDtype()
    return None


_pandas_type = pandas_type
"""Its name in revisions before ad04f8f's successors: ``bench/fetch_path_bench.py``
imports this name to measure such a revision (``--before``) beside this tree."""


def route_arrow_batches(
    batches: Iterator[pa.RecordBatch], sources: Mapping[str, Source], shards: int
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` form of :func:`route_arrow`."""
    for records in batches:
        yield from route_arrow(records, sources, shards)


def route_record_batches(
    batches: Iterator[KafkaRecords], sources: Mapping[str, Source], shards: int
) -> Iterator[pa.RecordBatch]:
    """:func:`route_records` of each batch (the job's own source reader routes what it
    reads: ``streaming.job.kafka_source``)."""
    for records in batches:
        yield from route_records(records, sources, shards)


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
        elif kind == "boolean":
            frame[name] = frame[name].astype("boolean")
        elif kind == "binary":
            frame[name] = frame[name].astype("object")
        else:
            raise ValueError(f"no pandas type for {kind!r} ({name})")
    return frame
