"""What a collector sends: only events that follow the contract, counted once sent.

Every event is first parsed with the job's own parser (``state.event_parser``): one that
breaks the contract is counted and logged, never sent, so that a collector cannot feed
the job a record it would dead-letter for its shape. A poll's fetch responses are judged
in bulk: as values (``state.fetch_decoder.refused_fetch_values``), or as the columns of an
``InputBatch`` (``FetchRows.checked``, a pack's check); either way the parser's verdicts
and reasons, 30 times faster.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from state import parse_json_line
from state.events import DeadLetter, Event, FetchResponse, Source
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.wire import InputBatch, InputRecord

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
            _refused(parsed, metrics)
            continue
        valid.append(event)
    return valid


def checked_batch(batch: InputBatch, metrics: CollectorMetrics) -> InputBatch:
    """The events of ``batch`` that follow the contract, its fetch responses still
    columns; the others are counted and logged, as by :func:`checked`."""
    records = checked(batch.records, metrics)
    fetches, refused = batch.fetches.checked()
    for _, letter in refused:
        _refused(letter, metrics)
    return InputBatch(records, fetches)


def _refused(letter: DeadLetter, metrics: CollectorMetrics) -> None:
    metrics.invalid.labels(metrics.collector, letter.reason.value).inc()
    log.error(
        "not sending an event that breaks the contract (%s: %s): %s",
        letter.reason.value,
        letter.detail,
        letter.raw,
    )


def _refused_fetches(values: Sequence[Mapping[str, Any]]) -> dict[int, DeadLetter]:
    if not values:
        return {}
    # Imported here: numpy only in a collector that sends fetch responses.
    from state.fetch_decoder import refused_fetch_values

    return refused_fetch_values(values)


def count_published(events: Sequence[InputRecord], metrics: CollectorMetrics) -> None:
    # One increment per kind, not per event: a poll of a large cluster publishes
    # hundreds of thousands of fetch responses, and each labels() lookup costs a lock.
    if isinstance(events, InputBatch):  # its fetch responses counted as columns
        kinds = Counter((event.source.value, event.event_type) for event in events.records)
        if events.fetches:
            kinds[(Source.FETCH_RESPONSES.value, FetchResponse.__name__)] += len(events.fetches)
    else:
        kinds = Counter((event.source.value, event.event_type) for event in events)
    for (source, event_type), count in kinds.items():
        metrics.events.labels(metrics.collector, source, event_type).inc(count)
