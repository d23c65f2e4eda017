"""The streaming job under sustained load, next to references measured in the same run.

    python -u bench/sustained_bench.py [--partitions 100000] [--rates 50000 100000 150000]
        [--seconds 180] [--shards 16] [--sections clients controller rates references replay]
        [--find-max LOW HIGH] [--all-rates] [--reference-records 1000000]
        [--reference-seconds 300] [--per-partition-partitions 2000] [--job-rate EVENTS_S]
        [--replay-seconds 1200] [--source-formats python kafka]
        [--broker embedded|kafka-4.1 [--port-base PORT]] [--short]

On the embedded broker (``--broker kafka-4.1``: a one-node Apache Kafka 4.1 from
``make kafka``, whose ListOffsets gives the true log end, as Spark's connector needs),
``local[2]``, for a cluster of ``--partitions`` partitions x 3
replicas (6 brokers, T = 10 s). Sections (``--sections``, all by default):

* ``clients``: kafka-python (``json.loads`` per record) against confluent-kafka (msgspec
  per record) reading the same records: records/s and CPU per record.
* ``controller``: the cold start (one LeaderAndIsr per partition before the query
  starts; seconds from the query's start until all are applied) and a failover
  (UpdateMetadata of every partition to 6 brokers, in events of 1,000 partitions;
  seconds until applied). ``rates`` needs the cold start and runs it in any case.
* ``rates``: each rate R for ``--seconds``, for each source of ``--source-formats``
  (``python``: this project's Python Data Source; ``kafka``: Spark's connector from
  ``make spark-kafka``), one after the other in the same Spark session, each on topics
  and a checkpoint of its own; the summary's figures of each are prefixed with it. A
  producer in a process of its own sends fetch responses (every follower of every
  partition in turn, event time = wall time, values pre-encoded) at R/s. Printed: the
  rate produced and the producer's CPU; the source backlog (records produced but not yet
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
* ``references``: the source floor (a plain confluent-kafka consumer decoding each value
  of ``--reference-records`` fetch responses), the Spark floor (the job's routing and
  stateful step fed from parquet files of the same records, no Kafka) and the
  per-``(topic, partition)`` design (``stream_bench``; one LeaderAndIsr and one round
  of fetches per partition), each bounded by ``--reference-seconds`` (what was done by
  then is reported); job / source floor (goal >= 0.5) and job / Spark floor (the job's
  figure: its events/s while its batches ran, the largest over the rates, or
  ``--job-rate`` from an earlier run).
* ``replay``: ``isrwatch replay`` and the job (available-now) agree record for record on
  elections + 2 rounds of fetches at ``--partitions`` (the job bounded by
  ``--replay-seconds``); where they differ, the first differences are printed.

A summary table of every figure ends the run, with the load average. ``--short`` runs
it all small (2,000 partitions, one rate, a few seconds each): the suite's smoke test
runs it. Nothing is asserted; the machine is shared (the load average is printed).
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import resource
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import msgspec
import numpy as np
import pandas as pd

from state import WireFetch, decode_record, encode_record
from state.settings import RuleSettings
from streaming.config import IsrwatchConfig, load_config
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
SECTIONS = ("clients", "controller", "rates", "references", "replay")


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


def generate_load(load: Load, sent: Any, results: Any) -> None:
    """The load generator, in a process of its own so that it takes no time from the
    driver's Python (the sink and its hook run there).

    Every follower of every partition fetches in turn, event time = wall time, at the
    leader's LEO, which grows by 10 a round: each fetch catches the follower up (Kafka's
    Replica.updateFetchState: fetch offset >= the leader's LEO). From ``probe_after_s``
    on, follower 0 of each probe partition stays at the offset of its last fetch, the
    LEO of the round before: that fetch (offset >= the LEO at its previous fetch) leaves
    its last caught-up time at its previous fetch, and no later fetch moves it. So its
    lag passes T exactly T after ``last_caught_up[p]``, the time of its last normal fetch.
    ``sent`` (a shared integer) counts what was produced so far."""
    prod = producer(load.bootstrap_servers)
    produce, poll, topic = prod.produce, prod.poll, load.topic
    middles = fetch_middles(load.partitions)
    probe_rows = {2 * p: p for p in load.probes}
    last_caught_up: dict[int, int] = {}
    stuck: dict[int, int] = {}
    rows, i, leo, count = len(middles), 0, load.leo0, 0
    tail = offsets_tail(leo, leo, leo)
    cpu, began, began_wall = time.process_time(), time.monotonic(), time.time()
    while (elapsed := time.monotonic() - began) < load.seconds:
        due = int(load.rate * elapsed) - count
        now_ms = int(time.time() * 1000)
        head = b'{"ts":%d' % now_ms
        probing = elapsed >= load.probe_after_s
        for _ in range(due):
            p = probe_rows.get(i)
            if p is None:
                value = head + middles[i] + tail
            elif probing and (p in stuck or leo > load.leo0):
                offset = stuck.setdefault(p, leo - 10)
                value = head + middles[i] + offsets_tail(offset, leo, offset)
            else:
                value = head + middles[i] + tail
                last_caught_up[p] = now_ms
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
        count += max(due, 0)
        sent.value = count
        poll(0)
        time.sleep(max(0.0, 0.02 - (time.monotonic() - began - elapsed)))
    elapsed = time.monotonic() - began
    prod.flush(120)
    probed = {p: t for p, t in last_caught_up.items() if p in stuck}
    cpu = time.process_time() - cpu
    results.send(
        {
            "sent": count,
            "elapsed": elapsed,
            "began_wall": began_wall,
            "cpu": cpu,
            "last_caught_up": probed,
        }
    )
    results.close()


class LoadProcess:
    """A :func:`generate_load` process; ``sent`` reads its count while it runs."""

    def __init__(self, load: Load) -> None:
        context = multiprocessing.get_context("spawn")  # no fork of a process with a JVM
        self._sent = context.Value("q", 0, lock=False)
        self._results, child = context.Pipe(duplex=False)
        self.process = context.Process(
            target=generate_load, args=(load, self._sent, child), daemon=True
        )
        self.outcome: dict[str, Any] = {}

    def start(self) -> None:
        self.process.start()

    @property
    def sent(self) -> int:
        return int(self._sent.value)

    def is_alive(self) -> bool:
        return self.process.is_alive() and not self._results.poll()

    def join(self) -> dict[str, Any]:
        if not self.outcome:
            self.outcome = self._results.recv()
            self.process.join(60)
        return self.outcome


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


def job_cpu_s() -> float:
    """CPU seconds the job has used so far: this process (the driver; the bench's watch
    and sampling threads too, a small part) and every process under Spark's JVM (the JVM,
    the Python workers, and those they reaped: cutime, cstime). The producer's process,
    also this process's child, is not counted: it is the load, not the job."""
    me, tick = os.getpid(), os.sysconf("SC_CLK_TCK")
    parents = _parents()
    ticks = sum(int(field) for field in _stat(me)[11:13])
    jvms = [pid for pid, parent in parents.items() if parent == me and b"java" in _cmdline(pid)]
    for pid in parents:
        if any(_descends(pid, jvm, parents) for jvm in jvms):
            try:
                ticks += sum(int(field) for field in _stat(pid)[11:15])
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile: its parent counts it once it is reaped
    return ticks / tick


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


def percentile(values: list[float], q: float) -> float:
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


def sustained(
    spark: Any, config: IsrwatchConfig, args: argparse.Namespace, memory: Memory, summary: Summary
) -> list[RateResult]:
    """Cold start, failover (section ``controller``), then each rate (``rates``)."""
    partitions = args.partitions
    prod = producer(config.kafka.bootstrap_servers)
    for value in controller_values(partitions, int(time.time() * 1000)):
        send(prod, config.topics.controller_events, value)
    prod.flush(120)
    rng = np.random.default_rng(7)
    probes = sorted(rng.choice(partitions, size=min(PROBES, partitions), replace=False).tolist())
    watch = Watch(probes)
    sink = make_sink(config, HealthExporter(), None, watch)
    query = start_query(spark, config, sink, snapshot_when_idle=False)
    cold = watch.wait_applied("LeaderAndIsr", partitions, args.controller_seconds)
    said = f"in {cold:.1f} s" if cold is not None else f"NOT within {args.controller_seconds:.0f} s"
    print(
        f"  cold start: {partitions:,} LeaderAndIsr applied {said} from query start ({load()})",
        flush=True,
    )
    summary.add("cold start (LeaderAndIsr of every partition)", said, "goal < 60 s")
    if "controller" in args.sections:
        failover(config, watch, partitions, args.controller_seconds, summary)
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
    cpu_before = job_cpu_s()
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
    cpu_per_event_us = 1e6 * (job_cpu_s() - cpu_before) / max(watch.fetches() - applied_before, 1)
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
    print(
        f"\n  rate {rate:,}/s for {seconds:.0f} s ({load()}):\n"
        f"    produced {produced:,.0f}/s (target {rate:,}/s); the producer process used "
        f"{cpu_share:.0%} of a core (of the machine's {os.cpu_count()})\n"
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
        "per event (driver, JVM and Python workers, over the phase and its drain)\n"
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
    summary.add(f"{name}: job CPU per event", f"{cpu_per_event_us:.1f} us")
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
        bench_config(broker, workdir, args.shards, args.trigger_ms),
        values,
        args.reference_seconds,
        summary,
    )
    floor_config = bench_config(broker, workdir, args.shards, args.trigger_ms)
    spark_rate = spark_floor(
        spark, floor_config, args.partitions, values, workdir, args.reference_seconds, summary
    )
    per_partition_design(
        spark,
        bench_config(broker, workdir, args.shards, 1000),
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


def replay_agreement(
    broker: TopicBroker, partitions: int, workdir: Path, limit_s: float, summary: Summary
) -> None:
    """The job (available-now) and ``isrwatch replay`` on the same input, record for record."""
    config = bench_config(broker, workdir, 16, 1000)
    now = 1_700_000_000_000
    envelopes = [
        {"source": "controller-events", "value": json.loads(v)}
        for v in controller_values(partitions, now)
    ]
    for r in range(2):
        for p in range(partitions):
            topic, number = topic_of(p)
            leader = p % BROKERS
            for k in (1, 2):
                envelopes.append(
                    {
                        "source": "fetch-responses",
                        "value": {
                            "ts": now + 1000 + r * 500 + k,
                            "topic": topic,
                            "partition": number,
                            "leader": leader,
                            "follower": (leader + k) % BROKERS,
                            "leader_epoch": 0,
                            "fetch_offset": 10 * r + k,
                            "leader_leo": 10 * r + 5,
                            "high_watermark": 10 * r,
                        },
                    }
                )
    prod = producer(config.kafka.bootstrap_servers)
    topics = {
        "controller-events": config.topics.controller_events,
        "fetch-responses": config.topics.fetch_responses,
    }
    for envelope in envelopes:
        send(prod, topics[envelope["source"]], json.dumps(envelope["value"]).encode())
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
    began = time.monotonic()
    lines = (json.dumps(e) for e in envelopes)
    expected = {
        r.key: json.loads(encode_record(r)) for r in replay(lines, RuleSettings(), None).records
    }
    replay_s = time.monotonic() - began
    same = sum(by_job.get(key) == record for key, record in expected.items())
    agree = same == len(expected) == len(by_job) and finished
    verdict = "AGREE" if agree else "DIFFER" if finished else f"job NOT done in {limit_s:.0f} s"
    print(
        f"\nreplay agreement at {partitions:,} partitions ({len(envelopes):,} events): "
        f"{same:,} of {len(expected):,} health records equal, {len(by_job):,} from the job "
        f"({verdict}); job {job_s:.0f} s, replay {replay_s:.0f} s ({load()})",
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
        f"replay vs job at {partitions:,} partitions",
        f"{same:,} of {len(expected):,} equal: {verdict}",
        "goal: AGREE",
    )


def bench_config(
    broker: TopicBroker,
    workdir: Path,
    shards: int,
    trigger_ms: int,
    source_format: str = "python",
) -> IsrwatchConfig:
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
            "kafka.starting_offsets": "earliest",
            "kafka.source_format": source_format,
            "streaming.checkpoint_location": str(workdir / suffix),
            "streaming.state_shards": shards,
            "streaming.trigger_interval_ms": trigger_ms,
            "kafka.max_events_per_partition_per_batch": 1_000_000,
            "metrics.enabled": False,
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
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--trigger-ms", type=int, default=5000)
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
        help="the job's Kafka sources to measure, in this order (controller and rates)",
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
    workdir = Path(tempfile.mkdtemp(prefix="isrwatch-sustained-"))
    memory = Memory()
    memory.start()
    summary = Summary()
    print(
        f"sustained bench: {args.partitions:,} partitions x 3 replicas, {args.shards} shards, "
        f"trigger {args.trigger_ms} ms, T {T_MS} ms, local[2]; sections "
        f"{' '.join(args.sections)}; {load()}",
        flush=True,
    )
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
        if {"controller", "rates"} & set(args.sections):
            configs = {
                source: bench_config(broker, workdir, args.shards, args.trigger_ms, source)
                for source in args.source_formats
            }
            # spark.jars is read when the JVM starts: the session of the connector's
            # config carries its jars, and serves the Python source as well.
            spark = spark_session(configs.get("kafka") or configs["python"])
            for source, config in configs.items():
                summary.prefix = f"[{source}] " if len(configs) > 1 else ""
                print(f"\njob on Kafka, source {source} ({load()}):", flush=True)
                results = sustained(spark, config, args, memory, summary)
                if source == "python" or job_rate is None:
                    job_rate = max((r.busy_rate for r in results), default=job_rate)
                capacity(results, args.partitions, args.trigger_ms / 1000, summary)
            summary.prefix = ""
        if "references" in args.sections:
            if spark is None:
                spark = spark_session(bench_config(broker, workdir, args.shards, args.trigger_ms))
            references(spark, broker, args, workdir, job_rate, summary)
        if spark is not None:
            spark.stop()
        if "replay" in args.sections:
            replay_agreement(broker, args.partitions, workdir, args.replay_seconds, summary)
    memory.stopped.set()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"\ndriver peak RSS (getrusage) {peak / 2**20:,.0f} MiB; {load()}", flush=True)
    summary.print()


if __name__ == "__main__":
    main()
