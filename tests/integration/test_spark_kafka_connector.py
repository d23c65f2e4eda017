"""Spark's own Kafka source (spark-sql-kafka-0-10, ``kafka.source_format: kafka``) against
real Apache Kafka 4.1: a one-node KRaft cluster from the Maven jars (``make kafka``),
isrwatch's topics on it, the incident sample written by the project's publisher, and
``isrwatch run`` with the connector's jars from ``make spark-kafka``. The job's health
records, in its file and in the partition-health topic, are ``isrwatch replay``'s.

The job runs in a process of its own: ``spark.jars`` is read when Spark's JVM starts, and
the test session's own Spark JVM has no connector.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming.config import load_config
from streaming.tools.lab.cluster import LabCluster
from streaming.tools.lab.distribution import LINES
from tests.integration.kafka_topics import assert_health_is_replays, read_topic
from tests.integration.lab_kafka import create_topics, environment, publish_sample

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kafka_4_1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabCluster]:
    cluster = LabCluster(LINES["4.1"], 1, tmp_path_factory.mktemp("kafka"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def job_settings(bootstrap_servers: str, tmp_path: Path, form: str) -> dict[str, object]:
    """The job's settings, on topics of their own for each fetch-responses form."""
    topics = ("controller_events", "fetch_responses", "partition_health", "dead_letters")
    return {
        "kafka.bootstrap_servers": bootstrap_servers,
        "kafka.source_format": "kafka",
        "streaming.checkpoint_location": str(tmp_path / "checkpoint"),
        "streaming.trigger_interval_ms": 500,
        "streaming.state_shards": 3,
        "metrics.enabled": "false",
        "topics.fetch_responses_form": form,
        **{f"topics.{name}": f"{name.replace('_', '-')}-{form}" for name in topics},
    }


@pytest.mark.parametrize("form", ["packed", "json"])
def test_sparks_connector_on_kafka_4_1_gives_what_replay_gives(
    kafka_4_1: LabCluster, tmp_path: Path, form: str
) -> None:
    """Fetch responses as packs (the shipped form: the job decodes them after the
    connector's read) and as one JSON record each."""
    settings = job_settings(kafka_4_1.bootstrap_servers, tmp_path, form)
    config = load_config(None, settings, environ={})
    create_topics(config)
    publish_sample(config)

    health_out = tmp_path / "health.jsonl"
    command = [sys.executable, "-m", "streaming.cli", "run", "--available-now"]
    done = subprocess.run(
        [*command, "--health-out", str(health_out)],
        env=environment(settings),
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    # the connector read the topics, not this project's Python source
    layout = json.loads((tmp_path / "checkpoint" / "isrwatch-layout.json").read_text())
    assert layout["source_format"] == "kafka"
    sources = json.loads((tmp_path / "checkpoint" / "offsets" / "0").read_text().splitlines()[2])
    assert set(sources) == {config.topics.controller_events, config.topics.fetch_responses}

    assert_health_is_replays(config, health_out)
    letters = [
        json.loads(v) for _, v in read_topic(config, config.topics.dead_letters) if v is not None
    ]
    assert [(d["source"], d["reason"]) for d in letters] == [
        ("fetch-responses", "stale_leader_epoch")
    ]
