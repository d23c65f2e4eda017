"""The sink's Kafka writes are at least once: a batch whose records the broker did not
all take fails (Spark then re-runs it from the checkpoint), with a real librdkafka
producer (confluent-kafka) and no broker to take them."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from confluent_kafka import Producer

from streaming.config import KafkaSettings
from streaming.job import sinks
from streaming.job.metrics import HealthExporter
from streaming.job.routing import DEAD
from streaming.job.shard_state import HEALTH, TOMBSTONE
from streaming.job.sinks import BatchSink, DeliveryError, kafka_producer

NOBODY = "127.0.0.1:1"  # nothing listens on port 1


def rows() -> pd.DataFrame:
    """Two health rows and a tombstone (no stats row: no shard reported)."""
    record = '{"topic": "t", "partition": 0, "followers": []}'
    return pd.DataFrame(
        [
            {"kind": HEALTH, "key": "t:0", "value": record},
            {
                "kind": HEALTH,
                "key": "t:1",
                "value": record.replace('"partition": 0', '"partition": 1'),
            },
            {"kind": TOMBSTONE, "key": "t:2", "value": None},
        ]
    )


class Factory:
    """Producers to nobody, counted; records expire after ``message_timeout_ms``."""

    def __init__(self, message_timeout_ms: int) -> None:
        self.message_timeout_ms = message_timeout_ms
        self.made: list[Producer] = []

    def __call__(self) -> Producer:
        producer = Producer(
            {
                "bootstrap.servers": NOBODY,
                "message.timeout.ms": self.message_timeout_ms,
                "log_level": 0,
            }
        )
        self.made.append(producer)
        return producer


def test_records_the_broker_never_took_fail_the_batch() -> None:
    factory = Factory(message_timeout_ms=300)
    sink = BatchSink(factory, "health", "dead", HealthExporter())
    with pytest.raises(DeliveryError, match="3 of 3 records not written"):
        sink.write(0, rows(), time.monotonic())
    # the re-run starts with a new producer, and fails again while nobody takes them
    with pytest.raises(DeliveryError):
        sink.write(0, rows(), time.monotonic())
    assert len(factory.made) == 2


def test_records_still_queued_when_the_flush_gives_up_fail_the_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sinks, "FLUSH_TIMEOUT_S", 0.2)
    factory = Factory(message_timeout_ms=60_000)  # librdkafka would still be retrying
    sink = BatchSink(factory, "health", "dead", HealthExporter())
    with pytest.raises(DeliveryError, match="flush timed out"):
        sink.write(0, rows(), time.monotonic())
    assert len(factory.made[0]) == 0  # purged: nothing is sent after the batch failed


def test_a_batch_with_nothing_to_write_makes_no_producer() -> None:
    factory = Factory(message_timeout_ms=300)
    sink = BatchSink(factory, "health", "dead", HealthExporter())
    sink.write(0, rows().iloc[0:0], time.monotonic())
    assert factory.made == []


def test_dead_letters_are_written_too() -> None:
    factory = Factory(message_timeout_ms=300)
    sink = BatchSink(factory, "health", "dead", HealthExporter())
    letter = (
        '{"source": "fetch-responses", "reason": "malformed", "detail": "x", "raw": "{",'
        ' "topic": "fetch-responses", "partition": 0, "offset": 7}'
    )
    dead = pd.DataFrame([{"kind": DEAD, "key": "fetch-responses:0:7", "value": letter}])
    with pytest.raises(DeliveryError, match="1 of 1 records not written"):
        sink.write(0, dead, time.monotonic())


def test_the_producer_takes_the_clients_settings() -> None:
    """TLS and SASL reach librdkafka under its own names (a producer is made, so
    librdkafka accepted every setting); acks=all for at least once."""
    kafka = KafkaSettings(
        bootstrap_servers="b1:9093,b2:9093",
        client_id="isrwatch-test",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="monitor",
        sasl_password="s3cret",
        ssl_check_hostname=False,
    )
    options: dict[str, Any] = kafka.librdkafka_options()
    assert options == {
        "bootstrap.servers": "b1:9093,b2:9093",
        "socket.timeout.ms": 30000,
        "client.id": "isrwatch-test",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "monitor",
        "sasl.password": "s3cret",
        "retry.backoff.ms": 1000,
        "reconnect.backoff.max.ms": 30000,
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert isinstance(kafka_producer(kafka), Producer)


def test_a_flush_that_waits_past_the_stall_time_marks_the_source_down(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An outage that begins while a batch writes: the exporter says so while the batch
    waits on its flush, not only once the flush gives up (docs/faults.md)."""
    monkeypatch.setattr(sinks, "FLUSH_TIMEOUT_S", 2.5)
    monkeypatch.setattr(sinks, "SINK_STALL_S", 0.5)
    status = tmp_path / "source-status.json"
    status.write_text(json.dumps({"consecutive_failures": 0, "last_success_at": 1.0}))
    exporter = HealthExporter(source_status=status)
    factory = Factory(message_timeout_ms=60_000)  # nobody takes the records
    sink = BatchSink(factory, "health", "dead", exporter)
    with pytest.raises(DeliveryError, match="flush timed out"):
        sink.write(0, rows(), time.monotonic())
    assert exporter.sink_stalled_since is not None
    assert gauge(exporter, "isrwatch_sink_stalled") == 1
    assert gauge(exporter, "isrwatch_source_up") == 0
    # a flush that empties its queue ends the stall
    sink.write(1, rows().iloc[0:0], time.monotonic())  # nothing to write: no flush
    assert exporter.sink_stalled_since is not None
    taken = BatchSink(lambda: Taken(), "health", "dead", exporter)  # type: ignore[arg-type,return-value]
    taken.write(2, rows(), time.monotonic())
    assert exporter.sink_stalled_since is None
    assert (gauge(exporter, "isrwatch_sink_stalled"), gauge(exporter, "isrwatch_source_up")) == (
        0,
        1,
    )


class Taken:
    """A producer whose every record is taken at once."""

    def produce(self, topic: str, key: bytes, value: bytes | None, on_delivery: Any) -> None:
        on_delivery(None, None)

    def flush(self, timeout: float) -> int:
        return 0


def gauge(exporter: HealthExporter, name: str) -> float:
    values = [s.value for m in exporter.collect() for s in m.samples if s.name == name]
    assert len(values) == 1, (name, values)
    return values[0]
