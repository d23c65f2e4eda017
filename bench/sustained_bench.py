"""The streaming job under sustained load, next to references measured in the same run.

    python bench/sustained_bench.py [--partitions 100000] [--rates 50000 100000 150000]
                                    [--seconds 180] [--shards 16] [--short]

On the embedded broker, ``local[2]``, for a cluster of ``--partitions`` partitions x 3
replicas (6 brokers, T = 10 s):

1. **Kafka clients**: kafka-python (``json.loads`` per record) against confluent-kafka
   (msgspec per record) reading the same records: records/s and CPU per record.
2. **Cold start**: one LeaderAndIsr per partition before the query starts; seconds from
   the query's start until all are applied. **Failover**: UpdateMetadata of every
   partition to 6 brokers (in events of 1,000 partitions); seconds until applied.
3. **Sustained rate R**, each for ``--seconds``: a producer sends fetch responses (every
   follower of every partition in turn, event time = wall time) at R/s. Printed: the rate
   produced, the source backlog (records behind the latest offsets) over time and whether
   it stays bounded, p50/p99 micro-batch duration, p99 end-to-end latency (produced ->
   written to partition-health and /metrics, which the sink does before its hook sees the
   batch: the hook time minus the oldest event time the batch could hold), detection
   latency (a follower of 20 probe partitions stops catching up: time from the event time
   at which its lag passes T to the hook seeing SHRINK_ELIGIBLE), state bytes per
   partition (the state store's own metrics) and peak RSS of the driver, the JVM and
   the Python workers.
4. **References**: the source floor (a plain confluent-kafka consumer of the same topic
   decoding each value), the Spark floor (the same job fed from parquet files of the same
   records, no Kafka), the per-``(topic, partition)`` design (``stream_bench``) for a
   fixed time; job / source floor and job / Spark floor.
5. **Replay**: ``isrwatch replay`` and the job (available-now) agree record for record
   on elections + 2 rounds of fetches at ``--partitions``.

``--short`` runs it all small (2,000 partitions, one rate, a few seconds each): the
suite's smoke test runs it. Nothing is asserted; the machine is shared (the load average
is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from state.fetch_decoder import WireFetch
from state.settings import RuleSettings
from streaming.config import IsrwatchConfig, load_config
from streaming.embedded_broker import EmbeddedBroker
from streaming.job import input_sources, make_sink, run, spark_session, start_query
from streaming.metrics import HealthExporter
from streaming.replay import replay
from streaming.shard_state import HEALTH
from streaming.sinks import shard_stats_of

BROKERS = 6
PER_TOPIC = 1000
T_MS = 10_000  # replica.lag.time.max.ms of every broker (--short: 2 s)
FETCH_PARTITIONS = 4
PROBES = 20


def topic_of(p: int) -> tuple[str, int]:
    return f"topic-{p // PER_TOPIC:04d}", p % PER_TOPIC


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


# ---------------------------------------------------------------- producing


def producer(config: IsrwatchConfig) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": config.kafka.bootstrap_servers, "linger.ms": 20,
                     "batch.num.messages": 10_000, "queue.buffering.max.messages": 2_000_000,
                     "queue.buffering.max.kbytes": 1_048_576})  # fmt: skip


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
        values.append(json.dumps({
            "type": "LeaderAndIsr", "ts": ts, "topic": topic, "partition": number,
            "leader": leader, "leader_epoch": 0, "isr": replicas, "replicas": replicas,
            "partition_epoch": 0}).encode())  # fmt: skip
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
                states.append({"topic": topic, "partition": number, "leader": leader,
                               "leader_epoch": 0, "isr": replicas, "replicas": replicas,
                               "offline_replicas": []})  # fmt: skip
            values.append(json.dumps({"type": "UpdateMetadata", "ts": ts, "broker": broker,
                                      "partitions": states}).encode())  # fmt: skip
    return values


class FetchProducer(threading.Thread):
    """Every follower of every partition fetches in turn at ``rate``/s (event time = now).

    From ``probe_at`` on, follower +1 of the probe partitions stops catching up: its
    offset stays where it was while the leader's LEO grows."""

    def __init__(self, config: IsrwatchConfig, partitions: int, rate: int, seconds: float,
                 probes: list[int], probe_after_s: float) -> None:  # fmt: skip
        super().__init__(daemon=True)
        self.config, self.partitions, self.rate, self.seconds = config, partitions, rate, seconds
        self.probes, self.probe_after_s = set(probes), probe_after_s
        self.last_caught_up: dict[int, int] = {}  # probe -> event time of its last catch-up
        self.sent = 0
        self.elapsed = 0.0
        self.leo = 0

    def run(self) -> None:
        prod, topic = producer(self.config), self.config.topics.fetch_responses
        template = (
            '{"ts":%d,"topic":"%s","partition":%d,"leader":%d,"follower":%d,'
            '"leader_epoch":0,"fetch_offset":%d,"leader_leo":%d,"high_watermark":%d}'
        )
        names = [topic_of(p) for p in range(self.partitions)]
        began = time.monotonic()
        tick = 0.05
        p = k = 0
        stuck: dict[int, int] = {}
        while (elapsed := time.monotonic() - began) < self.seconds:
            due = int(self.rate * elapsed) - self.sent
            now_ms = int(time.time() * 1000)
            probing = elapsed >= self.probe_after_s
            for _ in range(max(due, 0)):
                leader = p % BROKERS
                offset = self.leo
                if k == 0 and p in self.probes:
                    if probing:
                        offset = stuck.setdefault(p, self.leo)
                    else:
                        self.last_caught_up[p] = now_ms
                name, number = names[p]
                value = template % (now_ms, name, number, leader, (leader + 1 + k) % BROKERS,
                                    offset, self.leo, offset)  # fmt: skip
                send(prod, topic, value.encode(), (p * 2 + k) % FETCH_PARTITIONS)
                self.sent += 1
                k ^= 1
                if k == 0:
                    p += 1
                    if p == self.partitions:
                        p, self.leo = 0, self.leo + 10
            prod.poll(0)
            time.sleep(max(0.0, tick - (time.monotonic() - began - elapsed)))
        self.elapsed = time.monotonic() - began
        prod.flush(60)


# ---------------------------------------------------------------- watching the job


class Watch:
    """The sink's hook: per batch, its stats and the probes' health (driver side)."""

    def __init__(self, probe_keys: dict[str, int]) -> None:
        self.lock = threading.Lock()
        self.batches: list[tuple[float, int, int]] = []  # (wall s, stream clock ms, rows)
        self.applied: dict[str, int] = {}
        self.error_responses = 0
        self.eligible_at: dict[int, float] = {}  # probe -> wall time SHRINK_ELIGIBLE seen
        self.probe_keys = probe_keys

    def __call__(self, _batch_id: int, rows: pd.DataFrame) -> None:
        wall = time.time()
        stats = shard_stats_of(rows)
        health = rows[(rows["kind"] == HEALTH) & rows["key"].isin(self.probe_keys.keys())]
        with self.lock:
            totals: dict[str, int] = {}
            for shard in stats:
                for kind, count in shard.applied_total.items():
                    totals[kind] = totals.get(kind, 0) + count
            self.applied = totals
            self.error_responses = sum(shard.fetch_error_responses_total for shard in stats)
            clock = max((s.clock_ms for s in stats), default=-1)
            self.batches.append((wall, clock, len(rows)))
            for key, value in zip(health["key"], health["value"], strict=True):
                record = json.loads(value)
                if any(f["status"] == "SHRINK_ELIGIBLE" for f in record["followers"]):
                    self.eligible_at.setdefault(self.probe_keys[key], wall)

    def fetches(self) -> int:
        """Fetch responses the job has taken (applied, or answered with an error)."""
        with self.lock:
            return self.applied.get("FetchResponse", 0) + self.error_responses

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
        parents: dict[int, int] = {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                parents[int(pid)] = int(
                    Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[1]
                )
            except (OSError, IndexError, ValueError):
                continue
        for pid in map(str, parents):
            if not _descends(int(pid), me, parents):
                continue  # another job's process (the machine is shared)
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            hwm = next((int(line.split()[1]) * 1024 for line in status.splitlines()
                        if line.startswith("VmHWM")), 0)  # fmt: skip
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


# ---------------------------------------------------------------- phases


def clients(broker: EmbeddedBroker, count: int) -> None:
    """kafka-python vs confluent-kafka on the same records (one thread each)."""
    from confluent_kafka import Consumer, TopicPartition
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaPartition

    topic = f"clients-{uuid.uuid4().hex[:6]}"
    broker.create_topics([topic], partitions=1)
    config = bench_config(broker, Path(tempfile.mkdtemp()), 16, 5000, create=False)
    prod = producer(config)
    for i in range(count):
        send(prod, topic, (b'{"ts":%d,"topic":"topic-0001","partition":%d,"leader":1,'
                           b'"follower":2,"leader_epoch":0,"fetch_offset":5,"leader_leo":9,'
                           b'"high_watermark":5}') % (i, i % 1000))  # fmt: skip
    prod.flush(60)
    print(f"\nKafka clients, {count:,} records, one thread:", flush=True)
    wall, cpu = time.monotonic(), time.process_time()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None,
                             enable_auto_commit=False, max_poll_records=10_000)  # fmt: skip
    consumer.assign([KafkaPartition(topic, 0)])
    consumer.seek(KafkaPartition(topic, 0), 0)
    got = 0
    while got < count:
        for records in consumer.poll(timeout_ms=1000).values():
            for record in records:
                json.loads(record.value)
            got += len(records)
    consumer.close()
    report("kafka-python + json.loads", got, time.monotonic() - wall, time.process_time() - cpu)
    wall, cpu = time.monotonic(), time.process_time()
    decoder = msgspec.json.Decoder(WireFetch)
    reader = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "bench",
                       "enable.auto.commit": False})  # fmt: skip
    reader.assign([TopicPartition(topic, 0, 0)])
    got = 0
    while got < count:
        messages = reader.consume(10_000, timeout=1.0)
        for message in messages:
            decoder.decode(message.value() or b"")
        got += len(messages)
    reader.close()
    report("confluent-kafka + msgspec", got, time.monotonic() - wall, time.process_time() - cpu)


def report(name: str, records: int, wall_s: float, cpu_s: float) -> float:
    rate = records / wall_s if wall_s else 0.0
    print(f"  {name:28s} {rate:11,.0f} records/s   {1e6 * cpu_s / max(records, 1):6.2f} "
          f"us CPU/record (this process)", flush=True)  # fmt: skip
    return rate


def source_floor(config: IsrwatchConfig, records: int) -> float:
    """A plain consumer of the fetch topic decoding each value (msgspec)."""
    from confluent_kafka import Consumer, TopicPartition

    decoder = msgspec.json.Decoder(WireFetch)
    reader = Consumer({"bootstrap.servers": config.kafka.bootstrap_servers,
                       "group.id": "bench-floor", "enable.auto.commit": False})  # fmt: skip
    reader.assign([TopicPartition(config.topics.fetch_responses, p, 0)
                   for p in range(FETCH_PARTITIONS)])  # fmt: skip
    wall, cpu, got = time.monotonic(), time.process_time(), 0
    last = wall
    while got < records and time.monotonic() - last < 5:  # until 5 s without a record
        messages = reader.consume(10_000, timeout=1.0)
        if messages:
            last = time.monotonic()
        for message in messages:
            decoder.decode(message.value() or b"")
        got += len(messages)
    reader.close()
    return report("source floor", got, last - wall, time.process_time() - cpu)


def spark_floor(spark: Any, config: IsrwatchConfig, partitions: int, records: int,
                workdir: Path) -> float:  # fmt: skip
    """The job's routing and stateful step fed from parquet files (Kafka's columns)."""
    data = workdir / f"parquet-{uuid.uuid4().hex[:6]}"
    data.mkdir(parents=True)
    now = int(time.time() * 1000)
    controller = controller_values(partitions, now - 60_000)

    def frame_of(topic: str, values: list[bytes], offset0: int) -> pd.DataFrame:
        return pd.DataFrame({
            "key": [None] * len(values), "value": values, "topic": topic, "partition": 0,
            "offset": np.arange(offset0, offset0 + len(values)),
            "timestamp": pd.Timestamp(now, unit="ms", tz="UTC"), "timestampType": 0,
        })  # fmt: skip

    frame_of(config.topics.controller_events, controller, 0).to_parquet(data / "0.parquet")
    per_file, written, n = 200_000, 0, 1
    while written < records:
        values = []
        for i in range(written, min(written + per_file, records)):
            p, k = (i // 2) % partitions, i % 2
            topic, number = topic_of(p)
            leader = p % BROKERS
            values.append(b'{"ts":%d,"topic":"%s","partition":%d,"leader":%d,"follower":%d,'
                          b'"leader_epoch":0,"fetch_offset":9,"leader_leo":9,"high_watermark":9}'
                          % (now + i // 1000, topic.encode(), number, leader,
                             (leader + 1 + k) % BROKERS))  # fmt: skip
        frame_of(config.topics.fetch_responses, values, written).to_parquet(data / f"{n}.parquet")
        written, n = written + len(values), n + 1
    schema = spark.read.parquet(str(data / "0.parquet")).schema
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
    watch = Watch({})
    sink = make_sink(config, HealthExporter(), None, watch)
    query = start_query(spark, config, sink, snapshot_when_idle=False, records=stream)
    watch.wait_applied("LeaderAndIsr", partitions, 1800)
    first = len(query.recentProgress)
    watch.wait_applied("FetchResponse", records, 1800)
    time.sleep(1)
    progress = [p for p in query.recentProgress[first:] if p["numInputRows"] > 0]
    query.stop()
    sink.close()
    rows = sum(p["numInputRows"] for p in progress)
    seconds = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    rate = rows / seconds if seconds else 0.0
    print(f"  {'Spark floor (parquet)':28s} {rate:11,.0f} events/s over {len(progress)} batches",
          flush=True)  # fmt: skip
    return rate


def sustained(spark: Any, config: IsrwatchConfig, partitions: int, rates: list[int],
              seconds: float, memory: Memory) -> dict[int, float]:  # fmt: skip
    """Cold start, failover, then each rate; returns the job's events/s per rate."""
    now = int(time.time() * 1000)
    prod = producer(config)
    for value in controller_values(partitions, now):
        send(prod, config.topics.controller_events, value)
    prod.flush(120)
    rng = np.random.default_rng(7)
    probes = sorted(rng.choice(partitions, size=min(PROBES, partitions), replace=False).tolist())
    watch = Watch({"{}:{}".format(*topic_of(p)): p for p in probes})
    sink = make_sink(config, HealthExporter(), None, watch)
    query = start_query(spark, config, sink, snapshot_when_idle=False)
    cold = watch.wait_applied("LeaderAndIsr", partitions, 1800)
    print(f"  cold start: {partitions:,} LeaderAndIsr applied "
          f"{f'in {cold:.1f} s' if cold is not None else 'NOT within 30 min'} from query start",
          flush=True)  # fmt: skip
    burst = failover_values(partitions, int(time.time() * 1000))
    began = time.monotonic()
    for value in burst:
        send(prod, config.topics.controller_events, value)
    prod.flush(120)
    applied = watch.wait_applied("UpdateMetadata", len(burst), 1800)
    took = time.monotonic() - began if applied is not None else None
    print(f"  failover: UpdateMetadata of {partitions:,} partitions to {BROKERS} brokers "
          f"({len(burst)} events) applied "
          f"{f'in {took:.1f} s' if took is not None else 'NOT within 30 min'} from the first send",
          flush=True)  # fmt: skip
    results: dict[int, float] = {}
    for rate in rates:
        results[rate] = one_rate(query, config, watch, partitions, rate, seconds, probes, memory)
    state = (query.lastProgress or {}).get("stateOperators") or [{}]
    used = state[0].get("memoryUsedBytes")
    custom = state[0].get("customMetrics") or {}
    sst = custom.get("rocksdbSstFileSize")
    print(
        f"  state store: memoryUsedBytes {used} ({(used or 0) / partitions:,.0f} B/partition), "
        f"rocksdbSstFileSize {sst} ({(sst or 0) / partitions:,.0f} B/partition)",
        flush=True,
    )
    query.stop()
    sink.close()
    return results


def one_rate(query: Any, config: IsrwatchConfig, watch: Watch, partitions: int, rate: int,
             seconds: float, probes: list[int], memory: Memory) -> float:  # fmt: skip
    seen = {p["batchId"] for p in query.recentProgress}
    first_batch = len(watch.batches)
    watch.eligible_at.clear()
    fetches = FetchProducer(config, partitions, rate, seconds, probes, seconds / 3)
    lags: list[tuple[float, int]] = []
    progress: dict[int, dict[str, Any]] = {}
    began = time.monotonic()
    fetches.start()
    applied_before = watch.fetches()
    while fetches.is_alive():
        time.sleep(2)
        # Records produced but not yet through a completed batch (the source's backlog,
        # which a long-running batch does not hide as its last progress report would).
        lags.append((time.monotonic() - began, fetches.sent - (watch.fetches() - applied_before)))
    drained = time.monotonic() + 3 * seconds  # let the job finish what was produced
    while watch.fetches() - applied_before < fetches.sent and time.monotonic() < drained:
        time.sleep(1)
        for p in query.recentProgress:
            if p["batchId"] not in seen:
                progress[p["batchId"]] = p
    for p in query.recentProgress:
        if p["batchId"] not in seen:
            progress[p["batchId"]] = p
    data = [p for p in progress.values() if p["numInputRows"] > 0]
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in data]
    job_rate = (watch.fetches() - applied_before) / (time.monotonic() - began)
    middle = [lag for at, lag in lags if fetches.elapsed / 3 <= at < 2 * fetches.elapsed / 3]
    last = [lag for at, lag in lags if at >= 2 * fetches.elapsed / 3]
    bounded = (
        bool(last)
        and bool(middle)
        and (statistics.mean(last) <= 1.2 * statistics.mean(middle) + rate)
    )
    batches = watch.batches[first_batch:]
    e2e = [wall - previous_clock / 1000 for (wall, _, _), (_, previous_clock, _)
           in zip(batches[1:], batches[:-1], strict=True) if previous_clock > 0]  # fmt: skip
    detection = [
        watch.eligible_at[p] - (fetches.last_caught_up[p] + T_MS) / 1000
        for p in probes if p in watch.eligible_at and p in fetches.last_caught_up
    ]  # fmt: skip
    memory.sample()
    print(f"\n  rate {rate:,}/s for {seconds:.0f} s ({load()}):\n"
          f"    produced {fetches.sent / max(fetches.elapsed, 1e-9):,.0f}/s; job read "
          f"{job_rate:,.0f} events/s over {len(data)} batches\n"
          f"    source backlog (records): middle third {middle and int(statistics.mean(middle))}"
          f", last third {last and int(statistics.mean(last))}, at the end "
          f"{lags[-1][1] if lags else None} -> {'bounded' if bounded else 'GROWING'}\n"
          f"    micro-batch p50 {percentile(durations, 50):.2f} s, p99 "
          f"{percentile(durations, 99):.2f} s; end-to-end p99 {percentile(e2e, 99):.2f} s "
          f"(max {max(e2e, default=float('nan')):.2f} s)\n"
          f"    detection (lag passes T -> SHRINK_ELIGIBLE), {len(detection)}/{len(probes)} "
          f"probes: p50 {percentile(detection, 50):.2f} s, p99 {percentile(detection, 99):.2f} s"
          f"\n    peak RSS: " + ", ".join(f"{k} {v / 2**20:,.0f} MiB"
                                         for k, v in memory.peaks.items()),
          flush=True)  # fmt: skip
    fetches.join()
    return float(job_rate if bounded else -job_rate)


def per_partition_design(spark: Any, config: IsrwatchConfig, seconds: float) -> float:
    """``stream_bench``'s per-(topic, partition) pipeline on the same topics, for a time."""
    from stream_bench import per_partition  # bench/ is on the path

    query = per_partition(spark, config, input_sources(config))
    time.sleep(seconds)
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    query.stop()
    rows = sum(p["numInputRows"] for p in progress)
    busy = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    rate = rows / busy if busy else 0.0
    print(f"  {'per-(topic, partition)':28s} {rate:11,.0f} events/s over {len(progress)} "
          f"batches in {seconds:.0f} s", flush=True)  # fmt: skip
    return rate


def replay_agreement(broker: EmbeddedBroker, partitions: int, workdir: Path) -> None:
    """The job (available-now) and ``isrwatch replay`` on the same input, record for record."""
    config = bench_config(broker, workdir, 16, 1000)
    now = 1_700_000_000_000
    envelopes = [{"source": "controller-events", "value": json.loads(v)}
                 for v in controller_values(partitions, now)]  # fmt: skip
    for r in range(2):
        for p in range(partitions):
            topic, number = topic_of(p)
            leader = p % BROKERS
            for k in (1, 2):
                envelopes.append({"source": "fetch-responses", "value": {
                    "ts": now + 1000 + r * 500 + k, "topic": topic, "partition": number,
                    "leader": leader, "follower": (leader + k) % BROKERS, "leader_epoch": 0,
                    "fetch_offset": 10 * r + k, "leader_leo": 10 * r + 5,
                    "high_watermark": 10 * r}})  # fmt: skip
    prod = producer(config)
    topics = {"controller-events": config.topics.controller_events,
              "fetch-responses": config.topics.fetch_responses}  # fmt: skip
    for envelope in envelopes:
        send(prod, topics[envelope["source"]], json.dumps(envelope["value"]).encode())
    prod.flush(120)
    health_out = workdir / f"health-{uuid.uuid4().hex[:6]}.jsonl"
    began = time.monotonic()
    run(config, available_now=True, health_out=health_out, exporter=HealthExporter())
    job_s = time.monotonic() - began
    job = {}
    for line in health_out.read_text().splitlines():
        record = json.loads(line)
        job[f"{record['topic']}:{record['partition']}"] = record
    began = time.monotonic()
    lines = (json.dumps(e) for e in envelopes)
    expected = {f"{r['topic']}:{r['partition']}": r
                for r in replay(lines, RuleSettings(), None).records}  # fmt: skip
    replay_s = time.monotonic() - began
    same = sum(job.get(key) == record for key, record in expected.items())
    print(f"\nreplay agreement at {partitions:,} partitions ({len(envelopes):,} events): "
          f"{same:,} of {len(expected):,} health records equal, {len(job):,} from the job "
          f"({'AGREE' if same == len(expected) == len(job) else 'DIFFER'}); job {job_s:.0f} s, "
          f"replay {replay_s:.0f} s", flush=True)  # fmt: skip


def bench_config(broker: EmbeddedBroker, workdir: Path, shards: int, trigger_ms: int,
                 create: bool = True) -> IsrwatchConfig:  # fmt: skip
    suffix = uuid.uuid4().hex[:6]
    kinds = ("controller_events", "fetch_responses", "partition_health", "dead_letters")
    names = {f"topics.{k}": f"{k.replace('_', '-')}-{suffix}" for k in kinds}
    if create:
        broker.create_topics([names["topics.controller_events"]], partitions=1)
        broker.create_topics([names["topics.fetch_responses"]], partitions=FETCH_PARTITIONS)
        broker.create_topics([names["topics.partition_health"], names["topics.dead_letters"]])
    return load_config(None, {
        **names, "kafka.bootstrap_servers": broker.bootstrap_servers,
        "kafka.starting_offsets": "earliest",
        "streaming.checkpoint_location": str(workdir / suffix),
        "streaming.state_shards": shards, "streaming.trigger_interval_ms": trigger_ms,
        "kafka.max_records_per_partition_per_batch": 1_000_000, "metrics.enabled": False,
    }, environ={})  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--rates", type=int, nargs="+", default=[50_000, 100_000, 150_000])
    parser.add_argument("--seconds", type=float, default=180)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--trigger-ms", type=int, default=5000)
    parser.add_argument("--client-records", type=int, default=500_000)
    parser.add_argument(
        "--skip",
        nargs="*",
        default=[],
        choices=["clients", "per-partition", "spark-floor", "replay"],
    )
    parser.add_argument("--short", action="store_true", help="small and quick (the smoke test)")
    args = parser.parse_args(argv)
    if args.short:
        global T_MS
        T_MS = 2_000
        args.partitions, args.rates, args.seconds = 2000, [4000], 10
        args.client_records, args.trigger_ms = 20_000, 1000
    workdir = Path(tempfile.mkdtemp(prefix="isrwatch-sustained-"))
    memory = Memory()
    memory.start()
    print(f"sustained bench: {args.partitions:,} partitions x 3 replicas, {args.shards} shards, "
          f"trigger {args.trigger_ms} ms, local[2]; {load()}", flush=True)  # fmt: skip
    with EmbeddedBroker() as broker:
        broker.start()
        if "clients" not in args.skip:
            clients(broker, args.client_records)
        config = bench_config(broker, workdir, args.shards, args.trigger_ms)
        spark = spark_session(config)
        print(f"\njob on Kafka ({load()}):", flush=True)
        rates = sustained(spark, config, args.partitions, args.rates, args.seconds, memory)
        best = max((r for r in rates.values() if r > 0), default=0.0)
        print(f"\nreferences ({load()}):", flush=True)
        produced = int(sum(abs(r) for r in rates.values()) * args.seconds)
        floor = source_floor(config, produced)
        spark_rate = None
        if "spark-floor" not in args.skip:
            count = 20_000 if args.short else max(200_000, min(produced, 2_000_000))
            floor_config = bench_config(broker, workdir, args.shards, args.trigger_ms)
            spark_rate = spark_floor(spark, floor_config, args.partitions, count, workdir)
        if "per-partition" not in args.skip:
            per_partition_design(spark, bench_config(broker, workdir, args.shards, 1000),
                                 5 if args.short else 120)  # fmt: skip
        largest = max((k for k, v in rates.items() if v > 0), default=0)
        ratios = f"job / source floor {best / floor:.2f}" if floor else "no source floor"
        if spark_rate:
            ratios += f", job / Spark floor {best / spark_rate:.2f}"
        print(f"\nlargest rate with a bounded backlog: {largest:,}/s; the job read "
              f"{best:,.0f} events/s at it; {ratios}", flush=True)  # fmt: skip
        spark.stop()
        if "replay" not in args.skip:
            replay_agreement(broker, args.partitions, workdir)
    memory.stopped.set()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"\ndriver peak RSS (getrusage) {peak / 2**20:,.0f} MiB; {load()}", flush=True)


if __name__ == "__main__":
    main()
