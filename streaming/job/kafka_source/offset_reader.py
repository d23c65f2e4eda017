"""What the driver asks Kafka between micro-batches: the partitions of the subscribed
topics, their true end offsets (see the package's docstring on Tansu's ends) and beginning
offsets, through kafka-python clients it keeps until a failure; and the event times of
records, through a confluent-kafka consumer (``record_times``), for aligning a capped
micro-batch."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streaming.acl_denial import TOPIC_AUTHORIZATION_FAILED, Denial
from streaming.job.kafka_source.options import SOURCE_NAME, SourceSettings
from streaming.job.kafka_source.planner import offset_key, split_offset_key
from streaming.job.kafka_source.record_times import FetchedRecords, RecordFetcher

log = logging.getLogger("isrwatch.kafka_source")

#: How long the true-end probe waits for the last records (Tansu answers at once).
PROBE_TIMEOUT_MS = 3000
#: The longest one fetch of records to align a capped micro-batch on may wait.
ALIGN_FETCH_TIMEOUT_MS = 3000
#: The longest the driver's clients wait to bootstrap, unless kafkaOptions says otherwise.
DRIVER_BOOTSTRAP_TIMEOUT_MS = 10_000
_PROBE_MAX_RECORDS = 1_000_000
_PROBE_MAX_POLLS = 10_000
_UNKNOWN_TOPIC_OR_PARTITION = 3


@dataclass
class OffsetSnapshot:
    """What the broker said: true end per partition, beginnings asked for, exact ends."""

    ends: dict[str, int] = field(default_factory=dict)
    beginnings: dict[str, int] = field(default_factory=dict)
    exact: set[str] = field(default_factory=set)


class OffsetReader:
    """The driver's view of the subscribed topics' offsets. It keeps a kafka-python admin
    client and consumer, and the record fetcher, between calls (``close`` drops them:
    after a failure the next call starts with fresh clients) and the true end of each
    partition per (topic id, reported end), so that a partition is probed again only when
    its reported end moves."""

    def __init__(self, settings: SourceSettings) -> None:
        self.settings = settings
        self._consumer: Any = None
        self._admin: Any = None
        self._fetcher: RecordFetcher | None = None  # records' event times (alignment)
        # Per partition: (topic id, reported end, true end) of the last exact computation;
        # the topic id tells a re-created topic (same reported end, other records) apart.
        self._true_ends: dict[str, tuple[str | None, int, int]] = {}
        #: The subscribed topics Kafka refused to describe at the last look: the job's
        #: principal lacks Read on them (Read implies Describe).
        self.denied: list[str] = []

    def snapshot(self, wants_beginning: Callable[[str], bool]) -> OffsetSnapshot:
        """The partitions of the subscribed topics and their true end offsets, with the
        beginning offsets of those ``wants_beginning`` selects (and of those whose end moved).
        """
        from kafka import TopicPartition

        found = self._discover()
        snapshot = OffsetSnapshot()
        if not found:
            return snapshot
        consumer = self._driver_consumer()
        timeout_ms = self.settings.request_timeout_ms
        # kafka-python's offset lookups fail (KeyError) for a partition its own metadata
        # does not know yet: refresh it when the admin client found new ones.
        if any(p not in consumer.partitions_for_topic(topic) for topic, p in found):
            consumer.topics()
        partitions = [TopicPartition(topic, partition) for topic, partition in found]
        ids = {
            offset_key(topic, partition): topic_id for (topic, partition), topic_id in found.items()
        }
        reported = {
            offset_key(tp.topic, tp.partition): int(offset)
            for tp, offset in consumer.end_offsets(partitions, timeout_ms=timeout_ms).items()
        }
        moved = {
            key
            for key, offset in reported.items()
            if self._true_ends.get(key, (None, -1, -1))[:2] != (ids[key], offset)
        }
        asked = [
            tp
            for tp in partitions
            if (key := offset_key(tp.topic, tp.partition)) in moved or wants_beginning(key)
        ]
        if asked:
            snapshot.beginnings = {
                offset_key(tp.topic, tp.partition): int(offset)
                for tp, offset in consumer.beginning_offsets(asked, timeout_ms=timeout_ms).items()
            }
        to_probe = [
            tp
            for tp in partitions
            if (key := offset_key(tp.topic, tp.partition)) in moved
            and reported[key] > snapshot.beginnings.get(key, reported[key])
        ]
        last = self._probe(to_probe, reported) if to_probe else {}
        probed = {offset_key(tp.topic, tp.partition) for tp in to_probe}
        for key, offset in reported.items():
            if key not in moved:
                snapshot.ends[key] = self._true_ends[key][2]
            elif key in last:
                snapshot.ends[key] = max(offset, last[key] + 1)
            elif key in probed:
                snapshot.ends[key] = offset  # the probe got nothing: try again next time
                continue
            else:  # an empty partition
                snapshot.ends[key] = offset
            snapshot.exact.add(key)
            self._true_ends[key] = (ids[key], offset, snapshot.ends[key])
        return snapshot

    def beginnings(self, keys: Sequence[str]) -> dict[str, int]:
        from kafka import TopicPartition

        partitions = [TopicPartition(*split_offset_key(key)) for key in keys]
        found = self._driver_consumer().beginning_offsets(
            partitions, timeout_ms=self.settings.request_timeout_ms
        )
        return {offset_key(tp.topic, tp.partition): int(offset) for tp, offset in found.items()}

    @contextlib.contextmanager
    def records(self) -> Iterator[FetchedRecords]:
        """The event times of records and the events they hold, fetched as they are
        asked for (for one plan; most plans ask for none)."""
        try:
            yield FetchedRecords(self._fetch)
        finally:
            if self._fetcher is not None:
                self._fetcher.idle()

    def _fetch(self, key: str, offset: int) -> list[tuple[int, bytes | None]]:
        if self._fetcher is None:  # made on the first look, kept for the next plans
            from streaming.job.kafka_source.partition_reader import librdkafka_config

            timeout_ms = min(ALIGN_FETCH_TIMEOUT_MS, self.settings.request_timeout_ms)
            self._fetcher = RecordFetcher(librdkafka_config(self.settings), timeout_ms)
        return self._fetcher.fetch(key, offset)

    def _discover(self) -> dict[tuple[str, int], str | None]:
        """The partitions (with a leader) of the subscribed topics; topics that do not
        exist yet are left out, as are topics or partitions the broker reports an error for
        (they keep their offsets until it answers)."""
        admin = self._driver_admin()
        found: dict[tuple[str, int], str | None] = {}
        denied: list[str] = []
        for topic in admin.describe_topics(list(self.settings.topics)):
            name, error = topic.get("name"), topic.get("error_code", 0)
            if name not in self.settings.topics:
                continue
            if error == _UNKNOWN_TOPIC_OR_PARTITION:
                log.debug("%s: topic %s does not exist (yet)", SOURCE_NAME, name)
                continue
            if error == TOPIC_AUTHORIZATION_FAILED:
                # The other topic is still read: say, every trigger, what is missing.
                denied.append(name)
                log.warning(
                    "%s: %s; its records are not read until it has it",
                    SOURCE_NAME,
                    Denial.on_topic("the job", "Read", name),
                )
                continue
            if error:
                from kafka import errors as kafka_errors

                log.warning(
                    "%s: topic %s: metadata error %s (code %s)",
                    SOURCE_NAME,
                    name,
                    kafka_errors.for_code(error).__name__,
                    error,
                )
                continue
            for partition in topic.get("partitions") or []:
                if partition.get("error_code", 0) == 0 and partition.get("leader_id", 0) >= 0:
                    index = int(partition["partition_index"])
                    found[name, index] = str(topic.get("topic_id") or "") or None
        self.denied = denied
        return dict(sorted(found.items()))

    def _probe(self, partitions: list[Any], reported: Mapping[str, int]) -> dict[str, int]:
        """The last offset a fetch from ``reported - 1`` returns, per partition that
        returned records within the probe timeout."""
        consumer = self._driver_consumer()
        last: dict[str, int] = {}
        consumer.assign(partitions)
        try:
            for tp in partitions:
                consumer.seek(tp, reported[offset_key(tp.topic, tp.partition)] - 1)
            pending = set(partitions)
            timeout_ms = min(PROBE_TIMEOUT_MS, self.settings.request_timeout_ms)
            deadline = time.monotonic() + timeout_ms / 1000
            for _ in range(_PROBE_MAX_POLLS):
                remaining_ms = int((deadline - time.monotonic()) * 1000)
                waiting = bool(pending) and remaining_ms > 0
                fetched = consumer.poll(
                    timeout_ms=remaining_ms if waiting else 0, max_records=_PROBE_MAX_RECORDS
                )
                got = False
                for tp, records in fetched.items():
                    if records:
                        got = True
                        key = offset_key(tp.topic, tp.partition)
                        last[key] = max(last.get(key, -1), max(r.offset for r in records))
                        pending.discard(tp)
                if not waiting and not got:  # done waiting, and nothing more is held
                    break
        finally:
            with contextlib.suppress(Exception):
                consumer.unsubscribe()
        return last

    def _driver_admin(self) -> Any:
        if self._admin is None:
            from kafka import KafkaAdminClient

            kwargs = self.settings.client_kwargs(KafkaAdminClient, self._driver_defaults(), {})
            self._admin = KafkaAdminClient(**kwargs)
        return self._admin

    def _driver_consumer(self) -> Any:
        if self._consumer is None:
            from kafka import KafkaConsumer

            kwargs = self.settings.client_kwargs(
                KafkaConsumer,
                self._driver_defaults(),
                {
                    "group_id": None,
                    "enable_auto_commit": False,
                    "allow_auto_create_topics": False,
                    "auto_offset_reset": "latest",  # a probe out of range returns nothing
                    "fetch_max_wait_ms": min(100, self.settings.request_timeout_ms - 1),
                },
            )
            self._consumer = KafkaConsumer(**kwargs)
        return self._consumer

    def _driver_defaults(self) -> dict[str, Any]:
        timeout_ms = min(self.settings.request_timeout_ms, DRIVER_BOOTSTRAP_TIMEOUT_MS)
        return {"bootstrap_timeout_ms": timeout_ms}

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        admin, self._admin = self._admin, None
        fetcher, self._fetcher = self._fetcher, None
        if fetcher is not None:
            with contextlib.suppress(Exception):
                fetcher.close()
        if consumer is not None:
            with contextlib.suppress(Exception):
                consumer.close(autocommit=False)
        if admin is not None:
            with contextlib.suppress(Exception):
                admin.close()
