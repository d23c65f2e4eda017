"""Broker entries inside other programs' lines (issue 27, "nested logs"). The Kafka lines
are real (tests/unit/data/kafka_logs/generated/4.1-kraft/logs/apache/); the wrappers
around them are CONSTRUCTED here, in the forms a Spring Boot test run logging a
container's output and a harness prefixing each broker line print them: no such wrapped
line was taken from a real program's output. Expected values are written by hand."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from streaming.feeds.collectors.log_layouts import CONTINUATION, Entry, LineReader

UTC_ZONE = ZoneInfo("UTC")
# 4.1-kraft, broker-1/server.log
KAFKA_LINE = (
    "[2026-11-27 06:12:58,108] INFO [Partition orders-0 broker=1] ISR updated to 1,3  and"
    " version updated to 1 (kafka.cluster.Partition)"
)
MESSAGE = "[Partition orders-0 broker=1] ISR updated to 1,3  and version updated to 1"


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def test_a_broker_line_inside_a_spring_boot_test_runs_log_is_the_brokers_entry() -> None:
    wrapped = (
        "2026-11-27T06:12:58.200Z  INFO 4242 --- [  kafka-1-out] o.t.containers.output"
        f"                    : STDOUT: {KAFKA_LINE}"
    )
    entry = LineReader(UTC_ZONE).read(wrapped)
    assert entry == Entry(
        ms("2026-11-27 06:12:58.108"),
        "INFO",
        "kafka.cluster.Partition",
        MESSAGE,
        "apache, nested",
    )


def test_a_broker_line_after_a_harness_header_is_the_brokers_entry() -> None:
    wrapped = f"06:12:58.201 [kafka-broker-1] {KAFKA_LINE}"
    entry = LineReader(UTC_ZONE).read(wrapped)
    assert isinstance(entry, Entry)
    assert (entry.ts, entry.logger, entry.message) == (
        ms("2026-11-27 06:12:58.108"),
        "kafka.cluster.Partition",
        MESSAGE,
    )


def test_an_embedded_time_without_a_logger_is_not_an_entry() -> None:
    """A line that quotes a time in brackets is not a nested entry unless Kafka's layout
    ends it with a logger (this one is reported as a layout the reader does not know)."""
    quoted = "    at retry [2026-11-27 06:12:58,108] INFO was the last attempt"
    assert not isinstance(LineReader(UTC_ZONE).read(quoted), Entry)
    assert LineReader(UTC_ZONE).read("\tat kafka.Kafka.main(Kafka.scala:1)") is CONTINUATION
