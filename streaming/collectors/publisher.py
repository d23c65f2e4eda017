"""Where collected events go: the input topics (Kafka), or JSON lines (``--dry-run``).

Every event is first parsed with the job's own parser (``state.event_parser``): one that
breaks the contract is counted and logged, never sent, so that a collector cannot feed
the job a record it would dead-letter for its shape.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol, TextIO

from state import parse_json_line
from state.events import DeadLetter
from streaming.collectors.metrics import CollectorMetrics
from streaming.input_records import InputRecord, encode

log = logging.getLogger("isrwatch.collect")


class Publisher(Protocol):
    def publish(self, events: Sequence[InputRecord]) -> None:
        """Write ``events`` in order and return once all are acknowledged, or raise."""

    def close(self) -> None: ...


def checked(events: Sequence[InputRecord], metrics: CollectorMetrics) -> list[InputRecord]:
    """The events that follow the contract; the others are counted and logged."""
    valid: list[InputRecord] = []
    for event in events:
        parsed = parse_json_line(event.source, dict(event.value))
        if isinstance(parsed, DeadLetter):
            metrics.invalid.labels(metrics.collector, parsed.reason.value).inc()
            log.error("not sending an event that breaks the contract (%s: %s): %s",
                      parsed.reason.value, parsed.detail, parsed.raw)  # fmt: skip
            continue
        valid.append(event)
    return valid


def count_published(events: Sequence[InputRecord], metrics: CollectorMetrics) -> None:
    for event in events:
        metrics.events.labels(metrics.collector, event.source.value, event.event_type).inc()


class JsonLinesPublisher:
    """``--dry-run``: one ``{"source", "key", "value"}`` line per event; without ``key``
    this is the capture format of ``isrwatch replay``, which ignores the extra field."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def publish(self, events: Sequence[InputRecord]) -> None:
        for event in events:
            line = {"source": event.source.value, "key": event.key, "value": event.value}
            self._out.write(encode(line).decode("utf-8") + "\n")
        self._out.flush()

    def close(self) -> None:
        self._out.flush()
