"""Simulator bench: how fast the simulator makes a large cluster's traffic, and the model on it.

Runs the ``large-cluster`` scenario in simulated time, then applies its records to
``state.ReplicationModel`` in 5 s trigger windows (controller events in order, each
window's fetch responses as one batch) and, in the same run, to the one-at-a-time
baseline of ``bench/state_bench.py`` on the same fetches. Unlike state_bench's uniform
synthetic batches, this traffic has Kafka's shape: fetch sessions per broker pair,
produce bursts, a slow follower, elections.

    python bench/simulator_bench.py [--brokers 12] [--topics 100] [--partitions 100]
                                    [--seconds 20] [--window-ms 5000]
"""

from __future__ import annotations

import argparse
import time
from typing import Any, cast

import pandas as pd
from state_bench import Follower, Partition, baseline_apply, state_bytes

from state import ApplyReport, FetchBatch, ReplicationModel, parse_json_line
from state.events import DeadLetter, Event, FetchResponse, LeaderAndIsr, Source
from state.settings import RuleSettings
from streaming.feeds.simulator import ClusterSimulator, load_scenario

START_MS = 1_700_000_000_000


def simulate(args: argparse.Namespace) -> list[Any]:
    scenario = load_scenario(
        "large-cluster",
        {
            "cluster.brokers": args.brokers,
            "topics.0.count": args.topics,
            "topics.0.partitions": args.partitions,
            "duration_s": args.seconds,
        },
    )
    sim = ClusterSimulator(scenario, seed=1, start_ms=START_MS)
    started = time.perf_counter()
    events = list(sim.events())
    elapsed = time.perf_counter() - started
    fetches = sum(1 for e in events if e.source is Source.FETCH_RESPONSES)
    print(
        f"simulator: {len(sim.partitions):,} partitions on {args.brokers} brokers, "
        f"{args.seconds} simulated s: {len(events):,} records ({fetches:,} fetch responses) "
        f"in {elapsed:.1f} s = {len(events) / elapsed:,.0f} records/s, "
        f"{args.seconds / elapsed:.1f}x real time"
    )
    return events


def windows(events: list[Any], window_ms: int) -> list[tuple[list[Event], pd.DataFrame]]:
    """Per trigger window: its controller events (parsed) and its fetch responses (a frame)."""
    out: list[tuple[list[Event], pd.DataFrame]] = []
    controller: list[Event] = []
    fetches: list[dict[str, Any]] = []
    end = START_MS + window_ms
    for event in events:
        while event.ts >= end:
            out.append((controller, pd.DataFrame.from_records(fetches)))
            controller, fetches, end = [], [], end + window_ms
        if event.source is Source.FETCH_RESPONSES:
            fetches.append(event.value)
        else:
            parsed = parse_json_line(event.source, event.value)
            assert not isinstance(parsed, DeadLetter), parsed
            controller.append(parsed)
    out.append((controller, pd.DataFrame.from_records(fetches)))
    return out


def run_model(parts: list[tuple[list[Event], pd.DataFrame]]) -> dict[str, float]:
    """Seconds spent on controller events, on fetch batches, and per evaluation; bytes."""
    model = ReplicationModel(RuleSettings())
    first = next(frame for _, frame in parts if len(frame))
    model.apply_fetch_batch(FetchBatch.from_frame(first.iloc[:1]), ApplyReport())  # compile
    model = ReplicationModel(RuleSettings())
    report = ApplyReport()
    spent = {"controller": 0.0, "fetches": 0.0, "evaluate": 0.0}
    for controller, frame in parts:
        started = time.perf_counter()
        model.apply(enumerate(controller))
        applied = time.perf_counter()
        if len(frame):
            model.apply_fetch_batch(FetchBatch.from_frame(frame), report)
        fetched = time.perf_counter()
        model.evaluate(int(frame["ts"].max()) if len(frame) else START_MS)
        spent["controller"] += applied - started
        spent["fetches"] += fetched - applied
        spent["evaluate"] += time.perf_counter() - fetched
    spent["evaluate"] /= len(parts)
    spent["bytes"] = state_bytes(model)
    return spent


def run_baseline(parts: list[tuple[list[Event], pd.DataFrame]]) -> float:
    """One fetch at a time in Python; leadership from the LeaderAndIsr events, as they come."""
    state: dict[tuple[str, int], Partition] = {}
    elapsed = 0.0
    for controller, frame in parts:
        rows = [cast("dict[str, Any]", row) for row in frame.to_dict("records")]
        fetches = [FetchResponse(**row) for row in rows]
        started = time.perf_counter()
        for event in controller:
            if isinstance(event, LeaderAndIsr) and event.leader >= 0:
                assert event.replicas is not None
                assert event.leader_epoch is not None
                followers = {
                    b: Follower(last_fetch_time_ms=event.ts, last_caught_up_ms=event.ts)
                    for b in event.replicas
                    if b != event.leader
                }
                state[(event.topic, event.partition)] = Partition(
                    event.leader, event.leader_epoch, followers
                )
        baseline_apply(state, fetches)
        elapsed += time.perf_counter() - started
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=12)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=100, help="per topic")
    parser.add_argument("--seconds", type=int, default=20, help="simulated seconds")
    parser.add_argument("--window-ms", type=int, default=5_000, help="trigger interval")
    args = parser.parse_args()
    events = simulate(args)
    parts = windows(events, args.window_ms)
    fetches = sum(len(frame) for _, frame in parts)
    controller = sum(len(events) for events, _ in parts)
    spent = run_model(parts)
    baseline = run_baseline(parts)
    fetching = spent["fetches"]
    print(
        f"model    : {fetches / fetching:12,.0f} fetch responses/s ({fetching:.2f} s), "
        f"{len(parts)} windows of {args.window_ms} ms: {baseline / fetching:.1f}x the baseline"
    )
    print(
        f"baseline : {fetches / baseline:12,.0f} fetch responses/s ({baseline:.2f} s), "
        "one at a time on parsed events"
    )
    print(
        f"controller events: {controller:,} in {spent['controller']:.2f} s "
        f"(elections and full UpdateMetadata at start-up)"
    )
    print(
        f"evaluate : {spent['evaluate'] * 1000:.1f} ms per window; "
        f"state {spent['bytes'] / 2**20:.1f} MiB"
    )


if __name__ == "__main__":
    main()
