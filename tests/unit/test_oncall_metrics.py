"""The exporter's on-call series: causes per kind and broker, planned under-replication per
topic, brokers in maintenance, flapping followers; and the sink writing causes."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from state import ClusterShape, HealthRecord, UnhealthyPartitions, attribute, decode_record
from state.health_record import StatusName
from streaming.job.metrics import HealthExporter
from streaming.job.shard_state import STATS
from streaming.job.shard_stats import UnhealthyPartition, encode
from streaming.job.sinks import BatchSink, HealthFile
from tests.unit.builders import T_MS, partition_health
from tests.unit.test_metrics import samples, shard_stats


def lagging(partition: int, broker: int, status: StatusName = "LAGGING") -> HealthRecord:
    return partition_health({broker: status}, topic="orders", partition=partition, leader=1)


def test_cause_planned_maintenance_and_flapping_series() -> None:
    # broker 3 lags on 2 of its 3 replicas (from leader 1 only: its fetcher); broker 2 is
    # catching up after a restart (planned) in partition 5, under-replicated
    shape = ClusterShape.from_json(
        {
            "pairs": [[3, 1, 3], [2, 1, 3]],
            "led": [[1, 6]],
            "live": [1, 2, 3],
            "maintenance": [[2, "restarted", 1_700_000_000_000]],
        }
    )
    records = [lagging(0, 3), lagging(1, 3), lagging(5, 2, "OUT_OF_SYNC")]
    flap = {
        "topic": "orders",
        "partition": 4,
        "broker": 3,
        "leader": 1,
        "shrinks": 3,
        "expands": 2,
        "period_ms": 4_500,
        "last_shrink_ms": 1_700_000_000_000,
    }
    exporter = HealthExporter()
    exporter.record_batch([shard_stats(0, flapping=[flap])], {}, 0.1)
    exporter.record_causes(attribute(UnhealthyPartitions.of(records), shape))
    got = samples(exporter)
    cause = (("broker", "3"), ("kind", "fetcher_from_leader"))
    planned = (("broker", "2"), ("kind", "planned_maintenance"))
    assert got[("isrwatch_cause_followers", cause)] == 2
    assert got[("isrwatch_cause_partitions", cause)] == 2
    assert got[("isrwatch_cause_leaders", cause)] == 1
    assert got[("isrwatch_cause_followers", planned)] == 1
    assert got[("isrwatch_planned_under_replicated_partitions", (("topic", "orders"),))] == 1
    since = (("broker", "2"), ("state", "restarted"))
    assert got[("isrwatch_broker_maintenance_since_seconds", since)] == 1_700_000_000
    key = (("broker", "3"), ("leader", "1"), ("partition", "4"), ("topic", "orders"))
    assert got[("isrwatch_follower_isr_shrinks", key)] == 3
    assert got[("isrwatch_follower_flap_period_seconds", key)] == 4.5


def test_planned_under_replication_is_zero_for_every_topic_without_it() -> None:
    exporter = HealthExporter()
    exporter.record_batch([shard_stats(0)], {}, 0.1)
    exporter.record_causes(attribute(UnhealthyPartitions.of([]), ClusterShape.merge([])))
    got = samples(exporter)
    assert got[("isrwatch_planned_under_replicated_partitions", (("topic", "orders"),))] == 0
    assert not [name for name, _ in got if name == "isrwatch_cause_followers"]


def test_the_sink_writes_causes_and_rewrites_a_record_whose_cause_changed(
    tmp_path: Path,
) -> None:
    """Partition 0 lags alone, then broker 3 falls behind on 2 of its 3 replicas from
    leader 1 while partition 0's own health stays the same: its record is written again."""
    shape = {"pairs": [[3, 1, 3]], "led": [[1, 3]], "live": [1, 3]}
    out = HealthFile(tmp_path / "health.jsonl")
    sink = BatchSink(None, "health", "dead", HealthExporter(), out)
    batch_ids = iter(range(100))

    def batch(unhealthy: list[HealthRecord], changed: set[int]) -> dict[str, HealthRecord]:
        reported = [
            UnhealthyPartition(
                record=r, replica_lag_time_max_ms=T_MS, changed=r.partition in changed
            )
            for r in unhealthy
        ]
        stats = shard_stats(0, unhealthy=reported, cause_shape=shape)
        rows = [{"kind": STATS, "key": "0", "value": encode(stats)}]
        before = out.path.read_text().splitlines() if out.path.exists() else []
        sink.write(next(batch_ids), pd.DataFrame(rows), time.monotonic())
        written = [decode_record(line) for line in out.path.read_text().splitlines()[len(before) :]]
        return {r.key: r for r in written}

    first = batch([lagging(0, 3)], {0})
    cause = first["orders:0"].cause
    assert cause is not None
    assert cause.kind == "partition_alone"
    assert first["orders:0"].followers[0].cause == first["orders:0"].cause
    # partition 1 starts lagging: partition 0's health has not changed, but its cause is now
    # the fetcher from leader 1, so it is written again
    second = batch([lagging(0, 3), lagging(1, 3)], {1})
    assert set(second) == {"orders:0", "orders:1"}
    cause = second["orders:0"].cause
    assert cause is not None
    assert cause.kind == "fetcher_from_leader"
    assert batch([lagging(0, 3), lagging(1, 3)], set()) == {}  # nothing changed: nothing written
