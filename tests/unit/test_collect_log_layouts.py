"""streaming.feeds.collectors.log_layouts: the entry (time, level, logger, message) of a line,
whatever the layout and the prefix in front of it.

The message and its time are the same in every case below, so each test shows that the
layout or the prefix alone changes nothing. The layouts are those of Kafka's own
log4j.properties / log4j2.yaml, Strimzi's and Spring Boot's; the prefixes those of docker
compose, kubectl, journald and syslog. These lines are built from the patterns (the
corpus holds real lines in the Apache and Strimzi layouts and behind docker compose's
and journald's prefixes; none behind kubectl or syslog was found with a citable source).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from streaming.config.collect import LayoutError, compile_custom_layout
from streaming.feeds.collectors.log_layouts import (
    BAD_TIMESTAMP,
    CONTINUATION,
    NO_TIMESTAMP,
    UNKNOWN_LAYOUT,
    Entry,
    LineReader,
    parse_time,
)

UTC_ZONE = ZoneInfo("UTC")
MESSAGE = "[Partition t-3 broker=1] Shrinking ISR from 1,2,3 to 1,2"
LOGGER = "kafka.cluster.Partition"


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


TS = ms("2024-05-02 08:16:40.123")


def read(line: str, zone: ZoneInfo = UTC_ZONE) -> object:
    return LineReader(zone).read(line)


@pytest.mark.parametrize(
    ("line", "layout"),
    [
        # Kafka's log4j.properties and log4j2.yaml: [%d] %p %m (%c)%n (Confluent, Bitnami)
        (f"[2024-05-02 08:16:40,123] INFO {MESSAGE} ({LOGGER})", "apache"),
        (f"[2024-05-02 08:16:40.123] INFO {MESSAGE} ({LOGGER})", "apache"),
        # Kafka's tests: %m (%c:%L)%n
        (f"[2024-05-02 08:16:40,123] INFO {MESSAGE} ({LOGGER}:1234)", "apache"),
        # Strimzi: %d{ISO8601} %p %m (%c) [%t]%n
        (f"2024-05-02 08:16:40,123 INFO {MESSAGE} ({LOGGER}) [kafka-scheduler-4]", "strimzi"),
        (f"2024-05-02T08:16:40,123 INFO {MESSAGE} ({LOGGER}) [kafka-scheduler-4]", "strimzi"),
        # Spring Boot 3 and 2 console layouts (abbreviated logger)
        (
            f"2024-05-02T08:16:40.123Z  INFO 2537 --- [kafka-scheduler-4] k.cluster.Partition"
            f"                      : {MESSAGE}",
            "spring",
        ),
        (
            f"2024-05-02 08:16:40.123  INFO 2537 --- [app] [  kafka-scheduler-4] k.c.Partition"
            f" : {MESSAGE}",
            "spring",
        ),
    ],
)
def test_layouts(line: str, layout: str) -> None:
    entry = read(line)
    assert isinstance(entry, Entry)
    assert (entry.ts, entry.level, entry.message, entry.layout) == (TS, "INFO", MESSAGE, layout)


@pytest.mark.parametrize(
    "prefix",
    [
        "kafka  | ",  # docker compose
        "kafka-1      | ",
        "broker_1 |",  # compose without the space after the bar
        "[pod/kafka-0/kafka] ",  # kubectl logs --prefix
        "2024-05-02T08:16:40.999999999Z ",  # kubectl logs --timestamps
        "[pod/kafka-0/kafka] 2024-05-02T08:16:40.999999999Z ",  # both
        "kafka_3      | 2020-01-29T00:06:11.256074200Z ",  # docker compose logs --timestamps
        "May  2 08:16:41 node-1 kafka[912]: ",  # journald (short), RFC 3164 syslog
        "<14>May  2 08:16:41 node-1 kafka: ",
        "<14>1 2024-05-02T08:16:41.000Z node-1 kafka 912 - - ",  # RFC 5424
        "  ",  # indented in a paste
    ],
)
def test_prefixes_are_removed(prefix: str) -> None:
    entry = read(f"{prefix}[2024-05-02 08:16:40,123] INFO {MESSAGE} ({LOGGER})")
    assert isinstance(entry, Entry)
    assert (entry.ts, entry.message) == (TS, MESSAGE)  # the log4j time, not the prefix's


def test_a_prefix_alone_is_a_continuation_not_an_entry() -> None:
    """A docker compose line with nothing after its prefix (a blank line of the broker)."""
    assert read("kafka  | ") == CONTINUATION


def test_the_time_zone_is_the_configured_one_unless_the_time_names_one() -> None:
    line = f"[2024-07-01 12:00:00,000] INFO {MESSAGE} ({LOGGER})"
    paris = read(line, ZoneInfo("Europe/Paris"))
    assert isinstance(paris, Entry)
    assert paris.ts == ms("2024-07-01 10:00:00.000")
    spring = read(f"2024-07-01T12:00:00.000+02:00  INFO 1 --- [t] k.c.Partition : {MESSAGE}")
    assert isinstance(spring, Entry)
    assert spring.ts == ms("2024-07-01 10:00:00.000")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-02 08:16:40,123", "2024-05-02 08:16:40.123"),
        ("2024-05-02T08:16:40.1", "2024-05-02 08:16:40.100"),
        ("2024-05-02T08:16:40.123456789Z", "2024-05-02 08:16:40.123"),
        ("2024-05-02 08:16:40", "2024-05-02 08:16:40.000"),
        ("2024-05-02T10:16:40.123+0200", "2024-05-02 08:16:40.123"),
        ("2024-05-02T06:16:40.123-02:00", "2024-05-02 08:16:40.123"),
    ],
)
def test_times(text: str, expected: str) -> None:
    assert parse_time(text, UTC_ZONE) == ms(expected)


def test_an_impossible_date_is_a_bad_timestamp() -> None:
    assert read(f"[2024-13-40 10:00:00,000] INFO {MESSAGE} ({LOGGER})") is BAD_TIMESTAMP


@pytest.mark.parametrize(
    "line",
    [
        "\tat kafka.cluster.Partition.maybeShrinkIsr(Partition.scala:503)",
        "        at scala.Option.foreach(Option.scala:274)",
        "Caused by: org.apache.zookeeper.KeeperException$SessionExpiredException: expired",
        "org.apache.kafka.common.errors.NotEnoughReplicasException: The size of the current ISR",
        "Manager)",  # a terminal-wrapped logger name
        "",
    ],
)
def test_stack_traces_and_wrapped_lines_continue_the_entry(line: str) -> None:
    assert read(line) is CONTINUATION


@pytest.mark.parametrize(
    "line",
    [
        # a layout the reader does not know: the level before the date, no brackets
        f"INFO 2024-05-02 08:16:40,123 {MESSAGE}",
        "2025-07-03 10:52:41 INFO  [main] NetworkClient:1072 - Node 4 disconnected.",
        "kafka 15:53:51.46 INFO  ==> ** Starting Kafka setup **",  # Bitnami's script
        f"INFO {MESSAGE}",  # no time and no logger: nothing says it is %p %m (%c)
    ],
)
def test_lines_that_start_an_entry_in_another_layout_are_unknown(line: str) -> None:
    assert read(line) is UNKNOWN_LAYOUT


# --------------------------------------------------------------------------- no time


TIMELESS = f"INFO {MESSAGE} ({LOGGER})"  # %p %m (%c)%n, or a paste that lost the time


def test_an_entry_without_a_time_takes_the_time_of_the_entry_above() -> None:
    reader = LineReader(UTC_ZONE)
    assert reader.read(TIMELESS) is NO_TIMESTAMP  # nothing above it: no time, no entry
    assert reader.read(f"[2024-05-02 08:16:40,123] INFO {MESSAGE} ({LOGGER})") == Entry(
        TS, "INFO", LOGGER, MESSAGE, "apache"
    )
    assert reader.read(f"  {TIMELESS}") == Entry(TS, "INFO", LOGGER, MESSAGE, "timeless")
    # A line of an earlier time (entries out of order) does not move it back.
    reader.read(f"[2024-05-02 08:16:39,999] INFO {MESSAGE} ({LOGGER})")
    assert reader.read(f"DEBUG {MESSAGE} ({LOGGER})") == Entry(
        TS, "DEBUG", LOGGER, MESSAGE, "timeless"
    )
    # a stack trace line is still a continuation
    assert reader.read("\tat kafka.cluster.Partition.maybeShrinkIsr(Partition.scala:503)") is (
        CONTINUATION
    )


# --------------------------------------------------------------------------- custom


CUSTOM = (
    r"(?P<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) (?P<level>[A-Z]+)\s+\[(?P<thread>[^\]]*)\]"
    r" (?P<logger>[\w$.]+):\d+ - (?P<message>.*)"
)


def test_a_custom_layout_from_the_configuration() -> None:
    line = f"2025-07-03 10:52:41 INFO  [kafka-scheduler-4] Partition:1072 - {MESSAGE}"
    assert read(line) is UNKNOWN_LAYOUT
    entry = LineReader(UTC_ZONE, compile_custom_layout(CUSTOM)).read(line)
    assert entry == Entry(ms("2025-07-03 10:52:41.000"), "INFO", "Partition", MESSAGE, "custom")


def test_a_custom_layout_without_level_reads_info() -> None:
    layout = compile_custom_layout(r"(?P<time>\S+ \S+) (?P<message>.*)")
    entry = LineReader(UTC_ZONE, layout).read(f"2025-07-03 10:52:41 {MESSAGE}")
    assert isinstance(entry, Entry)
    assert entry.level == "INFO"
    assert entry.message == MESSAGE


@pytest.mark.parametrize(
    ("pattern", "error"),
    [
        (r"(?P<time>\S+) (?P<message>.*", "not a valid regex: missing ), unterminated subpattern"),
        (
            r"(?P<time>\S+) (.*)",
            "must have the named groups (?P<time>...) and (?P<message>...); missing: message",
        ),
        (r"(?P<when>\S+) (?P<message>.*)", "missing: time"),
        (
            r"(?P<time>\S+) (?P<host>\S+) (?P<message>.*)",
            "has unknown named groups host; allowed: level, logger, message, thread, time",
        ),
    ],
)
def test_a_custom_layout_is_checked_with_a_clear_error(pattern: str, error: str) -> None:
    with pytest.raises(LayoutError, match=re.escape(error)):
        compile_custom_layout(pattern)
