"""``isrwatch check restart --bootstrap-servers``: reads the compacted partition-health topic
on the real embedded broker (the last value per key wins, a tombstone deletes)."""

from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner
from kafka import KafkaProducer

from state import encode_record
from streaming.cli import main
from streaming.tools.embedded_broker import EmbeddedBroker
from tests.unit.builders import partition_health

pytestmark = pytest.mark.integration


def health(partition: int, isr: list[int]) -> bytes:
    """orders-``partition``'s record: ``isr`` in sync, its first member the leader."""
    return encode_record(
        partition_health(
            dict.fromkeys(isr[1:], "IN_SYNC"),
            topic="orders",
            partition=partition,
            leader=isr[0],
            min_insync_replicas=2,
        )
    )


def test_reads_the_latest_health_per_partition_from_the_topic(broker: EmbeddedBroker) -> None:
    topic = f"partition-health-{uuid.uuid4().hex[:8]}"
    broker.create_topics([topic], partitions=2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    for key, value in [
        ("orders:0", health(0, [1, 2])),  # at min ISR: stopping 1 or 2 breaks it...
        ("orders:0", health(0, [1, 2, 3])),  # ...until broker 3 rejoined
        ("orders:1", health(1, [2, 3])),  # at min ISR...
        ("orders:1", None),  # ...then deleted (tombstone)
        ("orders:2", health(2, [3, 4])),  # at min ISR: stopping 3 or 4 breaks it
    ]:
        producer.send(topic, key=key.encode(), value=value)
    producer.flush()
    producer.close()
    args = [
        "check",
        "restart",
        "--bootstrap-servers",
        broker.bootstrap_servers,
        "--set",
        f"topics.partition_health={topic}",
    ]
    runner = CliRunner()
    for stop, safe in [(1, True), (2, True), (3, False), (4, False)]:
        result = runner.invoke(main, [*args, "--broker", str(stop)])
        assert result.exit_code == (0 if safe else 1), result.output
        answer = json.loads(result.output)
        assert answer["partitions_considered"] == 2
        if not safe:
            assert [(b["partition"], b["becomes"]) for b in answer["would_break"]] == [
                (2, "under_min_isr")
            ]


def test_an_unknown_topic_is_an_error(broker: EmbeddedBroker) -> None:
    result = CliRunner().invoke(
        main,
        [
            "check",
            "restart",
            "--broker",
            "1",
            "--bootstrap-servers",
            broker.bootstrap_servers,
            "--set",
            f"topics.partition_health=missing-{uuid.uuid4().hex[:8]}",
        ],
    )
    assert result.exit_code == 2
