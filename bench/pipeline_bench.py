"""Where the streaming job's time goes: a fixed backlog read to the end, per-stage split.

    python bench/pipeline_bench.py [--partitions 100000] [--records 1000000] [--shards N]
                                   [--trigger-ms MS] [--max-per-partition N]
                                   [--wire packed|json] [--source-format python|kafka]
                                   [--conf key=value ...] [--py-spy FILE]

``--shards``, ``--trigger-ms`` and ``--max-per-partition`` default to the shipped
configuration's; each one set otherwise is printed.

On the embedded broker, ``local[2]``: one LeaderAndIsr per partition and ``--records``
fetch responses (every follower of every partition in turn, 4 Kafka partitions) are
produced *before* the query starts; the job (``streaming.job.query.start_query``, the shipped
pipeline) then reads them to the end. Printed, next to a baseline measured in the same
run (a plain confluent-kafka consumer decoding each value, the "source floor"):

* events/s the job read (fetches / sum of the data batches' ``triggerExecution``), the
  micro-batch p50/p99;
* the sum of each ``durationMs`` part (addBatch, getBatch, latestOffset, queryPlanning,
  walCommit, commitOffsets) and of the stateful operator's metrics (commit time, rows,
  state bytes);
* per-stage executor run time and CPU time from Spark's REST API (the UI is enabled for
  this run only): the map stage (source read + routing + shuffle write) and the reduce
  stage (shuffle read + the shard step + what the sink collects), and the driver's own
  CPU in the sink.

Nothing is asserted; the machine is shared: CPU figures are the ones to read, the load
average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pandas as pd
from spy_summary import print_stages  # bench/ is on the path
from sustained_bench import (
    WIRES,
    Probing,
    Summary,
    add_shipped_options,
    bench_config,
    controller_values,
    fetch_values,
    load,
    percentile,
    producer,
    send,
    shipped_option_values,
    shipped_value,
    source_floor,
    wire_of,
)

from state.events import MOST_ROWS_PER_PACK
from streaming.config import IsrwatchConfig, load_config
from streaming.job.metrics import HealthExporter
from streaming.job.query import make_sink, spark_session, start_query
from streaming.job.sinks import shard_stats_of
from streaming.tools.embedded_broker import EmbeddedBroker

PY_SPY = Path(sys.executable).with_name("py-spy")  # the .[profile] extra
UI_PORT = 4560  # the Spark UI for this run's REST API (the job ships with it disabled)
PRODUCE_CHUNK = 10 * MOST_ROWS_PER_PACK  # fetches sent at one event time


def produce_fetches(config: IsrwatchConfig, wire: Any, prod: Any, records: int) -> None:
    """``records`` fetch responses on ``wire`` (``wire_for``) through its producer
    ``prod``, every follower of every partition in turn, the event time a millisecond
    later every 1,000."""
    topic = config.topics.fetch_responses
    now = int(time.time() * 1000)
    sent = 0
    while sent < records:
        chunk = min(PRODUCE_CHUNK, records - sent)
        wire.send(topic, chunk, now + sent // 1000, probing=False)
        prod.poll(0)
        sent += chunk
    prod.flush(300)


def wire_for(config: IsrwatchConfig, name: str, partitions: int) -> tuple[Any, Any]:
    """The sustained bench's wire ``name`` (one JSON record a fetch, or packs of one
    leader's fetches), no probes, and the producer of its own it sends with."""
    prod = producer(config.kafka.bootstrap_servers)
    return wire_of(name, partitions, Probing((), 0), prod.produce, prod.poll), prod


class Applied:
    """The sink's hook: fetches and LeaderAndIsr applied so far, driver CPU in the sink."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.fetches = 0
        self.leader_and_isr = 0

    def __call__(self, _batch_id: int, rows: pd.DataFrame) -> None:
        stats = shard_stats_of(rows)
        with self.lock:
            self.fetches = sum(
                s.applied_total.get("FetchResponse", 0) + s.fetch_error_responses_total
                for s in stats
            )
            self.leader_and_isr = sum(s.applied_total.get("LeaderAndIsr", 0) for s in stats)

    def wait(self, fetches: int, partitions: int, timeout_s: float) -> bool:
        began = time.monotonic()
        while time.monotonic() - began < timeout_s:
            with self.lock:
                if self.fetches >= fetches and self.leader_and_isr >= partitions:
                    return True
            time.sleep(0.5)
        return False


def profiler(output: str | None) -> subprocess.Popen[bytes] | None:
    """py-spy of this process and its descendants (the Python workers), active samples."""
    if output is None:
        return None
    command = [
        str(PY_SPY),
        "record",
        "--subprocesses",
        "--nonblocking",
        "--format",
        "raw",
        "--rate",
        "50",
        "--output",
        output,
        "--pid",
        str(os.getpid()),
    ]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def cpu_by_kind() -> dict[str, float]:
    """CPU seconds (user + system, with reaped children) of this process's descendants by
    kind: the JVM, the Python workers (and the source's planner), this driver (which also
    produces the input); the embedded broker is left out."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    stats: dict[int, list[str]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(pid)] = int(fields[1])
        stats[int(pid)] = fields
    me = os.getpid()
    kinds = {"JVM": 0.0, "Python workers": 0.0, "driver": 0.0}
    for number, fields in stats.items():
        ancestor, depth = number, 0
        while ancestor not in (me, 0, 1) and depth < 64:
            ancestor, depth = parents.get(ancestor, 0), depth + 1
        if ancestor != me:
            continue
        try:
            command = Path(f"/proc/{number}/cmdline").read_bytes()
        except OSError:
            continue
        # utime, stime, cutime, cstime: fields 14-17 of /proc/PID/stat (11-14 after the name)
        seconds = sum(int(v) for v in fields[11:15]) / tick
        if number == me:
            kinds["driver"] += seconds
        elif b"java" in command:
            kinds["JVM"] += seconds
        elif b"pyspark" in command:
            if not any(b"pyspark" in _cmdline(p) for p in (parents.get(number, 0),)):
                kinds["Python workers"] += seconds  # a daemon: its reaped workers count
            else:
                kinds["Python workers"] += sum(int(v) for v in fields[11:13]) / tick
    return kinds


def jvm_threads() -> dict[str, float]:
    """CPU seconds of the JVM's threads (of this process's JVM child) by thread name,
    digits dropped: task threads, GC, JIT compilers, RocksDB, the query's own thread..."""
    tick = os.sysconf("SC_CLK_TCK")
    me = os.getpid()
    found: dict[str, float] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) != me or b"java" not in _cmdline(int(pid)):
                continue
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in threads:
            try:
                name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            kind = re.sub(r"[0-9]+", "N", name)
            found[kind] = found.get(kind, 0.0) + (int(stat[11]) + int(stat[12])) / tick
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def stages(spark: Any) -> list[dict[str, Any]]:
    """The completed stages (Spark's REST API)."""
    context = spark.sparkContext  # the UI's own address: another run may hold UI_PORT
    url = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}/stages?status=complete"
    with urllib.request.urlopen(url, timeout=300) as answer:
        found: list[dict[str, Any]] = json.load(answer)
    return found


def stage_split(spark: Any, first_stage: int) -> list[dict[str, Any]]:
    """Completed stages from ``first_stage`` on: run time and CPU per kind of stage."""
    kinds: dict[str, dict[str, Any]] = {}
    for stage in stages(spark):
        if stage["stageId"] < first_stage:
            continue
        if stage.get("shuffleWriteRecords", 0) > 0:
            kind = "map: source + routing + shuffle write"
        elif stage.get("shuffleReadRecords", 0) > 0:
            kind = "reduce: shuffle read + shard step + sink collect"
        else:
            kind = "other (no shuffle)"
        empty = {
            "kind": kind,
            "stages": 0,
            "tasks": 0,
            "run_s": 0.0,
            "cpu_s": 0.0,
            "gc_s": 0.0,
            "in": 0,
            "shuffle_mb": 0.0,
        }
        row = kinds.setdefault(kind, empty)
        row["stages"] += 1
        row["tasks"] += stage["numCompleteTasks"]
        row["run_s"] += stage["executorRunTime"] / 1000
        row["cpu_s"] += stage["executorCpuTime"] / 1e9
        row["gc_s"] += stage.get("jvmGcTime", 0) / 1000
        row["in"] += stage.get("inputRecords", 0)
        row["shuffle_mb"] += stage.get("shuffleWriteBytes", 0) / 2**20
    return list(kinds.values())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--records", type=int, default=1_000_000)
    add_shipped_options(parser)  # unset: the shipped configuration's
    parser.add_argument("--source-format", choices=["python", "kafka"], default="python")
    parser.add_argument(
        "--wire", choices=WIRES, default="packed", help="fetch-responses form (default packed)"
    )
    parser.add_argument("--py-spy", help="record py-spy (raw stacks) of all Python processes here")
    parser.add_argument("--conf", nargs="*", default=[], help="isrwatch settings key=value")
    parser.add_argument("--spark-conf", nargs="*", default=[], help="Spark settings key=value")
    args = parser.parse_args(argv)
    if args.py_spy is not None and not PY_SPY.exists():  # before minutes of setting up
        parser.error(f"--py-spy: {PY_SPY} is missing; install it with: pip install -e '.[profile]'")
    workdir = Path(tempfile.mkdtemp(prefix="isrwatch-pipeline-"))
    shipped_options = shipped_option_values(args)
    for setting, value in shipped_options.items():
        if value != shipped_value(setting):
            print(f"overrides {setting}: {value} (shipped: {shipped_value(setting)})")
    print(
        f"pipeline bench: {args.partitions:,} partitions, {args.records:,} fetches, "
        f"{args.shards} shards, trigger {args.trigger_ms} ms, {args.wire} wire; {load()}",
        flush=True,
    )
    with EmbeddedBroker() as broker:
        broker.start()
        base = bench_config(broker, workdir, {})  # its topics and checkpoint directory
        overrides = dict(item.split("=", 1) for item in args.conf)
        config = load_config(
            None,
            {
                **{
                    f"topics.{k}": getattr(base.topics, k)
                    for k in (
                        "controller_events",
                        "fetch_responses",
                        "partition_health",
                        "dead_letters",
                    )
                },
                "kafka.bootstrap_servers": broker.bootstrap_servers,
                "kafka.starting_offsets": "earliest",
                "kafka.source_format": args.source_format,
                "streaming.checkpoint_location": str(base.streaming.checkpoint_location),
                **shipped_options,
                "metrics.enabled": False,
                **overrides,
            },
            environ={},
        )
        prod = producer(config.kafka.bootstrap_servers)
        for value in controller_values(args.partitions, int(time.time() * 1000) - 60_000):
            send(prod, config.topics.controller_events, value)
        prod.flush(120)
        from pyspark.sql import SparkSession

        os.environ["PYSPARK_PYTHON"] = sys.executable  # as spark_session does
        builder = SparkSession.builder.master(config.streaming.spark_master)
        builder = builder.config("spark.ui.enabled", "true").config("spark.ui.port", UI_PORT)
        builder = builder.config("spark.ui.showConsoleProgress", "false")
        for item in args.spark_conf:
            key, value = item.split("=", 1)
            builder = builder.config(key, value)
        builder.getOrCreate()
        spark = spark_session(config)
        applied = Applied()
        sink = make_sink(config, HealthExporter(), None, applied)
        began = time.monotonic()
        query = start_query(spark, config, sink, snapshot_when_idle=False)
        applied.wait(0, args.partitions, 3600)
        print(
            f"  cold start: {args.partitions:,} LeaderAndIsr applied in "
            f"{time.monotonic() - began:.0f} s",
            flush=True,
        )
        # Warm-up: one round of fetches, read in as many tasks at once as the measured ones
        # (each new Python worker imports pandas, numba, the model: seconds of CPU once).
        wire, wire_producer = wire_for(config, args.wire, args.partitions)
        produce_fetches(config, wire, wire_producer, 2 * args.partitions)
        applied.wait(2 * args.partitions, args.partitions, 3600)
        print(f"  warm-up: {2 * args.partitions:,} fetches applied", flush=True)
        time.sleep(2 * args.trigger_ms / 1000)  # a batch with no data, to start clean
        warm = {p["batchId"] for p in query.recentProgress}
        first_stage = 1 + max((s["stageId"] for s in stages(spark)), default=-1)
        spy = profiler(args.py_spy)
        cpu_before, threads_before = cpu_by_kind(), jvm_threads()
        began = time.monotonic()
        produce_fetches(config, wire, wire_producer, args.records)
        print(
            f"  {args.records:,} fetches produced in {time.monotonic() - began:.0f} s", flush=True
        )
        print(f"\njob ({load()}):", flush=True)
        done = applied.wait(args.records + 2 * args.partitions, args.partitions, 3600)
        cpu = {k: v - cpu_before[k] for k, v in cpu_by_kind().items()}
        threads = {k: v - threads_before.get(k, 0.0) for k, v in jvm_threads().items()}
        time.sleep(2)
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            spy.wait(60)
        progress = [p for p in query.recentProgress if p["batchId"] not in warm]
        query.stop()
        sink.close()
        data = [p for p in progress if p["numInputRows"] > 0]
        durations = [p["durationMs"]["triggerExecution"] / 1000 for p in data]
        busy = sum(durations)
        rows = sum(p["numInputRows"] for p in data)
        rate = args.records / busy if busy else 0.0
        print(
            f"  {'done' if done else 'NOT DONE'}: {rows:,} input rows in {len(data)} batches, "
            f"{busy:.1f} s busy; job read {rate:,.0f} fetch events/s "
            f"batch p50 {percentile(durations, 50):.1f} s, p99 {percentile(durations, 99):.1f} s",
            flush=True,
        )
        print(
            "  CPU of the job's processes while it read them: "
            + ", ".join(f"{k} {v:.1f} s" for k, v in cpu.items())
            + f"; JVM + Python workers "
            f"{1e6 * (cpu['JVM'] + cpu['Python workers']) / args.records:.1f} us per fetch event",
            flush=True,
        )
        if args.py_spy is not None:
            print_stages(args.py_spy, cpu["Python workers"], args.records)
        busiest = sorted(threads.items(), key=lambda item: -item[1])[:8]
        print("  JVM threads (CPU s): " + ", ".join(f"{k} {v:.1f}" for k, v in busiest))
        parts: dict[str, float] = {}
        for p in data:
            for name, ms in p["durationMs"].items():
                parts[name] = parts.get(name, 0) + ms / 1000
        print(
            "  durationMs sums (s): " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(parts.items()))
        )
        ops = [p["stateOperators"][0] for p in data if p.get("stateOperators")]
        if ops:
            commit = sum(o.get("commitTimeMs", 0) for o in ops) / 1000
            custom = ops[-1].get("customMetrics") or {}
            print(
                f"  state operator: commit {commit:.1f} s total, rows {ops[-1]['numRowsTotal']}, "
                f"memoryUsedBytes {ops[-1].get('memoryUsedBytes')}, "
                f"rocksdbSstFileSize {custom.get('rocksdbSstFileSize')}, "
                f"allUpdatesTimeMs {sum(o.get('allUpdatesTimeMs', 0) for o in ops) / 1000:.1f} s",
                flush=True,
            )
        for row in stage_split(spark, first_stage):
            print(
                f"  {row['kind']:48s} {row['stages']:4d} stages {row['tasks']:5d} tasks  "
                f"run {row['run_s']:7.1f} s  CPU {row['cpu_s']:7.1f} s (JVM threads)  "
                f"GC {row['gc_s']:5.1f} s  shuffle {row['shuffle_mb']:7.1f} MiB",
                flush=True,
            )
        print(f"\nreference ({load()}):", flush=True)
        summary = Summary()
        values = fetch_values(args.partitions, args.records, int(time.time() * 1000))
        # on topics of its own: the job's fetch topic may hold packs
        floor = source_floor(bench_config(broker, workdir, {}), values, 300.0, summary)
        print(
            f"\njob {rate:,.0f} events/s; job / source floor (one JSON record a fetch) "
            f"{rate / floor if floor else 0:.2f}",
            flush=True,
        )
        spark.stop()


if __name__ == "__main__":
    main()
