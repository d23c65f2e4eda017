"""The streaming job end to end: embedded broker, real Spark session, real sinks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from kafka import KafkaProducer

from state import shard_of
from streaming.config import FetchResponsesForm, IsrwatchConfig
from streaming.job.metrics import HealthExporter
from streaming.job.query import run
from streaming.job.shard_state import STATS
from streaming.job.sinks import shard_stats_of
from streaming.tools.embedded_broker import EmbeddedBroker
from tests.integration.kafka_topics import (
    assert_health_is_replays,
    isolated_job_config,
    last_per_key,
    read_topic,
    replayed,
    sample,
    topic_settings,
)
from tests.integration.lab_kafka import publish_sample

pytestmark = pytest.mark.integration

B = 1_700_000_000_000


@pytest.fixture
def job_config(broker: EmbeddedBroker, tmp_path: Path) -> IsrwatchConfig:
    return isolated_job_config(broker, tmp_path)


def produce(
    config: IsrwatchConfig, envelopes: Sequence[dict[str, Any] | tuple[str, bytes]]
) -> None:
    topics = {
        "controller-events": config.topics.controller_events,
        "fetch-responses": config.topics.fetch_responses,
    }
    producer = KafkaProducer(bootstrap_servers=config.kafka.bootstrap_servers, linger_ms=20)
    for envelope in envelopes:
        if isinstance(envelope, tuple):
            source, raw = envelope
        else:
            source, raw = envelope["source"], json.dumps(envelope["value"]).encode()
        value = json.loads(raw) if raw.startswith(b"{") and raw.endswith(b"}") else {}
        key = f"{value.get('topic')}:{value.get('partition')}" if "topic" in value else "0"
        producer.send(topics[source], key=key.encode(), value=raw)
    producer.flush()
    producer.close()


class Batches:
    """Collects the job's output rows (the foreachBatch input) for assertions."""

    def __init__(self) -> None:
        self.frames: list[pd.DataFrame] = []

    def __call__(self, batch_id: int, rows: pd.DataFrame) -> None:
        self.frames.append(rows)

    def last_stats(self) -> list[dict[str, Any]]:
        last = self.frames[-1]
        return [json.loads(v) for v in last[last["kind"] == STATS]["value"]]


def run_gives_replay_and_its_one_rejected_fetch(
    job_config: IsrwatchConfig, tmp_path: Path
) -> dict[str, Any]:
    """Runs the job on what was produced; its health is replay's, and its one dead
    letter the fetch replay rejects (from before an election): that letter."""
    health_out = tmp_path / "health.jsonl"
    run(job_config, available_now=True, health_out=health_out, exporter=HealthExporter())
    assert_health_is_replays(job_config, health_out)
    letters = [
        json.loads(v)
        for _, v in read_topic(job_config, job_config.topics.dead_letters)
        if v is not None
    ]
    assert [(d["source"], d["reason"]) for d in letters] == [
        ("fetch-responses", "stale_leader_epoch")
    ]
    letter: dict[str, Any] = letters[0]
    return letter


def test_sample_gives_exactly_what_replay_gives(job_config: IsrwatchConfig, tmp_path: Path) -> None:
    produce(job_config, sample())
    assert "row" not in run_gives_replay_and_its_one_rejected_fetch(job_config, tmp_path)


def test_the_sample_in_fetch_packs_gives_exactly_what_replay_gives(
    job_config: IsrwatchConfig, tmp_path: Path
) -> None:
    """The same sample written by the project's publisher in the shipped form: fetch
    packs, one per leader (docs/event-contract.md#fetch-packs). The fetch that
    replay rejects is a row of a pack: its dead letter names the row."""
    assert job_config.topics.fetch_responses_form is FetchResponsesForm.PACKED
    publish_sample(job_config)
    letter = run_gives_replay_and_its_one_rejected_fetch(job_config, tmp_path)
    assert isinstance(letter["row"], int)  # a row of a pack: the fetches came packed


def test_malformed_records_are_dead_letters_and_the_job_goes_on(
    job_config: IsrwatchConfig,
) -> None:
    good = sample()
    bad: list[dict[str, Any] | tuple[str, bytes]] = [
        ("fetch-responses", b"not json at all"),
        ("controller-events", b'{"type": "Bogus", "ts": 1}'),
        ("controller-events", b'{"type": "IsrChange", "ts": 1}'),
        ("fetch-responses", b"[1, 2, 3]"),
    ]
    produce(job_config, [*bad[:2], *good[:60], *bad[2:], *good[60:]])
    batches = Batches()
    run(job_config, available_now=True, exporter=HealthExporter(), on_batch=batches)
    letters = [
        json.loads(v)
        for _, v in read_topic(job_config, job_config.topics.dead_letters)
        if v is not None
    ]
    assert sorted(d["reason"] for d in letters) == [
        "invalid_json",
        "missing_field",
        "not_an_object",
        "stale_leader_epoch",
        "unknown_type",
    ]
    assert last_per_key(read_topic(job_config, job_config.topics.partition_health)) == replayed()


def test_kill_and_restart_loses_and_repeats_nothing(
    job_config: IsrwatchConfig, tmp_path: Path
) -> None:
    envelopes = sample()
    produce(job_config, envelopes[:80])
    health_out = tmp_path / "health.jsonl"
    env = {
        **os.environ,
        **{
            f"ISRWATCH_{k.upper().replace('.', '__')}": str(v)
            for k, v in {
                "kafka.bootstrap_servers": job_config.kafka.bootstrap_servers,
                **topic_settings(job_config),
                "streaming.checkpoint_location": job_config.streaming.checkpoint_location,
                "streaming.trigger_interval_ms": 500,
                "streaming.state_shards": 3,
                "metrics.enabled": "false",
            }.items()
        },
    }
    job = subprocess.Popen(
        [sys.executable, "-m", "streaming.cli", "run", "--health-out", str(health_out)],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 180
        while not health_out.exists() and time.monotonic() < deadline:
            assert job.poll() is None, job.stderr.read().decode()[-3000:] if job.stderr else ""
            time.sleep(0.5)
        produce(job_config, envelopes[80:])
        time.sleep(1.0)  # likely inside a batch: the kill may land anywhere
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    batches = Batches()
    run(
        job_config,
        available_now=True,
        health_out=health_out,
        exporter=HealthExporter(),
        on_batch=batches,
    )
    assert last_per_key(read_topic(job_config, job_config.topics.partition_health)) == replayed()
    totals: dict[str, int] = {}
    for shard in batches.last_stats():
        for event_type, count in shard["applied_total"].items():
            totals[event_type] = totals.get(event_type, 0) + count
    fetches = sum(e["source"] == "fetch-responses" for e in envelopes)
    controller = len(envelopes) - fetches
    # Every event applied exactly once; the one stale fetch of the story is not applied.
    assert sum(v for k, v in totals.items() if k != "FetchResponse") == controller
    assert totals["FetchResponse"] == fetches - 1


def test_silent_follower_reaches_shrink_eligible_by_timeout_alone(
    job_config: IsrwatchConfig,
) -> None:
    quiet, busy = 0, next(p for p in range(1, 50) if shard_of("t", p, 3) != shard_of("t", 0, 3))

    def election(partition: int) -> dict[str, Any]:
        return {
            "source": "controller-events",
            "value": {
                "type": "LeaderAndIsr",
                "ts": B,
                "topic": "t",
                "partition": partition,
                "leader": 1,
                "leader_epoch": 0,
                "isr": [1, 2],
                "replicas": [1, 2],
                "partition_epoch": 0,
            },
        }

    def fetch(partition: int, ts: int) -> dict[str, Any]:
        return {
            "source": "fetch-responses",
            "value": {
                "ts": ts,
                "topic": "t",
                "partition": partition,
                "leader": 1,
                "follower": 2,
                "leader_epoch": 0,
                "fetch_offset": 100,
                "leader_leo": 100 + ts - B,
                "high_watermark": 100,
            },
        }

    produce(job_config, [election(quiet), election(busy), fetch(quiet, B + 1_000)])
    batches = Batches()
    run(job_config, available_now=True, exporter=HealthExporter(), on_batch=batches)
    # Only the other partition's follower goes on fetching; the quiet partition's shard
    # gets no event at all from now on.
    produce(job_config, [fetch(busy, B + t) for t in range(5_000, 40_001, 5_000)])
    run(job_config, available_now=True, exporter=HealthExporter(), on_batch=batches)
    # t:0 is unhealthy: its record is in its shard's stats (the driver writes it)
    final = {
        reported.record.key: reported.record
        for frame in batches.frames
        for stats in shard_stats_of(frame)
        for reported in stats.unhealthy
    }
    follower = final["t:0"].followers[0]
    # Caught up at the election (B); evaluated at B + 40 000 > B + 30 000 = T.
    assert (final["t:0"].as_of_ms, follower.status) == (B + 40_000, "SHRINK_ELIGIBLE")
    assert follower.shrink_by_ms == B + 45_000
