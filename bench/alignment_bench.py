"""What aligning capped micro-batches on event time costs the planner, next to planning
the same backlog without a cap, in the same run.

    python bench/alignment_bench.py [--fetch-partitions 12] [--records 600000] [--cap 10000]

The embedded broker gets a backlog: ``--records`` fetch responses over
``--fetch-partitions`` partitions of one topic, with one controller event per 1,000 of
them in a topic of one partition, event times one millisecond apart per 50 records.
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--fetch-partitions", type=int, default=12)
    parser.add_argument("--records", type=int, default=600_000)
    parser.add_argument("--cap", type=int, default=10_000, help="records per partition per batch")
    args = parser.parse_args(argv)
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory():
        broker.start()
        controller, fetches = "bench-controller-events", "bench-fetch-responses"
        broker.create_topics([controller])
        broker.create_topics([fetches], partitions=args.fetch_partitions)
        began = time.monotonic()
        produce(broker.bootstrap_servers, controller, fetches, args.fetch_partitions, args.records)
        print(
            f"alignment bench: {args.records:,} fetch records over {args.fetch_partitions} "
            f"partitions + {args.records // FETCHES_PER_CONTROLLER_EVENT:,} controller "
            f"events, produced in {time.monotonic() - began:.0f} s; cap {args.cap:,} "
            "records per partition",
            flush=True,
        )
        options = {
            "kafka.bootstrap.servers": broker.bootstrap_servers,
            "subscribe": f"{controller},{fetches}",
            "startingOffsets": "earliest",
            "maxEventsPerPartition": str(args.cap),
        }
        source = KafkaSource(options)
        reader = source.streamReader(SCHEMA)
        assert isinstance(reader, KafkaStreamReader)
        alignment_fetches: list[int] = []
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
            end = reader.latestOffset(start, ReadMaxRows(args.cap))
            capped.append(time.monotonic() - began)
            if reader.alignment_fetches > fetches_before:
                alignment_fetches.append(reader.alignment_fetches - fetches_before)
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
        f"{max(alignment_fetches, default=0)}"
    )
    print(
        f"  records per capped batch: p50 {statistics.median(read_per_batch):,.0f}, "
        f"max {max(read_per_batch):,}; cap x partitions = "
        f"{args.cap * (args.fetch_partitions + 1):,}"
    )


if __name__ == "__main__":
    main()
