"""The exporter: gauges from the shards' latest stats, bounded per-partition series."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path
from typing import Any

import msgspec
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from state import MetadataHealth
from streaming.job.exporter_http import ExporterServer
from streaming.job.metrics import HealthExporter
from streaming.job.shard_stats import ShardStats, UnhealthyPartition
from streaming.tools.embedded_broker import free_port
from tests.unit.builders import CONSISTENT, LEADER_LEO, follower_health, partition_health


def shard_stats(shard: int, **overrides: Any) -> ShardStats:
    stats: dict[str, Any] = {
        "shard": shard,
        "applied": {"FetchResponse": 10, "IsrChange": 1},
        "applied_total": {"FetchResponse": 100},
        "rejected": {},
        "late": 0,
        "duplicates": 0,
        "fetch_error_responses": 0,
        "fetch_error_responses_total": 0,
        "isr_transitions": [["orders", 1, "shrink", False]],
        "propagation_delays_ms": [5_500],
        "bounced_brokers": [],
        "clock_ms": 1_700_000_000_000,
        "now_ms": 1_700_000_000_000,
        "partitions": 2,
        "topics": {
            "orders": {
                "partitions": 2,
                "under_replicated": 1,
                "under_min_isr": 0,
                "at_min_isr": 1,
                "offline": 0,
                "predicted_under_replicated": 0,
                "followers": {"IN_SYNC": 3, "LAGGING": 1},
                "metadata_stale_expected": 1,
                "metadata_stale_overdue": 0,
            }
        },
        "brokers": {
            "1": {"followers": {}, "leads": {"partitions": 2, "under_replicated": 1}},
            "3": {"followers": {"IN_SYNC": 1, "LAGGING": 1}, "leads": {}},
        },
        "unhealthy": [],
    }
    return msgspec.convert({**stats, **overrides}, ShardStats)


NOW_MS = 1_700_000_000_000


def unhealthy_record(partition: int) -> UnhealthyPartition:
    """orders-``partition`` at min ISR (3 of 4 replicas, min 3), under-replicated (broker 4
    out of the ISR), follower 3 SHRINK_ELIGIBLE 32 s behind (T = 30 s: its deadline is 1.5 T
    after it last caught up, 13 s from now), metadata stale within its window."""
    record = partition_health(
        {2: "IN_SYNC", 3: "SHRINK_ELIGIBLE", 4: "OUT_OF_SYNC"},
        topic="orders",
        partition=partition,
        as_of_ms=NOW_MS,
        min_insync_replicas=3,
        metadata=MetadataHealth(
            stale_brokers=[2],
            state="STALE_EXPECTED",
            blackout_earliest_ms=NOW_MS + 1_000,
            blackout_latest_ms=NOW_MS + 3_500,
        ),
    )
    return UnhealthyPartition(record=record, replica_lag_time_max_ms=30_000, changed=True)


def samples(exporter: HealthExporter) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(exporter.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_gauges_add_up_over_shards_and_counters_accumulate() -> None:
    exporter = HealthExporter()
    exporter.record_batch(
        # shard 1 had 3 error responses among its 10 fetches: not in its applied count
        [
            shard_stats(0),
            shard_stats(1, fetch_error_responses=3, applied={"FetchResponse": 7, "IsrChange": 1}),
        ],
        {("fetch-responses", "invalid_json"): 2},
        0.5,
    )
    exporter.record_batch([shard_stats(0), shard_stats(1)], {("controller-events", "late"): 1}, 0.5)
    samples(exporter)  # a scrape: new ISR-change series are exported at 0 once first
    got = samples(exporter)
    topic = (("topic", "orders"),)
    assert got[("isrwatch_under_replicated_partitions", topic)] == 2  # 1 per shard, latest
    assert got[("isrwatch_partitions", topic)] == 4
    assert got[("isrwatch_followers", (("status", "LAGGING"), ("topic", "orders")))] == 2
    assert got[("isrwatch_metadata_stale_partitions", (("state", "expected"), *topic))] == 2
    assert got[("isrwatch_dead_letters_total", (("reason", "invalid_json"),))] == 2
    assert got[("isrwatch_dead_letters_total", (("reason", "late"),))] == 1
    fetches = (("result", "applied"), ("source", "fetch-responses"))
    assert got[("isrwatch_events_total", fetches)] == 10 + 7 + 10 + 10
    errors = (("result", "error_response"), ("source", "fetch-responses"))
    assert got[("isrwatch_events_total", errors)] == 3
    dead = (("result", "dead_letter"), ("source", "fetch-responses"))
    assert got[("isrwatch_events_total", dead)] == 2
    shrinks = (("kind", "shrink"), ("leader", "1"), ("origin", "leader"), *topic)
    assert got[("isrwatch_isr_changes_total", shrinks)] == 4  # 2 shards x 2 batches
    assert got[("isrwatch_propagation_delay_seconds_count", ())] == 4
    assert got[("isrwatch_state_events_applied", (("type", "FetchResponse"),))] == 200
    assert got[("isrwatch_last_event_time_seconds", ())] == 1_700_000_000
    led = (("broker", "1"), ("condition", "under_replicated"))
    assert got[("isrwatch_broker_led_partitions", led)] == 2  # one per shard
    lagging = (("broker", "3"), ("status", "LAGGING"))
    assert got[("isrwatch_broker_followers", lagging)] == 2


def test_partition_series_exist_only_while_unhealthy() -> None:
    exporter = HealthExporter()
    exporter.record_batch([shard_stats(0, unhealthy=[unhealthy_record(7)])], {}, 0.1)
    got = samples(exporter)
    follower = (
        ("broker", "3"),
        ("leader", "1"),
        ("partition", "7"),
        ("status", "SHRINK_ELIGIBLE"),
        ("topic", "orders"),
    )
    assert got[("isrwatch_follower_status", follower)] == 1
    assert got[("isrwatch_follower_lag_time_seconds", follower)] == 32
    assert got[("isrwatch_follower_lag_messages", follower)] == 100
    assert got[("isrwatch_follower_shrink_deadline_seconds", follower)] == 1_700_000_013
    conditions = {
        dict(labels)["condition"] for name, labels in got if name == "isrwatch_partition_condition"
    }
    assert conditions == {"under_replicated", "metadata_stale_expected"}
    partition = (("partition", "7"), ("topic", "orders"))
    assert got[("isrwatch_partition_high_watermark", partition)] == LEADER_LEO - 100
    assert got[("isrwatch_partition_leader_leo", partition)] == LEADER_LEO
    assert got[("isrwatch_partition_replica_lag_time_max_seconds", partition)] == 30
    assert got[("isrwatch_partition_blackout_earliest_seconds", partition)] == 1_700_000_001
    assert got[("isrwatch_partition_blackout_latest_seconds", partition)] == 1_700_000_003.5
    exporter.record_batch([shard_stats(0)], {}, 0.1)  # partition 7 is healthy again
    assert not [key for key in samples(exporter) if key[0].startswith("isrwatch_follower_")]
    assert not [key for key in samples(exporter) if key[0].startswith("isrwatch_partition_")]


def test_a_follower_without_lag_time_has_a_status_and_no_time_series() -> None:
    """Never caught up since its leader's election (docs/health-record.md): no lag time and
    no deadline from epoch 0, the status series alone (alerts count it)."""
    # 2 and 4 were put back into the ISR without catching up (docs/health-record.md):
    # 2's deadline is its entry + T / 2, 4's entry was not seen
    back = msgspec.structs.replace(
        follower_health(2, "OUT_OF_SYNC", in_isr=True),
        status="SHRINK_OVERDUE",
        fetch_offset=LEADER_LEO - 40,
        lag_messages=40,
        shrink_by_ms=NOW_MS - 1_000,
    )
    followers = [
        follower_health(3, "OUT_OF_SYNC", in_isr=False),
        back,
        msgspec.structs.replace(back, broker=4, shrink_by_ms=None),
    ]
    record = UnhealthyPartition(
        record=partition_health(followers, topic="orders", partition=7, as_of_ms=NOW_MS),
        replica_lag_time_max_ms=30_000,
        changed=True,
    )
    exporter = HealthExporter()
    exporter.record_batch([shard_stats(0, unhealthy=[record])], {}, 0.1)
    got = samples(exporter)
    status = {
        (dict(labels)["broker"], dict(labels)["status"]): value
        for (name, labels), value in got.items()
        if name == "isrwatch_follower_status"
    }
    assert status == {
        ("3", "OUT_OF_SYNC"): 1,
        ("2", "SHRINK_OVERDUE"): 1,
        ("4", "SHRINK_OVERDUE"): 1,
    }
    assert not [key for key in got if key[0] == "isrwatch_follower_lag_time_seconds"]
    deadlines = [
        dict(labels)["broker"]
        for name, labels in got
        if name == "isrwatch_follower_shrink_deadline_seconds"
    ]
    assert deadlines == ["2"]
    messages = [
        dict(labels)["broker"] for name, labels in got if name == "isrwatch_follower_lag_messages"
    ]
    assert sorted(messages) == ["2", "4"]


def test_no_blackout_series_without_a_predicted_window() -> None:
    stale = unhealthy_record(7)
    record = msgspec.structs.replace(
        stale, record=msgspec.structs.replace(stale.record, metadata=CONSISTENT)
    )
    exporter = HealthExporter()
    exporter.record_batch([shard_stats(0, unhealthy=[record])], {}, 0.1)
    names = {name for name, _ in samples(exporter)}
    assert "isrwatch_partition_high_watermark" in names
    assert not {n for n in names if n.startswith("isrwatch_partition_blackout_")}


def test_source_health_comes_from_the_readers_status_file(tmp_path: Path) -> None:
    status = tmp_path / "source-status.json"
    exporter = HealthExporter(source_status=status)
    assert not [k for k in samples(exporter) if k[0].startswith("isrwatch_source_")]
    status.write_text(
        json.dumps(
            {
                "consecutive_failures": 4,
                "failures_total": 9,
                "last_error": "NoBrokersAvailable",
                "last_error_at": 1_700_000_100.0,
                "last_success_at": 1_700_000_000.0,
            }
        )
    )
    got = samples(exporter)
    assert got[("isrwatch_source_up", ())] == 0
    assert got[("isrwatch_source_consecutive_failures", ())] == 4
    assert got[("isrwatch_source_failures_total", ())] == 9
    assert got[("isrwatch_source_last_success_time_seconds", ())] == 1_700_000_000


def test_counters_start_at_zero_for_label_values_known_in_advance() -> None:
    """rate() and increase() miss the first increment of a series that appears at 1."""
    exporter = HealthExporter()
    got = samples(exporter)
    assert got[("isrwatch_dead_letters_total", (("reason", "late"),))] == 0
    errors = (("result", "error_response"), ("source", "fetch-responses"))
    assert got[("isrwatch_events_total", errors)] == 0
    assert not [k for k in got if k[0] == "isrwatch_broker_bounces_total"]
    exporter.record_batch([shard_stats(0)], {}, 0.1)  # brokers 1 and 3 are known now
    bounces = {
        dict(labels)["broker"]: value
        for (name, labels), value in samples(exporter).items()
        if name == "isrwatch_broker_bounces_total"
    }
    assert bounces == {"1": 0, "3": 0}
    exporter.record_batch([shard_stats(0, bounced_brokers=[3])], {}, 0.1)
    assert samples(exporter)[("isrwatch_broker_bounces_total", (("broker", "3"),))] == 1


def test_a_new_isr_change_series_is_scraped_at_zero_before_its_count() -> None:
    """rate() and increase() miss the first count of a series that appears with it."""
    exporter = HealthExporter()
    exporter.record_batch([shard_stats(0)], {}, 0.1)  # one shrink, leader 1
    exporter.record_batch([shard_stats(0)], {}, 0.1)  # another, before any scrape
    shrinks = (("kind", "shrink"), ("leader", "1"), ("origin", "leader"), ("topic", "orders"))
    assert samples(exporter)[("isrwatch_isr_changes_total", shrinks)] == 0
    assert samples(exporter)[("isrwatch_isr_changes_total", shrinks)] == 2
    exporter.record_batch([shard_stats(0)], {}, 0.1)  # an exported series counts at once
    assert samples(exporter)[("isrwatch_isr_changes_total", shrinks)] == 3


def test_the_exporter_serves_until_closed_and_releases_its_port() -> None:
    server = ExporterServer(HealthExporter())
    port = free_port()
    server.serve("127.0.0.1", port)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert b"isrwatch_events_total" in response.read()
    server.close()
    server.close()  # idempotent
    with socket.socket() as again:  # nobody listens any more
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))


def test_the_cause_of_a_failing_connection_is_a_labelled_series_while_it_fails(
    tmp_path: Path,
) -> None:
    status = tmp_path / "source-status.json"
    exporter = HealthExporter(source_status=status)
    failing = {
        "bootstrap_servers": ["k1:9093", "k2:9093"],
        "consecutive_failures": 2,
        "failures_total": 2,
        "last_error": "authentication failed connecting to Kafka at ...",
        "last_error_reason": "authentication",
        "last_error_at": 1_700_000_100.0,
        "last_success_at": None,
    }
    status.write_text(json.dumps(failing))
    errors = {
        k: v for k, v in samples(exporter).items() if k[0] == "isrwatch_source_connection_error"
    }
    labels = (("bootstrap_servers", "k1:9093,k2:9093"), ("reason", "authentication"))
    assert errors == {("isrwatch_source_connection_error", labels): 1}
    # Connected again: no series at all (the reader clears the reason with the failures).
    status.write_text(json.dumps({**failing, "consecutive_failures": 0, "last_error_reason": None}))
    assert not [k for k in samples(exporter) if k[0] == "isrwatch_source_connection_error"]
    # A failure that is not about connecting (no reason): down, but no cause to show.
    status.write_text(json.dumps({**failing, "last_error_reason": None}))
    got = samples(exporter)
    assert got[("isrwatch_source_up", ())] == 0
    assert not [k for k in got if k[0] == "isrwatch_source_connection_error"]
    # Reading, but an input topic the job's principal may not read (its records missed):
    # down, for want of an ACL.
    reading = {**failing, "consecutive_failures": 0, "last_error_reason": None}
    status.write_text(json.dumps({**reading, "denied_topics": ["fetch-responses"]}))
    got = samples(exporter)
    assert got[("isrwatch_source_up", ())] == 0
    assert got[("isrwatch_source_connection_error", (labels[0], ("reason", "authorization")))] == 1
    status.write_text(json.dumps({**reading, "denied_topics": []}))
    assert samples(exporter)[("isrwatch_source_up", ())] == 1
