"""The event times of records still in Kafka, for aligning a capped micro-batch
(``streaming.job.kafka_source.event_time``): the driver fetches records at the offsets the
search asks about and reads their ``ts``.

One fetch returns many consecutive records (up to the consumer's fetch size; on Tansu,
whole record batches), so each is kept for the rest of the planning: the binary search
narrows into what it already fetched, and a search over a 100,000-record range costs a
handful of fetches. Values are parsed only when the search asks for their time.
"""

from __future__ import annotations

import bisect
import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from streaming.job.kafka_source.event_time import event_time_of
from streaming.job.kafka_source.planner import split_offset_key

#: Records one fetch keeps (kafka-python's poll returns at most this many).
RECORDS_PER_FETCH = 5000
#: Fetches one look makes past records with no event time before it gives up on the time.
MAX_FETCHES_PER_LOOK = 4

#: (offset, value) of consecutive records from the offset asked for.
Fetch = Callable[[str, int], Sequence[tuple[int, bytes | None]]]


@dataclass
class _Chunk:
    """Records fetched from ``asked`` on: they cover ``asked`` to ``offsets[-1]``."""

    asked: int
    offsets: list[int]
    values: list[bytes | None]
    times: dict[int, int | None] = field(default_factory=dict)  # parsed so far, by index

    def covers(self, offset: int) -> bool:
        return self.asked <= offset <= self.offsets[-1]

    def time(self, index: int) -> int | None:
        if index not in self.times:
            self.times[index] = event_time_of(self.values[index])
        return self.times[index]


class FetchedTimes:
    """``RecordTimes`` over a ``fetch`` function, keeping what it fetched."""

    def __init__(self, fetch: Fetch) -> None:
        self._fetch = fetch
        self._chunks: dict[str, list[_Chunk]] = {}
        self.fetches = 0

    def time_at(self, key: str, offset: int, end: int) -> int | None:
        position = offset
        for _ in range(MAX_FETCHES_PER_LOOK):
            if position >= end:
                return None
            chunk = self._chunk_at(key, position)
            if chunk is None:
                return None
            first = bisect.bisect_left(chunk.offsets, position)
            for index in range(first, len(chunk.offsets)):
                if chunk.offsets[index] >= end:
                    return None
                found = chunk.time(index)
                if found is not None:
                    return found
            position = chunk.offsets[-1] + 1
        return None

    def _chunk_at(self, key: str, offset: int) -> _Chunk | None:
        chunks = self._chunks.setdefault(key, [])
        for chunk in chunks:
            if chunk.covers(offset):
                return chunk
        self.fetches += 1
        records = [(at, value) for at, value in self._fetch(key, offset) if at >= offset]
        if not records:
            return None
        chunk = _Chunk(offset, [at for at, _ in records], [value for _, value in records])
        chunks.append(chunk)
        return chunk


@contextlib.contextmanager
def fetched_times(consumer: Any, timeout_ms: int) -> Iterator[FetchedTimes]:
    """``FetchedTimes`` reading with ``consumer`` (kafka-python, no group), which is left
    with no partition assigned afterwards. A fetch that gets no record within
    ``timeout_ms`` raises ``TimeoutError`` (the records asked about exist: Kafka is not
    answering)."""
    from kafka import TopicPartition

    def fetch(key: str, offset: int) -> list[tuple[int, bytes | None]]:
        tp = TopicPartition(*split_offset_key(key))
        consumer.assign([tp])
        consumer.seek(tp, offset)
        deadline = time.monotonic() + timeout_ms / 1000
        while (remaining_ms := int((deadline - time.monotonic()) * 1000)) > 0:
            got = consumer.poll(timeout_ms=remaining_ms, max_records=RECORDS_PER_FETCH)
            records = got.get(tp)
            if records:
                return [(int(record.offset), record.value) for record in records]
        raise TimeoutError(f"no record of {key} from offset {offset} within {timeout_ms} ms")

    try:
        yield FetchedTimes(fetch)
    finally:
        with contextlib.suppress(Exception):
            consumer.unsubscribe()
