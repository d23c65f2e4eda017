"""Where collected events go: the input topics (Kafka), or JSON lines (``--dry-run``).

Every event is first parsed with the job's own parser (``state.event_parser``): one that
breaks the contract is counted and logged, never sent, so that a collector cannot feed
the job a record it would dead-letter for its shape.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, Protocol, TextIO

from state.event_parser import parse_json_line
from state.events import DeadLetter, Source
from streaming.collectors.metrics import CollectorMetrics
from streaming.collectors.outgoing import Outgoing
from streaming.config import IsrwatchConfig

log = logging.getLogger("isrwatch.collect")

SEND_TIMEOUT_S = 60.0


class PublishError(Exception):
    """Some events could not be written; none of the batch counts as published."""


class Publisher(Protocol):
    def publish(self, events: Sequence[Outgoing]) -> None:
        """Write ``events`` in order and return once all are acknowledged, or raise."""

    def close(self) -> None: ...


def checked(events: Sequence[Outgoing], metrics: CollectorMetrics) -> list[Outgoing]:
    """The events that follow the contract; the others are counted and logged."""
    valid: list[Outgoing] = []
    for event in events:
        parsed = parse_json_line(event.source, dict(event.value))
        if isinstance(parsed, DeadLetter):
            metrics.invalid.labels(metrics.collector, parsed.reason.value).inc()
            log.error("not sending an event that breaks the contract (%s: %s): %s",
                      parsed.reason.value, parsed.detail, parsed.raw)  # fmt: skip
            continue
        valid.append(event)
    return valid


def count_published(events: Sequence[Outgoing], metrics: CollectorMetrics) -> None:
    for event in events:
        metrics.events.labels(metrics.collector, event.source.value, event.event_type).inc()


def encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


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

    def publish(self, events: Sequence[Outgoing]) -> None:
        try:
            futures = [
                self._producer.send(
                    self._topics[event.source],
                    key=event.key.encode("utf-8"),
                    value=encode(event.value),
                )
                for event in events
            ]
            self._producer.flush(timeout=SEND_TIMEOUT_S)
            for future in futures:
                future.get(timeout=SEND_TIMEOUT_S)
        except Exception as error:
            raise PublishError(f"cannot write events to Kafka: {error}") from error

    def close(self) -> None:
        self._producer.close()


class JsonLinesPublisher:
    """``--dry-run``: one ``{"source", "key", "value"}`` line per event; without ``key``
    this is the capture format of ``isrwatch replay``, which ignores the extra field."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def publish(self, events: Sequence[Outgoing]) -> None:
        for event in events:
            line = {"source": event.source.value, "key": event.key, "value": event.value}
            self._out.write(encode(line).decode("utf-8") + "\n")
        self._out.flush()

    def close(self) -> None:
        self._out.flush()
