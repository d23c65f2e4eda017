"""Topics of their own for each test on the shared embedded broker, and reading them back."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from state import encode_record
from state.settings import RuleSettings
from streaming.config import IsrwatchConfig, load_config
from streaming.feeds.publisher import KafkaPublisher
from streaming.feeds.wire import InputRecord
from streaming.tools.embedded_broker import EmbeddedBroker
from streaming.tools.replay import replay

#: The incident sample the README replays: the job's output over it must be replay's.
SAMPLE = Path(__file__).resolve().parents[2] / "conf" / "samples" / "incident.jsonl"


def sample() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines()]


def replayed() -> dict[str, dict[str, Any]]:
    """``isrwatch replay``'s health records for the sample, by ``topic:partition``."""
    with SAMPLE.open() as lines:
        return {
            r.key: json.loads(encode_record(r)) for r in replay(lines, RuleSettings(), None).records
        }


def assert_health_is_replays(config: IsrwatchConfig, health_out: Path) -> None:
    """The job's health records, in the file ``health_out`` and in the partition-health
    topic as compaction keeps it, are replay's for the sample."""
    expected = replayed()
    from_file = last_per_key(
        [
            (f"{r['topic']}:{r['partition']}", json.dumps(r))
            for r in map(json.loads, health_out.read_text().splitlines())
        ]
    )
    assert from_file == expected
    assert last_per_key(read_topic(config, config.topics.partition_health)) == expected


def isolated_job_config(
    broker: EmbeddedBroker,
    tmp_path: Path,
    settings: dict[str, object] | None = None,
    *,
    fetch_partitions: int = 2,
) -> IsrwatchConfig:
    """The job's configuration on fresh topics (a test's records are its own), a checkpoint
    in ``tmp_path``, fast triggers and no exporter; ``settings`` override."""
    suffix = uuid.uuid4().hex[:8]
    names = {
        "topics.controller_events": f"controller-events-{suffix}",
        "topics.fetch_responses": f"fetch-responses-{suffix}",
        "topics.partition_health": f"partition-health-{suffix}",
        "topics.dead_letters": f"dead-letters-{suffix}",
    }
    broker.create_topics([names["topics.controller_events"]], partitions=1)
    broker.create_topics([names["topics.fetch_responses"]], partitions=fetch_partitions)
    broker.create_topics([names["topics.partition_health"], names["topics.dead_letters"]])
    return load_config(
        None,
        {
            **names,
            "kafka.bootstrap_servers": broker.bootstrap_servers,
            "streaming.checkpoint_location": str(tmp_path / "checkpoint"),
            "streaming.trigger_interval_ms": 500,
            "streaming.state_shards": 3,
            "metrics.enabled": False,
            **(settings or {}),
        },
        environ={},
    )


def topic_settings(config: IsrwatchConfig) -> dict[str, str]:
    """The settings that give another job ``config``'s four topics."""
    topics = config.topics
    return {
        "topics.controller_events": topics.controller_events,
        "topics.fetch_responses": topics.fetch_responses,
        "topics.partition_health": topics.partition_health,
        "topics.dead_letters": topics.dead_letters,
    }


def read_topic(config: IsrwatchConfig, topic: str) -> list[tuple[str, str | None]]:
    """Every record of ``topic`` as (key, value), read with ``config``'s client settings
    (TLS, SASL), until it has been quiet for 3 s."""
    consumer = KafkaConsumer(**config.kafka.kafka_python_options(), enable_auto_commit=False)
    partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or []]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    records: list[tuple[str, str | None]] = []
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < 3:
        for messages in consumer.poll(timeout_ms=500).values():
            idle_since = time.monotonic()
            records += [
                (m.key.decode(), m.value.decode() if m.value is not None else None)
                for m in messages
            ]
    consumer.close()
    return records


def last_per_key(lines: list[tuple[str, str | None]]) -> dict[str, Any]:
    """A compacted topic's view: the last value of each key (None: a tombstone)."""
    latest: dict[str, Any] = {}
    for key, value in lines:
        latest[key] = json.loads(value) if value is not None else None
    return latest


class PublishedSpy:
    """A collector's publisher that also keeps what it published (the test replays it)."""

    def __init__(self, publisher: KafkaPublisher) -> None:
        self.publisher = publisher
        self.events: list[InputRecord] = []

    def publish(self, events: Sequence[InputRecord]) -> None:
        self.publisher.publish(events)
        self.events += events

    def close(self) -> None:
        self.publisher.close()
