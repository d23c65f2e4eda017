"""The event times of records still in Kafka, for aligning a capped micro-batch
(``streaming.job.kafka_source.event_time``), and how many events they hold, for sizing a
micro-batch in events (``planner.cap_events``): the driver fetches records at the offsets
it asks about and reads their ``ts`` (a fetch pack's span of them) and rows.

One fetch keeps up to ``RECORDS_PER_FETCH`` consecutive records for the rest of the
planning, so the search narrows into what it already fetched. It starts
``event_time.FIRST_LOOK_BACK`` records before the offset asked for: the first look at a
cut partition (the time it leaves unread, at its planned end) then brings the records
the search looks at next (just before that end) too. Values are parsed only when the
search asks for their time.

The fetches use confluent-kafka (librdkafka), as the readers do, not the driver's
kafka-python consumer: a fetch from the middle of a record batch makes kafka-python decode
in Python every record before the offset asked for, 100 to 300 ms a look on the embedded
broker, where librdkafka takes 3 to 20 ms.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from state.fetch_pack import events_in
from streaming.job.kafka_source.event_time import FIRST_LOOK_BACK, Span, event_times_of
from streaming.job.kafka_source.planner import split_offset_key

#: Records one fetch keeps.
RECORDS_PER_FETCH = 500
#: Fetches one look makes past records with no event time before it gives up on the time.
MAX_FETCHES_PER_LOOK = 4
#: Records whose events are counted for a partition's events per record: the first ones
#: of its range (a pack costs about 0.1 ms to count).
EVENTS_SAMPLE = 64

#: (offset, value) of consecutive records from the offset asked for.
Fetch = Callable[[str, int], Sequence[tuple[int, bytes | None]]]


@dataclass
class _Chunk:
    """Records fetched from ``asked`` on: they cover ``asked`` to ``offsets[-1]``."""

    asked: int
    offsets: list[int]
    values: list[bytes | None]
    spans: dict[int, Span | None] = field(default_factory=dict)  # parsed so far, by index

    def covers(self, offset: int) -> bool:
        return self.asked <= offset <= self.offsets[-1]

    def span(self, index: int) -> Span | None:
        if index not in self.spans:
            self.spans[index] = event_times_of(self.values[index])
        return self.spans[index]


class FetchedRecords:
    """``RecordTimes`` and the events records hold, over a ``fetch`` function, keeping
    what it fetched. A look at an offset not fetched yet fetches from ``look_back``
    records before it (and again from the offset itself if that did not reach it)."""

    def __init__(self, fetch: Fetch, look_back: int = FIRST_LOOK_BACK) -> None:
        self._fetch = fetch
        self._look_back = look_back
        # Per partition, once a look-back fetch fell short of the offset it was for (a
        # fetch of packs brings a handful): half of what that fetch brought.
        self._short_look_back: dict[str, int] = {}
        self._chunks: dict[str, list[_Chunk]] = {}
        self.fetches = 0

    def span_at(self, key: str, offset: int, end: int) -> Span | None:
        position, look_back = offset, self._look_back
        for _ in range(MAX_FETCHES_PER_LOOK):
            if position >= end:
                return None
            chunk = self._chunk_at(key, position, look_back)
            if chunk is None:
                return None
            first = bisect.bisect_left(chunk.offsets, position)
            for index in range(first, len(chunk.offsets)):
                if chunk.offsets[index] >= end:
                    return None
                found = chunk.span(index)
                if found is not None:
                    return found
            position, look_back = chunk.offsets[-1] + 1, 0  # on past records with no time
        return None

    def events_per_record(self, key: str, offset: int, end: int) -> float | None:
        """The mean number of events in the records from ``offset`` (the first
        ``EVENTS_SAMPLE`` before ``end`` that one fetch brings); None if it brings none."""
        chunk = self._chunk_at(key, offset, 0)
        if chunk is None:
            return None
        first = bisect.bisect_left(chunk.offsets, offset)
        last = bisect.bisect_left(chunk.offsets, end, lo=first)
        values = chunk.values[first : min(last, first + EVENTS_SAMPLE)]
        return sum(map(events_in, values)) / len(values) if values else None

    def _chunk_at(self, key: str, offset: int, look_back: int) -> _Chunk | None:
        chunks = self._chunks.setdefault(key, [])
        for chunk in chunks:
            if chunk.covers(offset):
                return chunk
        look_back = min(look_back, self._short_look_back.get(key, look_back))
        for asked in dict.fromkeys((max(0, offset - look_back), offset)):
            self.fetches += 1
            records = self._fetch(key, asked)
            if records and records[-1][0] >= offset:
                chunk = _Chunk(asked, [at for at, _ in records], [value for _, value in records])
                chunks.append(chunk)
                return chunk
            if records and asked < offset:
                self._short_look_back[key] = len(records) // 2
        return None


#: The aligning consumer's settings over the readers': fetch what is there at once, keep
#: little ahead (each look moves elsewhere), and do not back off a second when that
#: little is full (librdkafka's fetch.queue.backoff.ms), which would delay the next look.
ALIGNING_CONSUMER = {
    "group.id": "isrwatch-source-aligner",
    "fetch.wait.max.ms": 10,
    "queued.max.messages.kbytes": 256,
    "fetch.queue.backoff.ms": 5,
}


class RecordFetcher:
    """Fetches for ``FetchedTimes`` with a confluent-kafka consumer made from ``config``
    (the readers' librdkafka settings), kept between micro-batches like the driver's
    other clients (a new consumer's first fetches wait on its connection and metadata).
    A fetch that gets no record within ``timeout_ms`` raises ``TimeoutError``."""

    def __init__(self, config: dict[str, Any], timeout_ms: int) -> None:
        from confluent_kafka import Consumer

        self._consumer = Consumer({**config, **ALIGNING_CONSUMER})
        self._timeout_ms = timeout_ms

    def fetch(self, key: str, offset: int) -> list[tuple[int, bytes | None]]:
        from confluent_kafka import TopicPartition

        topic, partition = split_offset_key(key)
        # librdkafka drops what it fetched for an earlier assignment: what comes next is
        # read from ``offset`` on.
        self._consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + self._timeout_ms / 1000
        while (remaining := deadline - time.monotonic()) > 0:
            first = self._consumer.poll(remaining)
            if first is None or first.error() is not None:
                continue  # partition EOF, or a transient error librdkafka retries
            messages = [first, *self._consumer.consume(RECORDS_PER_FETCH - 1, timeout=0)]
            return [
                (at, message.value())
                for message in messages
                if message.error() is None and (at := message.offset()) is not None
            ]
        raise TimeoutError(f"no record of {key} from offset {offset} within {self._timeout_ms} ms")

    def idle(self) -> None:
        """Stop fetching ahead until the next look."""
        self._consumer.unassign()

    def close(self) -> None:
        self._consumer.close()
