"""CPU of one micro-batch's fixed costs at 100,000 partitions: the stateful step of every
shard and the driver's sink, for this tree and for an earlier release, in one run.

    python bench/batch_bench.py [--partitions 100000] [--shards 16] [--before main]

The costs that do not depend on the input rate: each shard evaluates all its partitions
every batch, decides which health records changed, reports them and its statistics; the
driver attributes causes over every shard's report and writes the records (to a producer
that drops them: the sink's CPU alone). Three batches, each from the same state (every
follower caught up):

* (a) 50,000 fetch responses in which few partitions' health changes;
* (b) a fetch response on every partition, 20 s later, behind the leader: every follower
  turns LAGGING, so every partition's health changes and every partition is unhealthy;
* (c) 20 s later, every follower caught up but on 5 % of the partitions, whose follower
  falls behind: those 5 % change and are unhealthy.

``--before`` names a git revision (default ``main``): the script exports it
(``git archive``) and measures it with this same code in a child process whose imports
resolve to the export, then measures this tree the same way; both print one line of
JSON, shown side by side. Both must write the same records (checked: the records the
sink writes, parsed, field for field). Printed: CPU seconds (``time.process_time``)
summed over the shards, and the sink's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]
from confluent_kafka import Producer

from state import ReplicationModel, Shard, shard_of
from state.events import LeaderAndIsr
from state.settings import RuleSettings
from streaming.job.metrics import HealthExporter
from streaming.job.routing import (
    FETCH,
    ROUTED_ARROW_SCHEMA,
    pandas_type,  # the frames Spark hands the state function
)
from streaming.job.shard_state import ShardJobSettings, ShardSnapshot, process
from streaming.job.sinks import BatchSink

T0 = 1_700_000_000_000
TOPICS = 100
ROOT = Path(__file__).resolve().parents[1]
Partition = tuple[str, int, int]  # topic, partition, leader (followers: the next two)


# ----------------------------------------------------------------------------- input


def partitions_of(total: int, shard: Shard) -> list[Partition]:
    per = max(1, total // TOPICS)
    out = []
    for i in range(total):
        topic, number = f"topic-{i // per:03d}", i % per
        if shard_of(topic, number, shard.count) == shard.index:
            out.append((topic, number, i % 6))
    return out


def elected(parts: list[Partition], shard: Shard) -> ShardSnapshot:
    """A shard's snapshot after one LeaderAndIsr per partition (3 replicas, all in sync)."""
    model = ReplicationModel(RuleSettings(), shard)
    events = []
    for i, (topic, number, leader) in enumerate(parts):
        replicas = (leader, (leader + 1) % 6, (leader + 2) % 6)
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


def fetches(
    parts: list[Partition],
    picks: np.ndarray,
    follower: np.ndarray,
    ts: np.ndarray,
    leo: int,
    offset: int,
) -> pd.DataFrame:
    """Routed fetch rows, as the state function gets them from Spark."""
    count = len(picks)
    leaders = np.asarray([p[2] for p in parts], dtype=np.int64)[picks]
    columns: dict[str, Any] = {
        "shard": np.zeros(count, np.int32),
        "kind": [FETCH] * count,
        "ts": ts,
        "src_topic": ["fetch-responses"] * count,
        "src_partition": np.zeros(count, np.int32),
        "src_offset": np.arange(count),
        "topic": [parts[i][0] for i in picks.tolist()],
        "partition": np.asarray([parts[i][1] for i in picks.tolist()], dtype=np.int64),
        "leader": leaders,
        "follower": (leaders + follower) % 6,
        "leader_epoch": np.zeros(count, np.int64),
        "fetch_offset": np.full(count, offset),
        "leader_leo": np.full(count, leo),
        "high_watermark": np.full(count, offset),
        "error": ["NONE"] * count,
    }
    arrays = [
        pa.array(columns[f.name], f.type) if f.name in columns else pa.nulls(count, f.type)
        for f in ROUTED_ARROW_SCHEMA
    ]
    batch = pa.RecordBatch.from_arrays(arrays, schema=ROUTED_ARROW_SCHEMA)
    frame: pd.DataFrame = batch.to_pandas(types_mapper=pandas_type)
    return frame


def warm_rows(parts: list[Partition]) -> pd.DataFrame:
    """Every follower at the leader's LEO at T0 + 15 s (1 % of them at T0 + 1 s)."""
    n = len(parts)
    every = np.concatenate([np.arange(n), np.arange(n)])
    ts = np.full(2 * n, T0 + 15_000, dtype=np.int64)
    ts[: n // 100] = T0 + 1_000
    follower = np.repeat([1, 2], n)
    return fetches(parts, every, follower, ts, 1_000, 1_000)


def batch_a(parts: list[Partition], count: int) -> tuple[pd.DataFrame, int]:
    """``count`` followers caught up again 1.5 s later: only the 1 % left behind can
    change."""
    rng = np.random.default_rng(1)
    picks = rng.integers(0, len(parts), count)
    now = T0 + 16_500
    ts = np.full(count, now, dtype=np.int64)
    return fetches(parts, picks, rng.integers(1, 3, count), ts, 2_000, 2_000), now


def batch_b(parts: list[Partition]) -> tuple[pd.DataFrame, int]:
    """20 s later, a fetch on every partition behind its leader: every follower LAGGING."""
    count = len(parts)
    picks = np.arange(count) % len(parts)
    now = T0 + 35_000
    ts = np.full(count, now, dtype=np.int64)
    return fetches(parts, picks, np.ones(count, np.int64), ts, 5_000, 1_500), now


def batch_c(parts: list[Partition]) -> tuple[pd.DataFrame, int]:
    """20 s later, every follower at the leader's LEO but follower 1 of 5 % of the
    partitions, behind: those partitions are unhealthy, the rest stay healthy."""
    n = len(parts)
    now = T0 + 35_000
    behind = np.arange(0, n, 20)  # 5 %
    caught_up = np.setdiff1d(np.arange(n), behind)
    frames = [
        fetches(
            parts, caught_up, np.full(len(caught_up), f), np.full(len(caught_up), now), 5_000, 5_000
        )
        for f in (1, 2)
    ]
    frames.append(
        fetches(
            parts, behind, np.ones(len(behind), np.int64), np.full(len(behind), now), 5_000, 1_500
        )
    )
    frames.append(
        fetches(parts, behind, np.full(len(behind), 2), np.full(len(behind), now), 5_000, 5_000)
    )
    return pd.concat(frames, ignore_index=True), now


# ------------------------------------------------------------------------------- run


class DroppingProducer:
    """Takes records and drops them, keeping the health records' values (for the check
    that both trees write the same): the sink's CPU alone."""

    def __init__(self) -> None:
        self.health: list[bytes] = []

    def produce(self, topic: str, key: bytes, value: bytes | None, on_delivery: Any) -> None:
        if topic == "partition-health" and value is not None:
            self.health.append(value)

    def flush(self, timeout: float = 0) -> int:
        return 0

    def close(self, timeout: float = 0) -> None:
        pass


ADDED_SINCE_BEFORE = {
    "record": ("elr", "last_known_elr", "high_watermark_frozen", "offline_recovery"),
    "follower": ("shrink_at_ms",),
}
"""Fields the record gained after the default ``--before`` revision (the ELR and the
frozen high watermark of Kafka 4.x, the learned check): left out of the check that both
trees write the same records, which then holds every field they share."""


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in record.items() if k not in ADDED_SINCE_BEFORE["record"]}
    kept["followers"] = [
        {k: v for k, v in follower.items() if k not in ADDED_SINCE_BEFORE["follower"]}
        for follower in record.get("followers", [])
    ]
    return kept


def cpu(action: Callable[[], Any]) -> tuple[float, Any]:
    started = time.process_time()
    result = action()
    return time.process_time() - started, result


def measure(partitions: int, shards: int) -> dict[str, Any]:
    """Every batch on every shard, then the sink over their outputs: CPU seconds, records
    written and a digest of them (parsed: whitespace aside)."""
    settings = ShardJobSettings(RuleSettings(), shards, 60_000)
    states = []
    for index in range(shards):
        shard = Shard(index, shards)
        parts = partitions_of(partitions, shard)
        snapshot = elected(parts, shard)
        process(snapshot, warm_rows(parts), -1, settings)
        states.append((parts, pickle.dumps(snapshot)))
    batches: dict[str, Callable[[list[Partition]], tuple[pd.DataFrame, int]]] = {
        "a": partial(batch_a, count=50_000 // shards),  # 50,000 in all
        "b": batch_b,
        "c": batch_c,
    }
    result: dict[str, Any] = {}
    for name, make in batches.items():
        spent = 0.0
        outputs = []
        for parts, state in states:
            rows, clock = make(parts)
            snapshot = pickle.loads(state)
            used, out = cpu(lambda: process(snapshot, rows, clock, settings))  # noqa: B023
            spent += used
            outputs.append(out)
        batch = pd.concat(outputs, ignore_index=True)
        producer = DroppingProducer()
        sink = BatchSink(
            lambda: cast("Producer", producer),  # noqa: B023
            "partition-health",
            "dead-letters",
            HealthExporter(),
        )
        sink_cpu, _ = cpu(lambda: sink.write(0, batch, time.monotonic()))  # noqa: B023
        written = producer.health
        parsed = sorted(json.dumps(comparable(json.loads(v)), sort_keys=True) for v in written)
        result[name] = {
            "shards_cpu_s": spent,
            "sink_cpu_s": sink_cpu,
            "crossing_bytes": int(batch["value"].str.len().sum()),
            "records": len(written),
            "digest": hashlib.sha256("\n".join(parsed).encode()).hexdigest()[:16],
        }
    return result


def export(revision: str, into: Path) -> Path:
    """The tree of ``revision`` (git archive), where a child process imports it from."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision], check=True, capture_output=True
    ).stdout
    tar = into / "tree.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as tree:
        tree.extractall(into / "tree", filter="data")
    return into / "tree"


def run_against(tree: Path, partitions: int, shards: int) -> dict[str, Any]:
    """``measure`` in a child process whose ``state`` and ``streaming`` are ``tree``'s."""
    answer = subprocess.run(
        [sys.executable, __file__, "--measure", f"--partitions={partitions}", f"--shards={shards}"],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tree)},
        cwd=tree,
    )
    found: dict[str, Any] = json.loads(answer.stdout.splitlines()[-1])
    return found


NAMES = {
    "a": "(a) 50,000 fetches, few changes",
    "b": "(b) every partition changes, unhealthy",
    "c": "(c) 5 % of partitions unhealthy",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--before", default="main", help="the git revision to compare with")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        import state

        json.dump(
            {"tree": str(Path(state.__file__).parents[1]), **measure(args.partitions, args.shards)},
            sys.stdout,
        )
        print()
        return
    print(
        f"batch bench: {args.partitions:,} partitions x 3 replicas in {args.shards} state "
        f"shards; before = {args.before}, now = this tree; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    with tempfile.TemporaryDirectory() as scratch:
        before = run_against(export(args.before, Path(scratch)), args.partitions, args.shards)
        now = run_against(ROOT, args.partitions, args.shards)
    print(f"  (imports: before {before['tree']}, now {now['tree']})")
    for part, title in (
        ("shards_cpu_s", "stateful step, CPU s summed over the shards"),
        ("sink_cpu_s", "driver (sink), CPU s per batch"),
    ):
        print(f"\n  {title:46s} {'before':>8s} {'now':>8s}")
        for key, name in NAMES.items():
            b, n = before[key], now[key]
            print(
                f"  {name:46s} {b[part]:8.2f} {n[part]:8.2f}  x{b[part] / max(n[part], 1e-9):.1f}"
            )
    print(f"\n  {'records written; Spark rows crossing (MB)':46s} {'before':>16s} {'now':>16s}")
    for key, name in NAMES.items():
        b, n = before[key], now[key]
        same = "same records" if b["digest"] == n["digest"] else "RECORDS DIFFER"
        print(
            f"  {name:46s} {b['records']:7,} {b['crossing_bytes'] / 1e6:7.1f} "
            f"{n['records']:7,} {n['crossing_bytes'] / 1e6:7.1f}  {same}"
        )
    print(f"  load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
