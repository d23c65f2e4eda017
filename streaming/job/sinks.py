"""Where each micro-batch's output goes, on the driver (``foreachBatch``).

* health records -> the compacted ``partition-health`` topic (key ``topic:partition``;
  a deleted partition gets a tombstone), and optionally a JSON-lines file;
* dead letters -> the ``isrwatch-dead-letters`` topic (key: Kafka coordinates of the
  record), with the raw value and the reason;
* stats -> the Prometheus exporter.

Kafka writes are at-least-once: a batch re-run after a crash writes its records again,
which compaction absorbs for health records. The JSON-lines file is exactly-once: it
remembers the last batch it wrote (``FILE.batch``) and skips a re-run.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
from confluent_kafka import KafkaError, Message, Producer

from streaming.acl_denial import Denial
from streaming.config import KafkaSettings
from streaming.job import shard_stats
from streaming.job.attribution import CauseAnnotator
from streaming.job.metrics import HealthExporter
from streaming.job.routing import DEAD
from streaming.job.shard_state import HEALTH, STATS, TOMBSTONE, cyclic_gc_paused
from streaming.job.shard_stats import ShardStats

log = logging.getLogger("isrwatch.sinks")

FLUSH_TIMEOUT_S = 60.0
SINK_STALL_S = 5.0
"""A flush still waiting after this long means the brokers do not take the records: the
exporter says the source is down (the same cluster) while the batch waits, instead of
after the flush gives up (docs/faults.md)."""
"""How long a batch waits for the broker to take its records before it fails."""


def kafka_producer(kafka: KafkaSettings) -> Producer:
    """The sinks' producer: confluent-kafka (librdkafka), which takes a record in about
    1/60 of the CPU kafka-python's ``send`` needs (``bench/batch_bench.py``); the same
    connection and security settings as every other client (``KafkaSettings``)."""
    return Producer(
        {
            **kafka.librdkafka_options(),
            "acks": "all",  # at least once: a record counts as written once the ISR has it
            "linger.ms": 20,
            # a record not delivered by then is reported as failed (and fails its batch)
            "message.timeout.ms": int(FLUSH_TIMEOUT_S * 1000),
            "logger": log,
        }
    )


class DeliveryError(RuntimeError):
    """The broker did not take every record of a batch."""


class HealthFile:
    """Appends health records as JSON lines, once per batch id."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.marker = path.with_name(path.name + ".batch")

    def last_batch(self) -> int:
        try:
            return int(self.marker.read_text())
        except (FileNotFoundError, ValueError):
            return -1

    def write(self, batch_id: int, values: list[str]) -> None:
        if batch_id <= self.last_batch():
            return  # already written before a restart
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as out:
            out.writelines(value + "\n" for value in values)
        self.marker.write_text(str(batch_id))


class BatchSink:
    """The ``foreachBatch`` function of the job."""

    def __init__(
        self,
        producer_factory: Callable[[], Producer] | None,
        health_topic: str,
        dead_letter_topic: str,
        exporter: HealthExporter,
        health_file: HealthFile | None = None,
        on_batch: Callable[[int, pd.DataFrame], None] | None = None,
    ) -> None:
        self._producer_factory = producer_factory
        self._producer: Producer | None = None
        self.health_topic = health_topic
        self.dead_letter_topic = dead_letter_topic
        self.exporter = exporter
        self.health_file = health_file
        self.on_batch = on_batch
        self.causes = CauseAnnotator()

    def __call__(self, batch: Any, batch_id: int) -> None:
        started = time.monotonic()
        rows: pd.DataFrame = batch.toPandas()
        self.write(batch_id, rows, started)

    def write(self, batch_id: int, rows: pd.DataFrame, started: float) -> None:
        with cyclic_gc_paused():  # a struct per record and follower, no cycles
            self._write(batch_id, rows, started)

    def _write(self, batch_id: int, rows: pd.DataFrame, started: float) -> None:
        stats = shard_stats_of(rows)
        # causes are a pattern over every shard's partitions: attributed here (attribution)
        health, attribution = self.causes.annotate(
            rows[rows["kind"].isin([HEALTH, TOMBSTONE])], stats
        )
        dead = rows[rows["kind"] == DEAD]
        self._send(health, dead)
        if self.health_file is not None:
            self.health_file.write(batch_id, list(health[health["kind"] == HEALTH]["value"]))
        self.exporter.record_batch(stats, dead_letters_by_reason(dead), time.monotonic() - started)
        self.exporter.record_causes(attribution)
        if self.on_batch is not None:
            try:
                self.on_batch(batch_id, rows)
            except Exception:  # an observer's failure must not fail the batch
                log.exception("the on_batch hook failed on batch %d", batch_id)

    def _send(self, health: pd.DataFrame, dead: pd.DataFrame) -> None:
        """Writes the batch's records and waits until the broker has them all. Raises
        DeliveryError otherwise: Spark fails the batch and the job's supervisor restarts
        the query from its checkpoint, which writes them again (nothing lost)."""
        if self._producer_factory is None or (health.empty and dead.empty):
            return
        if self._producer is None:
            self._producer = self._producer_factory()
        producer = self._producer
        failures: list[KafkaError] = []
        denied: dict[str, Denial] = {}  # by topic

        def delivered(error: KafkaError | None, message: Message) -> None:
            if error is None:
                return
            failures.append(error)
            # librdkafka fails a record at once when the broker refuses its Produce
            # (TOPIC_AUTHORIZATION_FAILED): a missing Write ACL, named for the operator.
            if error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                topic = message.topic() or "?"
                denied.setdefault(topic, Denial.on_topic("the job", "Write", topic))

        for topic, frame in ((self.health_topic, health), (self.dead_letter_topic, dead)):
            for key, value in zip(frame["key"], frame["value"], strict=True):
                _produce(producer, topic, key.encode(), _bytes(value), delivered)
        undelivered = self._flush(producer)
        if undelivered or failures:
            error = DeliveryError(
                f"{undelivered + len(failures)} of {len(health) + len(dead)} records not "
                f"written (first error: {failures[0] if failures else 'flush timed out'})"
                + "".join(f"; {denial}" for denial in denied.values())
            )
            self._discard()  # a re-run starts with an empty queue and a new connection
            raise error

    def _flush(self, producer: Producer) -> int:
        """``producer.flush(FLUSH_TIMEOUT_S)``, a second at a time, telling the exporter
        when the wait passes ``SINK_STALL_S``; a flush that empties the queue ends the
        stall (one that gives up keeps it: the re-run's flush will say)."""
        began = time.monotonic()
        while True:
            left = began + FLUSH_TIMEOUT_S - time.monotonic()
            undelivered = int(producer.flush(max(0.0, min(1.0, left))))
            if undelivered == 0:
                self.exporter.sink_stalled_since = None
                return 0
            if left <= 1.0:
                return undelivered
            if time.monotonic() - began >= SINK_STALL_S and not self.exporter.sink_stalled_since:
                self.exporter.sink_stalled_since = time.time()

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(10)
            self._producer = None

    def _discard(self) -> None:
        """Drops the producer and the records it still holds."""
        if self._producer is not None:
            self._producer.purge()
            self._producer.flush(0)
            self._producer = None


def _produce(
    producer: Producer,
    topic: str,
    key: bytes,
    value: bytes | None,
    delivered: Callable[[KafkaError | None, Message], None],
) -> None:
    """Queues one record; while librdkafka's local queue is full, serves deliveries."""
    while True:
        try:
            producer.produce(topic, key=key, value=value, on_delivery=delivered)
            return
        except BufferError:
            producer.poll(0.1)


def _bytes(value: object) -> bytes | None:
    """A tombstone's value is null (None, or NaN once it went through pandas)."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return None
    return str(value).encode()


def shard_stats_of(rows: pd.DataFrame) -> list[ShardStats]:
    """The stats row of every shard in a batch's output, in their typed form."""
    return [shard_stats.decode(value) for value in rows[rows["kind"] == STATS]["value"]]


def dead_letters_by_reason(dead: pd.DataFrame) -> Mapping[tuple[str, str], int]:
    """Dead letters by (source, reason)."""
    letters = [json.loads(value) for value in dead["value"]]
    return Counter((letter["source"], letter["reason"]) for letter in letters)
