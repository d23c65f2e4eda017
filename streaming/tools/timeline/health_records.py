"""Health records as the job wrote them: ``--health-out`` files, or the ``partition-health``
topic. Both give the same JSON objects; a line or value that is not one is counted and
skipped (it never stops the timeline)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from state import HealthRecord, decode_record
from streaming.config import IsrwatchConfig


@dataclass
class HealthInput:
    """Reads health records, counting those it could not use, by reason."""

    since_ms: int | None = None
    until_ms: int | None = None
    records: int = 0
    skipped: Counter[str] = field(default_factory=Counter)

    def parse(self, text: str) -> HealthRecord | None:
        try:
            record = decode_record(text)
        except msgspec.ValidationError:
            self.skipped["not_a_health_record"] += 1
            return None
        except msgspec.DecodeError:
            self.skipped["invalid_json"] += 1
            return None
        if self.until_ms is not None and record.as_of_ms > self.until_ms:
            self.skipped["after_the_range"] += 1
            return None
        self.records += 1
        return record

    def from_lines(self, lines: Iterable[str]) -> Iterator[HealthRecord]:
        for line in lines:
            if line.strip() and (record := self.parse(line)) is not None:
                yield record

    def from_files(self, paths: Iterable[Path]) -> list[HealthRecord]:
        """Every record of the files, in time order (a stable sort: file order breaks ties)."""
        records: list[HealthRecord] = []
        for path in paths:
            with path.open(encoding="utf-8") as lines:
                records.extend(self.from_lines(lines))
        return sorted(records, key=lambda r: r.as_of_ms)

    def from_topic(self, config: IsrwatchConfig, timeout_ms: int = 10_000) -> list[HealthRecord]:
        """The ``partition-health`` topic's records written from ``since_ms`` (by record
        timestamp; from the beginning without it) up to its end as of now, in time order.

        Records before ``since_ms`` that the seek still returns are kept: a change stream's
        earlier records are the state at the start of the range (the timeline clips).
        The topic is compacted: a partition's older records may be gone, so a range far in
        the past may show only each partition's latest health.
        """
        from kafka import KafkaConsumer, TopicPartition

        topic = config.topics.partition_health
        consumer = KafkaConsumer(
            **config.kafka.kafka_python_options(),
            enable_auto_commit=False,
            group_id=None,
            consumer_timeout_ms=timeout_ms,
        )
        try:
            numbers = consumer.partitions_for_topic(topic) or set()
            partitions = [TopicPartition(topic, n) for n in sorted(numbers)]
            if not partitions:
                raise LookupError(f"no topic {topic!r} at {config.kafka.bootstrap_servers}")
            consumer.assign(partitions)
            ends = consumer.end_offsets(partitions)
            if self.since_ms is None:
                consumer.seek_to_beginning(*partitions)
            else:
                starts = consumer.offsets_for_times(dict.fromkeys(partitions, self.since_ms))
                for tp in partitions:
                    found = starts.get(tp)
                    consumer.seek(tp, found.offset if found is not None else ends[tp])
            records: list[HealthRecord] = []
            while True:
                batch = consumer.poll(timeout_ms=timeout_ms)
                if not batch:
                    break  # quiet for timeout_ms: nothing more
                for messages in batch.values():
                    records += [
                        record
                        for message in messages
                        if message.value is not None  # a tombstone: a deleted partition
                        and (record := self.parse(message.value.decode("utf-8", "replace")))
                    ]
                if all(consumer.position(tp) >= ends[tp] for tp in partitions):
                    break  # the end as of the start (the job may be writing on)
            return sorted(records, key=lambda r: r.as_of_ms)
        finally:
            consumer.close()
