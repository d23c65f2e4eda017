"""CPU per fetch event of each Python stage of the job's packed fetch path, offline, for
this tree and an earlier revision in the same run.

    python bench/fetch_path_bench.py [--partitions 100000] [--events 2000000]
        [--shards 64] [--before main] [--profile FILE]

The input is what ``bench/sustained_bench.py``'s packed load writes: every follower of
``--partitions`` partitions x 3 replicas in turn, a pack per leader run of at most
``MOST_ROWS_PER_PACK`` rows, the packs spread over 4 Kafka partitions, ``--events``
fetch events in all (one micro-batch's: 5 s at 400,000/s is 2,000,000), of which one in
``ODD_ROWS`` breaks the contract and the next is fenced by the model. No broker and
no Spark; each stage is the job's own function on that batch:

* ``route``: the source's routing of each Kafka partition's records, in the reader
  batches the source's reader cuts them into (``partition_reader.runs_within``, at most
  ``READ_BATCH_BYTES`` of values a batch; one batch a partition in a revision before it)
  (``routing.route_arrow``: decode the packs, validate, find the shards, pack per
  shard);
* ``to pandas``: each shard's routed rows from Arrow to the pandas frame the state
  function gets (what PySpark's worker does for ``applyInPandasWithState``; the JVM's
  part, a few hundred rows, is not in it);
* ``shard step``: ``shard_state.process`` on each shard's rows, less the same step on
  no rows (its fixed part: evaluating every partition, the statistics), which is printed
  on its own.

The state is every partition elected (one LeaderAndIsr each) and warmed by one round.
``--before`` exports a git revision (``git archive``) and measures it in a child process
whose imports resolve to the export, then this tree (or ``--after``) the same way; both
outputs (dead letters and health rows) are compared by digest. Printed: CPU seconds
(``time.process_time``) and microseconds per event, the least of ``--repeat`` runs in
each of ``--rounds`` processes of each tree, run in turn, and how much the process's
peak resident memory grew while routing (the least, as the CPU). With ``--profile FILE`` this
tree's stages run once more under cProfile, written to FILE.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from state import ReplicationModel, Shard, shard_of
from state.events import MOST_ROWS_PER_PACK, LeaderAndIsr, Source
from state.fetch_pack import framed_pack
from state.settings import RuleSettings
from streaming.job.routing import ROUTED_ARROW_SCHEMA, _pandas_type, route_arrow
from streaming.job.shard_state import ShardJobSettings, ShardSnapshot, process

T0 = 1_700_000_000_000
BROKERS = 6
PER_TOPIC = 1000
FETCH_PARTITIONS = 4
ROUND_MS = 100  # event time between two rounds of every follower
ODD_ROWS = 50_000
ROOT = Path(__file__).resolve().parents[1]
SOURCES = {"fetch-responses": Source.FETCH_RESPONSES}


def topic_of(p: int) -> tuple[str, int]:
    return f"topic-{p // PER_TOPIC:04d}", p % PER_TOPIC


def kafka_batches(partitions: int, events: int, first_round: int) -> list[pa.RecordBatch]:
    """The packs of ``events`` fetch events from round ``first_round`` on, as the source's
    reader hands them to routing: one Arrow batch per Kafka partition (Spark's Kafka
    columns)."""
    rows = np.arange(2 * partitions)
    p, k = rows // 2, rows % 2
    leader = p % BROKERS
    order = np.lexsort((rows, leader))
    p, k, leader = p[order], k[order], leader[order]
    constant = {
        "topic": pa.array([topic_of(n)[0] for n in p.tolist()], pa.string()),
        "partition": pa.array(p % PER_TOPIC, pa.int64()),
        "leader": pa.array(leader, pa.int64()),
        "follower": pa.array((leader + 1 + k) % BROKERS, pa.int64()),
    }
    cuts = np.flatnonzero(np.diff(leader, append=-1)) + 1
    values: list[list[bytes]] = [[] for _ in range(FETCH_PARTITIONS)]
    done, i, round_ = 0, 0, first_round
    leo = 1_000 + 10 * round_
    while done < events:
        cut = int(cuts[np.searchsorted(cuts, i, side="right")])
        end = min(i + events - done, cut, i + MOST_ROWS_PER_PACK)
        count = end - i
        serial = np.arange(done, done + count)
        # one row in ODD_ROWS breaks the contract (routing dead-letters it), the next is
        # fenced by the model (a leader epoch it does not know: the shard dead-letters it)
        offsets = np.where(serial % ODD_ROWS == 0, -1, leo)
        epochs = np.where(serial % ODD_ROWS == 1, 7, 0)
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(np.full(count, T0 + 1_000 + round_ * ROUND_MS, np.int64)),
                *(constant[name].slice(i, count) for name in constant),
                pa.array(epochs),
                pa.array(offsets),
                pa.array(np.full(count, leo, np.int64)),
                pa.array(offsets),
            ],
            names=[
                "ts",
                "topic",
                "partition",
                "leader",
                "follower",
                "leader_epoch",
                "fetch_offset",
                "leader_leo",
                "high_watermark",
            ],
        )
        values[int(leader[i]) % FETCH_PARTITIONS].append(framed_pack(batch))
        done += count
        i = end
        if i == len(p):
            i, round_, leo = 0, round_ + 1, leo + 10
    return [
        pa.RecordBatch.from_pydict(
            {
                "key": pa.nulls(len(part), pa.binary()),
                "value": pa.array(part, pa.binary()),
                "topic": pa.array(["fetch-responses"] * len(part)),
                "partition": pa.array([n] * len(part), pa.int32()),
                "offset": pa.array(np.arange(len(part), dtype=np.int64)),
            }
        )
        for n, part in enumerate(values)
        if part
    ]


def elected(owned: list[int], shard: Shard) -> ShardSnapshot:
    """A shard's snapshot after one LeaderAndIsr per partition it owns (3 replicas)."""
    model = ReplicationModel(RuleSettings(), shard)
    events: list[tuple[int, LeaderAndIsr]] = []
    for p in owned:
        topic, number = topic_of(p)
        leader = p % BROKERS
        replicas = (leader, (leader + 1) % BROKERS, (leader + 2) % BROKERS)
        event = LeaderAndIsr(
            ts=T0,
            topic=topic,
            partition=number,
            leader=leader,
            leader_epoch=0,
            isr=replicas,
            replicas=replicas,
            partition_epoch=0,
        )
        events.append((len(events), event))
    model.apply(events)
    return ShardSnapshot(model)


def cpu(action: Callable[[], Any]) -> tuple[float, Any]:
    started = time.process_time()
    result = action()
    return time.process_time() - started, result


def reader_batches(batch: pa.RecordBatch) -> list[pa.RecordBatch]:
    """A Kafka partition's records as the source's reader hands them to routing."""
    try:
        from streaming.job.kafka_source.partition_reader import READ_BATCH_BYTES, runs_within
    except ImportError:  # a revision before reader batches were cut by bytes: one batch
        return [batch]
    sizes = pc.binary_length(batch.column("value")).fill_null(0).to_numpy()
    runs = runs_within(np.asarray(sizes, np.int64), READ_BATCH_BYTES)
    return [batch.slice(start, end - start) for start, end in runs]


def route_all(batches: list[pa.RecordBatch], shards: int) -> list[pa.RecordBatch]:
    return [
        out
        for batch in batches
        for part in reader_batches(batch)
        for out in route_arrow(part, SOURCES, shards)
    ]


def by_shard(routed: list[pa.RecordBatch], shards: int) -> dict[int, pa.Table]:
    table = pa.Table.from_batches(routed, ROUTED_ARROW_SCHEMA)
    shard = table.column("shard").to_numpy()
    return {s: table.filter(pa.array(shard == s)) for s in range(shards) if (shard == s).any()}


def frames_of(tables: dict[int, pa.Table]) -> dict[int, pd.DataFrame]:
    return {s: t.to_pandas(types_mapper=_pandas_type) for s, t in tables.items()}


def step_all(
    states: dict[int, bytes], frames: Mapping[int, pd.DataFrame], settings: ShardJobSettings
) -> list[pd.DataFrame]:
    return [process(pickle.loads(states[s]), frames.get(s), -1, settings) for s in states]


def _memory_kib(field: str) -> int:
    status = Path("/proc/self/status").read_text(encoding="ascii")
    return int(next(line for line in status.splitlines() if line.startswith(field)).split()[1])


def peak_growth(action: Callable[[], Any]) -> tuple[float, Any]:
    """How far above what the process held before ``action`` its resident memory rose
    while it ran (MiB; Linux: the peak is reset first, ``/proc/self/clear_refs``, 5)."""
    Path("/proc/self/clear_refs").write_text("5", encoding="ascii")
    held = _memory_kib("VmRSS:")
    result = action()
    return (_memory_kib("VmHWM:") - held) / 1024, result


def measure(partitions: int, events: int, shards: int, repeat: int, profile: str) -> dict[str, Any]:
    settings = ShardJobSettings(RuleSettings(), shards, 60_000)
    warm = kafka_batches(partitions, 2 * partitions, 0)
    batches = kafka_batches(partitions, events, 1)
    states: dict[int, bytes] = {}
    warm_frames = frames_of(by_shard(route_all(warm, shards), shards))
    owned: dict[int, list[int]] = {s: [] for s in range(shards)}
    for p in range(partitions):
        owned[shard_of(*topic_of(p), shards)].append(p)
    for s in range(shards):
        snapshot = elected(owned[s], Shard(s, shards))
        process(snapshot, warm_frames.get(s), -1, settings)
        # the clock of the warm-up round: the measured batch's rows come after it
        states[s] = pickle.dumps(snapshot)
    best: dict[str, float] = {}
    least_peak = float("inf")
    outputs: list[pd.DataFrame] = []
    for _ in range(repeat):
        route_peak, (t_route, routed) = peak_growth(lambda: cpu(lambda: route_all(batches, shards)))
        tables = by_shard(routed, shards)
        t_pandas, frames = cpu(lambda: frames_of(tables))  # noqa: B023
        t_step, outputs = cpu(lambda: step_all(states, frames, settings))  # noqa: B023
        t_fixed, _ = cpu(lambda: step_all(states, {}, settings))
        for name, spent in (
            ("route", t_route),
            ("to pandas", t_pandas),
            ("shard step", t_step - t_fixed),
            ("fixed", t_fixed),
        ):
            best[name] = min(best.get(name, spent), spent)
        least_peak = min(least_peak, route_peak)
    if profile:
        profiler = cProfile.Profile()
        profiler.enable()
        routed = route_all(batches, shards)
        frames = frames_of(by_shard(routed, shards))
        step_all(states, frames, settings)
        profiler.disable()
        profiler.dump_stats(profile)
    output = pd.concat(outputs, ignore_index=True)
    written = output[output["kind"] != "stats"]
    text = "\n".join(
        sorted(f"{k}\t{v}" for k, v in zip(written["key"], written["value"], strict=True))
    )
    applied = 0
    for value in output.loc[output["kind"] == "stats", "value"]:
        applied += sum(json.loads(value)["applied"].values())
    packed = [batch.column("event") for batch in routed if batch.num_rows]
    return {
        "cpu_s": best,
        "route_peak_mib": least_peak,
        "pack_bytes": sum(pc.sum(pc.binary_length(column)).as_py() or 0 for column in packed),
        "rows": sum(batch.num_rows for batch in routed),
        "records": sum(batch.num_rows for batch in batches),
        "applied": applied,
        "written": len(written),
        "digest": hashlib.sha256(text.encode()).hexdigest()[:16],
    }


def export(revision: str, into: Path) -> Path:
    """The tree of ``revision`` (git archive), where a child process imports it from."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision], check=True, capture_output=True
    ).stdout
    into.mkdir()
    tar = into / "tree.tar"
    tar.write_bytes(archive)
    subprocess.run(["tar", "-xf", str(tar), "-C", str(into)], check=True)
    return into


def run_against(tree: Path, args: argparse.Namespace, profile: str) -> dict[str, Any]:
    """``measure`` in a child process whose ``state`` and ``streaming`` are ``tree``'s."""
    answer = subprocess.run(
        [
            sys.executable,
            __file__,
            "--measure",
            f"--partitions={args.partitions}",
            f"--events={args.events}",
            f"--shards={args.shards}",
            f"--repeat={args.repeat}",
            f"--profile={profile}",
        ],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tree)},
        cwd=tree,
    )
    found: dict[str, Any] = json.loads(answer.stdout.splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=2, help="runs of each stage per process")
    parser.add_argument("--rounds", type=int, default=2, help="processes of each tree, in turn")
    parser.add_argument("--before", default="main", help="the git revision to compare with")
    parser.add_argument("--after", default="", help="a git revision instead of this tree")
    parser.add_argument("--profile", default="", help="cProfile this tree's stages into FILE")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        import state

        found = measure(args.partitions, args.events, args.shards, args.repeat, args.profile)
        json.dump({"tree": str(Path(state.__file__).parents[1]), **found}, sys.stdout)
        print()
        return
    print(
        f"fetch path bench: {args.events:,} fetch events over {args.partitions:,} partitions "
        f"x 3 replicas, packed, {args.shards} state shards; before = {args.before}, now = "
        f"{args.after or 'this tree'}; load average {os.getloadavg()[0]:.1f}"
    )
    now_tree = ROOT
    with tempfile.TemporaryDirectory() as scratch:
        tree = export(args.before, Path(scratch) / "before")
        if args.after:
            now_tree = export(args.after, Path(scratch) / "after")
        # the two in turn, each stage's least CPU over the rounds: on a shared machine a
        # neighbour's burst then falls on both
        before = run_against(tree, args, "")
        now = run_against(now_tree, args, args.profile)
        for _ in range(args.rounds - 1):
            for found, again in (
                (before, run_against(tree, args, "")),
                (now, run_against(now_tree, args, "")),
            ):
                found["cpu_s"] = {k: min(v, again["cpu_s"][k]) for k, v in found["cpu_s"].items()}
                found["route_peak_mib"] = min(found["route_peak_mib"], again["route_peak_mib"])
    print(f"  (imports: before {before['tree']}, now {now['tree']})")
    print(f"\n  {'stage':34s} {'before':>15s} {'now':>15s}")
    print(f"  {'':34s} {'CPU s   us/ev':>15s} {'CPU s   us/ev':>15s}")
    total = {"before": 0.0, "now": 0.0}
    for stage in ("route", "to pandas", "shard step", "fixed"):
        cells = []
        for name, found in (("before", before), ("now", now)):
            spent = found["cpu_s"][stage]
            if stage != "fixed":
                total[name] += spent
            cells.append(f"{spent:6.2f} {spent / args.events * 1e6:7.3f}")
        label = "shard step's fixed part (per batch)" if stage == "fixed" else stage
        print(f"  {label:34s} {cells[0]:>15s} {cells[1]:>15s}")
    print(
        f"  {'per event, all but the fixed part':34s} "
        f"{total['before'] / args.events * 1e6:15.3f} {total['now'] / args.events * 1e6:15.3f}"
    )
    peaks = [found["route_peak_mib"] for found in (before, now)]
    print(f"  {'route: peak memory growth (MiB)':34s} {peaks[0]:15.0f} {peaks[1]:15.0f}")
    for what in ("records", "rows", "applied", "written"):
        print(f"  {what:34s} {before[what]:15,} {now[what]:15,}")
    per_event = [found["pack_bytes"] / args.events for found in (before, now)]
    print(
        f"  {'routed bytes (event column) / event':34s} {per_event[0]:15.1f} {per_event[1]:15.1f}"
    )
    same = "same output" if before["digest"] == now["digest"] else "OUTPUT DIFFERS"
    print(f"  {same} (digests {before['digest']} / {now['digest']})")
    print(f"  load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
