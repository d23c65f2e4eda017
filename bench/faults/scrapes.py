"""The Prometheus exporter under scrape load, at the size of a large cluster.

    python -m bench.faults.scrapes [--partitions 100000] [--unhealthy 0.05] [--seconds 60]
                                   [--rate 20] [--trigger-s 5] [--shards 16]

The exporter's input is built the way the job builds it: one ``ShardStats`` per state
shard, the output of the shard step (``streaming.job.shard_state.process``) on a
``ReplicationModel`` of ``--partitions`` partitions (100 topics, 6 brokers, 3 replicas,
all in the ISR) after fetch responses in which ``--unhealthy`` of the partitions have a
follower behind (LAGGING). The job's driver then hands every batch's output to its sink
(``streaming.job.sinks.BatchSink``: shard stats decoded, causes attributed,
``HealthExporter.record_batch``); here the same sink, without Kafka, is given one batch
every ``--trigger-s`` seconds (a few precomputed batches in turn, in which the lagging
followers' lag grows) while a separate process scrapes ``/metrics`` ``--rate`` times a
second, all at once each second (Prometheus servers and other scrapers that happen to
align), for ``--seconds``. Printed: scrape time p50/p99/max, bytes and series of a scrape,
the render time of one scrape alone, and the updates' time.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pickle
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]
from prometheus_client import generate_latest

from state import ReplicationModel, Shard, shard_of
from state.events import LeaderAndIsr
from state.settings import RuleSettings
from streaming.job.exporter_http import ExporterServer
from streaming.job.metrics import HealthExporter
from streaming.job.routing import FETCH, ROUTED_ARROW_SCHEMA, pandas_type
from streaming.job.shard_state import ShardJobSettings, ShardSnapshot, process
from streaming.job.sinks import BatchSink
from streaming.tools.embedded_broker import free_port

T0 = 1_700_000_000_000
TOPICS = 100
BROKERS = 6
UPDATES = 3
"""Distinct batches computed; the updates cycle through them."""
Partition = tuple[str, int, int, int]
"""topic, partition, leader (the followers: the next two brokers), index in the cluster"""


# ------------------------------------------------------------------- the input


def partitions_of(total: int, shard: Shard) -> list[Partition]:
    per = max(1, total // TOPICS)
    return [
        (f"topic-{i // per:03d}", i % per, i % BROKERS, i)
        for i in range(total)
        if shard_of(f"topic-{i // per:03d}", i % per, shard.count) == shard.index
    ]


def unhealthy_mask(parts: Sequence[Partition], share: float) -> np.ndarray:
    """Which partitions get a lagging follower: those whose index in the cluster falls in
    the first ``share`` of its block of 100 (5 %: indexes 0-4, 100-104, ...)."""
    return np.asarray([p[3] % 100 < round(share * 100) for p in parts], dtype=np.bool_)


def elected(parts: Sequence[Partition], shard: Shard) -> ShardSnapshot:
    model = ReplicationModel(RuleSettings(), shard)
    events = []
    for i, (topic, number, leader, _) in enumerate(parts):
        replicas = (leader, (leader + 1) % BROKERS, (leader + 2) % BROKERS)
        events.append(
            (
                i,
                LeaderAndIsr(
                    ts=T0,
                    topic=topic,
                    partition=number,
                    leader=leader,
                    leader_epoch=0,
                    isr=replicas,
                    replicas=replicas,
                    partition_epoch=0,
                ),
            )
        )
    model.apply(events)
    return ShardSnapshot(model)


def fetch_rows(parts: Sequence[Partition], lagging: np.ndarray, ts: int, leo: int) -> pd.DataFrame:
    """Routed fetch rows at ``ts`` for both followers of every partition: caught up with
    the leader's log end ``leo``, except the first follower of a lagging partition,
    which stays at offset 1,000 (caught up last at T0 + 1 s, by :func:`warm_rows`)."""
    n = len(parts)
    index = np.concatenate([np.arange(n), np.arange(n)])
    step = np.repeat([1, 2], n)
    offsets = np.full(2 * n, leo, dtype=np.int64)
    offsets[:n][lagging] = 1_000
    high_watermark = np.where(np.concatenate([lagging, lagging]), 1_000, leo)
    return _rows(
        parts, index, step, np.full(2 * n, ts, dtype=np.int64), offsets, leo, high_watermark
    )


def warm_rows(parts: Sequence[Partition], lagging: np.ndarray) -> pd.DataFrame:
    """Every follower caught up at T0 + 1 s (offset 1,000 = the leader's log end)."""
    n = len(parts)
    index = np.concatenate([np.arange(n), np.arange(n)])
    ts = np.full(2 * n, T0 + 1_000, dtype=np.int64)
    offsets = np.full(2 * n, 1_000, dtype=np.int64)
    return _rows(parts, index, np.repeat([1, 2], n), ts, offsets, 1_000, offsets)


def _rows(
    parts: Sequence[Partition],
    index: np.ndarray,
    step: np.ndarray,
    ts: np.ndarray,
    offsets: np.ndarray,
    leo: int,
    high_watermark: np.ndarray,
) -> pd.DataFrame:
    count = len(index)
    leaders = np.asarray([p[2] for p in parts], dtype=np.int64)[index]
    columns: dict[str, Any] = {
        "shard": np.zeros(count, np.int32),
        "kind": [FETCH] * count,
        "ts": ts,
        "src_topic": ["fetch-responses"] * count,
        "src_partition": np.zeros(count, np.int32),
        "src_offset": np.arange(count),
        "topic": [parts[i][0] for i in index.tolist()],
        "partition": np.asarray([parts[i][1] for i in index.tolist()], dtype=np.int64),
        "leader": leaders,
        "follower": (leaders + step) % BROKERS,
        "leader_epoch": np.zeros(count, np.int64),
        "fetch_offset": offsets,
        "leader_leo": np.full(count, leo),
        "high_watermark": high_watermark,
        "error": ["NONE"] * count,
    }
    arrays = [
        pa.array(columns[f.name], f.type) if f.name in columns else pa.nulls(count, f.type)
        for f in ROUTED_ARROW_SCHEMA
    ]
    batch = pa.RecordBatch.from_arrays(arrays, schema=ROUTED_ARROW_SCHEMA)
    frame: pd.DataFrame = batch.to_pandas(types_mapper=pandas_type)
    return frame


def update_times(count: int = UPDATES) -> list[int]:
    """Event times of the updates, 5 s apart: the lagging followers' lag (since T0 + 1 s)
    is 16 to 26 s, above warn_ratio x T = 15 s and below T = 30 s: LAGGING in all."""
    return [T0 + 17_000 + 5_000 * k for k in range(count)]


def batch_outputs(partitions: int, shards: int, share: float) -> list[pd.DataFrame]:
    """The shard step's output of every shard, concatenated, for each update (what the
    sink gets from Spark after each batch)."""
    settings = ShardJobSettings(RuleSettings(), shards, 60_000)
    outputs: list[list[pd.DataFrame]] = [[] for _ in range(UPDATES)]
    for index in range(shards):
        shard = Shard(index, shards)
        parts = partitions_of(partitions, shard)
        lagging = unhealthy_mask(parts, share)
        snapshot = elected(parts, shard)
        process(snapshot, warm_rows(parts, lagging), -1, settings)
        for k, ts in enumerate(update_times()):
            outputs[k].append(
                process(snapshot, fetch_rows(parts, lagging, ts, 2_000 + k), ts, settings)
            )
        pickle.dumps(snapshot)  # the state Spark keeps (its cost is the job's, not measured)
    return [pd.concat(frames, ignore_index=True) for frames in outputs]


# ------------------------------------------------------------------- the load


PROMETHEUS_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "Accept-Encoding": "gzip",
}
"""What a Prometheus server asks for (OpenMetrics, gzip)."""


def scrape_once(url: str, timeout_s: float, headers: dict[str, str]) -> tuple[int, str]:
    """One scrape: the bytes on the wire and the exposition text."""
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=timeout_s) as answer:
        body = answer.read()
        packed = answer.headers.get("Content-Encoding") == "gzip"
    return len(body), (gzip.decompress(body) if packed else body).decode()


def scraper(
    url: str, rate: int, seconds: float, timeout_s: float, headers: dict[str, str]
) -> list[dict[str, Any]]:
    """``rate`` scrapes started together each second; each one's start, time, bytes."""
    results: list[dict[str, Any]] = []
    lock = threading.Lock()

    def one(started: float) -> None:
        began = time.monotonic()
        entry: dict[str, Any] = {"late_start_s": began - started}
        try:
            size, text = scrape_once(url, timeout_s, headers)
            entry.update(seconds=time.monotonic() - began, bytes=size, series=series_count(text))
        except OSError as error:
            entry.update(seconds=time.monotonic() - began, error=str(error))
        with lock:
            results.append(entry)

    with ThreadPoolExecutor(max_workers=rate * int(timeout_s + 2)) as pool:
        first = time.monotonic()
        for tick in range(int(seconds)):
            at = first + tick
            time.sleep(max(0.0, at - time.monotonic()))
            for _ in range(rate):
                pool.submit(one, at)
    return results


def series_count(text: str) -> int:
    """Samples in an exposition (the lines that are neither comments nor empty)."""
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


def families(text: str) -> tuple[dict[str, int], dict[str, float]]:
    """Series by sample name (``isrwatch_partitions``, ``..._total``, ``..._bucket``) and
    the sum of each one's values."""
    count: Counter[str] = Counter()
    total: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = line.split("{", 1)[0].split(" ", 1)[0]
            count[name] += 1
            total[name] = total.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return dict(count), total


@dataclass
class ScrapeFigures:
    scrapes: int
    errors: int
    p50_s: float
    p99_s: float
    max_s: float
    bytes: int
    series: int
    render_alone_s: float  # CPU of rendering the whole registry once
    first_scrape_s: float  # over HTTP, alone, after a batch: renders
    second_scrape_s: float  # the next one: the unhealthy series as rendered by the first
    wire_bytes: int  # of a scrape with the client's headers
    update_s: list[float]
    cpu_s: float  # CPU of the exporter's process during the load (all its threads)
    update_cpu_s: float  # of which the updates' (the sink's work after each batch)
    renderings: int  # renderings of the unhealthy series during the load
    families: dict[str, int]  # series of a scrape by metric (sample) name
    values: dict[str, float]  # the sum of each metric's samples in it

    def lines(self) -> list[str]:
        return [
            f"scrapes {self.scrapes} ({self.errors} failed or timed out)",
            f"scrape time p50 {self.p50_s * 1000:.0f} ms, p99 {self.p99_s * 1000:.0f} ms, "
            f"max {self.max_s * 1000:.0f} ms",
            f"a scrape: {self.bytes:,} bytes ({self.wire_bytes:,} on the wire), "
            f"{self.series:,} series; rendering all of it: {self.render_alone_s * 1000:.0f} ms "
            f"CPU (each scrape's cost without the cache); one scrape alone after a batch "
            f"{self.first_scrape_s * 1000:.0f} ms, the next {self.second_scrape_s * 1000:.0f} ms",
            f"updates: {len(self.update_s)}, each {_ms(self.update_s)}",
            f"CPU of the exporter's process during the load: {self.cpu_s:.1f} s, of which "
            f"updates {self.update_cpu_s:.1f} s; {self.renderings} renderings of the unhealthy "
            f"series; {self.cpu_per_scrape_ms():.0f} ms CPU per scrape besides the updates",
        ]

    def cpu_per_scrape_ms(self) -> float:
        return 1000 * (self.cpu_s - self.update_cpu_s) / max(1, self.scrapes)


def _ms(values: Sequence[float]) -> str:
    if not values:
        return "-"
    return f"median {statistics.median(values) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms"


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def run_scrapes(
    partitions: int,
    *,
    unhealthy: float = 0.05,
    seconds: float = 60,
    rate: int = 20,
    trigger_s: float = 5.0,
    shards: int = 16,
    timeout_s: float = 10.0,
    log: bool = True,
    prometheus: bool = True,
) -> ScrapeFigures:
    say = print if log else (lambda *_: None)
    started = time.monotonic()
    outputs = batch_outputs(partitions, shards, unhealthy)
    say(
        f"scrapes: {partitions:,} partitions, {unhealthy:.0%} unhealthy, {shards} shards; "
        f"{UPDATES} batches computed in {time.monotonic() - started:.0f} s"
    )
    exporter = HealthExporter()
    sink = BatchSink(None, "partition-health", "dead-letters", exporter)
    sink.write(0, outputs[0], time.monotonic())
    render = time.process_time()  # CPU: on a loaded machine wall time says little
    alone = generate_latest(exporter.registry)
    render_alone = time.process_time() - render
    port = free_port()
    server = ExporterServer(exporter)
    server.serve("127.0.0.1", port)
    url = f"http://127.0.0.1:{port}/metrics"
    headers = PROMETHEUS_HEADERS if prometheus else {}
    timings = []
    for _ in range(2):
        began = time.monotonic()
        wire_bytes, _text = scrape_once(url, timeout_s * 10, headers)
        timings.append(time.monotonic() - began)
    stop = threading.Event()
    update_s: list[float] = []

    update_cpu: list[float] = []

    def updates() -> None:  # one batch per trigger, as the job's driver does
        batch = 1
        while not stop.wait(trigger_s):
            began, cpu = time.monotonic(), time.thread_time()
            sink.write(batch, outputs[batch % UPDATES], began)
            update_s.append(time.monotonic() - began)
            update_cpu.append(time.thread_time() - cpu)
            batch += 1

    renderings = exporter.unhealthy_rendered.renderings
    cpu = time.process_time()
    updater = threading.Thread(target=updates, daemon=True)
    updater.start()
    try:
        client = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.faults.scrapes",
                "--client",
                url,
                "--rate",
                str(rate),
                "--seconds",
                str(seconds),
                "--timeout-s",
                str(timeout_s),
                *([] if prometheus else ["--plain"]),
            ],
            capture_output=True,
            check=True,
            env={**os.environ},
        )
    finally:
        stop.set()
        updater.join()
        cpu = time.process_time() - cpu
        renderings = exporter.unhealthy_rendered.renderings - renderings
        server.close()
    results: list[dict[str, Any]] = json.loads(client.stdout)
    by_family, values = families(alone.decode())
    done = [r for r in results if "error" not in r]
    times = [r["seconds"] for r in done]
    return ScrapeFigures(
        scrapes=len(results),
        errors=len(results) - len(done),
        p50_s=percentile(times, 0.50),
        p99_s=percentile(times, 0.99),
        max_s=max(times, default=float("nan")),
        bytes=len(alone),
        series=series_count(alone.decode()),
        render_alone_s=render_alone,
        first_scrape_s=timings[0],
        second_scrape_s=timings[1],
        wire_bytes=wire_bytes,
        update_s=update_s,
        cpu_s=cpu,
        update_cpu_s=sum(update_cpu),
        renderings=renderings,
        families=by_family,
        values=values,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--unhealthy", type=float, default=0.05)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rate", type=int, default=20)
    parser.add_argument("--trigger-s", type=float, default=5.0)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--timeout-s", type=float, default=10.0)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--plain", action="store_true", help="scrape as curl does (text, no gzip), not Prometheus"
    )
    parser.add_argument("--client", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client:  # the load, in its own process (as Prometheus is)
        headers = {} if args.plain else PROMETHEUS_HEADERS
        print(json.dumps(scraper(args.client, args.rate, args.seconds, args.timeout_s, headers)))
        return 0
    figures = run_scrapes(
        args.partitions,
        unhealthy=args.unhealthy,
        seconds=args.seconds,
        rate=args.rate,
        trigger_s=args.trigger_s,
        shards=args.shards,
        timeout_s=args.timeout_s,
        prometheus=not args.plain,
    )
    print(f"load average {os.getloadavg()[0]:.1f}")
    print("\n".join(figures.lines()))
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(figures), indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
