"""Where records for the job's input topics go, for every producer (collectors, simulator,
demo): the topics themselves (``KafkaPublisher``, with the job's client settings), JSON
lines (a collector's ``--dry-run``), or a replay file; paced in simulated time or not.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TextIO

from state.events import Source
from streaming.acl_denial import Denial
from streaming.config import FetchResponsesForm, IsrwatchConfig
from streaming.feeds.wire import InputRecord, encode, envelope_line, kafka_records

SEND_TIMEOUT_S = 60.0
RECORDS_PER_PUBLISH = 1_000
PACKED_RECORDS_PER_PUBLISH = 25_000
"""About 4,000 fetch responses a leader on a 6-broker cluster: a pack each
(``MOST_ROWS_PER_PACK``)."""


class Publisher(Protocol):
    def publish(self, events: Sequence[InputRecord]) -> None:
        """Write ``events`` in order and return once all are acknowledged, or raise.
        ``events`` may be an ``InputBatch`` (a poll of ``collect admin``): read one by
        one, its fetch responses are records like any other; ``KafkaPublisher`` packs
        them from their columns."""

    def close(self) -> None: ...


class PublishError(Exception):
    """Some records could not be written; none of the batch counts as published."""


class KafkaPublisher:
    """Sends to ``topics.controller_events`` / ``topics.fetch_responses`` with the job's
    client settings (``KafkaSettings.kafka_python_options``: TLS, SASL PLAIN or SCRAM),
    fetch responses in the form ``topics.fetch_responses_form`` says."""

    def __init__(self, config: IsrwatchConfig, producer: Any = None) -> None:
        if producer is None:
            from kafka import KafkaProducer

            producer = KafkaProducer(
                acks="all", linger_ms=20, **config.kafka.kafka_python_options()
            )
        self._producer = producer
        self._topics = {
            Source.CONTROLLER_EVENTS: config.topics.controller_events,
            Source.FETCH_RESPONSES: config.topics.fetch_responses,
        }
        self._fetch_form = config.topics.fetch_responses_form

    @property
    def records_per_publish(self) -> int:
        """How many records :func:`publish_all` hands over at once, at the most: more
        when fetch responses are packed, since a pack's fixed cost to read (about 0.2 ms,
        docs/event-contract.md#fetch-packs) wants thousands of rows, and a publish makes
        one pack per leader at the least."""
        if self._fetch_form is FetchResponsesForm.PACKED:
            return PACKED_RECORDS_PER_PUBLISH
        return RECORDS_PER_PUBLISH

    def publish(self, records: Sequence[InputRecord]) -> None:
        """Write ``records`` in order; return once all are acknowledged, or raise."""
        try:
            futures = [
                self._producer.send(
                    self._topics[record.source],
                    key=record.key.encode("utf-8"),
                    value=record.value,
                )
                for record in kafka_records(records, self._fetch_form)
            ]
            self._producer.flush(timeout=SEND_TIMEOUT_S)
            for future in futures:
                future.get(timeout=SEND_TIMEOUT_S)
        except Exception as error:
            raise PublishError(f"cannot write events to Kafka: {_named(error)}") from error

    def close(self) -> None:
        self._producer.close()


def _named(error: Exception) -> str:
    """kafka-python's error, with the ACL it stands for when the broker refused the
    Produce (TopicAuthorizationFailedError: the topic is its message)."""
    from kafka.errors import TopicAuthorizationFailedError

    if not isinstance(error, TopicAuthorizationFailedError):
        return str(error)
    # its argument: the topic (a refused Produce), or the set of them (refused metadata)
    said = error.args[0] if error.args else "?"
    topics = sorted(said) if isinstance(said, set | frozenset | list | tuple) else [str(said)]
    return "; ".join(str(Denial.on_topic("the publisher", "Write", topic)) for topic in topics)


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


def paced(
    records: Iterable[InputRecord],
    start_ms: int,
    speed: float | None,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[InputRecord]:
    """Release each record when its simulated time comes: ``speed`` simulated seconds per
    wall second (1.0: real time); ``None``: as fast as possible. Ends early on ``stop``."""
    stop = stop or threading.Event()
    began = clock()
    for record in records:
        if stop.is_set():
            return
        if speed is not None:
            wait = began + (record.ts - start_ms) / 1000.0 / speed - clock()
            if wait > 0 and stop.wait(wait):
                return
        yield record


def write_replay_file(
    records: Iterable[InputRecord], out: TextIO, counts: Counter[str] | None = None
) -> Counter[str]:
    """The replay contract's lines (``isrwatch replay`` reads them back)."""
    counts = Counter() if counts is None else counts
    for record in records:
        out.write(envelope_line(record) + "\n")
        counts[record.event_type] += 1
    return counts


def publish_all(
    publisher: KafkaPublisher,
    records: Iterable[InputRecord],
    counts: Counter[str] | None = None,
    batch: int | None = None,
    batch_s: float = 0.25,
) -> Counter[str]:
    """Send in order, a batch at a time: ``batch`` records (the publisher's
    ``records_per_publish`` unless given) or ``batch_s`` seconds' worth (paced records
    should not wait for a full batch). Counts what was acknowledged."""
    counts = Counter() if counts is None else counts
    batch = publisher.records_per_publish if batch is None else batch
    iterator = iter(records)
    while True:
        started = time.monotonic()
        chunk = list(itertools.islice(_until(iterator, started + batch_s), batch))
        if not chunk:
            return counts
        publisher.publish(chunk)
        counts.update(record.event_type for record in chunk)


def _until(records: Iterator[InputRecord], deadline: float) -> Iterator[InputRecord]:
    """Records from ``records`` until one is taken past ``deadline`` (it is included)."""
    for record in records:
        yield record
        if time.monotonic() >= deadline:
            return
