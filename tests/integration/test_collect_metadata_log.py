"""A KRaft cluster seen only through ``collect metadata-log`` and ``collect admin``: the
streaming job fed by their output agrees with ``isrwatch replay`` of the same events.

The metadata log is SYNTHETIC (tests/unit/metadata_log_synthetic.py: records built from
Kafka's schemas; the real logs are tested in tests/unit/test_metadata_log_fixtures.py).
The embedded broker (Tansu) has no KRaft quorum and does not answer DescribeQuorum, so
``collect admin`` polls a source that returns the quorum reports of this story; the
collectors, the publisher, the broker, the job and its sinks are the real ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest
from prometheus_client import CollectorRegistry

from state import decode_record
from state.settings import PropagationMode, PropagationSettings, RuleSettings
from streaming.config import IsrwatchConfig
from streaming.feeds.collectors.admin_collector import AdminCollector
from streaming.feeds.collectors.admin_poller import ClusterSnapshot, QuorumReplica, QuorumSnapshot
from streaming.feeds.collectors.metadata_log.collector import MetadataLogCollector
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.publisher import KafkaPublisher
from streaming.feeds.wire import envelope_line
from streaming.job.metrics import HealthExporter
from streaming.job.query import run
from streaming.tools.embedded_broker import EmbeddedBroker
from streaming.tools.replay import replay
from tests.integration.kafka_topics import PublishedSpy, isolated_job_config
from tests.unit import metadata_log_synthetic as syn

pytestmark = pytest.mark.integration

T0 = 1_700_000_000_000
TOPIC_ID = "v9meXjI1RVKB-NSvF0GXDA"
CONTROLLER = 3000
KRAFT = RuleSettings(propagation=PropagationSettings(mode=PropagationMode.KRAFT))


def metadata_log(directory: Path, topic: str) -> None:
    """Brokers 1-3 register; ``topic`` gets two partitions on all three; partition 0
    shrinks to [1, 2] at 5 s; broker 3 is fenced at 12 s (and leaves partition 1's ISR),
    comes back at 20 s, and rejoins partition 0's ISR at 25 s."""

    def at(offset: int, ms: int, *values: bytes) -> bytes:
        return syn.batch(offset, 1, T0 + ms, list(values))

    syn.write_segment(
        directory,
        0,
        [
            syn.leader_change_batch(0, 1, T0, leader=CONTROLLER, voters=[CONTROLLER]),
            at(1, 100, *(syn.register_broker_record(3, b, b, fenced=False) for b in (1, 2, 3))),
            at(
                4,
                200,
                syn.topic_record(topic, TOPIC_ID),
                syn.partition_record(1, TOPIC_ID, 0, [1, 2, 3], [1, 2, 3], 1),
                syn.partition_record(1, TOPIC_ID, 1, [2, 3, 1], [2, 3, 1], 2),
            ),
            at(
                7,
                300,
                syn.config_record(2, topic, "min.insync.replicas", "2"),
                syn.config_record(4, "", "replica.lag.time.max.ms", "10000"),
            ),
            at(9, 5_000, syn.partition_change_record(1, TOPIC_ID, 0, isr=[1, 2])),
            at(
                10,
                12_000,
                syn.broker_registration_change_record(1, 3, 3, fenced=1),
                syn.partition_change_record(1, TOPIC_ID, 1, isr=[2, 1]),
            ),
            at(
                12,
                20_000,
                syn.register_broker_record(3, 3, 12, fenced=True),
                syn.broker_registration_change_record(1, 3, 12, fenced=-1),
            ),
            at(14, 25_000, syn.partition_change_record(1, TOPIC_ID, 0, isr=[1, 2, 3])),
        ],
    )


class QuorumReports:
    """What DescribeQuorum says at each poll: (time, log end offset of brokers 1, 2, 3)."""

    POLLS: ClassVar[list[tuple[int, tuple[int, int, int]]]] = [
        (1_000, (9, 9, 9)),
        (6_000, (10, 10, 9)),
        (11_000, (10, 10, 9)),
        (16_000, (12, 12, 9)),
        (26_000, (15, 15, 15)),
    ]

    def __init__(self) -> None:
        self.polls = list(self.POLLS)

    def snapshot(self) -> ClusterSnapshot:
        ms, ends = self.polls.pop(0)
        brokers = zip((1, 2, 3), ends, strict=True)
        replicas = tuple(QuorumReplica(b, end, None, None) for b, end in brokers)
        quorum = QuorumSnapshot(CONTROLLER, 1, max(ends), replicas, fetch_timeout_ms=2_000)
        return ClusterSnapshot(
            ts=T0 + ms,
            controller_id=CONTROLLER,
            controller_epoch=None,
            brokers=(1, 2, 3),
            partitions={},
            quorum=quorum,
        )

    def close(self) -> None:
        pass


@pytest.fixture
def job_config(broker: EmbeddedBroker, tmp_path: Path) -> IsrwatchConfig:
    return isolated_job_config(
        broker, tmp_path, {"rules.propagation.mode": "kraft", "streaming.state_shards": 2}
    )


def test_job_fed_by_the_kraft_collectors_agrees_with_replay(
    job_config: IsrwatchConfig, tmp_path: Path
) -> None:
    topic = job_config.topics.controller_events.replace("controller-events", "orders")
    metadata_log(tmp_path / "broker-1" / "__cluster_metadata-0", topic)
    log_spy = PublishedSpy(KafkaPublisher(job_config))
    log_collector = MetadataLogCollector(
        [tmp_path / "broker-1"],
        log_spy,
        CollectorMetrics("metadata-log", CollectorRegistry()),
        tmp_path / "metadata-log.json",
    )
    while log_collector.read_once()[0]:
        pass
    log_collector.close()
    admin_spy = PublishedSpy(KafkaPublisher(job_config))
    admin = AdminCollector(
        QuorumReports(),
        admin_spy,
        CollectorMetrics("admin", CollectorRegistry()),
        tmp_path / "admin.json",
        fetch_responses=False,
        broker_changes=False,
        partition_events=False,
        interval_ms=5_000,
    )
    for _ in QuorumReports.POLLS:
        admin.poll_once()
    admin.close()
    assert [e.event_type for e in admin_spy.events] == ["MetadataLogProgress"] * 5

    health_out = tmp_path / "health.jsonl"
    run(job_config, available_now=True, health_out=health_out, exporter=HealthExporter())
    final = {
        (r.topic, r.partition): r for r in map(decode_record, health_out.read_text().splitlines())
    }
    assert final[(topic, 0)].isr == [1, 2, 3]
    assert final[(topic, 1)].isr == [2, 1]
    assert final[(topic, 0)].metadata.state == "CONSISTENT"
    assert final[(topic, 1)].at_min_isr  # two in sync, min.insync.replicas 2 (ConfigRecord)

    # replay: the same events, in the job's order (event time; ties by topic offset,
    # and the metadata log's events were published first)
    published = sorted(log_spy.events + admin_spy.events, key=lambda e: e.ts)
    lines = [envelope_line(event) for event in published]
    as_of = final[(topic, 0)].as_of_ms
    replayed = replay(lines, KRAFT, as_of)
    assert not replayed.dead_letters
    assert {(r.topic, r.partition): r for r in replayed.records} == final
    # and what the quorum said along the way: broker 3 still behind record 9 at 11 s,
    # past the 5 s change + 2 s fetch timeout, so overdue then
    at_11s = {r.partition: r for r in replay(lines, KRAFT, T0 + 11_000).records}
    assert at_11s[0].metadata.stale_brokers == [3]
    assert at_11s[0].metadata.state == "STALE_OVERDUE"
