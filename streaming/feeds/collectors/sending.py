"""What a collector sends: only events that follow the contract, counted once sent.

Every event is first parsed with the job's own parser (``state.event_parser``): one that
breaks the contract is counted and logged, never sent, so that a collector cannot feed
the job a record it would dead-letter for its shape. A poll's fetch responses are judged
in bulk (``state.fetch_decoder.refused_fetch_values``: the parser's verdicts and reasons,
30 times faster).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from state import parse_json_line
from state.events import DeadLetter, Event, Source
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.wire import InputRecord

log = logging.getLogger("isrwatch.collect")


def checked(events: Sequence[InputRecord], metrics: CollectorMetrics) -> list[InputRecord]:
    """The events that follow the contract; the others are counted and logged."""
    valid: list[InputRecord] = []
    fetches = [event.value for event in events if event.source is Source.FETCH_RESPONSES]
    refused = _refused_fetches(fetches)
    fetch = -1
    for event in events:
        if event.source is Source.FETCH_RESPONSES:
            fetch += 1
            parsed: Event | DeadLetter | None = refused.get(fetch)
        else:
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


def _refused_fetches(values: Sequence[Mapping[str, Any]]) -> dict[int, DeadLetter]:
    if not values:
        return {}
    # Imported here: numpy only in a collector that sends fetch responses.
    from state.fetch_decoder import refused_fetch_values

    return refused_fetch_values(values)


def count_published(events: Sequence[InputRecord], metrics: CollectorMetrics) -> None:
    # One increment per kind, not per event: a poll of a large cluster publishes
    # hundreds of thousands of fetch responses, and each labels() lookup costs a lock.
    kinds = Counter((event.source.value, event.event_type) for event in events)
    for (source, event_type), count in kinds.items():
        metrics.events.labels(metrics.collector, source, event_type).inc(count)
