"""What one ``collect admin`` process spends turning a poll into events and publishing
them, packed and as one JSON record per fetch, at a size no cluster on this machine
reaches: a snapshot of N partitions x 3 replicas on 6 brokers, made up here, published to
the embedded broker.

    python bench/collector_publish_bench.py [--partitions 100000] [--polls 5]
        [--forms packed json] [--state-file]

For each form, a collector as ``isrwatch collect admin`` runs it (``AdminCollector``
with the ``KafkaPublisher`` of the shipped configuration but for the form), fed by a
source that answers a new snapshot at each poll instead of asking a cluster:

* the **first poll**: every partition is new, so one ``LeaderAndIsr`` each, the brokers'
  and topics' settings, and one fetch response per follower;
* then ``--polls`` **steady polls**: every log end offset moved by 10, nothing else
  changed: one fetch response per follower (2 N events), as every poll of a quiet
  cluster sends.

With ``--state-file`` the collector also writes its state file after each poll, as
``isrwatch collect admin`` does (in a temporary directory; without it, as ``--dry-run``,
it keeps none).

Printed per form and kind of poll: wall time and this process's CPU (median and max over
the polls), events, Kafka records and bytes sent, and the steady poll's CPU per event.
Goal (issue: "the collector keeps up on its side"): a steady poll of 100,000 partitions x
3 replicas encoded and published within 1 s. What the poll's requests cost is not part of
this: ``bench/admin_poll_bench.py`` measures them on a real cluster; a full poll costs
both. Nothing is asserted; the machine is shared (the load average is printed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from streaming.config import FetchResponsesForm, IsrwatchConfig, load_config
from streaming.feeds.collectors.admin_collector import AdminCollector
from streaming.feeds.collectors.admin_poller import ClusterSnapshot, PartitionInfo
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.collectors.polled_partitions import (
    PartitionOffsets,
    PolledPartitions,
    ReplicaOffsets,
)
from streaming.feeds.publisher import KafkaPublisher
from streaming.tools.embedded_broker import EmbeddedBroker

BROKERS = 6
PER_TOPIC = 1000
"""Partitions per topic: the cluster's topics are ``t0000``, ``t0001``, ..."""
T0_MS = 1_700_000_000_000


def cluster(partitions: int, poll: int) -> ClusterSnapshot:
    """The snapshot of poll ``poll``: partition p led by broker p mod 6 with the next two
    as followers, all in sync, every replica's log end offset 10 x ``poll``."""
    topics: dict[str, dict[int, PartitionInfo]] = {}
    offsets: dict[tuple[str, int, int], int] = {}
    watermarks: dict[tuple[str, int], int] = {}
    leo = 10 * poll
    for p in range(partitions):
        topic, number = f"t{p // PER_TOPIC:04d}", p % PER_TOPIC
        leader = p % BROKERS
        replicas = (leader, (leader + 1) % BROKERS, (leader + 2) % BROKERS)
        topics.setdefault(topic, {})[number] = PartitionInfo(leader, 0, replicas, replicas)
        for broker in replicas:
            offsets[(topic, number, broker)] = leo
        watermarks[(topic, number)] = leo
    ts = T0_MS + 1000 * poll
    # as columns, as KafkaAdminSource gives them: the dicts would be turned into columns
    # in every timed poll, a cost the collector does not have
    table = PolledPartitions.of(topics)
    return ClusterSnapshot(
        ts=ts,
        controller_id=0,
        controller_epoch=1,
        brokers=tuple(range(BROKERS)),
        partitions=table,
        min_insync_replicas=dict.fromkeys(topics, 2),
        replica_lag_time_max_ms=dict.fromkeys(range(BROKERS), 30_000),
        log_end_offsets=ReplicaOffsets(table, ReplicaOffsets.aligned(offsets, table)),
        high_watermarks=PartitionOffsets(table, PartitionOffsets.aligned(watermarks, table)),
        offsets_ts=ts,
    )


class PreparedPolls:
    """A ``SnapshotSource`` answering snapshots made before the timing starts: making a
    snapshot of 100,000 partitions here costs more than the collector's work on it."""

    def __init__(self, snapshots: Sequence[ClusterSnapshot]) -> None:
        self._snapshots = list(snapshots)

    def snapshot(self) -> ClusterSnapshot:
        return self._snapshots.pop(0)

    def close(self) -> None:
        pass


class CountingProducer:
    """kafka-python's producer, counting the records and bytes sent through it."""

    def __init__(self, producer: Any) -> None:
        self._producer = producer
        self.records = 0
        self.bytes = 0

    def send(self, topic: str, key: bytes, value: bytes) -> Any:
        self.records += 1
        self.bytes += len(value)
        return self._producer.send(topic, key=key, value=value)

    def flush(self, timeout: float | None = None) -> None:
        self._producer.flush(timeout=timeout)

    def close(self) -> None:
        self._producer.close()


@dataclass(frozen=True)
class Poll:
    wall_s: float
    cpu_s: float
    events: int
    records: int
    bytes: int


def run_form(
    broker: EmbeddedBroker,
    form: FetchResponsesForm,
    partitions: int,
    polls: int,
    state_file: Path | None = None,
) -> list[Poll]:
    """The first poll and ``polls`` steady ones of a collector writing ``form``."""
    suffix = f"{form.value}-{os.getpid()}-{time.monotonic_ns() % 100_000}"
    controller, fetches = f"controller-events-{suffix}", f"fetch-responses-{suffix}"
    broker.create_topics([controller])
    broker.create_topics([fetches], partitions=4)
    config: IsrwatchConfig = load_config(
        None,
        {
            "kafka.bootstrap_servers": broker.bootstrap_servers,
            "topics.controller_events": controller,
            "topics.fetch_responses": fetches,
            "topics.fetch_responses_form": form.value,
        },
        environ={},
    )
    from kafka import KafkaProducer

    producer = CountingProducer(
        KafkaProducer(acks="all", linger_ms=20, **config.kafka.kafka_python_options())
    )
    snapshots = [cluster(partitions, poll) for poll in range(polls + 1)]
    collector = AdminCollector(
        PreparedPolls(snapshots),
        KafkaPublisher(config, producer=producer),
        CollectorMetrics("admin", CollectorRegistry()),
        state_file,
    )
    measured = []
    try:
        for _ in range(polls + 1):
            records, sent = producer.records, producer.bytes
            wall, cpu = time.monotonic(), time.process_time()
            events = collector.poll_once()
            measured.append(
                Poll(
                    time.monotonic() - wall,
                    time.process_time() - cpu,
                    events,
                    producer.records - records,
                    producer.bytes - sent,
                )
            )
    finally:
        producer.close()
    return measured


def report(form: FetchResponsesForm, polls: list[Poll]) -> dict[str, float]:
    first, steady = polls[0], polls[1:]
    print(
        f"{form.value:>6} first poll: {first.wall_s:.2f} s wall, {first.cpu_s:.2f} s CPU, "
        f"{first.events:,} events in {first.records:,} records ({first.bytes / 1e6:.1f} MB)",
        flush=True,
    )
    if not steady:
        return {}
    wall = [p.wall_s for p in steady]
    cpu = [p.cpu_s for p in steady]
    events = steady[0].events
    per_event_us = statistics.median(cpu) / events * 1e6 if events else float("nan")
    print(
        f"{form.value:>6} steady poll ({len(steady)}): wall median {statistics.median(wall):.2f} s "
        f"max {max(wall):.2f} s; CPU median {statistics.median(cpu):.2f} s max {max(cpu):.2f} s; "
        f"{events:,} events in {steady[0].records:,} records "
        f"({steady[0].bytes / 1e6:.1f} MB), {per_event_us:.2f} µs CPU an event",
        flush=True,
    )
    return {"wall": statistics.median(wall), "cpu": statistics.median(cpu), "us": per_event_us}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--polls", type=int, default=5, help="steady polls per form")
    parser.add_argument(
        "--forms",
        nargs="+",
        choices=[form.value for form in FetchResponsesForm],
        default=[FetchResponsesForm.PACKED.value, FetchResponsesForm.JSON.value],
    )
    parser.add_argument(
        "--state-file",
        action="store_true",
        help="write the collector's state file after each poll (collect admin does)",
    )
    args = parser.parse_args(argv)
    from kafka.record import util as kafka_record_util

    # kafka-python's CRC-32C of each record batch: in C with the crc32c package, else in
    # Python (80 ms a megabyte, most of a packed poll's CPU): say which this run had
    crc = "C (crc32c)" if kafka_record_util.crc32c_c is not None else "Python"
    print(
        f"collect admin, encoding and publishing: {args.partitions:,} partitions x 3 replicas "
        f"on {BROKERS} brokers, the embedded broker; kafka-python's CRC-32C in {crc}; "
        f"state file {'written each poll' if args.state_file else 'none'}; "
        f"load average {os.getloadavg()}",
        flush=True,
    )
    results = {}
    with EmbeddedBroker() as broker:
        broker.start()
        for name in args.forms:
            form = FetchResponsesForm(name)
            with tempfile.TemporaryDirectory() as work:
                state = Path(work) / "collect-admin.json" if args.state_file else None
                polls = run_form(broker, form, args.partitions, args.polls, state)
            results[form] = report(form, polls)
    packed, json_form = results.get(FetchResponsesForm.PACKED), results.get(FetchResponsesForm.JSON)
    if packed and json_form:
        print(
            f"steady poll, packed against JSON: wall {packed['wall']:.2f} s / "
            f"{json_form['wall']:.2f} s, CPU {packed['cpu']:.2f} s / {json_form['cpu']:.2f} s "
            f"(goal: packed within 1 s wall); load average {os.getloadavg()}",
            flush=True,
        )


if __name__ == "__main__":
    main()
