"""What a collector sends: only events that follow the contract, counted once sent.

Every event is first parsed with the job's own parser (``state.event_parser``): one that
breaks the contract is counted and logged, never sent, so that a collector cannot feed
the job a record it would dead-letter for its shape. A poll's fetch responses are judged
in bulk (``state.fetch_pack.refused_fetch_values``, which gives the parser's verdicts);
only those it refuses are parsed one by one, for the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from state import parse_json_line
from state.events import DeadLetter, Source
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
        if refused is not None and event.source is Source.FETCH_RESPONSES:
            fetch += 1
            if fetch not in refused:
                valid.append(event)
                continue
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


def _refused_fetches(values: Sequence[Mapping[str, Any]]) -> frozenset[int] | None:
    if not values:
        return None
    # Imported here: Arrow and numpy only in a collector that sends fetch responses.
    from state.fetch_pack import refused_fetch_values

    return refused_fetch_values(values)


def count_published(events: Sequence[InputRecord], metrics: CollectorMetrics) -> None:
    for event in events:
        metrics.events.labels(metrics.collector, event.source.value, event.event_type).inc()
