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
from kafka import KafkaProducer

from streaming import shard_stats
from streaming.attribution import CauseAnnotator
from streaming.metrics import HealthExporter
from streaming.routing import DEAD
from streaming.shard_state import HEALTH, STATS, TOMBSTONE
from streaming.shard_stats import ShardStats

log = logging.getLogger("isrwatch.sinks")


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
        producer_factory: Callable[[], KafkaProducer] | None,
        health_topic: str,
        dead_letter_topic: str,
        exporter: HealthExporter,
        health_file: HealthFile | None = None,
        on_batch: Callable[[int, pd.DataFrame], None] | None = None,
    ) -> None:
        self._producer_factory = producer_factory
        self._producer: KafkaProducer | None = None
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
        if self._producer_factory is None or (health.empty and dead.empty):
            return
        if self._producer is None:
            self._producer = self._producer_factory()
        futures = [
            self._producer.send(topic, key=key.encode(), value=_bytes(value))
            for topic, frame in ((self.health_topic, health), (self.dead_letter_topic, dead))
            for key, value in zip(frame["key"], frame["value"], strict=True)
        ]
        self._producer.flush(timeout=60)
        # Raise if the broker did not take them all: Spark fails the batch and the job's
        # supervisor restarts the query from its checkpoint (nothing lost).
        for future in futures:
            future.get(timeout=0)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close(timeout=10)
            self._producer = None


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
