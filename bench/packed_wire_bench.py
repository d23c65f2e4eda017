"""Candidates for the packed fetch wire, beside per-record JSON, in the same run.

    python bench/packed_wire_bench.py [--sizes 1000 100000] [--repeat 3]

A poll of N fetch responses (the values a collector holds: JSON-ready dicts, as
``streaming.feeds.wire_encoding`` makes them) is encoded and then decoded into the
columns the job routes (``state.fetch_decoder.DecodedFetches``: validated int64 columns,
the topic and error as Arrow string arrays):

* ``json per record``: one JSON value per fetch (``streaming.feeds.wire.encode``),
  decoded by the job's bulk decoder ``decode_fetches``: the baseline, today's wire;
* ``arrow ipc``: one Arrow IPC stream of int64 and string columns, read zero-copy into
  numpy and range-checked there; ``arrow ipc zstd``: the same with Arrow's buffer
  compression;
* ``msgpack arrays``: one msgpack map of column lists (``msgspec.msgpack``), decoded
  into a typed struct whose lists carry the schema's ranges (msgspec checks them in C);
* ``fetch pack (shipped)``: the chosen form as shipped, ``state.fetch_pack``'s encoder
  and decoder (its validation is exact: see docs/event-contract.md).

Printed: bytes per event, encode and decode microseconds per event (best of
``--repeat``, CPU time of this process) and the load average. Nothing is asserted.

Then the collector's side (``--partitions``, 0 to skip): one ``collect admin`` poll of
that many partitions x 3 replicas (two fetch responses each) from a snapshot in memory,
step by step as ``AdminCollector.poll_once`` takes them: the diff into records
(``AdminPoller.diff``), the contract check of every record (``sending.checked``), and
the records as Kafka values (``wire.kafka_records``), per-record JSON and packed. No
broker: what publishing costs beyond the encoding is the producer's.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Annotated, Any

import msgspec
import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from state.fetch_decoder import (
    INT32_MAX,
    INT_COLUMNS,
    MAX_TIMESTAMP_MS,
    MAX_TOPIC_LENGTH,
    DecodedFetches,
    decode_fetches,
)
from state.fetch_pack import decode_fetch_pack, encode_fetch_pack, field_rules
from streaming.config import FetchResponsesForm
from streaming.feeds.collectors.admin_poller import AdminPoller, ClusterSnapshot, PartitionInfo
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.collectors.sending import checked
from streaming.feeds.wire import encode, kafka_records


def poll(count: int) -> list[dict[str, Any]]:
    """``count`` fetch values of a cluster of 100 topics, 3 replicas, six brokers."""
    out = []
    for i in range(count):
        value: dict[str, Any] = {
            "ts": 1_700_000_000_000 + i // 1000,
            "topic": f"topic-{i % 100:04d}",
            "partition": (i // 200) % 5000,
            "leader": i % 6,
            "follower": (i + 1) % 6,
            "leader_epoch": 3,
            "fetch_offset": 1_000_000_000 + i,
            "leader_leo": 1_000_000_005 + i,
            "high_watermark": 1_000_000_000 + i,
        }
        if i % 500 == 0:
            value["error"] = "NOT_LEADER_OR_FOLLOWER"
        out.append(value)
    return out


# --------------------------------------------------------------------- candidates

_ARROW_SCHEMA = pa.schema(
    [pa.field(name, pa.int64()) for name in INT_COLUMNS]
    + [pa.field("topic", pa.string()), pa.field("error", pa.string())]
)
_LIMITS = {name: (field_rules()[name][0].ge, field_rules()[name][0].le) for name in INT_COLUMNS}
"""The integer fields' ranges, as ``WireFetch`` (the schema's constraints) gives them."""


def arrow_encode(values: Sequence[dict[str, Any]], compression: str | None = None) -> bytes:
    arrays = [pa.array([v[name] for v in values], pa.int64()) for name in INT_COLUMNS]
    arrays.append(pa.array([v["topic"] for v in values], pa.string()))
    arrays.append(pa.array([v.get("error") for v in values], pa.string()))
    batch = pa.RecordBatch.from_arrays(arrays, schema=_ARROW_SCHEMA)
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, _ARROW_SCHEMA, options=options) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def arrow_decode(value: bytes) -> DecodedFetches:
    table = pa.ipc.open_stream(value).read_all().combine_chunks()
    ints = {}
    for name in INT_COLUMNS:
        column = table.column(name).to_numpy()
        low, high = _LIMITS[name]  # every integer field has both bounds
        assert column.min() >= low
        assert column.max() <= high
        ints[name] = column
    lengths = pc.utf8_length(table.column("topic")).to_numpy()
    assert lengths.min() >= 1
    assert lengths.max() <= MAX_TOPIC_LENGTH
    error = table.column("error").fill_null("NONE").combine_chunks()
    count = table.num_rows
    return DecodedFetches(
        np.arange(count, dtype=np.int64), ints, table.column("topic").combine_chunks(), error
    )


_Int64 = Annotated[int, msgspec.Meta(ge=0)]


class _Columns(msgspec.Struct, frozen=True, gc=False):
    ts: list[Annotated[int, msgspec.Meta(ge=0, le=MAX_TIMESTAMP_MS)]]
    topic: list[Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TOPIC_LENGTH)]]
    partition: list[Annotated[int, msgspec.Meta(ge=0, le=999_999)]]
    leader: list[Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]]
    follower: list[Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]]
    leader_epoch: list[Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]]
    fetch_offset: list[_Int64]
    leader_leo: list[_Int64]
    high_watermark: list[_Int64]
    error: list[Annotated[str, msgspec.Meta(min_length=1)] | None]


_MSGPACK_DECODER = msgspec.msgpack.Decoder(_Columns)
_MSGPACK_ENCODER = msgspec.msgpack.Encoder()


def msgpack_encode(values: Sequence[dict[str, Any]]) -> bytes:
    columns: dict[str, list[Any]] = {name: [v[name] for v in values] for name in INT_COLUMNS}
    columns["topic"] = [v["topic"] for v in values]
    columns["error"] = [v.get("error") for v in values]
    return bytes(_MSGPACK_ENCODER.encode(columns))


def msgpack_decode(value: bytes) -> DecodedFetches:
    columns = _MSGPACK_DECODER.decode(value)
    ints = {name: np.array(getattr(columns, name), dtype=np.int64) for name in INT_COLUMNS}
    error = [e or "NONE" for e in columns.error]
    count = len(columns.ts)
    return DecodedFetches(
        np.arange(count, dtype=np.int64),
        ints,
        pa.array(columns.topic, pa.string()),
        pa.array(error, pa.string()),
    )


def shipped_encode(values: Sequence[dict[str, Any]]) -> bytes:
    return encode_fetch_pack(values)


def shipped_decode(value: bytes) -> DecodedFetches:
    decoded = decode_fetch_pack(value)
    assert isinstance(decoded, DecodedFetches)
    return decoded


# ------------------------------------------------------------------------ timing


def best(repeat: int, run: Callable[[], Any]) -> tuple[float, Any]:
    """The least CPU time of ``repeat`` runs, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.process_time()
        result = run()
        times.append(time.process_time() - start)
    return min(times), result


def measure(count: int, repeat: int) -> list[tuple[str, float, float, float]]:
    values = poll(count)
    expected = decode_fetches([encode(v) for v in values])
    rows = []

    def check(decoded: DecodedFetches) -> None:
        """Each candidate must give the baseline's columns (else its figures mean nothing)."""
        assert len(decoded) == len(expected)
        assert not decoded.dead
        for name in INT_COLUMNS:
            assert np.array_equal(decoded.ints[name], expected.ints[name]), name
        assert decoded.topic == expected.topic
        assert decoded.error == expected.error

    enc_s, records = best(repeat, lambda: [encode(v) for v in values])
    dec_s, decoded = best(repeat, lambda: decode_fetches(records))
    check(decoded)
    rows.append(("json per record", sum(map(len, records)), enc_s, dec_s))
    candidates: list[tuple[str, Callable[[], bytes], Callable[[bytes], DecodedFetches]]] = [
        ("arrow ipc", lambda: arrow_encode(values), arrow_decode),
        ("arrow ipc zstd", lambda: arrow_encode(values, "zstd"), arrow_decode),
        ("msgpack arrays", lambda: msgpack_encode(values), msgpack_decode),
        ("fetch pack (shipped)", lambda: shipped_encode(values), shipped_decode),
    ]
    for name, encoder, decoder in candidates:
        enc_s, blob = best(repeat, encoder)
        dec_s, decoded = best(repeat, partial(decoder, blob))
        check(decoded)
        rows.append((name, len(blob), enc_s, dec_s))
    return [
        (name, size / count, enc / count * 1e6, dec / count * 1e6) for name, size, enc, dec in rows
    ]


def snapshot(partitions: int) -> ClusterSnapshot:
    """A cluster of six brokers, 100 topics, ``partitions`` partitions x 3 replicas."""
    parts: dict[str, dict[int, PartitionInfo]] = {}
    leos: dict[tuple[str, int, int], int] = {}
    hws: dict[tuple[str, int], int] = {}
    for i in range(partitions):
        topic, partition = f"topic-{i % 100:04d}", i // 100
        replicas = (i % 6, (i + 1) % 6, (i + 2) % 6)
        parts.setdefault(topic, {})[partition] = PartitionInfo(replicas[0], 3, replicas, replicas)
        for lag, broker in enumerate(replicas):
            leos[(topic, partition, broker)] = 1_000_000 - lag
        hws[(topic, partition)] = 999_998
    return ClusterSnapshot(
        ts=1_700_000_000_000,
        controller_id=0,
        controller_epoch=1,
        brokers=tuple(range(6)),
        partitions=parts,
        log_end_offsets=leos,
        high_watermarks=hws,
        offsets_ts=1_700_000_000_000,
    )


def collector_poll(partitions: int) -> None:
    """CPU seconds of each step of an admin poll after the first: nothing changed but the
    offsets, so its records are the fetch responses (the first poll adds an event for
    every partition)."""
    from prometheus_client import CollectorRegistry

    poller = AdminPoller()
    poller.diff(snapshot(partitions))
    polled = snapshot(partitions)
    diffed_s, records = best(1, partial(poller.diff, polled))
    metrics = CollectorMetrics("admin", CollectorRegistry())
    checked_s, _ = best(1, partial(checked, records, metrics))
    fetches = sum(1 for r in records if r.source.value == "fetch-responses")
    print(f"\ncollect admin, one poll of {partitions:,} partitions x 3 replicas")
    print(f"  {len(records):,} records, {fetches:,} of them fetch responses; CPU s per step:")
    print(f"  {'diff into records (AdminPoller.diff)':<44} {diffed_s:>7.3f}")
    print(f"  {'contract check of each record (checked)':<44} {checked_s:>7.3f}")
    for form in FetchResponsesForm:
        encoded_s, sent = best(1, partial(kafka_records, records, form))
        size = sum(len(r.value) for r in sent)
        label = f"kafka_records, {form.value} ({len(sent):,} values, {size / 1e6:.1f} MB)"
        print(f"  {label:<44} {encoded_s:>7.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=20_000)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} (1 min)")
    for count in args.sizes:
        print(f"\nN = {count:,} fetch responses")
        print(f"  {'form':<22} {'bytes/event':>12} {'encode us/event':>16} {'decode us/event':>16}")
        for name, size, enc, dec in measure(count, args.repeat):
            print(f"  {name:<22} {size:>12.1f} {enc:>16.3f} {dec:>16.3f}")
    if args.partitions:
        collector_poll(args.partitions)
    print(f"\nload average after: {os.getloadavg()[0]:.2f} (1 min)")


if __name__ == "__main__":
    main()
