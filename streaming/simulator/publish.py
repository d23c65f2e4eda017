"""Where simulated records go: a replay file or the job's Kafka topics, paced or not."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import TextIO

from streaming.input_records import InputRecord, KafkaPublisher


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


def envelope_line(record: InputRecord) -> str:
    return json.dumps(record.envelope(), separators=(",", ":"))


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
    batch: int = 1_000,
    batch_s: float = 0.25,
) -> Counter[str]:
    """Send in order, a batch at a time: ``batch`` records or ``batch_s`` seconds' worth
    (paced records should not wait for a full batch). Counts what was acknowledged."""
    counts = Counter() if counts is None else counts
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
