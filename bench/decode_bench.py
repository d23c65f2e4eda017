"""Candidates for parsing and validating fetch responses in bulk, side by side.

    python bench/decode_bench.py [--records 200000] [--bad 0.001]

The same record values (JSON bytes as Kafka hands them; a fraction ``--bad`` of them
invalid in various ways) are turned into validated columns by:

* ``parse_record`` per record: ``json.loads`` + the compiled schema (fastjsonschema),
  jsonschema for the reason of a rejection: what the job did before;
* ``decode_fetches`` (the job's now): msgspec decodes every value into a typed struct
  with the schema's constraints, in msgspec's own loop; refusals go to ``parse_record``;
* msgspec on the whole batch joined into one JSON array: one call, but one bad value
  fails the batch and a value that is not one JSON value can hide in the join;
* pyarrow's JSON reader on newline-joined values: infers types, has no per-record
  verdict, and a value with a raw newline (valid JSON whitespace) breaks the framing;
* Spark SQL ``from_json`` in the JVM with the validation written as column
  expressions (``local[2]``, time of a ``count`` of the valid rows of a cached frame).

Printed: records/s of each, per core (CPU time of this process; the Spark line is wall
time of 2 cores). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import time
from collections.abc import Callable

import msgspec
import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
import pyarrow.json as pj  # type: ignore[import-untyped]

from state import WireFetch, decode_fetches, parse_record
from state.events import Source


def values(count: int, bad: float, seed: int = 1) -> list[bytes]:
    rng = np.random.default_rng(seed)
    out = []
    broken = (b"{not json", b'{"ts": -1}', b"[]", b'{"ts":1.5}', b"\xff\xfe")
    for i in range(count):
        if rng.random() < bad:
            out.append(broken[i % len(broken)])
            continue
        out.append(
            json.dumps(
                {
                    "ts": 1_700_000_000_000 + i,
                    "topic": f"topic-{i % 100:04d}",
                    "partition": i % 1000,
                    "leader": i % 6,
                    "follower": (i + 1) % 6,
                    "leader_epoch": 0,
                    "fetch_offset": i,
                    "leader_leo": i + 5,
                    "high_watermark": i,
                    "error": "NONE",
                }
            ).encode()
        )
    return out


def timed(name: str, count: int, work: Callable[[], object]) -> None:
    cpu = time.process_time()
    work()
    spent = time.process_time() - cpu
    print(f"  {name:52s} {count / spent:12,.0f} records/s per core", flush=True)


def spark_from_json(data: list[bytes]) -> None:
    """``from_json`` with the schema's checks as column expressions (JVM)."""
    os.environ.setdefault("PYSPARK_PYTHON", "python3")
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F  # noqa: N812

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("decode-bench")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    frame = spark.createDataFrame([(v,) for v in data], "value binary").cache()
    frame.count()
    ddl = (
        "ts long, topic string, partition long, leader long, follower long, "
        "leader_epoch long, fetch_offset long, leader_leo long, high_watermark long, "
        "error string"
    )
    parsed = frame.select(
        F.from_json(F.col("value").cast("string"), ddl, {"mode": "PERMISSIVE"}).alias("e")
    ).select("e.*")
    int32 = 2**31 - 1
    valid = (
        F.col("ts").isNotNull()
        & (F.col("ts") >= 0)
        & F.col("topic").isNotNull()
        & (F.length("topic") > 0)
        & F.col("partition").between(0, 999_999)
        & F.col("leader").between(0, int32)
        & F.col("follower").between(0, int32)
        & F.col("leader_epoch").between(0, int32)
        & (F.col("fetch_offset") >= 0)
        & (F.col("leader_leo") >= 0)
        & (F.col("high_watermark") >= 0)
    )
    began = time.monotonic()
    kept = parsed.where(valid).count()
    spent = time.monotonic() - began
    print(
        f"  {'Spark from_json + column checks (local[2], wall)':52s} "
        f"{len(data) / spent:12,.0f} records/s ({kept:,} valid); it cannot tell why a "
        "record is refused, nor an integral float from a truncated one",
        flush=True,
    )
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--bad", type=float, default=0.001)
    parser.add_argument("--skip-spark", action="store_true")
    args = parser.parse_args()
    data = values(args.records, args.bad)
    count = len(data)
    print(f"{count:,} fetch-response values, {args.bad:.1%} invalid:", flush=True)
    timed(
        "parse_record per record (json + fastjsonschema)",
        count,
        lambda: [parse_record(Source.FETCH_RESPONSES, v) for v in data],
    )
    timed(
        "decode_fetches (msgspec per value, C loop) + columns", count, lambda: decode_fetches(data)
    )
    clean = values(count, 0.0)
    joined = msgspec.json.Decoder(list[WireFetch])
    array = pa.array(clean, pa.binary())

    def whole_batch() -> object:
        text = pc.binary_join(
            pa.ListArray.from_arrays(pa.array([0, count], pa.int32()), array), b","
        )[0].as_py()
        return joined.decode(b"[" + text + b"]")

    timed("msgspec on one joined array (clean values only)", count, whole_batch)
    timed(
        "pyarrow.json on newline-joined values (clean only)",
        count,
        lambda: pj.read_json(io.BytesIO(b"\n".join(clean))),
    )
    if not args.skip_spark:
        spark_from_json(data)


if __name__ == "__main__":
    main()
