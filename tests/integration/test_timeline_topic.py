"""``isrwatch timeline --bootstrap-servers``: health records read from a real broker's
partition-health topic, from a time on (by record timestamp)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafka import KafkaProducer

from streaming.cli import main
from streaming.config import load_config
from streaming.tools.embedded_broker import EmbeddedBroker
from streaming.tools.timeline.health_records import HealthInput
from tests.unit.test_timeline_facts import health_lines

pytestmark = pytest.mark.integration


def health_topic(broker: EmbeddedBroker) -> str:
    """A fresh two-partition topic holding the synthetic health records of t-0 (key
    ``t:0``, timestamp = ``as_of_ms``), a bad value, a tombstone and another key."""
    topic = f"partition-health-{uuid.uuid4().hex[:8]}"
    broker.create_topics([topic], partitions=2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    for line in health_lines():
        try:
            as_of = json.loads(line).get("as_of_ms")
        except ValueError:
            as_of = None
        if not isinstance(as_of, int):  # the bad values: a record timestamp of their own
            as_of = 6_000
        producer.send(topic, key=b"t:0", value=line.encode(), partition=0, timestamp_ms=as_of)
    producer.send(topic, key=b"u:0", value=None, partition=1, timestamp_ms=8_000)
    producer.flush()
    producer.close()
    return topic


def test_records_from_the_topic_since_a_time(broker: EmbeddedBroker) -> None:
    topic = health_topic(broker)
    config = load_config(
        None,
        {"kafka.bootstrap_servers": broker.bootstrap_servers, "topics.partition_health": topic},
        environ={},
    )
    everything = HealthInput()
    records = everything.from_topic(config, timeout_ms=5_000)
    assert [r.as_of_ms for r in records] == [5_000, 7_000, 12_000, 14_000, 19_000, 30_000]
    assert everything.skipped == {"invalid_json": 1, "not_a_health_record": 2}
    # The seek by timestamp is an optimisation: records before the range may come too (the
    # embedded broker answers a timestamp lookup with offset 0), none within it may be lost.
    later = HealthInput(since_ms=12_000, until_ms=20_000)
    read = [r.as_of_ms for r in later.from_topic(config, timeout_ms=5_000)]
    assert [t for t in read if t >= 12_000] == [12_000, 14_000, 19_000]
    assert later.skipped["after_the_range"] == 1


def test_the_command_reads_the_topic(broker: EmbeddedBroker, tmp_path: Path) -> None:
    topic = health_topic(broker)
    result = CliRunner().invoke(
        main,
        [
            "timeline",
            "--out",
            str(tmp_path),
            "--bootstrap-servers",
            broker.bootstrap_servers,
            "--set",
            f"topics.partition_health={topic}",
        ],
    )
    assert result.exit_code == 0, result.output
    report = (tmp_path / "timeline.md").read_text(encoding="utf-8")
    assert f"topic {topic}" in report
    assert (
        "| ISR shrinks | 1 | 0 by leaders, 0 by the controller, 1 seen in health records "
        "(by whom not known) |"
    ) in report
    assert "Kafka (leader 1) removed broker 2 from the ISR of t-0, predicted 2.0 s before" in report
    assert "broker 2 fetches slowly" in report  # the cause the records carry
