"""Cost of cause attribution per micro-batch on the driver, next to what the driver already
does with the same reports (decoding the shards' unhealthy records from JSON).

    python bench/cause_bench.py [--partitions 100000] [--brokers 30] [--shards 64]

A cluster of ``--partitions`` partitions (3 replicas on random distinct brokers of
``--brokers``) in which broker 1 has crashed (its follower replicas OFFLINE, its
leaderships moved away) and broker 2 is behind on everything it follows: every
partition with a follower on either is unhealthy. Timed, best of 5: the baseline
(decoding the shards' unhealthy records, typed, and their shapes, as the sink does every
batch), building the columnar input from the records, merging the shards' shapes, and the
attribution itself. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import msgspec
import numpy as np

from state import (
    ClusterShape,
    FollowerHealth,
    HealthRecord,
    MetadataHealth,
    UnhealthyPartitions,
    attribute,
)
from state.health_record import StatusName

ENCODER = msgspec.json.Encoder()
DECODER = msgspec.json.Decoder(list[HealthRecord])


def follower(broker: int, status: StatusName, now: int) -> FollowerHealth:
    """A follower as the record has it: OFFLINE never caught up, LAGGING 20 s behind."""
    if status == "OFFLINE":
        return FollowerHealth(
            broker=broker,
            in_isr=False,
            fetch_offset=None,
            last_caught_up_ms=None,
            lag_time_ms=None,
            lag_time_unknown="NEVER_CAUGHT_UP",
            lag_messages=None,
            status=status,
        )
    lag = 20_000 if status == "LAGGING" else 0
    return FollowerHealth(
        broker=broker,
        in_isr=True,
        fetch_offset=1_000 - lag // 100,
        last_caught_up_ms=now - lag,
        lag_time_ms=lag,
        lag_messages=lag // 100,
        status=status,
    )


def cluster(partitions: int, brokers: int, shards: int) -> tuple[list[bytes], list[str]]:
    """The shards' unhealthy records and shapes, as the JSON the stats rows carry."""
    now = 1_700_000_000_000
    ids = np.arange(partitions)
    replicas = np.random.default_rng(0).random((partitions, brokers)).argsort(axis=1)[:, :3] + 1
    leader, followers = replicas[:, 0], replicas[:, 1:]
    live = [b for b in range(1, brokers + 1) if b != 1]
    records: list[list[HealthRecord]] = [[] for _ in range(shards)]
    consistent = MetadataHealth(
        stale_brokers=[], state="CONSISTENT", blackout_earliest_ms=None, blackout_latest_ms=None
    )
    for p in range(partitions):
        if leader[p] == 1:
            continue  # re-elected elsewhere; keep the example simple
        statuses: dict[int, StatusName] = {
            int(b): "OFFLINE" if b == 1 else "LAGGING" if b == 2 else "IN_SYNC"
            for b in followers[p]
        }
        if all(s == "IN_SYNC" for s in statuses.values()):
            continue
        isr = [int(leader[p])] + [b for b, s in statuses.items() if s != "OFFLINE"]
        records[p % shards].append(
            HealthRecord(
                topic=f"t{p // 1000}",
                partition=p % 1000,
                as_of_ms=now,
                leader=int(leader[p]),
                leader_epoch=0,
                replicas=[int(b) for b in replicas[p]],
                isr=isr,
                high_watermark=800,
                leader_leo=1_000,
                under_replicated=len(isr) < 3,
                under_min_isr=False,
                at_min_isr=len(isr) == 1,
                offline=False,
                predicted_under_replicated=False,
                followers=[follower(b, s, now) for b, s in statuses.items()],
                metadata=consistent,
            )
        )
    shapes = []
    for shard in range(shards):
        mine = ids % shards == shard
        shape = ClusterShape.of(followers[mine], leader[mine], live)
        shapes.append(json.dumps(shape.to_json()))
    return [ENCODER.encode(r) for r in records], shapes


def best_of(runs: int, task: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        task()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--brokers", type=int, default=30)
    parser.add_argument("--shards", type=int, default=64)
    args = parser.parse_args()
    records_json, shapes_json = cluster(args.partitions, args.brokers, args.shards)
    records = [r for chunk in records_json for r in DECODER.decode(chunk)]
    shapes = [ClusterShape.from_json(json.loads(s)) for s in shapes_json]
    merged = ClusterShape.merge(shapes)
    unhealthy = UnhealthyPartitions.of(records)
    baseline = best_of(
        5, lambda: ([DECODER.decode(c) for c in records_json], [json.loads(s) for s in shapes_json])
    )
    build = best_of(5, lambda: UnhealthyPartitions.of(records))
    merge = best_of(
        5, lambda: ClusterShape.merge([ClusterShape.from_json(json.loads(s)) for s in shapes_json])
    )
    attribution = best_of(5, lambda: attribute(unhealthy, merged))
    result = attribute(unhealthy, merged)
    print(
        f"{args.partitions:,} partitions, {args.brokers} brokers, {args.shards} shards: "
        f"{len(records):,} unhealthy, {len(unhealthy.followers.broker):,} followers not "
        "in sync"
    )
    print(f"baseline  decoding the shards' reports        {baseline * 1000:8.1f} ms")
    print(f"columnar  input from the records              {build * 1000:8.1f} ms")
    print(f"shapes    decoded and merged                  {merge * 1000:8.1f} ms")
    print(f"attribute the rules                           {attribution * 1000:8.1f} ms")
    for count in result.summary():
        print(
            f"  {count.kind} broker {count.broker}: {count.followers:,} followers, "
            f"{count.partitions:,} partitions, {count.leaders} leaders"
        )


if __name__ == "__main__":
    main()
