"""Records for the job's input topics, with their Kafka keys, and the producer that sends them.

The collectors and the simulator both make them; ``KafkaPublisher`` writes them to
``topics.controller_events`` / ``topics.fetch_responses`` with the job's client settings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from state.events import Source
from streaming.config import IsrwatchConfig

MAX_PARTITIONS_PER_EVENT = 1000
"""Events that list partitions (UpdateMetadata, TopicChange) are split to stay well under
Kafka's default 1 MB record limit: a controller failover puts every partition of the
cluster in one request."""

SEND_TIMEOUT_S = 60.0

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class InputRecord:
    """``value`` is the event as JSON-ready data; ``key`` follows docs/event-contract.md: the
    ``"<topic>:<partition>"`` of a per-partition event, else a broker or controller id."""

    source: Source
    key: str
    value: Mapping[str, Any]

    @property
    def ts(self) -> int:
        return int(self.value["ts"])

    @property
    def event_type(self) -> str:
        """The controller event's ``type``, or ``FetchResponse``."""
        if self.source is Source.FETCH_RESPONSES:
            return "FetchResponse"
        return str(self.value.get("type", ""))

    def envelope(self) -> dict[str, Any]:
        """The replay file's line (docs/event-contract.md#replay-contract)."""
        return {"source": self.source.value, "value": dict(self.value)}


def chunks(items: Sequence[_T], size: int) -> list[list[_T]]:
    """``items`` in consecutive lists of at most ``size`` (one empty list if none)."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)] or [[]]


def split_created(
    created: Mapping[str, Mapping[str, list[int]]], most: int = MAX_PARTITIONS_PER_EVENT
) -> list[dict[str, dict[str, list[int]]]]:
    """A TopicChange's ``created`` map in parts of at most ``most`` partitions each."""
    parts: list[dict[str, dict[str, list[int]]]] = []
    size = most
    for topic, partitions in created.items():
        for partition, replicas in partitions.items():
            if size == most:
                parts.append({})
                size = 0
            parts[-1].setdefault(topic, {})[partition] = replicas
            size += 1
    return parts


def partition_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class PublishError(Exception):
    """Some records could not be written; none of the batch counts as published."""


class KafkaPublisher:
    """Sends to ``topics.controller_events`` / ``topics.fetch_responses`` with the job's
    client settings (``KafkaSettings.kafka_python_options``: TLS, SASL PLAIN or SCRAM)."""

    def __init__(self, config: IsrwatchConfig, producer: Any = None) -> None:
        if producer is None:
            from kafka import KafkaProducer

            producer = KafkaProducer(acks="all", linger_ms=20,
                                     **config.kafka.kafka_python_options())  # fmt: skip
        self._producer = producer
        self._topics = {
            Source.CONTROLLER_EVENTS: config.topics.controller_events,
            Source.FETCH_RESPONSES: config.topics.fetch_responses,
        }

    def publish(self, records: Sequence[InputRecord]) -> None:
        """Write ``records`` in order; return once all are acknowledged, or raise."""
        try:
            futures = [
                self._producer.send(
                    self._topics[record.source],
                    key=record.key.encode("utf-8"),
                    value=encode(record.value),
                )
                for record in records
            ]
            self._producer.flush(timeout=SEND_TIMEOUT_S)
            for future in futures:
                future.get(timeout=SEND_TIMEOUT_S)
        except Exception as error:
            raise PublishError(f"cannot write events to Kafka: {error}") from error

    def close(self) -> None:
        self._producer.close()
