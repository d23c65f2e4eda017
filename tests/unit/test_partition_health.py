"""docs/domain.md#partition-health: partition health flags."""

from __future__ import annotations

import msgspec

from state.events import TopicChange, TopicConfig
from tests.unit.builders import (
    TOPIC,
    apply,
    brokers,
    fetch,
    health,
    isr_change,
    leader_and_isr,
    model,
    running_health,
)


def test_under_replicated_and_min_isr_use_the_topic_setting() -> None:
    m = model()
    apply(
        m,
        leader_and_isr(0, isr=(1, 2), replicas=(1, 2, 3)),
        TopicConfig(ts=0, topic="orders", min_insync_replicas=2),
    )
    record = health(m, 0)
    assert record.under_replicated is True  # 2 < 3 replicas
    assert (record.under_min_isr, record.at_min_isr) == (False, True)  # 2 == 2
    apply(m, isr_change(1_000, (1, 2), (1,)))
    record = health(m, 1_000)
    assert (record.under_min_isr, record.at_min_isr) == (True, False)  # 1 < 2


def test_min_isr_default_comes_from_the_settings() -> None:
    m = model(min_insync_replicas=3)
    apply(m, leader_and_isr(0, isr=(1, 2, 3)))
    record = health(m, 0)
    assert record.under_replicated is False
    assert (record.under_min_isr, record.at_min_isr) == (False, True)
    m = model()  # Kafka's default: 1
    apply(m, leader_and_isr(0, isr=(1,)))
    assert (health(m, 0).under_min_isr, health(m, 0).at_min_isr) == (False, True)


def test_offline_without_leader_or_with_a_dead_leader() -> None:
    m = model()
    apply(m, brokers(0, (1, 5), (2, 5), (3, 5)), leader_and_isr(0))
    assert health(m, 0).offline is False
    apply(m, brokers(1_000, (2, 5), (3, 5)))  # the leader's broker is gone
    assert health(m, 1_000).offline is True
    apply(m, leader_and_isr(2_000, leader=-1, epoch=1, isr=(1,)))
    record = health(m, 2_000)
    assert (record.offline, record.leader) == (True, -1)
    assert [f.broker for f in record.followers] == [1, 2, 3]


def test_no_shrink_prediction_without_a_live_leader() -> None:
    m = model()
    apply(m, leader_and_isr(0), brokers(0, (2, 5), (3, 5)))  # leader 1 is not live
    record = health(m, 100_000)  # far beyond 1.5 T since the election
    assert record.offline is True
    assert record.predicted_under_replicated is False
    assert {f.status for f in record.followers} == {"IN_SYNC"}


def test_predicted_under_replicated_only_while_not_under_replicated() -> None:
    m = model()
    apply(m, leader_and_isr(0), fetch(1_000, follower=2, offset=5, leader_leo=10))
    # Follower 3 never fetched: eligible once now > 30 000 (elected, caught up at 0).
    assert running_health(m, 30_000, by=2).predicted_under_replicated is False
    assert running_health(m, 30_001, by=2).predicted_under_replicated is True
    apply(m, isr_change(40_000, (1, 2, 3), (1, 2)))
    record = health(m, 40_000)
    assert record.under_replicated is True
    assert record.predicted_under_replicated is False  # it already is under-replicated


def test_record_has_every_field_of_the_contract() -> None:
    m = model()
    apply(m, leader_and_isr(0), fetch(1_000, follower=2, offset=5, leader_leo=10, hw=5))
    record = health(m, 1_000)
    # the JSON's fields, in the contract's order (docs/health-record.md)
    assert list(msgspec.to_builtins(record)) == [
        "topic",
        "partition",
        "as_of_ms",
        "leader",
        "leader_epoch",
        "replicas",
        "isr",
        "elr",
        "last_known_elr",
        "min_insync_replicas",
        "high_watermark",
        "high_watermark_frozen",
        "leader_leo",
        "under_replicated",
        "under_min_isr",
        "at_min_isr",
        "offline",
        "offline_recovery",
        "leader_silent_since_ms",
        "predicted_under_replicated",
        "followers",
        "metadata",
        "cause",
    ]
    assert record.min_insync_replicas == 1  # no TopicConfig: the configured default
    assert list(msgspec.to_builtins(record.followers[0])) == [
        "broker",
        "in_isr",
        "fetch_offset",
        "last_caught_up_ms",
        "lag_time_ms",
        "lag_time_unknown",
        "lag_messages",
        "status",
        "cause",
    ]
    assert list(msgspec.to_builtins(record.metadata)) == [
        "stale_brokers",
        "state",
        "blackout_earliest_ms",
        "blackout_latest_ms",
    ]


def test_records_are_sorted_by_topic_then_partition() -> None:
    m = model()
    apply(
        m,
        leader_and_isr(0, topic="b", partition=10),
        leader_and_isr(0, topic="b", partition=2),
        leader_and_isr(0, topic="a", partition=1),
    )
    keys = [(r.topic, r.partition) for r in m.evaluate(0).records()]
    assert keys == [("a", 1), ("b", 2), ("b", 10)]


def test_a_created_partition_is_not_offline_while_it_waits_for_its_first_leader() -> None:
    """Kafka's controller creates a partition in the NewPartition state and then elects
    its first leader (PartitionStateMachine: NewPartition -> OnlinePartition). Before the
    election the partition is not offline (OfflinePartitionsCount counts partitions whose
    leader is gone), nor under-replicated or under min ISR (a leader reports those), and
    no replica is anyone's follower yet."""
    m = model()
    apply(m, TopicChange(ts=0, created={TOPIC: {0: (1, 2, 3)}}))
    created = health(m, 100)
    assert (created.leader, created.replicas, created.isr) == (-1, [1, 2, 3], [])
    assert created.conditions() == {
        "under_replicated": False,
        "under_min_isr": False,
        "at_min_isr": False,
        "offline": False,
        "offline_unclean_only": False,
        "high_watermark_frozen": False,
        "leader_silent": False,
        "predicted_under_replicated": False,
    }
    assert created.followers == []
    assert not m.evaluate(100).unhealthy().any()
    apply(m, leader_and_isr(100))
    elected = health(m, 100)
    assert elected.leader == 1
    assert [(f.broker, f.status) for f in elected.followers] == [(2, "IN_SYNC"), (3, "IN_SYNC")]


def test_a_partition_whose_leader_is_gone_is_offline() -> None:
    """Once it had a leader, a partition without one is offline (OfflinePartition)."""
    m = model()
    apply(
        m,
        TopicChange(ts=0, created={TOPIC: {0: (1, 2, 3)}}),
        leader_and_isr(100, isr=(1,)),
        leader_and_isr(200, leader=-1, epoch=1, isr=(1,)),
    )
    record = health(m, 300)
    assert (record.leader, record.offline, record.under_min_isr) == (-1, True, False)
    assert [f.broker for f in record.followers] == [1, 2, 3]
