"""Throughput and micro-batch latency of the streaming job, next to two references.

    python bench/stream_bench.py [--partitions 10000 100000] [--rounds 3] [--shards 16]

For each cluster size it starts the embedded broker, produces one LeaderAndIsr per
partition (3 replicas) and ``rounds`` rounds of fetch responses in which every follower
of every partition fetches once, then runs on the same topics, one after the other:

* ``job``: the real pipeline (routing, per-shard state, sinks to Kafka);
* ``ceiling``: the same source and routing with the stateful step removed (a count in
  foreachBatch): the most the job can do;
* ``per-partition``: the straightforward design, the model grouped by
  ``(topic, partition)`` (one group per partition).

Printed per pipeline: events/s over the data batches, p50/p99 micro-batch latency, and
the number of batches. Nothing is asserted: the machines are shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from kafka import KafkaProducer

from state import ReplicationModel
from state.events import Source
from state.settings import RuleSettings
from streaming.config import IsrwatchConfig, load_config
from streaming.job.metrics import HealthExporter
from streaming.job.query import (
    input_sources,
    input_stream,
    make_sink,
    routed_stream,
    spark_session,
    start_query,
)
from streaming.job.routing import FETCH, ROUTED_SCHEMA, conform, route, unpack_fetches
from streaming.job.shard_state import (
    CLOCK_DELAY_MS,
    OUTPUT_SCHEMA,
    STATE_SCHEMA,
    ShardJobSettings,
    ShardSnapshot,
    process,
    restore_snapshot,
    save_snapshot,
)
from streaming.tools.embedded_broker import EmbeddedBroker

B = 1_700_000_000_000
FETCH_PARTITIONS = 4


PER_TOPIC = 1000


def producer_for(config: IsrwatchConfig) -> KafkaProducer:
    return KafkaProducer(
        bootstrap_servers=config.kafka.bootstrap_servers, linger_ms=50, batch_size=1 << 20
    )


def produce_elections(config: IsrwatchConfig, partitions: int) -> None:
    """One LeaderAndIsr per partition: the warm-up, not measured."""
    producer = producer_for(config)
    per_topic = PER_TOPIC
    for p in range(partitions):
        topic, number = f"topic-{p // per_topic:04d}", p % per_topic
        leader = p % 6
        replicas = [leader, (leader + 1) % 6, (leader + 2) % 6]
        producer.send(
            config.topics.controller_events,
            json.dumps(
                {
                    "type": "LeaderAndIsr",
                    "ts": B,
                    "topic": topic,
                    "partition": number,
                    "leader": leader,
                    "leader_epoch": 0,
                    "isr": replicas,
                    "replicas": replicas,
                    "partition_epoch": 0,
                }
            ).encode(),
        )
    producer.flush()
    producer.close()


def produce_fetches(config: IsrwatchConfig, partitions: int, rounds: int) -> int:
    """``rounds`` rounds in which every follower of every partition fetches once."""
    producer = producer_for(config)
    per_topic = PER_TOPIC
    rng = np.random.default_rng(1)
    leo = np.zeros(partitions, dtype=np.int64)
    for r in range(rounds):
        previous = leo.copy()
        leo += rng.integers(0, 100, partitions)
        for p in range(partitions):
            topic, number, leader = f"topic-{p // per_topic:04d}", p % per_topic, p % 6
            for k in (1, 2):
                producer.send(
                    config.topics.fetch_responses,
                    json.dumps(
                        {
                            "ts": B + 1_000 + r * 500 + k,
                            "topic": topic,
                            "partition": number,
                            "leader": leader,
                            "follower": (leader + k) % 6,
                            "leader_epoch": 0,
                            "fetch_offset": int(previous[p]),
                            "leader_leo": int(leo[p]),
                            "high_watermark": int(previous[p]),
                        }
                    ).encode(),
                    partition=(p * 2 + k) % FETCH_PARTITIONS,
                )
    producer.flush()
    producer.close()
    return partitions * 2 * rounds


def wait_for_rows(query: Any, after_batch: int, rows: int, timeout_s: float = 1800) -> int:
    """Wait until the batches after ``after_batch`` have read ``rows`` input rows; returns
    the id of the last batch. (Caught-up detection alone can fire in a gap of the
    producer, or on the source's registration batch of a new partition.)"""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        progress = [p for p in query.recentProgress if p["batchId"] > after_batch]
        if sum(p["numInputRows"] for p in progress) >= rows:
            return int(max(p["batchId"] for p in progress))
        time.sleep(0.5)
    raise TimeoutError(f"{rows} rows not read in {timeout_s} s")


def measure(query: Any, after_batch: int, rows: int) -> dict[str, Any]:
    """Figures of the data batches after ``after_batch`` (the warm-up)."""
    wait_for_rows(query, after_batch, rows)
    progress = [
        p for p in query.recentProgress if p["numInputRows"] > 0 and p["batchId"] > after_batch
    ]
    query.stop()
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
    rows = sum(p["numInputRows"] for p in progress)
    return {
        "events/s": rows / sum(durations) if durations else 0.0,
        "p50 s": statistics.median(durations) if durations else 0.0,
        "p99 s": float(np.percentile(durations, 99)) if durations else 0.0,
        "batches": len(durations),
        "rows": rows,
    }


def ceiling(spark: Any, config: IsrwatchConfig) -> Any:
    """The job's own source and routing; a count where the stateful step would be."""
    counted: list[int] = []
    return (
        routed_stream(spark, config)
        .writeStream.foreachBatch(lambda frame, _: counted.append(frame.count()))
        .option("checkpointLocation", config.streaming.checkpoint_location)
        .trigger(processingTime="1 second")
        .start()
    )


def per_partition(spark: Any, config: IsrwatchConfig, sources: dict[str, Source]) -> Any:
    """The model grouped by (topic, partition): each group holds one partition."""
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.streaming.state import GroupStateTimeout

    def routed(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for records in batches:
            frame = unpack_fetches(route(records, sources, 1))  # a row per fetch, to group
            controller = frame["kind"] != FETCH
            parsed = [json.loads(v) for v in frame.loc[controller, "value"]]
            frame.loc[controller, "topic"] = [e.get("topic") for e in parsed]
            frame.loc[controller, "partition"] = [e.get("partition") for e in parsed]
            yield conform(frame, ROUTED_SCHEMA)

    settings = ShardJobSettings(RuleSettings(), 1, config.streaming.watermark_delay_ms)

    def update(
        key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        snapshot = (
            restore_snapshot(state.get[0], settings.rules)
            if state.exists
            else ShardSnapshot(ReplicationModel(settings.rules))
        )
        rows = pd.concat([f for f in frames if len(f)], ignore_index=True)
        watermark = state.getCurrentWatermarkMs()
        clock = watermark + CLOCK_DELAY_MS if watermark > 0 else -1
        out = process(snapshot, rows if len(rows) else None, clock, settings)
        state.update((save_snapshot(snapshot),))
        yield out

    return (
        input_stream(spark, config)
        .mapInPandas(routed, ROUTED_SCHEMA)
        .withColumn("event_time", F.timestamp_millis("ts"))
        .withWatermark("event_time", f"{CLOCK_DELAY_MS} milliseconds")
        .groupBy("topic", "partition")
        .applyInPandasWithState(
            update, OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout
        )
        .writeStream.foreachBatch(lambda frame, _: frame.count())
        .option("checkpointLocation", config.streaming.checkpoint_location)
        .trigger(processingTime="1 second")
        .start()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument(
        "--max-per-partition",
        type=int,
        default=100_000,
        help="records per Kafka partition per micro-batch",
    )
    parser.add_argument("--skip", nargs="*", default=[], choices=["per-partition"])
    args = parser.parse_args()
    workdir = Path(os.environ.get("TMPDIR", "/tmp")) / f"isrwatch-bench-{uuid.uuid4().hex[:6]}"
    with EmbeddedBroker() as broker:
        broker.start()
        for partitions in args.partitions:
            print(
                f"\n{partitions:,} partitions x 3 replicas; measured: {args.rounds} rounds of "
                f"fetch responses ({partitions * 2 * args.rounds:,} events) after a warm-up "
                f"with one LeaderAndIsr per partition; {args.shards} shards, local[2]",
                flush=True,
            )
            results: dict[str, dict[str, Any]] = {}
            for name in ("job", "ceiling", "per-partition"):
                if name in args.skip:
                    continue
                config = bench_config(broker, workdir, args)
                spark = spark_session(config)
                sources = input_sources(config)
                sink = make_sink(config, HealthExporter(), None)
                produce_elections(config, partitions)
                query = start_pipeline(name, spark, config, sink, sources)
                warm_up = wait_for_rows(query, -1, partitions)
                events = produce_fetches(config, partitions, args.rounds)
                figures = results[name] = measure(query, warm_up, events)
                sink.close()
                line = (
                    f"  {name:14s} {figures['events/s']:10,.0f} events/s   "
                    f"p50 {figures['p50 s']:6.2f} s   p99 {figures['p99 s']:6.2f} s   "
                    f"{figures['batches']} batches, {figures['rows']:,} rows"
                )
                print(line, flush=True)
            if {"job", "ceiling", "per-partition"} <= results.keys():
                job = results["job"]["events/s"]
                print(
                    f"  job / ceiling: {job / results['ceiling']['events/s']:.2f}   "
                    f"job / per-partition: {job / results['per-partition']['events/s']:.1f} x"
                )


def start_pipeline(
    name: str, spark: Any, config: IsrwatchConfig, sink: Any, sources: dict[str, Source]
) -> Any:
    if name == "job":
        return start_query(spark, config, sink, snapshot_when_idle=False)
    if name == "ceiling":
        return ceiling(spark, config)
    return per_partition(spark, config, sources)


def bench_config(broker: EmbeddedBroker, workdir: Path, args: argparse.Namespace) -> IsrwatchConfig:
    """Topics and a checkpoint of its own for one pipeline."""
    suffix = uuid.uuid4().hex[:6]
    kinds = ("controller_events", "fetch_responses", "partition_health", "dead_letters")
    names = {f"topics.{k}": f"{k.replace('_', '-')}-{suffix}" for k in kinds}
    broker.create_topics([names["topics.controller_events"]], partitions=1)
    broker.create_topics([names["topics.fetch_responses"]], partitions=FETCH_PARTITIONS)
    broker.create_topics([names["topics.partition_health"], names["topics.dead_letters"]])
    return load_config(
        None,
        {
            **names,
            "kafka.bootstrap_servers": broker.bootstrap_servers,
            "streaming.checkpoint_location": str(workdir / suffix),
            "streaming.state_shards": args.shards,
            "streaming.trigger_interval_ms": 1000,
            "kafka.max_events_per_partition_per_batch": args.max_per_partition,
            "metrics.enabled": False,
        },
        environ={},
    )


if __name__ == "__main__":
    main()
