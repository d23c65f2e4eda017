"""Events/s of the state model applying fetch responses, next to a one-at-a-time baseline.

    python bench/state_bench.py [--partitions 100000] [--events 1000000] [--batch 100000]
                                [--shards 16] [--no-controller] [--stored-state]

Both sides start from the same 100,000 elected partitions (3 replicas: a leader and two
followers) and apply the same fetch responses with the same rule (docs/domain.md#caught-up,
with the epoch/leader/replica fencing). The vectorised model takes them as the
columnar batches the streaming job hands it (pandas frames, as Arrow gives them); the
baseline is the straightforward implementation: a dict of per-follower objects updated
in a Python loop over parsed events. Printed: events/s of each, the ratio, the
evaluation time of all partitions at ``now`` and the state size. Pinned to one core
(``taskset``) where available so that the figure is per core.

With ``--stored-state``, only the size and the save + restore time of each shard's
group state, as a pickle (the releases up to 9711ad5) and in the state format.

Then the controller bursts of a 100,000-partition cluster, in CPU seconds per stage
(``time.process_time``): a cold start (one LeaderAndIsr per partition) and a failover
(UpdateMetadata of every partition to 6 brokers, events of 1,000 partitions). Each
stage is measured the per-record / per-event way (``parse_record``; one event per
``apply`` call, the explaining reference) and in bulk (``decode_controller_events``;
the whole batch in one ``apply``, as a shard gets it), on the same values, with the
same parts per shard (``route_controller_events``); both sides must end in equal state.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pickle
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import numpy as np
import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]

import state.model as model_module
from state import (
    ApplyReport,
    FetchBatch,
    ReplicationModel,
    Shard,
    decode_controller_events,
    health_signatures,
    parse_record,
    route_controller_events,
    shard_of,
)
from state.events import ControllerEvent, DeadLetter, FetchResponse, LeaderAndIsr, Source
from state.settings import RuleSettings
from streaming.job.shard_snapshot import ShardSnapshot
from streaming.job.shard_state import restore_snapshot, save_snapshot
from streaming.job.state_format import FORMAT_VERSION

REPLICAS = 3
TOPICS = 100


def topic_partitions(partitions: int) -> tuple[list[str], np.ndarray]:
    per_topic = partitions // TOPICS
    topics = [f"topic-{i // per_topic:03d}" for i in range(partitions)]
    numbers = np.arange(partitions) % per_topic
    return topics, numbers


def fetch_frames(partitions: int, events: int, batch: int, seed: int = 1) -> list[pd.DataFrame]:
    """Rounds in which every follower of every partition fetches once, as frames of ``batch``.

    The leader of partition i is broker i % 6; its followers the next two brokers. The
    leader appends 0-99 messages per round; followers are usually caught up with the
    previous round, one in twenty falls behind.
    """
    rng = np.random.default_rng(seed)
    topics, numbers = topic_partitions(partitions)
    topic_col = np.asarray(topics, dtype=object)
    leaders = np.arange(partitions) % 6
    leo = np.zeros(partitions, dtype=np.int64)
    per_round = partitions * (REPLICAS - 1)
    rows = []
    for r in range(-(-events // per_round)):
        previous = leo.copy()
        leo += rng.integers(0, 100, partitions)
        for k in (1, 2):
            behind = rng.random(partitions) < 0.05
            offset = np.where(behind, previous - rng.integers(0, 500, partitions), previous)
            rows.append(
                pd.DataFrame(
                    {
                        "ts": 1_700_000_000_000 + r * 500 + k,
                        "topic": topic_col,  # pandas' default string column, as the job gets it
                        "partition": numbers,
                        "leader": leaders,
                        "follower": (leaders + k) % 6,
                        "leader_epoch": 0,
                        "fetch_offset": np.maximum(offset, 0),
                        "leader_leo": leo,
                        "high_watermark": previous,
                        "error": ["NONE"] * partitions,
                    }
                )
            )
    frame = pd.concat(rows, ignore_index=True).iloc[:events]
    frame = frame.sample(frac=1.0, random_state=seed).sort_values("ts", kind="stable")
    frame = frame.reset_index(drop=True)
    return [frame.iloc[i : i + batch].reset_index(drop=True) for i in range(0, events, batch)]


ELECTION_TS = 1_700_000_000_000


def assignments(partitions: int) -> Iterator[tuple[str, int, int, tuple[int, ...]]]:
    """(topic, partition, leader, replicas) of every partition: RF 3 over 6 brokers."""
    topics, numbers = topic_partitions(partitions)
    for i in range(partitions):
        leader = i % 6
        yield topics[i], int(numbers[i]), leader, (leader, (leader + 1) % 6, (leader + 2) % 6)


def elections(partitions: int) -> Iterator[tuple[int, LeaderAndIsr]]:
    for i, (topic, partition, leader, replicas) in enumerate(assignments(partitions)):
        yield (
            i,
            LeaderAndIsr(
                ts=ELECTION_TS,
                topic=topic,
                partition=partition,
                leader=leader,
                leader_epoch=0,
                isr=replicas,
                replicas=replicas,
                partition_epoch=0,
            ),
        )


# ------------------------------------------------------------ controller bursts

BROKERS = 6


def election_values(partitions: int) -> list[bytes]:
    """The cold start's LeaderAndIsr of :func:`elections`, as record values."""
    return [
        json.dumps(
            {
                "type": "LeaderAndIsr",
                "ts": ELECTION_TS,
                "topic": topic,
                "partition": partition,
                "leader": leader,
                "leader_epoch": 0,
                "isr": list(replicas),
                "replicas": list(replicas),
                "partition_epoch": 0,
            }
        ).encode()
        for topic, partition, leader, replicas in assignments(partitions)
    ]


def failover_values(partitions: int, per_event: int = 1000) -> list[bytes]:
    """A new controller's UpdateMetadata of every partition to every broker."""
    states = [
        {
            "topic": topic,
            "partition": partition,
            "leader": leader,
            "leader_epoch": 0,
            "isr": list(replicas),
            "replicas": list(replicas),
            "offline_replicas": [],
        }
        for topic, partition, leader, replicas in assignments(partitions)
    ]
    return [
        json.dumps(
            {
                "type": "UpdateMetadata",
                "ts": 1_700_000_001_000,
                "broker": broker,
                "controller_id": 0,
                "controller_epoch": 1,
                "partitions": states[start : start + per_event],
            }
        ).encode()
        for broker in range(BROKERS)
        for start in range(0, partitions, per_event)
    ]


def cpu(work: Callable[[], object]) -> tuple[float, object]:
    started = time.process_time()
    result = work()
    return time.process_time() - started, result


def parse_each(values: Sequence[bytes]) -> list[ControllerEvent]:
    parsed = [parse_record(Source.CONTROLLER_EVENTS, value) for value in values]
    assert not any(isinstance(p, DeadLetter) for p in parsed)
    return cast("list[ControllerEvent]", parsed)


def parse_bulk(values: Sequence[bytes]) -> list[ControllerEvent]:
    events, dead = decode_controller_events(values)
    assert not dead
    return [event for _, event in events]


def shard_inputs(events: list[ControllerEvent], shards: int) -> list[list[tuple[int, Any]]]:
    inputs: list[list[tuple[int, Any]]] = [[] for _ in range(shards)]
    for n, parts in enumerate(route_controller_events(events, shards)):
        for part in parts:
            inputs[part.shard].append((n, part.event))
    return inputs


def apply_each(models: list[ReplicationModel], inputs: list[list[tuple[int, Any]]]) -> None:
    """One event per call, and every UpdateMetadata's states by the reference too."""
    bulk_min_states = model_module.BULK_MIN_STATES
    model_module.BULK_MIN_STATES = 2**62
    try:
        for model, mine in zip(models, inputs, strict=True):
            for item in mine:
                model.apply([item])
    finally:
        model_module.BULK_MIN_STATES = bulk_min_states


def apply_bulk(models: list[ReplicationModel], inputs: list[list[tuple[int, Any]]]) -> None:
    for model, mine in zip(models, inputs, strict=True):
        model.apply(mine)


def controller_bursts(partitions: int, shards: int) -> None:
    print(
        f"controller bursts: {partitions:,} partitions, {shards} shards, CPU seconds "
        f"(process_time), per record/event -> bulk"
    )
    models = {
        side: [ReplicationModel(RuleSettings(), Shard(i, shards)) for i in range(shards)]
        for side in ("each", "bulk")
    }
    bursts = (
        ("cold start", election_values(partitions), "LeaderAndIsr"),
        ("failover", failover_values(partitions), "UpdateMetadata"),
    )
    for name, values, kind in bursts:
        parse_e, each_events = cpu(lambda v=values: parse_each(v))  # type: ignore[misc]
        parse_b, bulk_events = cpu(lambda v=values: parse_bulk(v))  # type: ignore[misc]
        assert each_events == bulk_events
        split, inputs = cpu(lambda e=bulk_events: shard_inputs(e, shards))  # type: ignore[misc]
        apply_e, _ = cpu(lambda i=inputs: apply_each(models["each"], i))  # type: ignore[misc]
        apply_b, _ = cpu(lambda i=inputs: apply_bulk(models["bulk"], i))  # type: ignore[misc]
        for one, other in zip(models["each"], models["bulk"], strict=True):
            assert one.partition_count() == other.partition_count()
            now = 1_700_000_002_000
            assert list(one.evaluate(now).records()) == list(other.evaluate(now).records())
        total_e, total_b = parse_e + split + apply_e, parse_b + split + apply_b
        print(
            f"  {name:10s}: {len(values):,} {kind} "
            f"({sum(len(v) for v in values) / 2**20:.0f} MiB of JSON)\n"
            f"    parse+validate {parse_e:6.2f} -> {parse_b:5.2f} s   "
            f"split by shard {split:5.2f} s   "
            f"model apply {apply_e:6.2f} -> {apply_b:5.2f} s   "
            f"total {total_e:6.2f} -> {total_b:5.2f} s ({total_e / total_b:.1f} x)"
        )


# --------------------------------------------------- the straightforward baseline


@dataclass(slots=True)
class Follower:
    log_end_offset: int = -1
    last_fetch_time_ms: int = 0
    last_fetch_leader_leo: int = 0
    last_caught_up_ms: int = 0


@dataclass(slots=True)
class Partition:
    leader: int
    leader_epoch: int
    followers: dict[int, Follower]
    leader_leo: int = 0
    high_watermark: int = 0


def baseline_state(partitions: int) -> dict[tuple[str, int], Partition]:
    state = {}
    for topic, partition, leader, replicas in assignments(partitions):
        followers = {
            b: Follower(last_fetch_time_ms=ELECTION_TS, last_caught_up_ms=ELECTION_TS)
            for b in replicas
            if b != leader
        }
        state[(topic, partition)] = Partition(leader, 0, followers)
    return state


def baseline_apply(state: dict[tuple[str, int], Partition], fetches: list[FetchResponse]) -> int:
    rejected = 0
    for f in fetches:
        p = state.get((f.topic, f.partition))
        if p is None or f.leader_epoch != p.leader_epoch or f.leader != p.leader:
            rejected += 1
            continue
        r = p.followers.get(f.follower)
        if r is None:
            rejected += 1
            continue
        if f.error != "NONE":
            continue
        if f.fetch_offset >= f.leader_leo:
            r.last_caught_up_ms = max(r.last_caught_up_ms, f.ts)
        elif f.fetch_offset >= r.last_fetch_leader_leo:
            r.last_caught_up_ms = max(r.last_caught_up_ms, r.last_fetch_time_ms)
        r.last_fetch_leader_leo = f.leader_leo
        r.last_fetch_time_ms = f.ts
        r.log_end_offset = f.fetch_offset
        p.leader_leo = f.leader_leo
        p.high_watermark = f.high_watermark
    return rejected


# ------------------------------------------------------- the stored shard state


def shard_snapshots(partitions: int, shards: int, failover: bool) -> list[ShardSnapshot]:
    """Every shard of a job at ``partitions``: elected, one round of fetches (every
    follower once), with ``failover`` every broker's cache of every partition
    (UpdateMetadata), and the signatures, seen events and totals a batch leaves."""
    models = [ReplicationModel(RuleSettings(), Shard(i, shards)) for i in range(shards)]
    controller = parse_bulk(election_values(partitions))
    if failover:
        controller += parse_bulk(failover_values(partitions))
    apply_bulk(models, shard_inputs(controller, shards))
    (frame,) = fetch_frames(partitions, partitions * (REPLICAS - 1), partitions * REPLICAS)
    owners = np.asarray(
        [
            shard_of(t, int(p), shards)
            for t, p in zip(frame["topic"], frame["partition"], strict=True)
        ]
    )
    snapshots = []
    for i, model in enumerate(models):
        report = ApplyReport()
        model.apply_fetch_batch(FetchBatch.from_frame(frame[owners == i]), report)
        now = int(frame["ts"].max())
        health = model.evaluate(now)
        keys = [f"{t}:{p}" for t, p in zip(health.topic, health.partition.tolist(), strict=True)]
        snapshots.append(
            ShardSnapshot(
                model,
                clock_ms=now,
                signatures=dict(zip(keys, health_signatures(health).tolist(), strict=True)),
                seen_controller_events={-(n + 1): now for n in range(200)},
                applied_total=Counter(report.applied),
            )
        )
    return snapshots


def least_cpu(work: Callable[[], object], repeats: int = 5) -> float:
    """The least CPU time of ``repeats`` runs: the cost without other processes' noise."""
    spent = []
    for _ in range(repeats):
        started = time.process_time()
        work()
        spent.append(time.process_time() - started)
    return min(spent)


def stored_state(partitions: int, shards: int) -> None:
    """Size and save + restore time of each shard's group state, per format: the pickle
    of the releases up to 9711ad5 and this release's (streaming.job.state_format). The size
    in LZ4 approximates what RocksDB (which compresses its blocks) keeps of it."""
    print(
        f"stored shard state: {partitions:,} partitions, {shards} shards (per shard: mean "
        f"over the shards of the least CPU time of 5 runs)"
    )
    formats: dict[str, tuple[Callable[[ShardSnapshot], bytes], Callable[[bytes], object]]] = {
        "pickle (9711ad5)": (
            lambda s: pickle.dumps(s, protocol=pickle.HIGHEST_PROTOCOL),
            pickle.loads,
        ),
        f"state format {FORMAT_VERSION}": (  # as the job saves and restores it
            save_snapshot,
            lambda b: restore_snapshot(b, RuleSettings()),
        ),
    }
    for failover in (False, True):
        snapshots = shard_snapshots(partitions, shards, failover)
        what = "after a failover (every broker caches every ISR)" if failover else "steady"
        print(f"  {what}:")
        for name, (save, restore) in formats.items():
            sizes, packed, saves, restores = [], [], [], []
            for snapshot in snapshots:
                stored = save(snapshot)
                sizes.append(len(stored))
                packed.append(len(pa.compress(stored, codec="lz4", asbytes=True)))
                saves.append(least_cpu(partial(save, snapshot)))
                restores.append(least_cpu(partial(restore, stored)))
            save_ms, restore_ms = np.mean(saves) * 1000, np.mean(restores) * 1000
            print(
                f"    {name:17s}: {np.mean(sizes) / 2**20:5.2f} MiB "
                f"({np.mean(packed) / 2**20:5.2f} MiB in LZ4)   save {save_ms:5.1f} ms   "
                f"restore {restore_ms:5.1f} ms   "
                f"save+restore {save_ms + restore_ms:5.1f} ms"
            )


# ------------------------------------------------------------------------ main


def state_bytes(model: ReplicationModel) -> int:
    return model.table.array_bytes()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument(
        "--batch",
        type=int,
        nargs="+",
        default=[100_000, 1_000_000],
        help="micro-batch sizes to measure (1,000,000: every follower 5 "
        "times in one batch, as in a 5 s trigger)",
    )
    parser.add_argument("--no-pin", action="store_true", help="do not pin to one core")
    parser.add_argument("--shards", type=int, default=16, help="state shards (controller bursts)")
    parser.add_argument(
        "--no-controller",
        action="store_true",
        help="skip the controller bursts (cold start, failover)",
    )
    parser.add_argument(
        "--stored-state",
        action="store_true",
        help="only the size and save + restore time of each shard's state",
    )
    args = parser.parse_args()
    if not args.no_pin and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    if args.stored_state:
        stored_state(args.partitions, args.shards)
        return
    cores = len(os.sched_getaffinity(0))
    print(
        f"state bench: {args.partitions:,} partitions x {REPLICAS} replicas, "
        f"{args.events:,} fetch responses, cores used: {cores}"
    )
    frames = fetch_frames(args.partitions, args.events, args.events)

    elected = ReplicationModel(RuleSettings())
    started, cpu_started = time.perf_counter(), time.process_time()
    elected.apply(elections(args.partitions))
    print(
        f"  setup: {args.partitions:,} LeaderAndIsr applied in "
        f"{time.perf_counter() - started:.2f} s ({time.process_time() - cpu_started:.2f} s CPU;"
        f" load average {os.getloadavg()[0]:.1f})"
    )

    started = time.perf_counter()
    rows = [cast("dict[str, Any]", row) for frame in frames for row in frame.to_dict("records")]
    fetches = [FetchResponse(**row) for row in rows]
    reading = time.perf_counter() - started
    state = baseline_state(args.partitions)
    started = time.perf_counter()
    rejected = baseline_apply(state, fetches)
    baseline = time.perf_counter() - started
    assert rejected == 0
    rate_b = args.events / baseline
    print(
        f"  one at a time    : {rate_b:12,.0f} events/s  ({baseline:.3f} s)  baseline, "
        f"on parsed events (its best case)"
    )
    print(
        f"  one at a time    : {args.events / (baseline + reading):12,.0f} events/s  "
        f"({baseline + reading:.3f} s)  baseline, reading the same frames as the model"
    )

    started = time.perf_counter()
    copy.deepcopy(elected).apply_fetch_batch(
        FetchBatch.from_frame(frames[0].iloc[:10]), ApplyReport()
    )
    print(f"  first call (numba compile or cache load): {time.perf_counter() - started:.2f} s")
    for batch in args.batch:
        model = copy.deepcopy(elected)
        batches = [frames[0].iloc[i : i + batch] for i in range(0, args.events, batch)]
        report = ApplyReport()
        started = time.perf_counter()
        for frame in batches:
            model.apply_fetch_batch(FetchBatch.from_frame(frame), report)
        vectorised = time.perf_counter() - started
        assert report.applied["FetchResponse"] == args.events, report.rejections_by_reason()
        rate_v = args.events / vectorised
        print(
            f"  vectorised model : {rate_v:12,.0f} events/s  ({vectorised:.3f} s)  "
            f"batches of {batch:,}: {rate_v / rate_b:.1f} x the baseline"
        )

    mismatches = sum(
        int(model.table.last_caught_up_ms[model.table.live_row_of(t, p), 1 + i])
        != follower.last_caught_up_ms
        for (t, p), part in list(state.items())[:1000]
        for i, follower in enumerate(part.followers.values())
    )
    assert mismatches == 0, f"{mismatches} followers differ between the two implementations"

    now = int(frames[-1]["ts"].max())
    started = time.perf_counter()
    health = model.evaluate(now)
    evaluation = time.perf_counter() - started

    print(f"  evaluate all {len(health):,} partitions at now: {evaluation * 1000:.0f} ms")
    print(f"  state size (numpy columns): {state_bytes(model) / 2**20:.1f} MiB")
    print(f"  follower statuses: {health.status_counts()}")
    if not args.no_controller:
        controller_bursts(args.partitions, args.shards)


if __name__ == "__main__":
    main()
