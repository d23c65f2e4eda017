"""What one ``collect admin`` poll costs on a real Apache Kafka 4.1 cluster, by size.

    python bench/admin_poll_bench.py                       # 1,000 and 10,000 partitions x 3
    python bench/admin_poll_bench.py --partitions 1000 --polls 20
    python bench/admin_poll_bench.py --partitions 30000 --brokers 6
    python bench/admin_poll_bench.py --partitions 10000 --no-records --baseline /tmp/base

``--baseline`` is a source tree of another commit (``git archive <commit> | tar -x -C
/tmp/base``): its collector is measured too, on the same cluster, right before this
tree's, so that both figures share the cluster's state and the machine's load. Each tree's
polls run in a process of their own (``--measure``: the tree's modules on ``PYTHONPATH``),
so that each CPU figure is that process's alone.

For each size, a cluster of ``--brokers`` (3; the lab's, from the Maven jars) gets that
many partitions, replication factor 3, with one record in each (none with
``--no-records``): one topic up to 5,000, past that topics of at most 5,000 (a topic of
10,000 is more metadata records than the KRaft controller takes in one operation).
Once every replica answers its log end offset, one after the other, ``--polls`` of each:

* **collector**: ``AdminCollector.poll_once()`` as ``isrwatch collect admin`` runs it:
  the requests, the snapshot, the diff, every event checked, and encoded as the Kafka
  records its publisher sends (``--sink packed``, the default ``fetch_responses_form``:
  the fetch responses in packs; ``--sink json-lines``: ``--dry-run``'s line per event),
  then discarded;
* **source alone**: ``KafkaAdminSource.snapshot()``, the public call the collector makes
  first: the same requests on the same kafka-python client (Metadata, DescribeCluster,
  DescribeQuorum, DescribeConfigs, ListOffsets per broker) and their answers as a
  snapshot, but no diff or event: what asking costs.

A broker keeps a file open for each replica it holds (its log segment): at 3 brokers,
30,000 partitions are 30,000 open files in each JVM, past a 20,000 open-file limit, where
more brokers share them.

It prints per poll: wall time (median, max), this process's CPU, and the requests sent
per node (counted at kafka-python's connections) and per API; then the cost per
partition, and the partitions one core keeps at a 1 s poll, extrapolated linearly from
the largest size (the collector is one Python thread).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streaming.config import FetchResponsesForm, IsrwatchConfig
from streaming.feeds.collectors.admin_collector import AdminCollector
from streaming.feeds.collectors.admin_source import KafkaAdminSource
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.publisher import JsonLinesPublisher
from streaming.feeds.wire import InputRecord, kafka_records
from streaming.tools.lab.cluster import DEFAULT_HEAP_MB, LabCluster
from streaming.tools.lab.distribution import LINES

HERE = Path(__file__).resolve().parent.parent


class PackedRecords:
    """The collector's Kafka publisher up to the producer: each poll's events as the
    Kafka records it would send (fetch responses packed), then dropped."""

    def publish(self, events: list[InputRecord]) -> None:
        kafka_records(events, FetchResponsesForm.PACKED)

    def close(self) -> None:
        pass


def count_requests() -> Counter[tuple[str, str]]:
    """Every request kafka-python sends from now on, by (node, API): its connections'
    ``send_request``, wrapped (the client's own metadata refreshes included)."""
    from kafka.net.connection import KafkaConnection

    counts: Counter[tuple[str, str]] = Counter()
    send = KafkaConnection.send_request

    def counted(self: Any, request: Any, request_timeout_ms: Any = None) -> Any:
        counts[(str(self.node_id), type(request).__name__.split("_v")[0])] += 1
        return send(self, request, request_timeout_ms=request_timeout_ms)

    KafkaConnection.send_request = counted
    return counts


def per_poll(counts: Counter[tuple[str, str]], polls: int) -> str:
    """The requests of ``polls`` polls, per poll: by node, then by API."""
    nodes: Counter[str] = Counter()
    apis: Counter[str] = Counter()
    for (node, api), n in counts.items():
        nodes[node] += n
        apis[api] += n
    by_node = ", ".join(f"{node}: {n / polls:g}" for node, n in sorted(nodes.items()))
    by_api = ", ".join(f"{api} {n / polls:g}" for api, n in sorted(apis.items()))
    return f"by node {by_node}; by API {by_api}"


def settle(source: KafkaAdminSource, replicas: int, timeout_s: float = 1800) -> float:
    """Seconds until every replica answers its log end offset: Kafka acknowledges a
    CreateTopics once the controller committed it, and the brokers create the logs after."""
    started = time.monotonic()
    while len(source.snapshot().log_end_offsets) < replicas:
        if time.monotonic() - started > timeout_s:
            raise SystemExit(f"the brokers had not created {replicas} logs in {timeout_s:.0f} s")
        time.sleep(5)
    return time.monotonic() - started


def timed(call: Callable[[], Any], polls: int) -> tuple[list[float], list[float]]:
    walls, cpus = [], []
    for _ in range(polls):
        wall, cpu = time.perf_counter(), time.process_time()
        call()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return walls, cpus


# Kafka 4.1's KRaft controller refuses a CreateTopics request of more than 10,000
# partitions ("Excessively large number of partitions per request") and an operation of
# more than 10,000 metadata records (MAX_RECORDS_PER_USER_OP: "Unable to perform
# excessively large batch operation", which a topic of 10,000 partitions, one
# PartitionRecord each and its TopicRecord, got here): topics of at most 5,000, one request
# each
PARTITIONS_PER_REQUEST = 5_000


def topic_sizes(partitions: int) -> list[tuple[str, int]]:
    """The topics that make ``partitions``: ``wide``, then ``wide-1``, ``wide-2``..."""
    sizes: list[tuple[str, int]] = []
    while partitions > 0:
        size = min(partitions, PARTITIONS_PER_REQUEST)
        sizes.append((f"wide-{len(sizes)}" if sizes else "wide", size))
        partitions -= size
    return sizes


def create_topic(bootstrap: str, partitions: int, records: bool) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 50})
    for name, size in topic_sizes(partitions):
        for future in admin.create_topics(
            [NewTopic(name, num_partitions=size, replication_factor=3)],
            operation_timeout=600,
        ).values():
            future.result(timeout=900)
        if not records:
            continue
        for partition in range(size):
            producer.produce(name, value=b"x", partition=partition)
            producer.poll(0)
        producer.flush(300)


def measure(bootstrap: str, replicas: int, polls: int, sink: str) -> dict[str, Any]:
    """This process's figures for one tree: the collector's polls, then the source's."""
    config = IsrwatchConfig.model_validate({"kafka": {"bootstrap_servers": bootstrap}})
    source = KafkaAdminSource(config.kafka)
    publisher: Any = PackedRecords() if sink == "packed" else JsonLinesPublisher(io.StringIO())
    collector = AdminCollector(source, publisher, CollectorMetrics("admin"), None)
    settle(source, replicas)
    collector.poll_once()  # the first poll sends every partition (and compiles): not steady
    counts = count_requests()
    c_wall, c_cpu = timed(collector.poll_once, polls)
    c_requests = per_poll(counts, polls)
    counts.clear()
    b_wall, b_cpu = timed(source.snapshot, polls)
    b_requests = per_poll(counts, polls)
    source.close()
    return {
        "collector_wall": c_wall,
        "collector_cpu": c_cpu,
        "source_wall": b_wall,
        "source_cpu": b_cpu,
        "collector_requests": c_requests,
        "source_requests": b_requests,
        "collector_module": sys.modules[AdminCollector.__module__].__file__,
    }


def measured_in(
    tree: Path, bootstrap: str, replicas: int, polls: int, sink: str
) -> dict[str, Any] | None:
    """``measure`` in a process of its own, with ``tree``'s modules; None if it failed
    (its error printed: a poll that timed out, at sizes the brokers hardly answer)."""
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--measure",
        bootstrap,
        "--replicas",
        str(replicas),
        "--polls",
        str(polls),
        "--sink",
        sink,
    ]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"  failed ({done.returncode}):\n{done.stderr[-3000:]}", flush=True)
        return None
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def summary(label: str, size: int, figures: dict[str, Any]) -> str:
    def p50(name: str) -> float:
        return float(statistics.median(figures[name]))

    return (
        f"{label:>21} {size:>7} partitions: collector wall p50 {p50('collector_wall'):.3f} s "
        f"max {max(figures['collector_wall']):.3f} s, CPU p50 {p50('collector_cpu'):.3f} s "
        f"(min {min(figures['collector_cpu']):.3f}, max {max(figures['collector_cpu']):.3f})"
        f" | source alone wall p50 {p50('source_wall'):.3f} s, CPU p50 {p50('source_cpu'):.3f} s"
        f"\n  requests per poll, collector: {figures['collector_requests']}"
        f"\n  requests per poll, source alone: {figures['source_requests']}"
        f"\n  collector from {figures['collector_module']}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="1000,10000")
    parser.add_argument("--polls", type=int, default=10)
    parser.add_argument(
        "--no-records",
        action="store_true",
        help="leave the partitions empty (writing one record to each, acks=all, took most of"
        " the setup at 10,000 partitions on a busy 2-core machine)",
    )
    parser.add_argument(
        "--brokers",
        type=int,
        default=3,
        help="each holds every partition's replica at 3 brokers: one open file each",
    )
    parser.add_argument(
        "--broker-heap-mb",
        type=int,
        default=DEFAULT_HEAP_MB,
        help="each broker's heap (the lab's 512 MiB is for a dozen partitions)",
    )
    parser.add_argument(
        "--sink",
        default="packed",
        help="packed, json-lines, or both (packed,json-lines): each measured in turn",
    )
    parser.add_argument(
        "--baseline", type=Path, help="another commit's source tree, measured first"
    )
    parser.add_argument("--measure", metavar="BOOTSTRAP", help=argparse.SUPPRESS)
    parser.add_argument("--replicas", type=int, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.measure:
        figures = measure(options.measure, options.replicas, options.polls, options.sink)
        print(json.dumps(figures))
        return 0
    trees = [("baseline", options.baseline)] if options.baseline else []
    trees.append(("this tree", HERE))
    rows = []
    for size in [int(p) for p in options.partitions.split(",")]:
        with tempfile.TemporaryDirectory(prefix="admin-bench-") as work:
            cluster = LabCluster(
                LINES["4.1"], options.brokers, Path(work), heap_mb=options.broker_heap_mb
            )
            with cluster:
                cluster.start()
                started = time.monotonic()
                create_topic(cluster.bootstrap_servers, size, not options.no_records)
                print(f"{size} partitions x 3 created in {time.monotonic() - started:.0f} s")
                config = IsrwatchConfig.model_validate(
                    {"kafka": {"bootstrap_servers": cluster.bootstrap_servers}}
                )
                source = KafkaAdminSource(config.kafka)
                print(f"every replica's log end answered after {settle(source, size * 3):.0f} s")
                source.close()
                for sink in options.sink.split(","):
                    for tree_label, tree in trees:
                        label = f"{tree_label}, {sink}"
                        print(f"load average before {label}: {os.getloadavg()}", flush=True)
                        measured = measured_in(
                            tree, cluster.bootstrap_servers, size * 3, options.polls, sink
                        )
                        if measured is not None:
                            rows.append((label, size, measured))
                            print(summary(label, size, measured), flush=True)
                print(f"load average at the end: {os.getloadavg()}", flush=True)
    for label, size, figures in rows:
        if size != rows[-1][1]:
            continue
        per_partition_ms = statistics.median(figures["collector_cpu"]) / size * 1000
        print(
            f"{label}: collector CPU per partition (x3 replicas) per poll: "
            f"{per_partition_ms * 1000:.1f} us; one core at a 1 s poll keeps about "
            f"{int(1000 / per_partition_ms):,} partitions"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
