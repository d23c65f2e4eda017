"""``collect admin`` against the embedded broker, and its events through the streaming job.

Tansu (the embedded broker) is one broker, so every partition has a single replica and
no follower: no fetch-responses can be derived here (the derivation is unit-tested).
It answers DescribeCluster, Metadata, ListOffsets and DescribeConfigs, the latter with
no entries at all: the collector goes on without TopicConfig and BrokerConfig and counts
the gap.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient
from prometheus_client import CollectorRegistry

from streaming.config import IsrwatchConfig
from streaming.feeds.collectors.admin_collector import AdminCollector
from streaming.feeds.collectors.admin_source import KafkaAdminSource
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.publisher import KafkaPublisher
from streaming.feeds.wire import InputRecord
from streaming.job.metrics import HealthExporter
from streaming.job.query import run
from streaming.tools.embedded_broker import EmbeddedBroker
from tests.integration.kafka_topics import isolated_job_config, read_topic

pytestmark = pytest.mark.integration


@pytest.fixture
def job_config(broker: EmbeddedBroker, tmp_path: Path) -> IsrwatchConfig:
    state_file = {"collect.admin.state_file": str(tmp_path / "admin.json")}
    return isolated_job_config(broker, tmp_path, {"streaming.state_shards": 2, **state_file})


class Spy:
    """Publishes to Kafka and keeps what it published."""

    def __init__(self, publisher: KafkaPublisher) -> None:
        self.publisher = publisher
        self.polls: list[list[InputRecord]] = []

    def publish(self, events: Sequence[InputRecord]) -> None:
        self.publisher.publish(events)
        self.polls[-1] += events

    def close(self) -> None:
        self.publisher.close()


def of_topic(events: Sequence[InputRecord], topic: str) -> list[dict[str, Any]]:
    mine = []
    for event in events:
        value = dict(event.value)
        if (
            value.get("topic") == topic
            or topic in value.get("created", {})
            or topic in (value.get("deleted") or ())
        ):
            mine.append(value)
    return mine


def test_topic_creation_and_deletion_drive_the_job(
    broker: EmbeddedBroker, job_config: IsrwatchConfig, tmp_path: Path
) -> None:
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    metrics = CollectorMetrics("admin", CollectorRegistry())
    gaps: list[str] = []
    source = KafkaAdminSource(
        job_config.kafka, offsets=True, on_unavailable=lambda api, error: gaps.append(api)
    )
    spy = Spy(KafkaPublisher(job_config))
    collector = AdminCollector(source, spy, metrics, Path(job_config.collect.admin.state_file))
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    node = int(admin.describe_cluster()["brokers"][0]["broker_id"])
    try:
        spy.polls.append([])
        collector.poll_once()  # the baseline: what the shared broker already holds
        assert topic not in json.dumps([dict(e.value) for e in spy.polls[0]])
        broker.create_topics([topic], partitions=2)
        spy.polls.append([])
        collector.poll_once()
        created = of_topic(spy.polls[1], topic)
        assert [(v["type"], v.get("partition")) for v in created] == [
            ("TopicChange", None),
            ("LeaderAndIsr", 0),
            ("LeaderAndIsr", 1),
        ]
        assert created[0]["created"][topic] == {"0": [node], "1": [node]}
        for value in created[1:]:
            assert (value["leader"], value["isr"], value["replicas"]) == (node, [node], [node])
        assert not [e for e in spy.polls[1] if e.event_type == "FetchResponse"]  # one broker

        health_out = tmp_path / "health.jsonl"
        run(job_config, available_now=True, health_out=health_out, exporter=HealthExporter())
        records = {
            (r["topic"], r["partition"]): r
            for r in map(json.loads, health_out.read_text().splitlines())
        }
        for partition in (0, 1):
            record = records[(topic, partition)]
            assert (record["leader"], record["isr"], record["replicas"]) == (node, [node], [node])
            assert not record["offline"]
            assert not record["under_replicated"]

        admin.delete_topics([topic])
        spy.polls.append([])
        collector.poll_once()
        assert of_topic(spy.polls[2], topic) == [
            {
                "type": "TopicChange",
                "created": {},
                "deleted": [topic],
                "ts": spy.polls[2][0].value["ts"],
                "controller_id": node,
            },
        ]
        run(job_config, available_now=True, health_out=health_out, exporter=HealthExporter())
        latest: dict[str, str | None] = {}
        for key, health in read_topic(job_config, job_config.topics.partition_health):
            latest[key] = health
        assert latest[f"{topic}:0"] is None
        assert latest[f"{topic}:1"] is None
    finally:
        admin.close()
        collector.close()

    published = [
        value for key, value in read_topic(job_config, job_config.topics.controller_events)
    ]
    assert len(published) == sum(len(poll) for poll in spy.polls)  # every event reached Kafka
    # Tansu answers DescribeConfigs with no entries: no TopicConfig / BrokerConfig, counted
    assert {"describe_topic_configs", "describe_broker_configs"} <= set(gaps)
    assert (
        metrics.registry.get_sample_value("isrwatch_collect_polls_total", {"collector": "admin"})
        == 3
    )
