"""What a collector sends: only events that follow the contract, counted once sent.

Every event is first parsed with the job's own parser (``state.event_parser``): one that
breaks the contract is counted and logged, never sent, so that a collector cannot feed
the job a record it would dead-letter for its shape.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from state import parse_json_line
from state.events import DeadLetter
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.wire import InputRecord

log = logging.getLogger("isrwatch.collect")


def checked(events: Sequence[InputRecord], metrics: CollectorMetrics) -> list[InputRecord]:
    """The events that follow the contract; the others are counted and logged."""
    valid: list[InputRecord] = []
    for event in events:
        parsed = parse_json_line(event.source, dict(event.value))
        if isinstance(parsed, DeadLetter):
            metrics.invalid.labels(metrics.collector, parsed.reason.value).inc()
            log.error(
                "not sending an event that breaks the contract (%s: %s): %s",
                parsed.reason.value,
                parsed.detail,
                parsed.raw,
            )
            continue
        valid.append(event)
    return valid


def count_published(events: Sequence[InputRecord], metrics: CollectorMetrics) -> None:
    for event in events:
        metrics.events.labels(metrics.collector, event.source.value, event.event_type).inc()
