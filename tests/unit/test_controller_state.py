"""docs/domain.md#controller-state: controller decisions, fencing, membership, topic lifecycle."""

from __future__ import annotations

import pickle

import numpy as np

from state import IsrChangeKind, ReplicationModel
from state.events import (
    ControllerChange,
    DeadLetterReason,
    TopicChange,
)
from tests.unit.builders import (
    TOPIC,
    apply,
    brokers,
    fetch,
    follower,
    health,
    isr_change,
    leader_and_isr,
    model,
    running_health,
)


def test_events_of_an_older_controller_epoch_are_ignored_and_counted() -> None:
    m = model()
    apply(m, ControllerChange(ts=0, controller_id=1, controller_epoch=7), leader_and_isr(0))
    report = apply(
        m,
        leader_and_isr(1_000, leader=2, epoch=1, controller_epoch=6),  # a zombie controller
        leader_and_isr(2_000, leader=3, epoch=1, controller_epoch=7),
    )
    assert report.rejected_ids == [0]
    assert report.rejected_reasons == [DeadLetterReason.STALE_CONTROLLER_EPOCH]
    assert health(m, 2_000).leader == 3
    assert m.cluster.controller_epoch == 7


def test_newer_controller_epoch_fences_the_old_one() -> None:
    m = model()
    apply(m, leader_and_isr(0, controller_epoch=3), leader_and_isr(1, epoch=1, controller_epoch=4))
    report = apply(m, ControllerChange(ts=2, controller_id=9, controller_epoch=3))
    assert report.rejected_reasons == [DeadLetterReason.STALE_CONTROLLER_EPOCH]
    assert m.cluster.controller_epoch == 4


def test_older_leader_epoch_is_stale() -> None:
    m = model()
    apply(m, leader_and_isr(0, leader=1, epoch=5))
    report = apply(m, leader_and_isr(1_000, leader=2, epoch=4))
    assert report.rejected_reasons == [DeadLetterReason.STALE_LEADER_EPOCH]
    assert (health(m, 1_000).leader, health(m, 1_000).leader_epoch) == (1, 5)


def test_same_leader_epoch_with_older_partition_epoch_is_stale() -> None:
    m = model()
    apply(m, leader_and_isr(0, epoch=5, partition_epoch=9))
    report = apply(m, leader_and_isr(1_000, epoch=5, partition_epoch=8, isr=(1,)))
    assert report.rejected_reasons == [DeadLetterReason.STALE_PARTITION_EPOCH]
    assert health(m, 1_000).isr == [1, 2, 3]


def test_isr_change_fencing() -> None:
    m = model()
    apply(m, leader_and_isr(0, leader=1, epoch=3, partition_epoch=10))
    report = apply(
        m,
        isr_change(1_000, (1, 2, 3), (1, 2), epoch=2),  # older leader epoch
        isr_change(1_000, (1, 2, 3), (1, 2), epoch=4),  # a leader epoch not seen yet
        isr_change(1_000, (1, 2, 3), (1, 2), epoch=None, leader=2),  # not the leader
        isr_change(1_000, (1, 2, 3), (1, 2), partition=5),  # unknown partition
    )
    assert report.rejected_reasons == [
        DeadLetterReason.STALE_LEADER_EPOCH,
        DeadLetterReason.UNKNOWN_LEADER_EPOCH,
        DeadLetterReason.NOT_LEADER,
        DeadLetterReason.UNKNOWN_PARTITION,
    ]
    assert health(m, 1_000).isr == [1, 2, 3]


def test_log_derived_isr_change_without_epochs_applies_to_the_current_epoch() -> None:
    m = model()
    apply(m, leader_and_isr(0, leader=1, epoch=3))
    report = apply(m, isr_change(1_000, (1, 2, 3), (1, 3), epoch=None))
    assert report.rejected_ids == []
    assert [(t.kind, t.by_controller) for t in report.isr_transitions] == [
        (IsrChangeKind.SHRINK, False)
    ]
    record = health(m, 1_000)
    assert record.isr == [1, 3]
    assert follower(record, 2).in_isr is False


def test_expansion_is_counted_as_an_expand() -> None:
    m = model()
    apply(m, leader_and_isr(0, isr=(1, 2)))
    report = apply(m, isr_change(1_000, (1, 2), (1, 2, 3)))
    assert [t.kind for t in report.isr_transitions] == [IsrChangeKind.EXPAND]
    assert follower(health(m, 1_000), 3).in_isr is True


def test_topic_creation_then_election() -> None:
    m = model()
    apply(m, TopicChange(ts=0, created={"new": {0: (1, 2), 1: (2, 1)}}))
    record = health(m, 0, topic="new")
    # NewPartition until the first election: not offline (docs/domain.md#partition-health)
    assert (record.leader, record.offline, record.isr) == (-1, False, [])
    apply(m, leader_and_isr(100, topic="new", replicas=(1, 2), isr=(1, 2)))
    assert health(m, 100, topic="new").offline is False


def test_topic_deletion_removes_its_partitions() -> None:
    m = model()
    apply(
        m,
        leader_and_isr(0, topic="gone"),
        leader_and_isr(0, topic="gone", partition=1),
        leader_and_isr(0, topic="kept"),
    )
    apply(m, TopicChange(ts=1, deleted=("gone",)))
    assert m.partitions() == [m.table.topic_partition(m.table.live_row_of("kept", 0))]
    report = apply(m, fetch(2, follower=2, offset=1, leader_leo=1, topic="gone"))
    assert report.rejected_reasons == [DeadLetterReason.UNKNOWN_PARTITION]


def test_leader_minus_two_deletes_and_a_recreated_topic_starts_fresh() -> None:
    m = model()
    apply(m, leader_and_isr(0, epoch=7), fetch(10, follower=2, offset=50, leader_leo=50, epoch=7))
    apply(m, leader_and_isr(20, leader=-2, epoch=8))
    assert m.partition_count() == 0
    apply(m, leader_and_isr(30, epoch=0))  # recreated: epoch 0 is not stale any more
    record = health(m, 30)
    assert (record.leader_epoch, record.leader_leo) == (0, 0)
    assert follower(record, 2).fetch_offset is None


def test_reassignment_keeps_the_state_of_replicas_that_stay() -> None:
    m = model()
    apply(
        m,
        leader_and_isr(0, replicas=(1, 2, 3)),
        fetch(1_000, follower=2, offset=10, leader_leo=10),
        leader_and_isr(2_000, epoch=0, partition_epoch=1, replicas=(1, 4, 2), isr=(1, 2)),
    )
    record = health(m, 2_000)
    assert [f.broker for f in record.followers] == [4, 2]
    assert follower(record, 2).last_caught_up_ms == 1_000
    assert follower(record, 4).fetch_offset is None


def test_bounced_and_dead_brokers() -> None:
    m = model()
    apply(m, brokers(0, (1, 10), (2, 10), (3, 10)))
    report = apply(m, brokers(1, (1, 10), (2, 11)))
    assert report.bounced_brokers == [2]
    assert m.cluster.is_live(3) is False
    assert m.cluster.is_live(2) is True


def test_controller_epoch_is_learnt_from_an_event_rejected_for_another_reason() -> None:
    m = model()
    apply(m, leader_and_isr(0, epoch=5, controller_epoch=1))
    report = apply(
        m,
        leader_and_isr(1, epoch=4, controller_epoch=2),  # stale leader epoch, newer controller
        leader_and_isr(2, epoch=6, controller_epoch=1),  # from the old controller
    )
    assert report.rejected_reasons == [
        DeadLetterReason.STALE_LEADER_EPOCH,
        DeadLetterReason.STALE_CONTROLLER_EPOCH,
    ]
    assert m.cluster.controller_epoch == 2


def test_isr_change_on_a_leaderless_partition_is_rejected() -> None:
    m = model()
    apply(m, leader_and_isr(0, leader=-1, epoch=1))
    report = apply(m, isr_change(1_000, (1, 2, 3), (2, 3), leader=-1, epoch=None))
    assert report.rejected_reasons == [DeadLetterReason.NOT_LEADER]
    assert health(m, 1_000).isr == [1, 2, 3]


def isr_since(m: ReplicationModel, row: int) -> dict[int, int]:
    """Replica -> when it last entered the ISR as the model saw it (0: never seen)."""
    table = m.table
    return {
        int(b): int(t)
        for b, t in zip(table.replica_broker[row], table.isr_since_ms[row], strict=True)
        if b >= 0
    }


def test_isr_entry_times_through_creation_reassignment_and_row_reuse() -> None:
    m = model()
    apply(m, leader_and_isr(1_000, isr=(1, 2), replicas=(1, 2, 3)))
    row = m.table.live_row_of(TOPIC, 0)
    assert isr_since(m, row) == {1: 1_000, 2: 1_000, 3: 0}  # new row: its ISR entered now
    apply(m, isr_change(2_000, (1, 2), (1, 2, 3)))
    assert isr_since(m, row) == {1: 1_000, 2: 1_000, 3: 2_000}
    # Reassignment (same leader epoch, wider than the table's slots): 1 and 3 keep their
    # times in their new slots, 2 leaves, 4 enters the ISR now, 5 is out of it.
    apply(m, leader_and_isr(3_000, isr=(1, 3, 4), replicas=(3, 1, 4, 5, 6), partition_epoch=1))
    assert m.table.replica_capacity > 4
    assert isr_since(m, row) == {3: 2_000, 1: 1_000, 4: 3_000, 5: 0, 6: 0}
    # A new leader epoch that keeps the ISR moves no entry time.
    apply(m, leader_and_isr(4_000, leader=3, epoch=1, isr=(3, 1, 4), replicas=(3, 1, 4, 5, 6)))
    assert isr_since(m, row) == {3: 2_000, 1: 1_000, 4: 3_000, 5: 0, 6: 0}
    # Deleted, then recreated without an ISR: the reused row starts with no entry times.
    apply(m, leader_and_isr(5_000, leader=-2, epoch=2))
    apply(m, TopicChange(ts=6_000, created={TOPIC: {0: (1, 2, 3)}}))
    assert m.table.live_row_of(TOPIC, 0) == row
    assert isr_since(m, row) == {1: 0, 2: 0, 3: 0}
    assert not m.table.isr_since_ms[row].any()


def test_isr_entry_times_are_pickled_and_an_older_pickle_loads_without_them() -> None:
    m = model()
    # Follower 3, never caught up, is added at 40 000: eligible until 55 000.
    apply(m, leader_and_isr(0, isr=(1, 2)), isr_change(40_000, (1, 2), (1, 2, 3)))
    restored = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(restored.table.isr_since_ms, m.table.isr_since_ms)
    # A model pickled before the column existed: every entry time unknown (NEVER), so the
    # 1.5 T rule applies alone.
    del m.table.isr_since_ms
    old = pickle.loads(pickle.dumps(m))
    assert old.table.isr_since_ms.shape == old.table.replica_broker.shape
    assert not old.table.isr_since_ms.any()
    assert follower(running_health(old, 45_001, by=2), 3).status == "SHRINK_OVERDUE"
    assert follower(running_health(restored, 45_001, by=2), 3).status == "SHRINK_ELIGIBLE"
