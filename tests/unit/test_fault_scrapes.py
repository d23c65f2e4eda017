"""The scrape-load module of the fault campaign at small scale (bench/faults/scrapes.py):
the series of a scrape, counted by hand for the cluster it builds. No timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_scrape_of_1000_partitions_with_5_percent_lagging(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.faults.scrapes",
            "--partitions",
            "1000",
            "--seconds",
            "3",
            "--rate",
            "5",
            "--trigger-s",
            "1",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=600,
    )
    figures = json.loads(out.read_text())
    families, values = figures["families"], figures["values"]
    # 1,000 partitions: 100 topics of 10, partition i of the cluster led by broker i % 6,
    # followers (i+1) % 6 and (i+2) % 6. Lagging: i % 100 < 5, so 50 partitions (5 in
    # each of topics 0, 10, ..., 90), each with one LAGGING follower (16 to 26 s behind,
    # between 0.5 T and T of the default T = 30 s: no shrink deadline yet).
    per_partition = {
        "isrwatch_partition_high_watermark": 50,
        "isrwatch_partition_leader_leo": 50,
        "isrwatch_partition_replica_lag_time_max_seconds": 50,
    }
    per_follower = {
        "isrwatch_follower_status": 50,
        "isrwatch_follower_lag_time_seconds": 50,
        "isrwatch_follower_lag_messages": 50,
    }
    per_topic = {
        "isrwatch_partitions": 100,
        "isrwatch_under_replicated_partitions": 100,
        "isrwatch_under_min_isr_partitions": 100,
        "isrwatch_at_min_isr_partitions": 100,
        "isrwatch_offline_partitions": 100,
        "isrwatch_offline_unclean_only_partitions": 100,
        "isrwatch_high_watermark_frozen_partitions": 100,
        "isrwatch_leader_silent_partitions": 100,
        "isrwatch_predicted_under_replicated_partitions": 100,
        "isrwatch_planned_under_replicated_partitions": 100,
        "isrwatch_metadata_stale_partitions": 200,  # expected, overdue
        "isrwatch_followers": 100 + 10,  # IN_SYNC everywhere, LAGGING in 10 topics
    }
    # lagging followers' brokers: (i % 6 + 1) % 6 over i in {100 t + j}: all six
    per_broker = {
        "isrwatch_broker_followers": 6 + 6,
        "isrwatch_broker_led_partitions": 6,
        "isrwatch_broker_bounces_total": 6,
        "isrwatch_broker_bounces_created": 6,
    }
    fixed = {
        # the 16 dead-letter reasons of docs/event-contract.md, each at 0
        "isrwatch_dead_letters_total": 16,
        "isrwatch_dead_letters_created": 16,
        # fetch-responses: applied, error_response, dead_letter; controller-events: 2
        "isrwatch_events_total": 5,
        "isrwatch_events_created": 5,
        "isrwatch_propagation_delay_seconds_bucket": 14 + 1,  # 14 bounds and +Inf
        "isrwatch_propagation_delay_seconds_count": 1,
        "isrwatch_propagation_delay_seconds_sum": 1,
        "isrwatch_propagation_delay_seconds_created": 1,
        "isrwatch_batch_duration_seconds_bucket": 10 + 1,
        "isrwatch_batch_duration_seconds_count": 1,
        "isrwatch_batch_duration_seconds_sum": 1,
        "isrwatch_batch_duration_seconds_created": 1,
        "isrwatch_last_event_time_seconds": 1,
        "isrwatch_event_time_lag_seconds": 1,
        "isrwatch_seconds_since_last_batch": 1,
        "isrwatch_state_events_applied": 1,  # FetchResponse (the elections bypass the step)
    }
    expected = {**per_partition, **per_follower, **per_topic, **per_broker, **fixed}
    causes = {name: n for name, n in families.items() if name.startswith("isrwatch_cause_")}
    assert {k: v for k, v in families.items() if k not in causes} == expected
    assert sum(expected.values()) == 1_718
    assert figures["series"] == 1_718 + sum(causes.values())
    # every lagging follower has a cause, and every partition is counted once
    assert values["isrwatch_cause_followers"] == 50
    assert values["isrwatch_partitions"] == 1_000
    assert values["isrwatch_follower_status"] == 50
    assert figures["scrapes"] == 3 * 5
