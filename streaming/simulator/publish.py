"""Where simulated records go: a replay file or the job's Kafka topics, paced or not."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO

from state.events import Source
from streaming.config import IsrwatchConfig
from streaming.simulator.cluster import SimEvent


def paced(
    events: Iterable[SimEvent],
    start_ms: int,
    speed: float | None,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[SimEvent]:
    """Release each record when its simulated time comes: ``speed`` simulated seconds per
    wall second (1.0: real time); ``None``: as fast as possible. Ends early on ``stop``."""
    stop = stop or threading.Event()
    began = clock()
    for event in events:
        if stop.is_set():
            return
        if speed is not None:
            due = began + (event.ts - start_ms) / 1000.0 / speed
            wait = due - clock()
            if wait > 0 and stop.wait(wait):
                return
        yield event


def envelope_line(event: SimEvent) -> str:
    return json.dumps(event.envelope(), separators=(",", ":"))


def write_replay_file(events: Iterable[SimEvent], out: TextIO) -> Counter[str]:
    """The replay contract's lines (``isrwatch replay`` reads them back)."""
    counts: Counter[str] = Counter()
    for event in events:
        out.write(envelope_line(event) + "\n")
        counts[event_kind(event)] += 1
    return counts


def event_kind(event: SimEvent) -> str:
    return str(event.value.get("type", "FetchResponse"))


class KafkaPublisher:
    """Produces records to the job's input topics with the contract's keys."""

    def __init__(self, config: IsrwatchConfig, producer: Any = None) -> None:
        if producer is None:
            from kafka import KafkaProducer

            options = config.kafka.kafka_python_options()
            producer = KafkaProducer(linger_ms=50, acks=1, **options)
        self._producer = producer
        self._topics = {
            Source.CONTROLLER_EVENTS: config.topics.controller_events,
            Source.FETCH_RESPONSES: config.topics.fetch_responses,
        }
        self.counts: Counter[str] = Counter()

    def send(self, event: SimEvent) -> None:
        value = json.dumps(event.value, separators=(",", ":")).encode()
        self._producer.send(self._topics[event.source], key=event.key.encode(), value=value)
        self.counts[event_kind(event)] += 1

    def publish(self, events: Iterable[SimEvent], flush_every: int = 5_000) -> Counter[str]:
        for n, event in enumerate(events, start=1):
            self.send(event)
            if n % flush_every == 0:
                self._producer.flush()
        self._producer.flush()
        return self.counts

    def close(self) -> None:
        self._producer.flush()
        self._producer.close(timeout=10)
