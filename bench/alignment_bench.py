"""What aligning capped micro-batches on event time costs the planner, next to planning
the same backlog without a cap, in the same run.

    python bench/alignment_bench.py [--fetch-partitions 12] [--records 600000] [--cap 10000]
    python bench/alignment_bench.py --wire packed [--partitions 100000] [--seconds 12]
                                    [--cap 1000000]

The embedded broker gets a backlog. On the JSON wire (the default): ``--records`` fetch
responses over ``--fetch-partitions`` partitions of one topic, with one controller event
per 1,000 of them in a topic of one partition, event times one millisecond apart per 50
records. On the packed wire: the sustained bench's cluster (``bench/sustained_bench.py``),
one LeaderAndIsr per partition, then ``--seconds`` of its fetch packs at 1,000,000
events/s, produced at once; its 6 leaders' packs go to 4 partitions (leader mod 4), so
two carry twice the events of the other two, as a collector's packs keyed by leader do.
The source's stream reader then plans the whole backlog in capped micro-batches (the
driver's side only: ``latestOffset``, as Spark calls it, without reading), and before
each capped plan it plans the same start uncapped (``ReadAllAvailable``: the offset
snapshot and nothing to align) as the baseline. Printed per side: micro-batches, the
planning time per batch (p50, max), and for the capped side the record fetches the
alignment made per batch and what a batch read.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # this tree's streaming, not an installed one
    sys.path.insert(0, str(ROOT))

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows  # noqa: E402

from streaming.job.kafka_source import SCHEMA, KafkaSource, KafkaStreamReader  # noqa: E402
from streaming.tools.embedded_broker import EmbeddedBroker  # noqa: E402

RECORDS_PER_MS = 50
FETCHES_PER_CONTROLLER_EVENT = 1000
PACKED_RATE = 1_000_000  # fetch events a second of the packed backlog's event times


def produce(servers: str, controller: str, fetches: str, partitions: int, records: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 50})
    base = 1_700_000_000_000
    for i in range(records):
        ts = base + i // RECORDS_PER_MS
        value = json.dumps({"topic": "t", "partition": i % 1000, "ts": ts}).encode()
        producer.produce(fetches, value, partition=i % partitions)
        if i % FETCHES_PER_CONTROLLER_EVENT == 0:
            producer.produce(controller, json.dumps({"type": "IsrChange", "ts": ts}).encode())
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(300):
        raise RuntimeError("the backlog was not acknowledged")


def summary(name: str, seconds: list[float]) -> str:
    ms = sorted(1000 * s for s in seconds)
    return f"{name}: {len(ms)} plans, p50 {statistics.median(ms):.0f} ms, max {ms[-1]:.0f} ms"


def packed_backlog(broker: EmbeddedBroker, workdir: Path, partitions: int, seconds: float) -> str:
    """The sustained bench's seed and ``seconds`` of its fetch packs at 1,000,000 events/s,
    produced at once; the topics, comma-separated."""
    from sustained_bench import Load, LoadProcess, bench_config, seed  # bench/ is on the path

    config = bench_config(broker, workdir, {})
    began_ms = int(time.time() * 1000) - int(1000 * seconds)
    seed(config, partitions, began_ms - 1000)  # the elections before every fetch
    topic = config.topics.fetch_responses
    load = Load(
        broker.bootstrap_servers,
        topic,
        partitions,
        PACKED_RATE,
        seconds,
        (),
        float("inf"),
        1_000_000_000,
        "packed",
        backfill_from_ms=began_ms,
    )
    process = LoadProcess(load)
    process.start()
    sent = process.join()["sent"]
    print(
        f"alignment bench: {partitions:,} LeaderAndIsr, then {sent:,} fetch events in packs "
        f"over 4 partitions (leader mod 4)",
        flush=True,
    )
    return f"{config.topics.controller_events},{topic}"


def json_backlog(broker: EmbeddedBroker, fetch_partitions: int, records: int) -> str:
    controller, fetches = "bench-controller-events", "bench-fetch-responses"
    broker.create_topics([controller])
    broker.create_topics([fetches], partitions=fetch_partitions)
    produce(broker.bootstrap_servers, controller, fetches, fetch_partitions, records)
    print(
        f"alignment bench: {records:,} fetch records over {fetch_partitions} partitions + "
        f"{records // FETCHES_PER_CONTROLLER_EVENT:,} controller events",
        flush=True,
    )
    return f"{controller},{fetches}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--wire", choices=["json", "packed"], default="json")
    parser.add_argument("--fetch-partitions", type=int, default=12, help="json wire")
    parser.add_argument("--records", type=int, default=600_000, help="json wire")
    parser.add_argument("--partitions", type=int, default=100_000, help="packed wire")
    parser.add_argument("--seconds", type=float, default=12, help="packed wire: of load")
    parser.add_argument(
        "--cap", type=int, help="events per partition per batch (json 10,000, packed 1,000,000)"
    )
    args = parser.parse_args(argv)
    cap = args.cap or (10_000 if args.wire == "json" else 1_000_000)
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as workdir:
        broker.start()
        began = time.monotonic()
        topics = (
            json_backlog(broker, args.fetch_partitions, args.records)
            if args.wire == "json"
            else packed_backlog(broker, Path(workdir), args.partitions, args.seconds)
        )
        print(f"  produced in {time.monotonic() - began:.0f} s; cap {cap:,} events a partition")
        options = {
            "kafka.bootstrap.servers": broker.bootstrap_servers,
            "subscribe": topics,
            "startingOffsets": "earliest",
            "maxEventsPerPartition": str(cap),
        }
        source = KafkaSource(options)
        reader = source.streamReader(SCHEMA)
        assert isinstance(reader, KafkaStreamReader)
        alignment_fetches: list[int] = []
        filled: list[float] = []  # events an aligned batch read / what its cap allowed
        uncapped: list[float] = []
        capped: list[float] = []
        read_per_batch: list[int] = []
        start = reader.initialOffset()
        reader.latestOffset(start, ReadAllAvailable())  # clients made, true ends probed
        while True:
            began = time.monotonic()
            everything = reader.latestOffset(start, ReadAllAvailable())
            uncapped.append(time.monotonic() - began)
            began, fetches_before = time.monotonic(), reader.alignment_fetches
            read_before, allowed_before = reader.aligned_events, reader.allowed_events
            end = reader.latestOffset(start, ReadMaxRows(cap))
            capped.append(time.monotonic() - began)
            if reader.alignment_fetches > fetches_before:
                alignment_fetches.append(reader.alignment_fetches - fetches_before)
                allowed = reader.allowed_events - allowed_before
                filled.append((reader.aligned_events - read_before) / allowed if allowed else 1.0)
            read_per_batch.append(sum(end[key] - start.get(key, end[key]) for key in end))
            if end in (start, everything):
                break
            start = end
        reader.stop()
    print(summary("  uncapped (baseline)", uncapped))
    print(summary("  capped and aligned ", capped))
    print(
        f"  alignments: {len(alignment_fetches)}, record fetches per alignment p50 "
        f"{statistics.median(alignment_fetches or [0]):.0f}, max "
        f"{max(alignment_fetches, default=0)}; events an aligned batch read, of what its "
        f"cap allowed, p50 {statistics.median(filled or [0]):.0%}, min "
        f"{min(filled, default=0):.0%}"
    )
    print(
        f"  records per capped batch: p50 {statistics.median(read_per_batch):,.0f}, "
        f"max {max(read_per_batch):,}"
    )


if __name__ == "__main__":
    main()
