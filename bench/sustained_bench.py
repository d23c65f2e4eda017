"""The streaming job under sustained load, next to references measured in the same run.

    python -u bench/sustained_bench.py [--partitions 100000] [--rates 50000 100000 150000]
        [--seconds 180] [--shards N] [--trigger-ms MS]
        [--sections clients controller rates catchup references replay]
        [--find-max LOW HIGH] [--all-rates] [--reference-records 1000000]
        [--reference-seconds 300] [--per-partition-partitions 2000] [--job-rate EVENTS_S]
        [--replay-seconds 1200] [--source-formats python kafka] [--wires packed json]
        [--catchup-rate R] [--outage-seconds 600] [--catchup-seconds 1800]
        [--broker embedded|kafka-4.1 [--port-base PORT]] [--short]

The job runs with the shipped configuration (``conf/isrwatch.yaml``'s defaults) but for
what the bench must set or is told to (``--shards``, ``--trigger-ms``, the source format
and wire of a run, no /metrics server): the run starts by printing every setting it
overrides, shipped value and its own, and the summary lists them.

On the embedded broker (``--broker kafka-4.1``: a one-node Apache Kafka 4.1 from ``make
kafka``, whose ListOffsets gives the true log end, as Spark's connector needs),
``local[2]``, for a cluster of ``--partitions`` partitions x 3 replicas (6 brokers, T =
10 s); every run's cold start is followed by one round of fetches on its wire that is not
measured (a Python worker's first fetches pay its warm-up).

Sections (``--sections``, all by default):

* ``clients``: kafka-python (``json.loads`` per record) against confluent-kafka (msgspec
  per record) reading the same records: records/s and CPU per record.
* ``controller``: the cold start (one LeaderAndIsr per partition before the query
  starts; seconds from the query's start until all are applied) and a failover
  (UpdateMetadata of every partition to 6 brokers, in events of 1,000 partitions;
  seconds until applied). ``rates`` needs the cold start and runs it in any case.
* ``rates``: each rate R for ``--seconds``, for each (source, wire) pair of
  ``--source-formats`` (``python``: this project's Python Data Source; ``kafka``: Spark's
  connector from ``make spark-kafka``) and ``--wires`` (``packed``: fetch packs, the
  shipped form; ``json``: one JSON record per fetch), one after the other in the same
  Spark session, each on topics and a checkpoint of its own; the summary's figures of
  each are prefixed with it (``python/packed: ``). A producer in a process of its own
  sends fetch responses (every follower of every partition in turn, event time = wall
  time) at R/s: JSON values pre-encoded, or packs as a collector writes them (one
  leader's fetches, at most ``MOST_ROWS_PER_PACK``, all at the tick's time; the
  constant columns built once). Printed: the rate produced, the producer's CPU and its
  CPU per event; the source backlog (records produced but not yet
  through a completed batch), taken just after each batch, and its least-squares slope
  over the last two thirds, in records/s: the backlog is bounded when the slope is at
  most 5 % of R and it drains after the phase; p50/p99 micro-batch duration; p99
  end-to-end latency (produced -> written to partition-health and /metrics, which the
  sink does before its hook sees the batch: the hook time minus the oldest event time
  the batch could hold); detection latency (one follower of each of 20 probe partitions
  stops catching up a third into the phase: time from the event time at which its lag
  passes T, known exactly from what was produced, to the hook seeing a health record
  with that follower past T; the probes still missing when the input is applied are
  waited for, with a bound), against its goal, one trigger interval plus one batch; the
  job's CPU per event (the driver's and every process under Spark's JVM, from /proc, over
  the phase and its drain, divided by the events applied meanwhile);
  state bytes per partition (the state store's own metrics) and peak RSS of the driver,
  the JVM and the Python workers. Then the batch cost fitted over the phases
  (``CoreCosts``): what one core keeps up with at a 10, 5 and 1 s collector poll, and
  the cores 1,000,000 partitions need. Rates above the first unbounded one are not run
  (``--all-rates`` runs them). ``--find-max LOW HIGH`` bisects the largest bounded R
  instead.
* ``catchup``: per pair, at R = ``--catchup-rate`` (the first of ``--rates``): a live
  phase of ``--seconds``; the query stopped (checkpoint kept) for ``--outage-seconds``
  while R goes on; the query restarted, R still going: the backlog at the restart, the
  time until it is back to the live phase's (just after a batch), the events applied a
  second meanwhile, next to the live phase's. Then a cold start on a busy topic: a query
  from ``earliest`` on ``--outage-seconds`` x R fetch events after the elections: the time
  until all are applied, and the rate. What the broker would hold is estimated first; if
  it does not fit (the embedded broker keeps its log in memory), the section says so and
  what would fit. Both bounded by ``--catchup-seconds``.
* ``references``: the source floor (a plain confluent-kafka consumer decoding each value
  of ``--reference-records`` fetch responses), the Spark floor (the job's routing and
  stateful step fed from parquet files of the same records, no Kafka) and the
  per-``(topic, partition)`` design (``stream_bench``; one LeaderAndIsr and one round
  of fetches per partition), each bounded by ``--reference-seconds`` (what was done by
  then is reported); job / source floor (goal >= 0.5) and job / Spark floor (the job's
  figure: its events/s while its batches ran, the largest over the rates of the
  python/json run, as the references read JSON, or ``--job-rate`` from an earlier run).
* ``replay``: ``isrwatch replay`` of the JSON envelopes and the job (available-now) on the
  same envelopes, written on each wire of ``--wires`` by the project's publisher
  (``streaming.feeds.wire.kafka_records``), agree record for record on elections + 2
  rounds of fetches at ``--partitions`` (the job bounded by ``--replay-seconds``); where
  they differ, the first differences are printed.

A summary table of every figure ends the run, with the load average. ``--short`` runs
it all small (2,000 partitions, one rate, a few seconds each, a 10 s outage): the suite's
smoke test runs it. Before any run with the packed wire, ``check_packs`` asserts that the
packs hold exactly the fetch responses the JSON wire sends. No figure is judged: the
machine is shared (the load average is printed).
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import resource
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]

from state import WireFetch, decode_record, encode_record
from state.events import MOST_ROWS_PER_PACK, DeadLetter, Source
from state.fetch_decoder import INT_COLUMNS, DecodedFetches, decode_fetches
from state.fetch_pack import PACK_SCHEMA, decode_fetch_pack, framed_pack
from state.settings import RuleSettings
from streaming.config import FetchResponsesForm, IsrwatchConfig, load_config
from streaming.feeds.wire import InputRecord, kafka_records, partition_key
from streaming.job.metrics import HealthExporter
from streaming.job.query import input_sources, make_sink, run, spark_session, start_query
from streaming.job.shard_state import HEALTH
from streaming.job.sinks import shard_stats_of
from streaming.tools.embedded_broker import EmbeddedBroker
from streaming.tools.lab.cluster import LabCluster
from streaming.tools.lab.distribution import LINES
from streaming.tools.replay import replay

BROKERS = 6
PER_TOPIC = 1000
T_MS = 10_000  # replica.lag.time.max.ms of every broker (--short: 2 s)
FETCH_PARTITIONS = 4
WIRES = ("packed", "json")  # the fetch-responses forms (docs/event-contract.md#fetch-packs)
# The columns of a pack the load writes: the contract's required fields, in the order the
# project's writer (``encode_fetch_pack``) puts them.
PACK_COLUMNS = [
    name for name in PACK_SCHEMA.names if name not in ("log_start_offset", "error", "bytes")
]


class TopicBroker(Protocol):
    """What the bench needs of a broker: where it is, and topics on it."""

    @property
    def bootstrap_servers(self) -> str: ...

    def create_topics(self, names: Iterable[str], partitions: int = 1) -> None: ...


class LabBroker:
    """A one-node Apache Kafka 4.1 (KRaft, ``make kafka``) as the bench's broker."""

    def __init__(self, workdir: Path, port_base: int | None) -> None:
        self.cluster = LabCluster(LINES["4.1"], 1, workdir, port_base=port_base)

    @property
    def bootstrap_servers(self) -> str:
        return self.cluster.bootstrap_servers

    def create_topics(self, names: Iterable[str], partitions: int = 1) -> None:
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers)
        admin.create_topics([NewTopic(name, partitions, 1) for name in names])
        admin.close()

    def __enter__(self) -> LabBroker:
        self.cluster.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.cluster.stop()


PROBES = 20
BOUNDED_SLOPE = 0.05  # backlog growth (records/s) over R at which the backlog counts as growing
PAST_T = ("SHRINK_ELIGIBLE", "SHRINK_OVERDUE")
SECTIONS = ("clients", "controller", "rates", "catchup", "references", "replay")
PER_PARTITION_TRIGGER_MS = 1000  # the per-(topic, partition) design: its batches are per group


def topic_of(p: int) -> tuple[str, int]:
    return f"topic-{p // PER_TOPIC:04d}", p % PER_TOPIC


def probe_follower(p: int) -> int:
    """The follower of a probe partition that stops catching up (the first, k = 0)."""
    return (p % BROKERS + 1) % BROKERS


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


@dataclass
class Summary:
    """Every figure the run measured, for the table at its end: (figure, value, goal)."""

    rows: list[tuple[str, str, str]] = field(default_factory=list)
    prefix: str = ""  # the source format's, when the run measures more than one

    def add(self, figure: str, value: str, goal: str = "") -> None:
        self.rows.append((self.prefix + figure, value, goal))

    def print(self) -> None:
        width = max((len(f) for f, _, _ in self.rows), default=10)
        value_width = max((len(v) for _, v, _ in self.rows), default=10)
        print(f"\nsummary ({load()}):", flush=True)
        for figure, value, goal in self.rows:
            print(f"  {figure:{width}s}  {value:{value_width}s}  {goal}", flush=True)


# ---------------------------------------------------------------- producing


def producer(bootstrap_servers: str) -> Any:
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": bootstrap_servers,
            "linger.ms": 50,
            "batch.num.messages": 100_000,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_097_151,
        }
    )


def send(prod: Any, topic: str, value: bytes, partition: int = 0) -> None:
    while True:
        try:
            prod.produce(topic, value, partition=partition)
            return
        except BufferError:
            prod.poll(0.05)


def controller_values(partitions: int, ts: int) -> list[bytes]:
    """T = 10 s on every broker, then one LeaderAndIsr per partition."""
    values = [
        json.dumps(
            {"type": "BrokerConfig", "ts": ts, "broker": b, "replica_lag_time_max_ms": T_MS}
        ).encode()
        for b in range(BROKERS)
    ]
    for p in range(partitions):
        topic, number = topic_of(p)
        leader = p % BROKERS
        replicas = [leader, (leader + 1) % BROKERS, (leader + 2) % BROKERS]
        values.append(
            json.dumps(
                {
                    "type": "LeaderAndIsr",
                    "ts": ts,
                    "topic": topic,
                    "partition": number,
                    "leader": leader,
                    "leader_epoch": 0,
                    "isr": replicas,
                    "replicas": replicas,
                    "partition_epoch": 0,
                }
            ).encode()
        )
    return values


def failover_values(partitions: int, ts: int) -> list[bytes]:
    """A new controller's UpdateMetadata of every partition to every broker."""
    values = []
    for broker in range(BROKERS):
        for start in range(0, partitions, 1000):
            states = []
            for p in range(start, min(start + 1000, partitions)):
                topic, number = topic_of(p)
                leader = p % BROKERS
                replicas = [leader, (leader + 1) % BROKERS, (leader + 2) % BROKERS]
                states.append(
                    {
                        "topic": topic,
                        "partition": number,
                        "leader": leader,
                        "leader_epoch": 0,
                        "isr": replicas,
                        "replicas": replicas,
                        "offline_replicas": [],
                    }
                )
            values.append(
                json.dumps(
                    {"type": "UpdateMetadata", "ts": ts, "broker": broker, "partitions": states}
                ).encode()
            )
    return values


def fetch_middles(partitions: int) -> list[bytes]:
    """The fixed part of every follower's fetch response, encoded once: index 2 p + k is
    follower k (0 or 1) of partition p, the order in which the load fetches."""
    middles = []
    for p in range(partitions):
        name, number = topic_of(p)
        leader = p % BROKERS
        for k in (0, 1):
            middles.append(
                b',"topic":"%s","partition":%d,"leader":%d,"follower":%d,'
                b'"leader_epoch":0' % (name.encode(), number, leader, (leader + 1 + k) % BROKERS)
            )
    return middles


def offsets_tail(fetch_offset: int, leader_leo: int, high_watermark: int) -> bytes:
    return b',"fetch_offset":%d,"leader_leo":%d,"high_watermark":%d}' % (
        fetch_offset,
        leader_leo,
        high_watermark,
    )


def fetch_values(partitions: int, count: int, ts0_ms: int) -> list[bytes]:
    """``count`` fetch responses, every follower in turn, each at its leader's LEO (which
    grows by 10 a round), 1,000 a millisecond of event time from ``ts0_ms``."""
    middles = fetch_middles(partitions)
    values = []
    for i in range(count):
        leo = 10 * (i // len(middles))
        values.append(
            b'{"ts":%d' % (ts0_ms + i // 1000)
            + middles[i % len(middles)]
            + offsets_tail(leo, leo, leo)
        )
    return values


@dataclass(frozen=True)
class Load:
    """What the load process sends: ``rate`` fetch responses a second for ``seconds``."""

    bootstrap_servers: str
    topic: str
    partitions: int
    rate: int
    seconds: float
    probes: tuple[int, ...]
    probe_after_s: float
    leo0: int  # the leaders' LEO at the start (above every earlier phase's)
    wire: str = "json"  # WIRES: one JSON record per fetch, or fetch packs
    # Set: no pacing; the event times are those of a load that began at this time (ms),
    # produced as fast as the producer goes (a backlog for the busy cold start).
    backfill_from_ms: int | None = None


class Probing:
    """The probe followers of a load (``generate_load``): from ``probe_after_s`` on, each
    stays at the offset of its last fetch, and its last normal fetch's time is kept."""

    def __init__(self, probes: Iterable[int], leo0: int) -> None:
        self.probes = frozenset(probes)
        self.leo0 = leo0
        self.last_caught_up: dict[int, int] = {}
        self.stuck: dict[int, int] = {}

    def offset(self, p: int, leo: int, probing: bool, now_ms: int) -> int | None:
        """The fetch offset of probe ``p``'s fetch in the round at ``leo``, or None for a
        normal fetch (at the LEO: it catches up)."""
        # Stuck only after a whole round: leo - 10 must be an offset it really fetched.
        if probing and (p in self.stuck or leo > self.leo0):
            return self.stuck.setdefault(p, leo - 10)
        self.last_caught_up[p] = now_ms
        return None

    def probed(self) -> dict[int, int]:
        """The last normal fetch's time of each probe that got stuck."""
        return {p: t for p, t in self.last_caught_up.items() if p in self.stuck}


Produce = Callable[..., None]  # confluent-kafka's Producer.produce, or a test's collector


class JsonWire:
    """One JSON record per fetch response: every follower of every partition in turn
    (index 2 p + k, ``fetch_middles``), each value completed from its pre-encoded middle
    by two byte concatenations; record i to Kafka partition i mod ``FETCH_PARTITIONS``
    (so a follower's fetches stay in one partition, in order)."""

    def __init__(self, partitions: int, probing: Probing, produce: Produce, poll: Any) -> None:
        self.middles = fetch_middles(partitions)
        self.probe_rows = {2 * p: p for p in probing.probes}
        self.probing = probing
        self.produce, self.poll = produce, poll
        self.i, self.leo = 0, probing.leo0
        self.tail = offsets_tail(self.leo, self.leo, self.leo)

    def send(self, topic: str, due: int, now_ms: int, probing: bool) -> None:
        produce, poll, middles, probe_rows = self.produce, self.poll, self.middles, self.probe_rows
        rows, i, leo, tail = len(middles), self.i, self.leo, self.tail
        head = b'{"ts":%d' % now_ms
        for _ in range(due):
            p = probe_rows.get(i)
            offset = None if p is None else self.probing.offset(p, leo, probing, now_ms)
            if offset is None:
                value = head + middles[i] + tail
            else:
                value = head + middles[i] + offsets_tail(offset, leo, offset)
            while True:
                try:
                    produce(topic, value, partition=i % FETCH_PARTITIONS)
                    break
                except BufferError:
                    poll(0.05)
            i += 1
            if i == rows:
                i, leo = 0, leo + 10
                tail = offsets_tail(leo, leo, leo)
        self.i, self.leo, self.tail = i, leo, tail


class PackWire:
    """Fetch packs as a collector writes them (docs/event-contract.md#fetch-packs): the
    fetches one leader served, at most ``MOST_ROWS_PER_PACK`` a pack, every row of a pack
    at the tick's time, keyed by the leader and sent to Kafka partition leader mod
    ``FETCH_PARTITIONS`` (a follower's fetches stay in one partition, in order).

    The followers take their turns leader by leader (the JSON wire's order, grouped by
    leader), so that a pack is a slice of columns built once: topic, partition, leader,
    follower and leader epoch never change. Per pack only the time and offsets are made
    (numpy), the probes patched in, and the columns framed as they are (``framed_pack``):
    the producer shares the 2 cores with the job."""

    def __init__(self, partitions: int, probing: Probing, produce: Produce, poll: Any) -> None:
        original = np.arange(2 * partitions)  # the JSON wire's row: 2 p + k
        p, k = original // 2, original % 2
        leader = p % BROKERS
        order = np.lexsort((original, leader))  # by leader, then the JSON wire's order
        p, k, leader = p[order], k[order], leader[order]
        topics = [f"topic-{n:04d}" for n in (p // PER_TOPIC).tolist()]
        self.constant = {
            "topic": pa.array(topics, pa.string()),
            "partition": pa.array(p % PER_TOPIC, pa.int64()),
            "leader": pa.array(leader, pa.int64()),
            "follower": pa.array((leader + 1 + k) % BROKERS, pa.int64()),
            "leader_epoch": pa.array(np.zeros(len(p), np.int64)),
        }
        self.leader = leader.tolist()
        # A pack never spans two leaders: cut where the leader changes (and at the round's
        # end, where the LEO grows).
        self.cuts = np.flatnonzero(np.diff(leader, append=-1)) + 1
        probe_row = {
            int(row): int(p[row]) for row in np.flatnonzero(k == 0) if p[row] in probing.probes
        }
        self.probe_at = np.array(sorted(probe_row), np.int64)
        self.probe_of = [probe_row[row] for row in self.probe_at.tolist()]
        self.probing = probing
        self.produce, self.poll = produce, poll
        self.i, self.leo = 0, probing.leo0

    def send(self, topic: str, due: int, now_ms: int, probing: bool) -> None:
        rows = len(self.leader)
        while due > 0:
            i = self.i
            cut = int(self.cuts[np.searchsorted(self.cuts, i, side="right")])
            end = min(i + due, cut, i + MOST_ROWS_PER_PACK)
            count = end - i
            offsets = np.full(count, self.leo, np.int64)
            first, last = np.searchsorted(self.probe_at, (i, end))
            for at, p in zip(
                self.probe_at[first:last].tolist(), self.probe_of[first:last], strict=True
            ):
                offset = self.probing.offset(p, self.leo, probing, now_ms)
                if offset is not None:
                    offsets[at - i] = offset
            constant = self.constant
            batch = pa.RecordBatch.from_arrays(
                [
                    pa.array(np.full(count, now_ms, np.int64)),
                    constant["topic"].slice(i, count),
                    constant["partition"].slice(i, count),
                    constant["leader"].slice(i, count),
                    constant["follower"].slice(i, count),
                    constant["leader_epoch"].slice(i, count),
                    pa.array(offsets),  # fetch_offset: the LEO, or a probe's stuck offset
                    pa.array(np.full(count, self.leo, np.int64)),
                    pa.array(offsets),  # high_watermark: as the JSON wire, the fetch offset
                ],
                names=PACK_COLUMNS,
            )
            leader = self.leader[i]
            value = framed_pack(batch)
            while True:
                try:
                    self.produce(
                        topic, value, key=b"%d" % leader, partition=leader % FETCH_PARTITIONS
                    )
                    break
                except BufferError:
                    self.poll(0.05)
            due -= count
            self.i = end
            if end == rows:
                self.i, self.leo = 0, self.leo + 10


def wire_of(name: str, partitions: int, probing: Probing, produce: Produce, poll: Any) -> Any:
    return (PackWire if name == "packed" else JsonWire)(partitions, probing, produce, poll)


def generate_load(load: Load, sent: Any, stop: Any, results: Any) -> None:
    """The load generator, in a process of its own so that it takes no time from the
    driver's Python (the sink and its hook run there).

    Every follower of every partition fetches in turn, event time = wall time, at the
    leader's LEO, which grows by 10 a round: each fetch catches the follower up (Kafka's
    Replica.updateFetchState: fetch offset >= the leader's LEO). From ``probe_after_s``
    on, follower 0 of each probe partition stays at the offset of its last fetch, the
    LEO of the round before: that fetch (offset >= the LEO at its previous fetch) leaves
    its last caught-up time at its previous fetch, and no later fetch moves it. So its
    lag passes T exactly T after ``last_caught_up[p]``, the time of its last normal fetch.
    ``sent`` (a shared integer) counts the fetch responses produced so far; a non-zero
    ``stop`` (shared too) ends the load early."""
    prod = producer(load.bootstrap_servers)
    probing = Probing(load.probes, load.leo0)
    wire = wire_of(load.wire, load.partitions, probing, prod.produce, prod.poll)
    count, total = 0, int(load.rate * load.seconds)
    tick_s = 0.02
    cpu, began, began_wall = time.process_time(), time.monotonic(), time.time()
    elapsed = 0.0
    while elapsed < load.seconds and not stop.value:
        if load.backfill_from_ms is None:
            elapsed = time.monotonic() - began
            now_ms = int(time.time() * 1000)
        else:  # as fast as it goes, in the event time of a paced load
            elapsed += tick_s
            now_ms = load.backfill_from_ms + int(1000 * elapsed)
        due = min(int(load.rate * elapsed), total) - count
        if due > 0:
            wire.send(load.topic, due, now_ms, elapsed >= load.probe_after_s)
            count += due
        sent.value = count
        prod.poll(0)
        if load.backfill_from_ms is None:
            time.sleep(max(0.0, tick_s - (time.monotonic() - began - elapsed)))
    elapsed = time.monotonic() - began
    prod.flush(600)
    cpu = time.process_time() - cpu
    results.send(
        {
            "sent": count,
            "elapsed": elapsed,
            "began_wall": began_wall,
            "cpu": cpu,
            "last_caught_up": probing.probed(),
        }
    )
    results.close()


class LoadProcess:
    """A :func:`generate_load` process; ``sent`` reads its count while it runs, ``stop``
    ends it early."""

    def __init__(self, load: Load) -> None:
        context = multiprocessing.get_context("spawn")  # no fork of a process with a JVM
        self._sent = context.Value("q", 0, lock=False)
        self._stop = context.Value("b", 0, lock=False)
        self._results, child = context.Pipe(duplex=False)
        self.process = context.Process(
            target=generate_load, args=(load, self._sent, self._stop, child), daemon=True
        )
        self.outcome: dict[str, Any] = {}

    def start(self) -> None:
        self.process.start()

    @property
    def sent(self) -> int:
        return int(self._sent.value)

    def stop(self) -> None:
        self._stop.value = 1

    def is_alive(self) -> bool:
        return self.process.is_alive() and not self._results.poll()

    def join(self) -> dict[str, Any]:
        if not self.outcome:
            self.outcome = self._results.recv()
            self.process.join(60)
        return self.outcome


def check_packs(partitions: int = 50) -> None:
    """Assert that the packed wire sends exactly the fetch responses the JSON wire sends:
    three whole rounds (the second and third with the probes stuck), each wire's records
    decoded by the job's own readers (``decode_fetch_pack``, ``decode_fetches``), the
    rows compared as sets (the wires take the followers in different orders, and a round
    is one tick, so each row has the same time in both); every pack one leader's, under
    its key, at one time, of at most ``MOST_ROWS_PER_PACK`` rows."""
    probes = tuple(range(0, partitions, 7))
    sent: dict[str, list[tuple[bytes, bytes | None, int]]] = {"json": [], "packed": []}
    caught_up = {}
    for name, records in sent.items():

        def collect(
            _topic: str,
            value: bytes,
            key: bytes | None = None,
            partition: int = 0,
            records: list[tuple[bytes, bytes | None, int]] = records,
        ) -> None:
            records.append((value, key, partition))

        probing = Probing(probes, 1000)
        wire = wire_of(name, partitions, probing, collect, None)
        for tick, probe in enumerate((False, True, True)):
            wire.send("fetches", 2 * partitions, 1_700_000_000_000 + 1000 * tick, probe)
        caught_up[name] = probing.probed()
    json_rows = decode_fetches([value for value, _, _ in sent["json"]])
    packed_rows: list[tuple[Any, ...]] = []
    for value, key, partition in sent["packed"]:
        pack = decode_fetch_pack(value)
        assert not isinstance(pack, DeadLetter), pack
        assert pack.dead == []
        assert 0 < len(pack) <= MOST_ROWS_PER_PACK
        assert len(set(pack.ints["ts"].tolist())) == 1, "a pack's rows share its tick's time"
        assert {key} == {b"%d" % leader for leader in pack.ints["leader"].tolist()}
        assert partition == int(pack.ints["leader"][0]) % FETCH_PARTITIONS
        packed_rows += rows_of(pack)
    assert json_rows.dead == []
    assert sorted(packed_rows) == sorted(rows_of(json_rows)), "packs differ from JSON"
    assert caught_up["packed"] == caught_up["json"]
    assert caught_up["json"]


def rows_of(decoded: DecodedFetches) -> list[tuple[Any, ...]]:
    columns = [decoded.ints[name].tolist() for name in INT_COLUMNS]
    return list(zip(decoded.topic, decoded.error, *columns, strict=True))


# ---------------------------------------------------------------- watching the job


@dataclass(frozen=True)
class Detection:
    wall_s: float  # when the hook saw it
    status: str
    last_caught_up_ms: int | None  # the model's, from the health record


class Watch:
    """The sink's hook: per batch, its stats and the probes' health (driver side)."""

    def __init__(self, probes: list[int]) -> None:
        self.lock = threading.Lock()
        self.batches: list[tuple[float, int, int]] = []  # (wall s, stream clock ms, rows)
        self.applied: dict[str, int] = {}
        self.shard_totals: dict[int, tuple[dict[str, int], int]] = {}
        self.error_responses = 0
        self.dead_letters = 0  # rejected, late or duplicate: taken, but not applied
        self.probe_keys = {"{}:{}".format(*topic_of(p)): p for p in probes}
        self.detected: dict[int, Detection] = {}
        self.ends: list[tuple[float, int]] = []  # (wall s, fetches taken) at each batch's end
        # Fetches taken by each batch: Spark's numInputRows counts the source's rows,
        # and fetches travel packed, one row per shard (streaming.job.routing.pack_fetches).
        self.taken_in_batch: dict[int, int] = {}
        self.since_ms = 0  # a probe counts when the model's caught-up time is this late

    def __call__(self, batch_id: int, rows: pd.DataFrame) -> None:
        wall = time.time()
        stats = shard_stats_of(rows)
        health = rows[(rows["kind"] == HEALTH) & rows["key"].isin(self.probe_keys.keys())]
        with self.lock:
            taken_before = self._taken()
            # Totals per shard, kept: a shard with nothing to do in a batch may not report.
            for shard in stats:
                self.shard_totals[shard.shard] = (
                    shard.applied_total,
                    shard.fetch_error_responses_total,
                )
            totals: dict[str, int] = {}
            for applied, _ in self.shard_totals.values():
                for kind, count in applied.items():
                    totals[kind] = totals.get(kind, 0) + count
            self.applied = totals
            self.error_responses = sum(errors for _, errors in self.shard_totals.values())
            self.dead_letters += sum(
                sum(shard.rejected.values()) + shard.late + shard.duplicates for shard in stats
            )
            clock = max((s.clock_ms for s in stats), default=-1)
            self.batches.append((wall, clock, len(rows)))
            self.ends.append((wall, self._taken()))
            self.taken_in_batch[batch_id] = self._taken() - taken_before
            # An unhealthy record crosses Spark once, in its shard's stats row (the job's
            # sink writes it from there); a healthy one as a health row.
            records = [decode_record(value) for value in health["value"]]
            records += [
                reported.record
                for shard in stats
                for reported in shard.unhealthy
                if reported.record.key in self.probe_keys
            ]
            for record in records:
                p = self.probe_keys[record.key]
                for follower in record.followers:
                    caught_up = follower.last_caught_up_ms
                    if (
                        follower.broker == probe_follower(p)
                        and follower.status in PAST_T
                        and (caught_up or 0) >= self.since_ms
                        and p not in self.detected
                    ):
                        self.detected[p] = Detection(wall, follower.status, caught_up)

    def start_phase(self, since_ms: int) -> None:
        with self.lock:
            self.detected.clear()
            self.since_ms = since_ms

    def fetches(self) -> int:
        """Fetch responses the job has taken (applied, answered with an error, or dead-
        lettered: none of the bench's fetches should be, and the phase prints how many)."""
        with self.lock:
            return self._taken()

    def _taken(self) -> int:
        return self.applied.get("FetchResponse", 0) + self.error_responses + self.dead_letters

    def wait_applied(self, kind: str, count: int, timeout_s: float) -> float | None:
        began = time.monotonic()
        while time.monotonic() - began < timeout_s:
            with self.lock:
                if self.applied.get(kind, 0) >= count:
                    return time.monotonic() - began
            time.sleep(0.2)
        return None


class Memory(threading.Thread):
    """Peak RSS (VmHWM) of the driver, the JVM and the Python workers, sampled."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peaks: dict[str, int] = {"driver": 0, "jvm": 0, "python workers": 0}
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(1.0):
            self.sample()

    def sample(self) -> None:
        me = os.getpid()
        workers = 0
        parents = _parents()
        for pid in map(str, parents):
            if not _descends(int(pid), me, parents):
                continue  # another job's process (the machine is shared)
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            hwm = next(
                (
                    int(line.split()[1]) * 1024
                    for line in status.splitlines()
                    if line.startswith("VmHWM")
                ),
                0,
            )
            if int(pid) == me:
                self.peaks["driver"] = max(self.peaks["driver"], hwm)
            elif b"java" in cmdline:
                self.peaks["jvm"] = max(self.peaks["jvm"], hwm)
            elif (
                b"pyspark.daemon" in cmdline
                or b"pyspark/daemon" in cmdline
                or (b"pyspark.worker" in cmdline)
            ):
                workers += hwm
        self.peaks["python workers"] = max(self.peaks["python workers"], workers)


def _parents() -> dict[int, int]:
    """Every process's parent, from /proc."""
    parents: dict[int, int] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            parents[int(pid)] = int(_stat(int(pid))[1])
        except (OSError, IndexError, ValueError):
            continue
    return parents


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name: state, ppid, ..., utime (11),
    stime (12), cutime (13), cstime (14), in clock ticks (proc(5))."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def job_cpu_parts() -> dict[str, float]:
    """CPU seconds the job has used so far, by process: ``driver``, this process (the
    bench's watch and sampling threads too, a small part); ``jvm``, Spark's JVM itself;
    ``python``, every process under the JVM (the Python workers) and those they or the
    JVM reaped (cutime, cstime). The producer's process, also this process's child, is
    not counted: it is the load, not the job."""
    me, tick = os.getpid(), os.sysconf("SC_CLK_TCK")
    parents = _parents()
    ticks = {"driver": sum(int(field) for field in _stat(me)[11:13]), "jvm": 0, "python": 0}
    jvms = [pid for pid, parent in parents.items() if parent == me and b"java" in _cmdline(pid)]
    for pid in parents:
        if any(_descends(pid, jvm, parents) for jvm in jvms):
            try:
                fields = [int(field) for field in _stat(pid)[11:15]]
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile: its parent counts it once it is reaped
            if pid in jvms:
                ticks["jvm"] += sum(fields[:2])
                ticks["python"] += sum(fields[2:])
            else:
                ticks["python"] += sum(fields)
    return {name: count / tick for name, count in ticks.items()}


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _descends(pid: int, ancestor: int, parents: dict[int, int]) -> bool:
    for _ in range(64):
        if pid == ancestor:
            return True
        if pid not in parents or pid <= 1:
            return False
        pid = parents[pid]
    return False


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def backlog_slope(
    samples: list[tuple[float, int, int]],
    ends: list[tuple[float, int]],
    began: float,
    elapsed_s: float,
) -> tuple[float, str]:
    """Least-squares slope (records/s) of the backlog over the last two thirds of a phase
    (the first third is the job reaching its pace), and what it was fitted on.

    ``samples``: (wall time, records produced, backlog) every second; ``ends``: (wall
    time, records taken) at each batch's end. The backlog is taken just after each
    batch: sampled at any time it is a sawtooth whose teeth (a batch's worth of records)
    would tilt a fit over a few long batches. With fewer than two batch ends in the
    window, the fit takes every second's sample, and says so."""
    start, end = began + elapsed_s / 3, began + elapsed_s
    window = [(wall, taken) for wall, taken in ends if start <= wall <= end]
    if len(window) >= 2:
        walls, produced = np.array([(w, p) for w, p, _ in samples], dtype=float).T
        at = np.array([wall for wall, _ in window])
        backlog = np.interp(at, walls, produced) - np.array([taken for _, taken in window])
        return float(np.polyfit(at, backlog, 1)[0]), f"{len(window)} batch ends"
    late = [(wall, backlog) for wall, _, backlog in samples if start <= wall <= end]
    if len(late) < 3:
        return float("nan"), "too few samples"
    at, backlog = np.array(late, dtype=float).T
    slope = float(np.polyfit(at, backlog, 1)[0])
    return slope, "every second (fewer than 2 batch ends: the sawtooth biases it)"


# ---------------------------------------------------------------- phases


def clients(broker: TopicBroker, count: int, summary: Summary) -> None:
    """kafka-python vs confluent-kafka on the same records (one thread each)."""
    from confluent_kafka import Consumer, TopicPartition
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaPartition

    topic = f"clients-{uuid.uuid4().hex[:6]}"
    broker.create_topics([topic], partitions=1)
    prod = producer(broker.bootstrap_servers)
    for value in fetch_values(1000, count, 0):
        send(prod, topic, value)
    prod.flush(60)
    print(f"\nKafka clients, {count:,} records, one thread:", flush=True)
    wall, cpu = time.monotonic(), time.process_time()
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        max_poll_records=10_000,
    )
    consumer.assign([KafkaPartition(topic, 0)])
    consumer.seek(KafkaPartition(topic, 0), 0)
    got = 0
    while got < count:
        for records in consumer.poll(timeout_ms=1000).values():
            for record in records:
                json.loads(record.value)
            got += len(records)
    consumer.close()
    report(
        "kafka-python + json.loads",
        got,
        time.monotonic() - wall,
        time.process_time() - cpu,
        summary,
    )
    wall, cpu = time.monotonic(), time.process_time()
    decoder = msgspec.json.Decoder(WireFetch)
    reader = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "bench",
            "enable.auto.commit": False,
        }
    )
    reader.assign([TopicPartition(topic, 0, 0)])
    got = 0
    while got < count:
        messages = reader.consume(10_000, timeout=1.0)
        for message in messages:
            decoder.decode(message.value() or b"")
        got += len(messages)
    reader.close()
    report(
        "confluent-kafka + msgspec",
        got,
        time.monotonic() - wall,
        time.process_time() - cpu,
        summary,
    )


def report(name: str, records: int, wall_s: float, cpu_s: float, summary: Summary) -> float:
    rate = records / wall_s if wall_s > 0 else 0.0
    per_record = 1e6 * cpu_s / max(records, 1)
    print(
        f"  {name:28s} {rate:11,.0f} records/s   {per_record:6.2f} us CPU/record (this process)",
        flush=True,
    )
    summary.add(name, f"{rate:,.0f} records/s, {per_record:.2f} us CPU/record")
    return rate


@dataclass
class RateResult:
    rate: int
    bounded: bool
    busy_rate: float  # events/s over the time the job's batches ran
    detection_p99: float
    drained: bool  # its input was applied within the drain bound
    batches: list[tuple[int, float]]  # (input rows, seconds) of its data batches


CAPACITY_PARTITIONS = 1_000_000
POLL_INTERVALS_S = (10, 5, 1)
HEADROOM = 1.5  # bursts (a failover), Spark's own work, uneven shards


@dataclass(frozen=True)
class CoreCosts:
    """What the job's work costs one core, from its batches on 2 cores.

    A batch's duration on the 2 cores is fitted as ``c0 + c1 rows``: c0 is what a batch
    costs whatever its input (every partition evaluated, health signatures, statistics,
    Spark's scheduling), taken as proportional to the cluster size; c1 what an input
    record costs. Doubled, they are core-seconds (the work runs in 2 tasks at a time;
    the driver's share is counted as if it were parallel too)."""

    per_partition_s: float  # core-seconds per partition per second (c0 every trigger)
    per_event_s: float  # core-seconds per fetch event

    @classmethod
    def fitted(cls, c0_s: float, c1_s: float, partitions: int, trigger_s: float) -> CoreCosts:
        return cls(2 * c0_s / partitions / trigger_s, 2 * c1_s)

    def cores(self, partitions: int, poll_s: float) -> float:
        """Cores busy for ``partitions`` x 3 replicas polled every ``poll_s``: 2 fetch
        events per partition and poll, and the batches' fixed cost."""
        return partitions * (self.per_partition_s + self.per_event_s * 2 / poll_s)

    def partitions_per_core(self, poll_s: float) -> float:
        """The cluster size one core keeps up with, with batches no longer than the
        trigger (longer batches spread c0 over more rows and keep up with more, up to
        ``1 / per_event_s`` events/s a core, at the price of latency)."""
        return 1 / self.cores(1, poll_s)


def capacity(
    results: list[RateResult], partitions: int, trigger_s: float, summary: Summary
) -> None:
    """What one core keeps up with, and the cores for 1,000,000 partitions, from the
    micro-batches of the rate phases (least squares: :class:`CoreCosts`)."""
    sizes = [size for result in results for size in result.batches]
    rows = np.array([r for r, _ in sizes], dtype=float)
    seconds = np.array([d for _, d in sizes], dtype=float)
    if len(sizes) < 3 or rows.std() < 0.1 * rows.mean():
        print("\n  capacity: too few batches of different sizes to fit their cost", flush=True)
        return
    c1, c0 = (float(x) for x in np.polyfit(rows, seconds, 1))
    c0, c1 = max(c0, 0.0), max(c1, 1e-12)
    costs = CoreCosts.fitted(c0, c1, partitions, trigger_s)
    print(
        f"\n  batch cost (least squares over {len(sizes)} batches of the rate phases): "
        f"{c0:.2f} s + {1e6 * c1:.2f} us x rows on 2 cores; one core: "
        f"{1e6 * costs.per_event_s:.2f} us an event and, at a {trigger_s:.0f} s trigger, "
        f"{1e6 * costs.per_partition_s:.2f} us of every second per partition; with batches "
        f"as long as needed, at most {1 / costs.per_event_s:,.0f} events/s a core",
        flush=True,
    )
    summary.add("batch cost on 2 cores (fixed + per row)", f"{c0:.2f} s + {1e6 * c1:.2f} us x rows")
    for poll in POLL_INTERVALS_S:
        keeps_up = costs.partitions_per_core(poll)
        print(
            f"  one core keeps up with {keeps_up:,.0f} partitions x 3 replicas at a {poll} s "
            f"poll ({keeps_up * 2 / poll:,.0f} events/s)",
            flush=True,
        )
        summary.add(f"one core keeps up with (poll {poll} s)", f"{keeps_up:,.0f} partitions")
    for poll in POLL_INTERVALS_S:
        cores = costs.cores(CAPACITY_PARTITIONS, poll)
        print(
            f"  {CAPACITY_PARTITIONS:,} partitions x 3 replicas at a {poll} s poll "
            f"({2 * CAPACITY_PARTITIONS // poll:,} events/s): {cores:.1f} cores of work, "
            f"{HEADROOM * cores:.0f} with {HEADROOM}x headroom",
            flush=True,
        )
        summary.add(
            f"cores for {CAPACITY_PARTITIONS:,} partitions (poll {poll} s)",
            f"{cores:.1f} ({HEADROOM * cores:.0f} with {HEADROOM}x headroom)",
        )


def drop_topics(config: IsrwatchConfig) -> None:
    """Delete a finished run's topics: what the broker holds of them (the embedded
    broker's memory, Kafka's disk) is room for the next run. A broker that refuses keeps
    them; the room checks before a phase then say what does not fit."""
    from kafka.admin import KafkaAdminClient

    topics = config.topics
    names = [topics.controller_events, topics.fetch_responses]
    names += [topics.partition_health, topics.dead_letters]
    try:
        admin = KafkaAdminClient(bootstrap_servers=config.kafka.bootstrap_servers)
        try:
            admin.delete_topics(names)
        finally:
            admin.close()
    except Exception as error:  # any refusal: the run goes on without the room
        print(f"  (the run's topics were not deleted: {error})", flush=True)


def seed(config: IsrwatchConfig, partitions: int, ts_ms: int) -> None:
    """T on every broker, then one LeaderAndIsr per partition (``controller_values``)."""
    prod = producer(config.kafka.bootstrap_servers)
    for value in controller_values(partitions, ts_ms):
        send(prod, config.topics.controller_events, value)
    prod.flush(120)


def cold_start(
    spark: Any, config: IsrwatchConfig, partitions: int, watch: Watch, limit_s: float
) -> tuple[Any, Any, float | None]:
    """The job's query on a seeded cluster, its sink, and the seconds from its start until
    every LeaderAndIsr is applied (None: not within ``limit_s``)."""
    sink = make_sink(config, HealthExporter(), None, watch)
    query = start_query(spark, config, sink, snapshot_when_idle=False)
    return query, sink, watch.wait_applied("LeaderAndIsr", partitions, limit_s)


def warm_up(config: IsrwatchConfig, args: argparse.Namespace, watch: Watch) -> None:
    """One round of fetches on the run's wire, applied before anything is measured: a
    shard's first fetches cost it what a Python worker pays once (imports, the model's
    compiled kernels loaded), which would fall on the first measured phase of the first
    run in the session and not on the others."""
    prod = producer(config.kafka.bootstrap_servers)
    wire = wire_of(args.wire, args.partitions, Probing((), 0), prod.produce, prod.poll)
    before, count = watch.fetches(), 2 * args.partitions
    began = time.monotonic()
    wire.send(config.topics.fetch_responses, count, int(time.time() * 1000), False)
    prod.flush(120)
    while watch.fetches() - before < count and time.monotonic() - began < args.controller_seconds:
        time.sleep(0.5)
    took = time.monotonic() - began
    print(f"  warm-up: one round of fetches ({count:,}) applied in {took:.1f} s", flush=True)


def sustained(
    spark: Any,
    config: IsrwatchConfig,
    args: argparse.Namespace,
    memory: Memory,
    summary: Summary,
    with_failover: bool,
) -> list[RateResult]:
    """Cold start, failover (section ``controller``, when ``with_failover``), then each
    rate (``rates``)."""
    partitions = args.partitions
    seed(config, partitions, int(time.time() * 1000))
    rng = np.random.default_rng(7)
    probes = sorted(rng.choice(partitions, size=min(PROBES, partitions), replace=False).tolist())
    watch = Watch(probes)
    query, sink, cold = cold_start(spark, config, partitions, watch, args.controller_seconds)
    said = f"in {cold:.1f} s" if cold is not None else f"NOT within {args.controller_seconds:.0f} s"
    print(
        f"  cold start: {partitions:,} LeaderAndIsr applied {said} from query start ({load()})",
        flush=True,
    )
    summary.add("cold start (LeaderAndIsr of every partition)", said, "goal < 60 s")
    if "controller" in args.sections and with_failover:
        failover(config, watch, partitions, args.controller_seconds, summary)
    if "rates" in args.sections:
        warm_up(config, args, watch)
    results: list[RateResult] = []
    if "rates" in args.sections:
        results = rates(query, config, watch, args, probes, memory, summary)
    state = (query.lastProgress or {}).get("stateOperators") or [{}]
    used = state[0].get("memoryUsedBytes")
    sst = (state[0].get("customMetrics") or {}).get("rocksdbSstFileSize")
    print(
        f"  state store: memoryUsedBytes {used} ({(used or 0) / partitions:,.0f} B/partition), "
        f"rocksdbSstFileSize {sst} ({(sst or 0) / partitions:,.0f} B/partition)",
        flush=True,
    )
    summary.add(
        "state per partition (SST; memory used)",
        f"{(sst or 0) / partitions:,.0f} B; {(used or 0) / partitions:,.0f} B",
        "goal <= 1 KB",
    )
    query.stop()
    sink.close()
    drop_topics(config)
    return results


def failover(
    config: IsrwatchConfig, watch: Watch, partitions: int, limit_s: float, summary: Summary
) -> None:
    burst = failover_values(partitions, int(time.time() * 1000))
    prod = producer(config.kafka.bootstrap_servers)
    began = time.monotonic()
    for value in burst:
        send(prod, config.topics.controller_events, value)
    prod.flush(120)
    applied = watch.wait_applied("UpdateMetadata", len(burst), limit_s)
    said = (
        f"in {time.monotonic() - began:.1f} s"
        if applied is not None
        else f"NOT within {limit_s:.0f} s"
    )
    print(
        f"  failover: UpdateMetadata of {partitions:,} partitions to {BROKERS} brokers "
        f"({len(burst)} events) applied {said} from the first send ({load()})",
        flush=True,
    )
    summary.add("failover (UpdateMetadata of every partition to 6 brokers)", said, "goal < 60 s")


def rates(
    query: Any,
    config: IsrwatchConfig,
    watch: Watch,
    args: argparse.Namespace,
    probes: list[int],
    memory: Memory,
    summary: Summary,
) -> list[RateResult]:
    """The listed rates in turn (up to the first unbounded one), or a bisection."""
    results: list[RateResult] = []

    def phase(rate: int) -> RateResult:
        result = one_rate(query, config, watch, args, rate, probes, memory, len(results), summary)
        results.append(result)
        return result

    if args.find_max:
        low, high = args.find_max
        for _ in range(args.find_steps):
            middle = (low + high) // 2 // 1000 * 1000
            if middle in (low, high):
                break
            result = phase(middle)
            if not result.drained:
                break  # a backlog that does not drain: the phases after it would not tell
            low, high = (middle, high) if result.bounded else (low, middle)
        print(
            f"\n  bisection: bounded at {low:,}/s, growing at {high:,}/s (or untested)", flush=True
        )
    else:
        for rate in sorted(args.rates):
            result = phase(rate)
            if not result.drained or (not result.bounded and not args.all_rates):
                skipped = [r for r in args.rates if r > rate]
                if skipped:
                    print(
                        f"  not run (above an unbounded or undrained rate; --all-rates "
                        f"runs them): {skipped}",
                        flush=True,
                    )
                break
    largest = max((r.rate for r in results if r.bounded), default=0)
    tried = ", ".join(f"{r.rate:,}" for r in results)
    summary.add(
        "largest rate R with a bounded backlog",
        f"{largest:,}/s",
        f"goal >= 150,000/s; tried {tried}",
    )
    return results


def one_rate(
    query: Any,
    config: IsrwatchConfig,
    watch: Watch,
    args: argparse.Namespace,
    rate: int,
    probes: list[int],
    memory: Memory,
    index: int,
    summary: Summary,
) -> RateResult:
    """One phase at ``rate`` (its input applied, within the drain bound, before it returns)."""
    seconds, trigger_s = args.seconds, args.trigger_ms / 1000
    need = rate * seconds * stored_bytes_per_event(args.wire)
    room, of_what = broker_room(args.broker, Path(tempfile.gettempdir()))
    if need > room:  # the embedded broker would take the machine's memory, Kafka its disk
        said = (
            f"not run: {seconds:.0f} s x {rate:,}/s does not fit the broker's {of_what} "
            f"({need / 2**30:,.1f} GiB needed, {room / 2**30:,.1f} GiB free; --broker "
            "kafka-4.1 keeps it on disk)"
        )
        print(f"\n  rate {rate:,}/s: {said}", flush=True)
        summary.add(f"R = {rate:,}/s", said)
        return RateResult(rate, False, 0.0, float("nan"), False, [])
    seen = {p["batchId"] for p in query.recentProgress}
    first_batch = len(watch.batches)
    load_process = LoadProcess(
        Load(
            config.kafka.bootstrap_servers,
            config.topics.fetch_responses,
            args.partitions,
            rate,
            seconds,
            tuple(probes),
            seconds / 3,
            (index + 1) * 1_000_000_000,
            args.wire,
        )
    )
    phase_start_ms = int(time.time() * 1000)
    watch.start_phase(phase_start_ms)
    samples: list[tuple[float, int, int]] = []  # (wall s, produced, backlog)
    first_end = len(watch.ends)
    progress: dict[int, dict[str, Any]] = {}

    def collect() -> None:
        for p in query.recentProgress:
            if p["batchId"] not in seen:
                progress[p["batchId"]] = p

    applied_before, dead_before = watch.fetches(), watch.dead_letters
    cpu_before = job_cpu_parts()
    load_process.start()
    began, began_wall = time.monotonic(), time.time()
    samples.append((began_wall, 0, 0))
    while load_process.is_alive():
        time.sleep(1)
        # Records produced but not yet through a completed batch (the source's backlog,
        # which a long-running batch does not hide as its last progress report would).
        produced_so_far = load_process.sent
        backlog = produced_so_far - (watch.fetches() - applied_before)
        samples.append((time.time(), produced_so_far, backlog))
        collect()
    outcome = load_process.join()
    phase_s, sent = outcome["elapsed"], outcome["sent"]
    applied_in_phase = watch.fetches() - applied_before
    drain_until = time.monotonic() + args.drain_seconds
    while watch.fetches() - applied_before < sent and time.monotonic() < drain_until:
        time.sleep(1)
        collect()
    drained = watch.fetches() - applied_before >= sent
    drain_s = time.monotonic() - began - phase_s
    # the job's CPU over the phase and its drain, per event it applied meanwhile
    applied_events = max(watch.fetches() - applied_before, 1)
    cpu_parts_us = {
        name: 1e6 * (spent - cpu_before[name]) / applied_events
        for name, spent in job_cpu_parts().items()
    }
    cpu_per_event_us = sum(cpu_parts_us.values())
    last_caught_up: dict[int, int] = outcome["last_caught_up"]
    batches = watch.batches[first_batch:]
    longest = max(
        (b - a for (a, _, _), (b, _, _) in itertools.pairwise(batches)), default=trigger_s
    )
    wait_until = time.monotonic() + max(30.0, 2 * longest)
    while drained and not last_caught_up.keys() <= watch.detected.keys():
        if time.monotonic() > wait_until:
            break
        time.sleep(1)
    collect()
    data = [p for p in progress.values() if p["numInputRows"] > 0]
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in data]
    with watch.lock:
        events = [watch.taken_in_batch.get(p["batchId"], 0) for p in data]
    busy_rate = sum(events) / sum(durations) if durations else 0.0
    planning = [p["durationMs"].get("latestOffset", 0) / 1000 for p in data]
    ends = [(wall, taken - applied_before) for wall, taken in watch.ends[first_end:]]
    slope, fitted_on = backlog_slope(samples, ends, outcome["began_wall"], phase_s)
    bounded = bool(slope <= BOUNDED_SLOPE * rate) and drained
    batches = watch.batches[first_batch:]
    # A batch holds nothing older than the previous batch's clock (its largest event time).
    e2e = [
        wall - previous_clock / 1000
        for (_, previous_clock, _), (wall, _, _) in itertools.pairwise(batches)
        if previous_clock >= phase_start_ms
    ]
    with watch.lock:
        detected = dict(watch.detected)
    detection = [
        detected[p].wall_s - (t + T_MS) / 1000 for p, t in last_caught_up.items() if p in detected
    ]
    agree = sum(
        detected[p].last_caught_up_ms == t for p, t in last_caught_up.items() if p in detected
    )
    statuses = sorted({d.status for d in detected.values()})
    goal_s = trigger_s + percentile(durations, 50)
    memory.sample()
    most = max((b for _, _, b in samples), default=0)
    rss = ", ".join(f"{k} {v / 2**20:,.0f} MiB" for k, v in memory.peaks.items())
    produced = sent / max(phase_s, 1e-9)
    cpu_share = outcome["cpu"] / max(phase_s, 1e-9)
    producer_us = 1e6 * outcome["cpu"] / max(sent, 1)
    print(
        f"\n  rate {rate:,}/s for {seconds:.0f} s ({load()}):\n"
        f"    produced {produced:,.0f}/s (target {rate:,}/s) on the {args.wire} wire; the "
        f"producer process used {cpu_share:.0%} of a core (of the machine's "
        f"{os.cpu_count()}), producer CPU per event {producer_us:.2f} us\n"
        f"    job applied {applied_in_phase / max(phase_s, 1e-9):,.0f}/s during the phase, "
        f"{busy_rate:,.0f} events/s while its batches ran, over {len(data)} batches; "
        f"{'drained' if drained else 'NOT drained'} {drain_s:.0f} s after the phase; "
        f"{watch.dead_letters - dead_before} dead letters (0 expected)\n"
        f"    source backlog (records), sampled every 1 s: max {most:,}, "
        f"at the end {samples[-1][2]:,}; slope over the last two thirds "
        f"{slope:,.0f} records/s ({slope / rate:.1%} of R, fitted on {fitted_on}) -> "
        f"{'bounded' if bounded else 'GROWING'} (bounded: slope <= {BOUNDED_SLOPE:.0%} of R, "
        f"and drained)\n"
        f"    micro-batch p50 {percentile(durations, 50):.2f} s, p99 "
        f"{percentile(durations, 99):.2f} s; end-to-end p99 {percentile(e2e, 99):.2f} s "
        f"(max {max(e2e, default=float('nan')):.2f} s); job CPU {cpu_per_event_us:.1f} us "
        f"per event (driver {cpu_parts_us['driver']:.2f}, JVM {cpu_parts_us['jvm']:.2f}, "
        f"Python workers {cpu_parts_us['python']:.2f}; over the phase and its drain)\n"
        f"    events a batch p50 {percentile(events, 50):,.0f}, max {max(events, default=0):,}; "
        f"planning it (the source's latestOffset) p50 {percentile(planning, 50):.2f} s, max "
        f"{max(planning, default=float('nan')):.2f} s\n"
        f"    detection (lag passes T -> a health record past T: {'/'.join(statuses) or '-'}), "
        f"{len(detection)}/{len(last_caught_up)} probes: p50 {percentile(detection, 50):.2f} s, "
        f"p99 {percentile(detection, 99):.2f} s; goal p99 <= {goal_s:.2f} s (trigger "
        f"{trigger_s:.0f} s + p50 batch); the model's last caught-up time equals the "
        f"producer's for {agree}/{len(detection)}\n"
        f"    peak RSS: {rss}",
        flush=True,
    )
    name = f"R = {rate:,}/s"
    summary.add(
        f"{name}: produced / target",
        f"{produced:,.0f} / {rate:,} (producer {cpu_share:.0%} of a core)",
    )
    summary.add(f"{name}: producer CPU per event", f"{producer_us:.2f} us")
    summary.add(
        f"{name}: backlog slope",
        f"{slope:,.0f} records/s -> {'bounded' if bounded else 'GROWING'}",
        f"bounded: <= {BOUNDED_SLOPE:.0%} of R",
    )
    summary.add(
        f"{name}: micro-batch p50 / p99",
        f"{percentile(durations, 50):.2f} s / {percentile(durations, 99):.2f} s",
    )
    summary.add(f"{name}: end-to-end p99", f"{percentile(e2e, 99):.2f} s")
    summary.add(
        f"{name}: job CPU per event",
        f"{cpu_per_event_us:.1f} us (driver {cpu_parts_us['driver']:.2f}, JVM "
        f"{cpu_parts_us['jvm']:.2f}, Python {cpu_parts_us['python']:.2f})",
    )
    summary.add(
        f"{name}: detection p50 / p99 ({len(detection)}/{len(last_caught_up)} probes)",
        f"{percentile(detection, 50):.2f} s / {percentile(detection, 99):.2f} s",
        f"goal p99 <= {goal_s:.2f} s",
    )
    summary.add(
        f"{name}: peak RSS driver / JVM / Python workers",
        " / ".join(f"{v / 2**20:,.0f} MiB" for v in memory.peaks.values()),
    )
    if not drained:
        print(
            f"    the backlog did not drain within {args.drain_seconds:.0f} s: no further rate",
            flush=True,
        )
    sizes = list(zip(events, durations, strict=True))
    return RateResult(rate, bounded, busy_rate, percentile(detection, 99), drained, sizes)


# ---------------------------------------------------------------- catching up

RECORD_OVERHEAD_B = 10  # a record's framing in a Kafka batch (no key on the JSON wire)
# What the broker keeps besides: the embedded broker's memory grew by 164 B a JSON fetch
# event and 79 B a packed one, 1,000,000 of each (100,000 partitions; its values are 158
# and 78 B): 10 % over the values and framing covers it, and Kafka's log on disk.
BROKER_OVERHEAD = 1.1
JOB_RESERVE_B = 8 * 2**30  # memory left to the job (driver, JVM, Python workers) and the OS


def stored_bytes_per_event(wire: str) -> float:
    """What a fetch event costs the broker on ``wire``, estimated from the load's own
    records (1,000 partitions, one round): its bytes and framing, times
    ``BROKER_OVERHEAD``."""
    sizes: list[int] = []

    def collect(_topic: str, value: bytes, key: bytes | None = None, partition: int = 0) -> None:
        sizes.append(len(value) + len(key or b"") + RECORD_OVERHEAD_B)

    wire_of(wire, 1000, Probing((), 0), collect, None).send("x", 2000, 1_700_000_000_000, False)
    return BROKER_OVERHEAD * sum(sizes) / 2000


def broker_room(broker: str, workdir: Path) -> tuple[float, str]:
    """Bytes the broker can still take, and of what: memory for the embedded broker
    (Tansu keeps its log in memory; ``JOB_RESERVE_B`` is left to the job), disk for
    Apache Kafka (its log under ``workdir``)."""
    if broker == "embedded":
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        available = next(int(line.split()[1]) * 1024 for line in meminfo if "MemAvailable" in line)
        return available - JOB_RESERVE_B, "memory (the embedded broker keeps its log in memory)"
    return shutil.disk_usage(workdir).free - 2 * 2**30, f"disk (under {workdir})"


def catchup(
    spark: Any, broker: TopicBroker, args: argparse.Namespace, workdir: Path, summary: Summary
) -> None:
    """Section ``catchup``: the drain after an outage, and a cold start on a busy topic."""
    rate, partitions, outage = args.catchup_rate, args.partitions, args.outage_seconds
    per_event = stored_bytes_per_event(args.wire)
    # The live phase, the outage's backlog and a drain as long as the outage (at twice R)
    # while R goes on; the busy topic (the outage's backlog) comes after those are deleted.
    events = rate * (args.seconds + 2 * outage)
    room, of_what = broker_room(args.broker, workdir)
    print(
        f"\ncatch-up on the {args.wire} wire at {partitions:,} partitions, R = {rate:,}/s, "
        f"outage {outage:.0f} s ({load()}): about {events:,.0f} fetch events on the broker, "
        f"{events * per_event / 2**30:,.1f} GiB of its {of_what}, {room / 2**30:,.1f} GiB free",
        flush=True,
    )
    if events * per_event > room:
        fits = max(0.0, (room / per_event / rate - args.seconds) / 2)
        said = (
            f"not run: {outage:.0f} s x {rate:,}/s does not fit the broker's {of_what} "
            f"({events * per_event / 2**30:,.1f} GiB needed, {room / 2**30:,.1f} GiB free); "
            f"--outage-seconds {fits:.0f} would, or --broker kafka-4.1 (on disk)"
        )
        print(f"  {said}", flush=True)
        summary.add("catch-up after an outage", said)
        return
    outage_drain(spark, broker, args, workdir, summary)
    busy_cold_start(spark, broker, args, workdir, summary)


def reported(query: Any, watch: Watch, after_batch: int) -> list[dict[str, Any]]:
    """Spark's progress reports of the data batches after ``after_batch``, once those the
    hook saw are there: Spark reports a batch after its sink returns, so the last one can
    be missing for a moment (bounded: 10 s)."""
    deadline = time.monotonic() + 10
    while True:
        progress = [
            p for p in query.recentProgress if p["batchId"] > after_batch and p["numInputRows"] > 0
        ]
        with watch.lock:
            seen = {b for b, taken in watch.taken_in_batch.items() if taken and b > after_batch}
        if seen <= {p["batchId"] for p in progress} or time.monotonic() > deadline:
            return progress
        time.sleep(0.2)


def busy_rate(watch: Watch, progress: list[dict[str, Any]]) -> float:
    """Fetch events a second while the batches of ``progress`` ran (Spark's input rows
    are packs: the events are the hook's count per batch)."""
    with watch.lock:
        taken = [watch.taken_in_batch.get(p["batchId"], 0) for p in progress]
    busy_s = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    return sum(taken) / busy_s if busy_s else float("nan")


def outage_drain(
    spark: Any, broker: TopicBroker, args: argparse.Namespace, workdir: Path, summary: Summary
) -> None:
    """A live phase at R for ``--seconds``; the query stopped (its checkpoint kept) for
    ``--outage-seconds`` while R goes on; the query restarted from its checkpoint, R still
    going: the backlog at the restart, the time until it is back to the live phase's, and
    the events applied a second meanwhile (the job's own stats, as the rates count them),
    next to the live phase's."""
    rate, partitions, trigger_s = args.catchup_rate, args.partitions, args.trigger_ms / 1000
    config = bench_config(broker, workdir, bench_settings(args))
    seed(config, partitions, int(time.time() * 1000))
    watch = Watch([])
    query, sink, cold = cold_start(spark, config, partitions, watch, args.controller_seconds)
    if cold is None:
        print(f"  cold start NOT within {args.controller_seconds:.0f} s: no catch-up", flush=True)
        summary.add("catch-up after an outage", "not run: the cold start did not finish")
        query.stop()
        sink.close()
        drop_topics(config)
        return
    warm_up(config, args, watch)
    load_process = LoadProcess(
        Load(
            config.kafka.bootstrap_servers,
            config.topics.fetch_responses,
            partitions,
            rate,
            args.seconds + args.outage_seconds + args.catchup_seconds,
            (),
            float("inf"),
            1_000_000_000,
            args.wire,
        )
    )
    taken0 = watch.fetches()
    samples: list[tuple[float, int, int]] = []  # (wall s, produced, backlog)

    def sample_for(seconds: float) -> None:
        until = time.monotonic() + seconds
        while time.monotonic() < until and load_process.is_alive():
            time.sleep(1)
            produced = load_process.sent
            samples.append((time.time(), produced, produced - (watch.fetches() - taken0)))

    def backlog_at(ends: list[tuple[float, int]]) -> list[tuple[float, int, float]]:
        """(wall s, fetches taken since the start, backlog) at each batch end that the
        samples cover (the records produced then are interpolated)."""
        walls, produced = np.array([(w, p) for w, p, _ in samples], dtype=float).T
        return [
            (wall, taken - taken0, float(np.interp(wall, walls, produced)) - (taken - taken0))
            for wall, taken in ends
            if wall <= walls[-1]
        ]

    load_process.start()
    # The live phase begins with the load: a spawned process takes seconds to import what
    # it needs (more on a loaded machine), and the phase is timed here, not in it.
    began = time.monotonic()
    while load_process.sent == 0 and time.monotonic() - began < 300:
        time.sleep(0.05)
    first_end = len(watch.ends)
    live_began = time.time()
    samples.append((live_began, load_process.sent, load_process.sent))
    sample_for(args.seconds)
    live_s = time.time() - live_began
    live_taken = watch.fetches() - taken0
    live_ends = [
        end for end in backlog_at(watch.ends[first_end:]) if end[0] >= live_began + live_s / 3
    ]
    # The backlog just after a batch: sampled at any time it is a sawtooth of a batch's
    # worth (backlog_slope). "Drained" is back to the most the live phase left.
    live_level = max((b for _, _, b in live_ends), default=max(b for _, _, b in samples))
    threshold = max(live_level, rate * trigger_s)
    live_rate = live_taken / max(live_s, 1e-9)
    query.stop()
    sink.close()
    sample_for(args.outage_seconds)
    if not load_process.is_alive():
        print("  the load ended before the restart: no figure", flush=True)
        return
    restarted, produced_then = time.time(), load_process.sent
    taken_then = watch.fetches() - taken0
    backlog_then = produced_then - taken_then
    seen = {p["batchId"] for p in query.recentProgress}
    restart_end = len(watch.ends)
    sink = make_sink(config, HealthExporter(), None, watch)
    query = start_query(spark, config, sink, snapshot_when_idle=False)
    drained: tuple[float, int, float] | None = None
    while drained is None and time.time() - restarted < args.catchup_seconds:
        sample_for(2)
        if not load_process.is_alive():
            break
        drained = next(
            (end for end in backlog_at(watch.ends[restart_end:]) if end[2] <= threshold), None
        )
    # The batches after the restart, taken as soon as the drain is seen (a batch after
    # the drained one may have ended meanwhile: at most one, in the 2 s between looks).
    progress = reported(query, watch, max(seen, default=-1))
    load_process.stop()
    outcome = load_process.join()
    query.stop()
    sink.close()
    drop_topics(config)
    first_batch_s = (
        watch.ends[restart_end][0] - restarted if len(watch.ends) > restart_end else float("nan")
    )
    producer_us = 1e6 * outcome["cpu"] / max(outcome["sent"], 1)
    print(
        f"  live phase: {rate:,}/s for {live_s:.0f} s, the job applied {live_rate:,.0f} "
        f"events/s; backlog just after its batches at most {live_level:,.0f} events; "
        f"producer CPU per event {producer_us:.2f} us\n"
        f"  outage: the query stopped for {args.outage_seconds:.0f} s (checkpoint kept), "
        f"backlog at restart {backlog_then:,} events; first batch "
        f"{first_batch_s:.1f} s after the restart",
        flush=True,
    )
    summary.add("catch-up: live phase, applied", f"{live_rate:,.0f} events/s at R = {rate:,}/s")
    summary.add("catch-up: backlog at restart", f"{backlog_then:,} events")
    # Not drained within the bound: what the job applied until its last batch is still
    # the rate it drains at (R goes on, so the backlog shrinks by that less R).
    ends = backlog_at(watch.ends[restart_end:])
    if drained is None and not ends:
        said = f"NOT drained within {args.catchup_seconds:.0f} s, no batch ended"
        print(f"  backlog {said} ({watch.dead_letters} dead letters; {load()})", flush=True)
        summary.add("catch-up: drained after the restart", said)
        return
    wall, taken, left = drained or ends[-1]
    drain_s = wall - restarted
    drain_rate = (taken - taken_then) / max(drain_s, 1e-9)
    busy = busy_rate(watch, progress)
    versus = (
        f"{drain_rate / live_rate:.2f}x the live phase's {live_rate:,.0f}/s"
        if live_rate
        else "no batch of the live phase ended in it: give it a longer --seconds"
    )
    when = (
        f"drained (backlog {left:,.0f} <= {threshold:,.0f}, the live phase's) {drain_s:.1f} s "
        "after the restart"
        if drained
        else f"NOT drained within {args.catchup_seconds:.0f} s (--catchup-seconds): backlog "
        f"{left:,.0f} after the last batch, {drain_s:.1f} s after the restart"
    )
    print(
        f"  {when}: drain rate {drain_rate:,.0f} events/s applied ({versus}; "
        f"{busy:,.0f} events/s while its batches ran, over {len(progress)} batches); "
        f"{watch.dead_letters} dead letters (0 expected) ({load()})",
        flush=True,
    )
    summary.add(
        "catch-up: drained after the restart",
        f"{'in' if drained else 'NOT drained in'} {drain_s:.1f} s, {drain_rate:,.0f} events/s "
        f"(live {live_rate:,.0f}/s)",
        "goal: drain rate >= the sustained rate",
    )


def busy_cold_start(
    spark: Any, broker: TopicBroker, args: argparse.Namespace, workdir: Path, summary: Summary
) -> None:
    """A query from ``earliest`` on a topic that already holds ``--outage-seconds`` x R
    fetch events after the LeaderAndIsr seed (event times those of a load at R that began
    ``--outage-seconds`` ago): the time until all are applied, and the rate."""
    rate, partitions, outage = args.catchup_rate, args.partitions, args.outage_seconds
    config = bench_config(broker, workdir, bench_settings(args))
    began_ms = int(time.time() * 1000) - int(1000 * outage)
    seed(config, partitions, began_ms - 1000)  # the elections before every fetch
    backfill = LoadProcess(
        Load(
            config.kafka.bootstrap_servers,
            config.topics.fetch_responses,
            partitions,
            rate,
            outage,
            (),
            float("inf"),
            1_000_000_000,
            args.wire,
            backfill_from_ms=began_ms,
        )
    )
    backfill.start()
    outcome = backfill.join()
    events = outcome["sent"]
    watch = Watch([])
    began = time.monotonic()
    query, sink, cold = cold_start(spark, config, partitions, watch, args.catchup_seconds)
    limit = max(0.0, args.catchup_seconds - (time.monotonic() - began))
    done = watch.wait_applied("FetchResponse", events, limit) is not None
    caught_up_s = time.monotonic() - began
    progress = reported(query, watch, -1)
    query.stop()
    sink.close()
    drop_topics(config)
    busy = busy_rate(watch, progress)
    said = (
        f"caught up in {caught_up_s:.1f} s from the query's start: "
        f"{events / caught_up_s:,.0f} events/s"
        if done
        else f"NOT caught up within {args.catchup_seconds:.0f} s "
        f"({watch.fetches():,} of {events:,} applied)"
    )
    print(
        f"  cold start on a busy topic ({events:,} fetch events after {partitions:,} "
        f"LeaderAndIsr, produced in {outcome['elapsed']:.1f} s at "
        f"{1e6 * outcome['cpu'] / max(events, 1):.2f} us of producer CPU an event): "
        f"elections applied {f'in {cold:.1f} s' if cold is not None else 'NOT'}; {said}; "
        f"{busy:,.0f} events/s while its batches ran ({watch.dead_letters} dead letters; "
        f"{load()})",
        flush=True,
    )
    summary.add(f"cold start on a busy topic ({events:,} fetch events)", said)


def references(
    spark: Any,
    broker: TopicBroker,
    args: argparse.Namespace,
    workdir: Path,
    job_rate: float | None,
    summary: Summary,
) -> None:
    """The source floor, the Spark floor, the per-(topic, partition) design; the ratios."""
    print(
        f"\nreferences ({load()}); the job's figure: "
        f"{f'{job_rate:,.0f} events/s while its batches ran' if job_rate else 'not measured'}",
        flush=True,
    )
    values = fetch_values(args.partitions, args.reference_records, int(time.time() * 1000))
    floor = source_floor(
        bench_config(broker, workdir, bench_settings(args)),
        values,
        args.reference_seconds,
        summary,
    )
    floor_config = bench_config(broker, workdir, bench_settings(args))
    spark_rate = spark_floor(
        spark, floor_config, args.partitions, values, workdir, args.reference_seconds, summary
    )
    per_partition_design(
        spark,
        bench_config(broker, workdir, bench_settings(args, PER_PARTITION_TRIGGER_MS)),
        min(args.partitions, args.per_partition_partitions),
        args.reference_seconds,
        summary,
    )
    if job_rate:
        for name, rate, goal in (
            ("job / source floor", floor, "goal >= 0.5"),
            ("job / Spark floor", spark_rate, ""),
        ):
            value = f"{job_rate / rate:.2f}" if rate else "no floor measured"
            print(f"  {name}: {value} {goal}", flush=True)
            summary.add(name, value, goal)


def source_floor(
    config: IsrwatchConfig, values: list[bytes], limit_s: float, summary: Summary
) -> float:
    """A plain consumer of a fetch topic decoding each value (msgspec)."""
    from confluent_kafka import Consumer, TopicPartition

    prod = producer(config.kafka.bootstrap_servers)
    for i, value in enumerate(values):
        send(prod, config.topics.fetch_responses, value, i % FETCH_PARTITIONS)
    prod.flush(120)
    decoder = msgspec.json.Decoder(WireFetch)
    reader = Consumer(
        {
            "bootstrap.servers": config.kafka.bootstrap_servers,
            "group.id": "bench-floor",
            "enable.auto.commit": False,
        }
    )
    reader.assign(
        [TopicPartition(config.topics.fetch_responses, p, 0) for p in range(FETCH_PARTITIONS)]
    )
    wall, cpu, got = time.monotonic(), time.process_time(), 0
    last = wall
    while got < len(values) and time.monotonic() - last < 5 and last - wall < limit_s:
        messages = reader.consume(10_000, timeout=1.0)
        if messages:
            last = time.monotonic()
        for message in messages:
            decoder.decode(message.value() or b"")
        got += len(messages)
    reader.close()
    return report("source floor", got, last - wall, time.process_time() - cpu, summary)


def spark_floor(
    spark: Any,
    config: IsrwatchConfig,
    partitions: int,
    values: list[bytes],
    workdir: Path,
    limit_s: float,
    summary: Summary,
) -> float | None:
    """The job's routing and stateful step fed from parquet files (Kafka's columns): the
    elections first (not measured), then the fetch responses, 200,000 a batch."""
    data = workdir / f"parquet-{uuid.uuid4().hex[:6]}"
    data.mkdir(parents=True)
    now = int(time.time() * 1000)

    def frame_of(topic: str, chunk: list[bytes], offset0: int) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "key": [None] * len(chunk),
                "value": chunk,
                "topic": topic,
                "partition": 0,
                "offset": np.arange(offset0, offset0 + len(chunk)),
                "timestamp": pd.Timestamp(now, unit="ms", tz="UTC"),
                "timestampType": 0,
            }
        )

    controller = controller_values(partitions, now - 60_000)
    frame_of(config.topics.controller_events, controller, 0).to_parquet(data / "0000.parquet")
    per_file = 200_000
    for n, start in enumerate(range(0, len(values), per_file), start=1):
        chunk = values[start : start + per_file]
        frame_of(config.topics.fetch_responses, chunk, start).to_parquet(data / f"{n:04d}.parquet")
    schema = spark.read.parquet(str(data / "0000.parquet")).schema
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(data))
    stream = stream.selectExpr(
        "key",
        "value",
        "topic",
        "cast(partition as int) partition",
        "offset",
        "timestamp",
        "cast(timestampType as int) timestampType",
    )
    watch = Watch([])
    sink = make_sink(config, HealthExporter(), None, watch)
    query = start_query(spark, config, sink, snapshot_when_idle=False, records=stream)
    deadline = time.monotonic() + limit_s
    warm = watch.wait_applied("LeaderAndIsr", partitions, limit_s)
    first = max((p["batchId"] for p in query.recentProgress), default=-1)
    watch.wait_applied("FetchResponse", len(values), max(0.0, deadline - time.monotonic()))
    time.sleep(1)
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0 and p["batchId"] > first]
    query.stop()
    sink.close()
    rows = sum(p["numInputRows"] for p in progress)
    seconds = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    if warm is None or not seconds:
        said = f"no fetch batch completed within {limit_s:.0f} s"
        print(f"  {'Spark floor (parquet)':28s} {said}", flush=True)
        summary.add("Spark floor (parquet, no Kafka)", said)
        return None
    rate = float(rows / seconds)
    done = "" if rows >= len(values) else f", stopped at the {limit_s:.0f} s limit"
    print(
        f"  {'Spark floor (parquet)':28s} {rate:11,.0f} events/s over {len(progress)} batches "
        f"({rows:,} of {len(values):,} fetch responses{done})",
        flush=True,
    )
    summary.add("Spark floor (parquet, no Kafka)", f"{rate:,.0f} events/s ({rows:,} records)")
    return rate


def per_partition_design(
    spark: Any, config: IsrwatchConfig, partitions: int, limit_s: float, summary: Summary
) -> None:
    """``stream_bench``'s per-(topic, partition) pipeline: one LeaderAndIsr and one round
    of fetches per partition, read in one batch; bounded by ``limit_s``. Its cost is per
    group (partition) and batch, so its events/s hardly depend on the cluster's size: a
    smaller cluster than the job's (``--per-partition-partitions``) lets it finish."""
    from stream_bench import per_partition  # bench/ is on the path

    prod = producer(config.kafka.bootstrap_servers)
    for value in controller_values(partitions, int(time.time() * 1000) - 60_000):
        send(prod, config.topics.controller_events, value)
    fetches = fetch_values(partitions, 2 * partitions, int(time.time() * 1000))
    for i, value in enumerate(fetches):
        send(prod, config.topics.fetch_responses, value, i % FETCH_PARTITIONS)
    prod.flush(120)
    events = BROKERS + partitions + len(fetches)
    query = per_partition(spark, config, input_sources(config))
    began = time.monotonic()
    progress: list[dict[str, Any]] = []
    while time.monotonic() - began < limit_s and query.isActive:
        progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
        if sum(p["numInputRows"] for p in progress) >= events:
            break
        time.sleep(1)
    if not query.isActive:
        print(f"  per-(topic, partition) query failed: {query.exception()}", flush=True)
    query.stop()
    rows = sum(p["numInputRows"] for p in progress)
    busy = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    name = "per-(topic, partition)"
    if not busy:
        said = f"no batch completed within {limit_s:.0f} s: below {events / limit_s:,.0f} events/s"
        print(f"  {name:28s} {said}", flush=True)
        summary.add(f"{name} design", said)
        return
    rate = rows / busy
    print(
        f"  {name:28s} {rate:11,.0f} events/s over {len(progress)} batches ({rows:,} of "
        f"{events:,} events: elections and one round of fetches of {partitions:,} "
        f"partitions)",
        flush=True,
    )
    summary.add(f"{name} design", f"{rate:,.0f} events/s ({partitions:,} partitions)")


def replay_envelopes(partitions: int) -> list[InputRecord]:
    """Elections and 2 rounds of fetches of every follower, in time order."""
    now = 1_700_000_000_000
    records = [
        InputRecord(Source.CONTROLLER_EVENTS, "0", json.loads(v))
        for v in controller_values(partitions, now)
    ]
    for r in range(2):
        for p in range(partitions):
            topic, number = topic_of(p)
            leader = p % BROKERS
            for k in (1, 2):
                value = {
                    "ts": now + 1000 + r * 500 + k,
                    "topic": topic,
                    "partition": number,
                    "leader": leader,
                    "follower": (leader + k) % BROKERS,
                    "leader_epoch": 0,
                    "fetch_offset": 10 * r + k,
                    "leader_leo": 10 * r + 5,
                    "high_watermark": 10 * r,
                }
                records.append(
                    InputRecord(Source.FETCH_RESPONSES, partition_key(topic, number), value)
                )
    return records


def replay_agreement(
    broker: TopicBroker, args: argparse.Namespace, workdir: Path, summary: Summary
) -> None:
    """``isrwatch replay`` of the JSON envelopes, and the job (available-now) on the same
    envelopes as each wire of ``--wires`` writes them, record for record."""
    partitions = args.partitions
    records = replay_envelopes(partitions)
    began = time.monotonic()
    lines = (json.dumps(r.envelope()) for r in records)
    expected = {
        r.key: json.loads(encode_record(r)) for r in replay(lines, RuleSettings(), None).records
    }
    replay_s = time.monotonic() - began
    print(
        f"\nreplay agreement at {partitions:,} partitions ({len(records):,} events): "
        f"isrwatch replay {replay_s:.0f} s ({load()})",
        flush=True,
    )
    for wire in args.wires:
        args.wire = wire
        job_agreement(broker, args, workdir, records, expected, summary)


def job_agreement(
    broker: TopicBroker,
    args: argparse.Namespace,
    workdir: Path,
    records: list[InputRecord],
    expected: dict[str, Any],
    summary: Summary,
) -> None:
    """The job (available-now) on ``records`` sent on ``args.wire``, against ``expected``."""
    partitions, limit_s = args.partitions, args.replay_seconds
    config = bench_config(broker, workdir, bench_settings(args))
    prod = producer(config.kafka.bootstrap_servers)
    topics = {
        Source.CONTROLLER_EVENTS: config.topics.controller_events,
        Source.FETCH_RESPONSES: config.topics.fetch_responses,
    }
    form = FetchResponsesForm(args.wire)
    sent = kafka_records(records, form)  # the project's publisher's own encoding
    for record in sent:
        send(prod, topics[record.source], record.value)  # one partition: in order
    prod.flush(120)
    health_out = workdir / f"health-{uuid.uuid4().hex[:6]}.jsonl"
    stop = threading.Event()
    job = threading.Thread(
        target=run,
        daemon=True,
        kwargs={
            "config": config,
            "available_now": True,
            "health_out": health_out,
            "exporter": HealthExporter(),
            "stop": stop,
        },
    )
    began = time.monotonic()
    job.start()
    job.join(limit_s)
    finished = not job.is_alive()
    stop.set()
    job.join(120)
    job_s = time.monotonic() - began
    by_job = {}
    if health_out.exists():
        for line in health_out.read_text().splitlines():
            record = json.loads(line)
            by_job[f"{record['topic']}:{record['partition']}"] = record
    drop_topics(config)
    same = sum(by_job.get(key) == record for key, record in expected.items())
    agree = same == len(expected) == len(by_job) and finished
    verdict = "AGREE" if agree else "DIFFER" if finished else f"job NOT done in {limit_s:.0f} s"
    fetch_records = sum(r.source is Source.FETCH_RESPONSES for r in sent)
    print(
        f"  {args.wire} wire ({fetch_records:,} fetch-responses records): {same:,} of "
        f"{len(expected):,} health records equal, {len(by_job):,} from the job ({verdict}); "
        f"job {job_s:.0f} s ({load()})",
        flush=True,
    )
    for key in [k for k, r in expected.items() if by_job.get(k) != r][:5]:
        if key not in by_job:
            print(f"  {key}: no record from the job", flush=True)
            continue
        fields = sorted(
            f
            for f in expected[key].keys() | by_job[key].keys()
            if expected[key].get(f) != by_job[key].get(f)
        )
        print(
            f"  {key}: differs in {', '.join(fields)}: replay "
            f"{ {f: expected[key].get(f) for f in fields} }, job "
            f"{ {f: by_job[key].get(f) for f in fields} }",
            flush=True,
        )
    extra = len(by_job.keys() - expected.keys())
    if extra:
        print(f"  {extra:,} records from the job that replay does not have", flush=True)
    summary.add(
        f"replay vs job at {partitions:,} partitions, {args.wire} wire",
        f"{same:,} of {len(expected):,} equal: {verdict}",
        "goal: AGREE",
    )


# ---------------------------------------------------------------- configuration

# Why the bench sets what it sets, where it is not a measured choice.
WHY = {
    "metrics.enabled": "the bench reads the exporter in process; no /metrics port to clash",
    "topics.fetch_responses_form": "what the load writes, as a collector's setting would say",
}


SHIPPED_OPTIONS = (
    ("--shards", "streaming.state_shards"),
    ("--trigger-ms", "streaming.trigger_interval_ms"),
    ("--max-per-partition", "kafka.max_events_per_partition_per_batch"),
)
"""The benches' options that set the job's configuration; each defaults to the shipped
value."""


def add_shipped_options(parser: argparse.ArgumentParser) -> None:
    """:data:`SHIPPED_OPTIONS` on ``parser``, each defaulting to the shipped value."""
    for option, setting in SHIPPED_OPTIONS:
        parser.add_argument(
            option,
            type=int,
            default=shipped_value(setting),
            help=f"{setting} (default: the shipped value)",
        )


def shipped_option_values(args: argparse.Namespace) -> dict[str, Any]:
    """The setting each of :data:`SHIPPED_OPTIONS` sets, and its value in ``args``."""
    return {
        setting: getattr(args, option[2:].replace("-", "_")) for option, setting in SHIPPED_OPTIONS
    }


@cache
def shipped() -> IsrwatchConfig:
    """The shipped configuration: conf/isrwatch.yaml's defaults, no file, no environment."""
    return load_config(None, {}, environ={})


def shipped_value(name: str) -> Any:
    value: Any = shipped()
    for part in name.split("."):
        value = getattr(value, part)
    return value.value if isinstance(value, Enum) else value


def bench_settings(args: argparse.Namespace, trigger_ms: int | None = None) -> dict[str, Any]:
    """The settings the bench gives the job, where they differ from the shipped ones:
    :data:`SHIPPED_OPTIONS` (``trigger_ms`` instead of ``--trigger-ms``), the source format
    and the wire of the run, and no /metrics server."""
    settings = {
        **shipped_option_values(args),
        "streaming.trigger_interval_ms": trigger_ms or args.trigger_ms,
        "kafka.source_format": args.source_format,
        "topics.fetch_responses_form": args.wire,
        "metrics.enabled": False,
    }
    return {name: v for name, v in settings.items() if v != shipped_value(name)}


def overrides_of(args: argparse.Namespace) -> list[tuple[str, str, str, str]]:
    """Every setting the runs override, as (name, shipped value, bench value, where):
    the (source format, wire) pairs' settings, and those of the other configurations."""
    pairs: dict[tuple[str, Any], list[str]] = {}
    runs = [(s, w) for s in args.source_formats for w in args.wires]
    for source, wire in runs:
        run_args = argparse.Namespace(**{**vars(args), "source_format": source, "wire": wire})
        for name, value in bench_settings(run_args).items():
            pairs.setdefault((name, value), []).append(f"{source}/{wire}")
    rows = [
        (
            name,
            str(shipped_value(name)),
            str(value),
            "every run" if len(where) == len(runs) else ", ".join(where),
        )
        for (name, value), where in pairs.items()
    ]
    if "references" in args.sections and args.trigger_ms != PER_PARTITION_TRIGGER_MS:
        name = "streaming.trigger_interval_ms"
        rows.append(
            (
                name,
                str(shipped_value(name)),
                str(PER_PARTITION_TRIGGER_MS),
                "the per-partition design",
            )
        )
    return rows


def print_overrides(args: argparse.Namespace, summary: Summary) -> None:
    """Every setting the bench overrides, against the shipped configuration; the rest
    of the job's settings are the shipped ones."""
    rows = overrides_of(args)
    print("settings the bench overrides (name: shipped -> bench, where):", flush=True)
    for name, was, now, where in rows:
        why = f"; {WHY[name]}" if name in WHY else ""
        print(f"  {name}: {was} -> {now} ({where}{why})", flush=True)
        summary.add(f"override {name}", f"{was} -> {now}", where)
    print(
        "  and, for every run, its own topics, checkpoint (a temporary directory) and "
        "kafka.bootstrap_servers (the bench's broker); everything else as shipped",
        flush=True,
    )
    if not rows:
        summary.add("overrides", "none: the shipped configuration")


def bench_config(broker: TopicBroker, workdir: Path, settings: dict[str, Any]) -> IsrwatchConfig:
    """The shipped configuration with ``settings`` (``bench_settings``), on topics and a
    checkpoint of its own."""
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
            **settings,
        },
        environ={},
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--rates", type=int, nargs="+", default=[50_000, 100_000, 150_000])
    parser.add_argument("--seconds", type=float, default=180, help="of each rate")
    parser.add_argument(
        "--find-max",
        type=int,
        nargs=2,
        metavar=("LOW", "HIGH"),
        help="bisect the largest bounded rate (instead of --rates)",
    )
    parser.add_argument("--find-steps", type=int, default=4)
    parser.add_argument(
        "--all-rates", action="store_true", help="run the rates above an unbounded one too"
    )
    parser.add_argument(
        "--drain-seconds",
        type=float,
        default=600,
        help="after a rate, the bound on applying its backlog",
    )
    parser.add_argument(
        "--controller-seconds",
        type=float,
        default=1800,
        help="bound on the cold start and on the failover",
    )
    add_shipped_options(parser)
    parser.add_argument("--client-records", type=int, default=500_000)
    parser.add_argument("--reference-records", type=int, default=1_000_000)
    parser.add_argument(
        "--reference-seconds", type=float, default=300, help="bound on each reference"
    )
    parser.add_argument(
        "--per-partition-partitions",
        type=int,
        default=2_000,
        help="cluster size of the per-(topic, partition) reference",
    )
    parser.add_argument(
        "--replay-seconds",
        type=float,
        default=1200,
        help="bound on the job's run in the replay section",
    )
    parser.add_argument(
        "--job-rate",
        type=float,
        help="the job's events/s from an earlier run of the rates, for the "
        "references' ratios when this run has no rates",
    )
    parser.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=SECTIONS)
    parser.add_argument(
        "--source-formats",
        nargs="+",
        default=["python"],
        choices=["python", "kafka"],
        help="the job's Kafka sources to measure, in this order (controller, rates, catchup)",
    )
    parser.add_argument(
        "--wires",
        nargs="+",
        default=list(WIRES),
        choices=WIRES,
        help="the fetch-responses forms the load writes, in this order (rates, catchup, "
        "replay): fetch packs, or one JSON record per fetch",
    )
    parser.add_argument(
        "--catchup-rate", type=int, help="R of the catchup section (default: the first of --rates)"
    )
    parser.add_argument(
        "--outage-seconds",
        type=float,
        default=600,
        help="catchup: how long the query is stopped while R goes on; the busy topic's "
        "backlog is this many seconds of R",
    )
    parser.add_argument(
        "--catchup-seconds",
        type=float,
        default=1800,
        help="catchup: bound on the drain after the restart, and on the busy cold start",
    )
    parser.add_argument("--broker", choices=["embedded", "kafka-4.1"], default="embedded")
    parser.add_argument(
        "--port-base",
        type=int,
        default=None,
        help="of --broker kafka-4.1 (default: ports the OS picks, free on a shared machine)",
    )
    parser.add_argument("--short", action="store_true", help="small and quick (the smoke test)")
    args = parser.parse_args(argv)
    if args.short:
        global T_MS
        T_MS = 2_000
        args.partitions, args.rates, args.seconds, args.find_max = 2000, [4000], 12, None
        args.client_records, args.trigger_ms, args.reference_records = 20_000, 1000, 20_000
        args.reference_seconds = args.drain_seconds = 300
        args.outage_seconds, args.catchup_seconds = 10, 300
    args.catchup_rate = args.catchup_rate or args.rates[0]
    # The run's source format and wire: each run of a pair sets them (bench_settings).
    args.source_format, args.wire = args.source_formats[0], args.wires[0]
    if "packed" in args.wires:
        check_packs()  # the packs hold exactly what the JSON wire sends, or no run
    workdir = Path(tempfile.mkdtemp(prefix="isrwatch-sustained-"))
    memory = Memory()
    memory.start()
    summary = Summary()
    print(
        f"sustained bench: {args.partitions:,} partitions x 3 replicas, {args.shards} shards, "
        f"trigger {args.trigger_ms} ms, T {T_MS} ms, local[2]; sections "
        f"{' '.join(args.sections)}; wires {' '.join(args.wires)}; {load()}",
        flush=True,
    )
    print_overrides(args, summary)
    broker_context: Any = (
        LabBroker(workdir / "kafka", args.port_base)
        if args.broker == "kafka-4.1"
        else EmbeddedBroker()
    )
    with broker_context as broker:
        if isinstance(broker, EmbeddedBroker):
            broker.start()
        if "clients" in args.sections:
            clients(broker, args.client_records, summary)
        spark = None
        job_rate = args.job_rate
        pairs = [(s, w) for s in args.source_formats for w in args.wires]
        if {"controller", "rates", "catchup"} & set(args.sections):
            # spark.jars is read when the JVM starts: the session of the connector's
            # config carries its jars, and serves the Python source as well.
            args.source_format = "kafka" if "kafka" in args.source_formats else "python"
            spark = spark_session(bench_config(broker, workdir, bench_settings(args)))
        if {"controller", "rates"} & set(args.sections):
            assert spark is not None
            for n, (source, wire) in enumerate(pairs):
                args.source_format, args.wire = source, wire
                summary.prefix = f"{source}/{wire}: " if len(pairs) > 1 else ""
                config = bench_config(broker, workdir, bench_settings(args))
                print(f"\njob on Kafka, source {source}, {wire} wire ({load()}):", flush=True)
                # The failover's events are the controller's, whatever the wire: once
                # per source format.
                first_of_source = n % len(args.wires) == 0
                results = sustained(spark, config, args, memory, summary, first_of_source)
                # The references read JSON records on the Python source: their ratios
                # take that run's figure when there is one.
                reference_run = ("python", "json") if ("python", "json") in pairs else pairs[0]
                if (source, wire) == reference_run or job_rate is None:
                    job_rate = max((r.busy_rate for r in results), default=job_rate)
                capacity(results, args.partitions, args.trigger_ms / 1000, summary)
            summary.prefix = ""
        if "catchup" in args.sections:
            assert spark is not None
            for source, wire in pairs:
                args.source_format, args.wire = source, wire
                summary.prefix = f"{source}/{wire}: " if len(pairs) > 1 else ""
                catchup(spark, broker, args, workdir, summary)
            summary.prefix = ""
        # The references read one JSON record per fetch (fetch_values), on the Python source.
        args.source_format, args.wire = "python", "json"
        if "references" in args.sections:
            if spark is None:
                spark = spark_session(bench_config(broker, workdir, bench_settings(args)))
            references(spark, broker, args, workdir, job_rate, summary)
        if spark is not None:
            spark.stop()
        if "replay" in args.sections:
            replay_agreement(broker, args, workdir, summary)
    memory.stopped.set()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"\ndriver peak RSS (getrusage) {peak / 2**20:,.0f} MiB; {load()}", flush=True)
    summary.print()


if __name__ == "__main__":
    main()
