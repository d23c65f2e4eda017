"""Replay rules of the metadata log (Kafka's PartitionRegistration.merge, ClusterDelta,
metadata transactions) and the events they give, on synthetic batches."""

from __future__ import annotations

from typing import Any

from streaming.feeds.collectors.metadata_log.replay import MetadataReplayer
from streaming.feeds.collectors.metadata_log.segments import Batch, parse_batch
from tests.unit import metadata_log_synthetic as syn

T = "v9meXjI1RVKB-NSvF0GXDA"
T0 = 1_700_000_000_000


def batch(offset: int, *values: bytes, epoch: int = 5, ts: int = T0) -> Batch:
    return parse_batch(syn.batch(offset, epoch, ts, list(values)))


def values(replayer: MetadataReplayer, b: Batch) -> list[dict[str, Any]]:
    return [dict(e.value) for e in replayer.replay(b)]


def created(replayer: MetadataReplayer) -> None:
    """Topic t, partition 0 on [1, 2, 3], ISR [1, 2, 3], leader 1, epochs 0/0 (offsets 1-2)."""
    replayer.replay(
        batch(1, syn.topic_record("t", T), syn.partition_record(0, T, 0, [1, 2, 3], [1, 2, 3], 1))
    )


def test_topic_creation_is_a_topic_change_then_leader_and_isr() -> None:
    replayer = MetadataReplayer()
    replayer.replay(parse_batch(syn.leader_change_batch(0, 5, T0, leader=3, voters=[3])))
    partition = syn.partition_record(0, T, 0, [1, 2], [1, 2], 1, 0, 0)
    out = values(replayer, batch(1, syn.topic_record("t", T), partition))
    assert [e["type"] for e in out] == ["TopicChange", "LeaderAndIsr"]
    assert out[0]["created"] == {"t": {"0": [1, 2]}}
    assert out[1] == {
        "type": "LeaderAndIsr",
        "topic": "t",
        "partition": 0,
        "leader": 1,
        "leader_epoch": 0,
        "isr": [1, 2],
        "replicas": [1, 2],
        "partition_epoch": 0,
        "ts": T0,
        "controller_epoch": 5,
        "controller_id": 3,
        "metadata_offset": 2,
    }


def test_isr_only_change_keeps_the_leader_epoch_and_bumps_the_partition_epoch() -> None:
    replayer = MetadataReplayer()
    created(replayer)
    (shrink,) = values(
        replayer, batch(3, syn.partition_change_record(0, T, 0, isr=[1, 3]), ts=T0 + 50)
    )
    assert shrink["type"] == "IsrChange"
    assert (shrink["old_isr"], shrink["new_isr"], shrink["leader"]) == ([1, 2, 3], [1, 3], 1)
    assert (shrink["leader_epoch"], shrink["partition_epoch"]) == (0, 1)
    assert (shrink["ts"], shrink["metadata_offset"]) == (T0 + 50, 3)


def test_leader_field_bumps_the_leader_epoch_even_for_the_same_leader() -> None:
    """Before metadata.version 3.6-IV0 the controller writes Leader (unchanged) on every
    ISR shrink, to bump the leader epoch: that is a new epoch, so a LeaderAndIsr."""
    replayer = MetadataReplayer()
    created(replayer)
    (event,) = values(replayer, batch(3, syn.partition_change_record(0, T, 0, isr=[1], leader=1)))
    assert event["type"] == "LeaderAndIsr"
    assert (event["leader"], event["leader_epoch"], event["partition_epoch"]) == (1, 1, 1)
    assert event["isr"] == [1]


def test_new_leader_and_no_leader() -> None:
    replayer = MetadataReplayer()
    created(replayer)
    values(replayer, batch(3, syn.partition_change_record(0, T, 0, leader=2)))
    (offline,) = values(
        replayer, batch(4, syn.partition_change_record(0, T, 0, isr=[2], leader=-1))
    )
    assert (offline["type"], offline["leader"], offline["isr"]) == ("LeaderAndIsr", -1, [2])
    assert (offline["leader_epoch"], offline["partition_epoch"]) == (2, 2)


def test_isr_change_of_a_leaderless_partition_is_a_leader_and_isr() -> None:
    replayer = MetadataReplayer()
    created(replayer)
    values(replayer, batch(3, syn.partition_change_record(0, T, 0, leader=-1)))
    (event,) = values(replayer, batch(4, syn.partition_change_record(0, T, 0, isr=[3])))
    assert event["type"] == "LeaderAndIsr"  # IsrChange needs a leader
    assert (event["leader_epoch"], event["partition_epoch"]) == (1, 2)


def test_reassignment_replaces_the_replicas() -> None:
    replayer = MetadataReplayer()
    created(replayer)
    (event,) = values(
        replayer,
        batch(3, syn.partition_change_record(0, T, 0, replicas=[1, 2, 4], isr=[1, 2], leader=1)),
    )
    assert (event["replicas"], event["isr"], event["leader_epoch"]) == ([1, 2, 4], [1, 2], 1)


def test_a_change_that_moves_only_directories_still_counts_the_partition_epoch() -> None:
    replayer = MetadataReplayer()
    created(replayer)
    (event,) = values(
        replayer,
        batch(3, syn.partition_change_record(1, T, 0, directories=["AAAAAAAAAAAAAAAAAAAAAQ"] * 3)),
    )
    assert (event["type"], event["leader_epoch"], event["partition_epoch"]) == (
        "LeaderAndIsr",
        0,
        1,
    )


def test_change_of_unknown_partition_is_counted() -> None:
    replayer = MetadataReplayer()
    assert values(replayer, batch(3, syn.partition_change_record(0, T, 0, isr=[1]))) == []
    assert replayer.dropped["change_of_unknown_partition"] == 1


def test_topic_removal() -> None:
    replayer = MetadataReplayer()
    created(replayer)
    (event,) = values(replayer, batch(3, syn.remove_topic_record(T)))
    assert (event["type"], event["deleted"], event["created"]) == ("TopicChange", ["t"], {})
    assert replayer.image.topic_partitions() == {}


def test_broker_registration_fencing_and_epochs() -> None:
    replayer = MetadataReplayer()
    assert values(replayer, batch(10, syn.register_broker_record(3, 1, 10))) == []  # fenced
    (unfenced,) = values(
        replayer, batch(11, syn.broker_registration_change_record(0, 1, 10, fenced=-1))
    )
    assert unfenced["live"] == [{"id": 1, "epoch": 10}]
    assert unfenced["metadata_offset"] == 11
    values(replayer, batch(12, syn.register_broker_record(2, 2, 12, fenced=False)))
    (fenced,) = values(
        replayer,
        batch(13, syn.broker_registration_change_record(1, 1, 10, fenced=1, controlled_shutdown=1)),
    )
    assert fenced["live"] == [{"id": 2, "epoch": 12}]
    (back,) = values(replayer, batch(20, syn.register_broker_record(3, 1, 20, fenced=False)))
    assert back["live"] == [{"id": 1, "epoch": 20}, {"id": 2, "epoch": 12}]  # a new epoch
    (gone,) = values(replayer, batch(21, syn.unregister_broker_record(2, 12)))
    assert gone["live"] == [{"id": 1, "epoch": 20}]


def test_kafka_3_2_fence_and_unfence_records() -> None:
    replayer = MetadataReplayer()
    values(replayer, batch(1, syn.register_broker_record(0, 1, 1)))
    (live,) = values(replayer, batch(2, syn.fence_broker_record(1, 1, fence=False)))
    assert live["live"] == [{"id": 1, "epoch": 1}]
    (dead,) = values(replayer, batch(3, syn.fence_broker_record(1, 1, fence=True)))
    assert dead["live"] == []


def test_configs_topic_own_value_over_cluster_default() -> None:
    replayer = MetadataReplayer()
    values(replayer, batch(1, syn.register_broker_record(3, 1, 1, fenced=False)))
    created(replayer)
    min_isr = syn.config_record(4, "", "min.insync.replicas", "2")
    lag = syn.config_record(4, "", "replica.lag.time.max.ms", "10000")
    out = values(replayer, batch(5, min_isr, lag))
    assert [(e["type"], e.get("topic", e.get("broker"))) for e in out] == [
        ("TopicConfig", "t"),
        ("BrokerConfig", 1),
    ]
    assert (out[0]["min_insync_replicas"], out[1]["replica_lag_time_max_ms"]) == (2, 10000)
    (own,) = values(replayer, batch(7, syn.config_record(2, "t", "min.insync.replicas", "3")))
    assert own["min_insync_replicas"] == 3
    assert values(replayer, batch(8, syn.config_record(2, "t", "retention.ms", "1"))) == []
    (back,) = values(replayer, batch(9, syn.config_record(2, "t", "min.insync.replicas", None)))
    assert back["min_insync_replicas"] == 2  # the cluster default again
    (per_broker,) = values(
        replayer, batch(10, syn.config_record(4, "1", "replica.lag.time.max.ms", "5000"))
    )
    assert (per_broker["broker"], per_broker["replica_lag_time_max_ms"]) == (1, 5000)


def test_transaction_takes_effect_at_its_end() -> None:
    replayer = MetadataReplayer()
    assert replayer.replay(batch(1, syn.begin_transaction_record(), syn.topic_record("t", T))) == []
    assert replayer.in_transaction
    assert replayer.stable_image().topic_names == {}
    part = syn.partition_record(0, T, 0, [1], [1], 1)
    assert replayer.replay(batch(3, part)) == []
    out = values(replayer, batch(4, syn.end_transaction_record()))
    assert [e["type"] for e in out] == ["TopicChange", "LeaderAndIsr"]
    assert not replayer.in_transaction


def test_aborted_transaction_leaves_nothing() -> None:
    replayer = MetadataReplayer()
    replayer.replay(
        batch(
            1,
            syn.begin_transaction_record(),
            syn.topic_record("t", T),
            syn.partition_record(0, T, 0, [1], [1], 1),
        )
    )
    assert values(replayer, batch(4, syn.abort_transaction_record())) == []
    assert replayer.image.topic_names == {}
    assert replayer.dropped["aborted_transaction"] == 1


def test_leader_change_is_a_controller_change_and_stamps_later_events() -> None:
    replayer = MetadataReplayer()
    out = [
        dict(e.value)
        for e in replayer.replay(
            parse_batch(syn.leader_change_batch(0, 7, T0, leader=2, voters=[1, 2, 3]))
        )
    ]
    assert out == [
        {
            "type": "ControllerChange",
            "ts": T0,
            "controller_id": 2,
            "controller_epoch": 7,
            "metadata_offset": 0,
        }
    ]
    created(replayer)  # written in epoch 5, not 7: no controller id is claimed
    (event,) = values(replayer, batch(3, syn.partition_change_record(0, T, 0, isr=[1]), epoch=7))
    assert (event["controller_id"], event["controller_epoch"]) == (2, 7)


def test_no_op_records_give_nothing() -> None:
    replayer = MetadataReplayer()
    assert (
        replayer.replay(
            batch(1, syn.no_op_record(), syn.feature_level_record("metadata.version", 21))
        )
        == []
    )
    assert replayer.image.features == {"metadata.version": 21}
    assert replayer.records["NoOpRecord v0"] == 1
