"""isrwatch on a real Apache Kafka 4.1 of the lab (``LabCluster``, ``make kafka``): its
topics created as an operator creates them, the incident sample written by the project's
publisher, and ``isrwatch`` commands run with a configuration given as ``ISRWATCH_``
variables (secrets never on a command line)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from kafka.admin import KafkaAdminClient, NewTopic

from state.events import Source
from streaming.config import IsrwatchConfig
from streaming.feeds.publisher import KafkaPublisher
from streaming.feeds.wire import InputRecord, partition_key
from tests.integration.kafka_topics import sample

__all__ = ["create_topics", "environment", "input_records", "publish_sample"]


def create_topics(config: IsrwatchConfig) -> None:
    """isrwatch's four topics, with ``config``'s client settings (TLS, SASL)."""
    topics = config.topics
    admin = KafkaAdminClient(**config.kafka.kafka_python_options())
    admin.create_topics(
        [
            NewTopic(topics.controller_events, 1, 1),
            NewTopic(topics.fetch_responses, 2, 1),
            NewTopic(topics.partition_health, 1, 1, topic_configs={"cleanup.policy": "compact"}),
            NewTopic(topics.dead_letters, 1, 1),
        ]
    )
    admin.close()


def input_records() -> list[InputRecord]:
    """The sample's envelopes keyed as docs/event-contract.md says."""
    records = []
    for envelope in sample():
        value = envelope["value"]
        key = (
            partition_key(value["topic"], value["partition"])
            if "partition" in value
            else str(value.get("broker", value.get("controller_id", 0)))
        )
        records.append(InputRecord(Source(envelope["source"]), key, value))
    return records


def publish_sample(config: IsrwatchConfig) -> None:
    """The sample, written by the project's publisher with ``config``'s client settings."""
    publisher = KafkaPublisher(config)
    publisher.publish(input_records())
    publisher.close()


def environment(settings: Mapping[str, object]) -> dict[str, str]:
    """``settings`` (dotted keys) as the ``ISRWATCH_`` variables of an isrwatch command."""
    return {
        **os.environ,
        **{f"ISRWATCH_{k.upper().replace('.', '__')}": str(v) for k, v in settings.items()},
    }
