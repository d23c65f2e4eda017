"""docs/domain.md#caught-up: the leader's bookkeeping of each follower's fetches."""

from __future__ import annotations

import numpy as np

from state import PartitionTable
from state.events import DeadLetterReason
from state.follower_fetch_state import FetchBatch, apply_fetches
from tests.unit.builders import (
    apply,
    fetch,
    follower,
    health,
    leader_and_isr,
    model,
)


def test_fetch_at_leader_leo_is_caught_up_at_its_own_time() -> None:
    m = model()
    apply(m, leader_and_isr(1_000), fetch(5_000, follower=2, offset=700, leader_leo=700))
    f = follower(health(m, 5_000), 2)
    assert f.last_caught_up_ms == 5_000
    assert f.fetch_offset == 700


def test_fetch_that_reached_the_previous_leader_leo_is_caught_up_at_the_previous_fetch() -> None:
    m = model()
    apply(
        m,
        leader_and_isr(1_000),
        fetch(2_000, follower=2, offset=100, leader_leo=500),  # behind: 100 < 500, 100 >= 0
        fetch(3_000, follower=2, offset=500, leader_leo=900),  # has what the leader had at 2 s
    )
    # Fetch 1: o=100 < L=500, o >= previous L (0, reset at election) -> caught up at 1 000
    # (the election time, the previous "fetch"). Fetch 2: o=500 >= previous L=500 -> 2 000.
    assert follower(health(m, 3_000), 2).last_caught_up_ms == 2_000


def test_fetch_behind_the_previous_leader_leo_does_not_advance_last_caught_up() -> None:
    m = model()
    apply(
        m,
        leader_and_isr(1_000),
        fetch(2_000, follower=2, offset=500, leader_leo=500),  # caught up at 2 000
        fetch(3_000, follower=2, offset=600, leader_leo=900),  # 600 >= 500: caught up at 2 000
        fetch(4_000, follower=2, offset=800, leader_leo=1_300),  # 800 < 900: no progress
        fetch(5_000, follower=2, offset=850, leader_leo=1_700),  # 850 < 1 300: no progress
    )
    f = follower(health(m, 5_000), 2)
    assert f.last_caught_up_ms == 2_000
    assert f.fetch_offset == 850
    assert f.lag_messages == 1_700 - 850


def test_last_caught_up_never_moves_backwards() -> None:
    m = model()
    apply(
        m,
        leader_and_isr(1_000),
        fetch(9_000, follower=2, offset=500, leader_leo=500),  # caught up at 9 000
        fetch(8_000, follower=2, offset=500, leader_leo=500),  # an older timestamp
    )
    assert follower(health(m, 9_000), 2).last_caught_up_ms == 9_000


def test_error_response_changes_nothing() -> None:
    m = model()
    apply(
        m,
        leader_and_isr(1_000),
        fetch(2_000, follower=2, offset=400, leader_leo=500, hw=400),
        fetch(3_000, follower=2, offset=900, leader_leo=900, hw=900, error="OFFSET_OUT_OF_RANGE"),
    )
    record = health(m, 3_000)
    f = follower(record, 2)
    assert (f.fetch_offset, f.last_caught_up_ms) == (400, 1_000)
    assert (record.leader_leo, record.high_watermark) == (500, 400)


def test_stale_and_foreign_fetches_are_rejected_with_their_reason() -> None:
    m = model()
    apply(m, leader_and_isr(1_000, leader=1, epoch=3))
    report = apply(
        m,
        fetch(2_000, follower=2, offset=1, leader_leo=1, epoch=2),  # older leader epoch
        fetch(2_000, follower=2, offset=1, leader_leo=1, epoch=4),  # epoch not seen yet
        fetch(2_000, follower=3, offset=1, leader_leo=1, epoch=3, leader=2),  # not the leader
        fetch(2_000, follower=7, offset=1, leader_leo=1, epoch=3),  # not an assigned replica
        fetch(2_000, follower=1, offset=1, leader_leo=1, epoch=3),  # the leader itself
        fetch(2_000, follower=2, offset=1, leader_leo=1, epoch=3, partition=9),  # unknown
        fetch(2_000, follower=3, offset=5, leader_leo=5, epoch=3),  # fine
    )
    assert report.rejected_ids == [0, 1, 2, 3, 4, 5]
    assert report.rejected_reasons == [
        DeadLetterReason.STALE_LEADER_EPOCH,
        DeadLetterReason.UNKNOWN_LEADER_EPOCH,
        DeadLetterReason.NOT_LEADER,
        DeadLetterReason.NOT_ASSIGNED_REPLICA,
        DeadLetterReason.NOT_ASSIGNED_REPLICA,
        DeadLetterReason.UNKNOWN_PARTITION,
    ]
    assert report.applied["FetchResponse"] == 1
    record = health(m, 2_000)
    assert follower(record, 2).fetch_offset is None  # no rejected fetch was applied
    assert follower(record, 3).fetch_offset == 5


def test_high_watermark_and_leader_leo_come_from_the_latest_applied_fetch() -> None:
    m = model()
    apply(
        m,
        leader_and_isr(1_000),
        fetch(2_000, follower=2, offset=90, leader_leo=100, hw=80),
        fetch(2_100, follower=3, offset=95, leader_leo=120, hw=90),
        fetch(2_050, follower=2, offset=100, leader_leo=110, hw=85),  # latest in order
        fetch(2_200, follower=3, offset=1, leader_leo=999, hw=999, epoch=7),  # rejected
    )
    record = health(m, 2_200)
    assert (record.leader_leo, record.high_watermark) == (110, 85)


def test_reset_on_become_leader() -> None:
    m = model()
    apply(
        m,
        leader_and_isr(1_000, leader=1, epoch=0, isr=(1, 2, 3)),
        fetch(5_000, follower=2, offset=700, leader_leo=700),
        fetch(5_000, follower=3, offset=300, leader_leo=700),
        # Broker 2 becomes leader at 9 000; broker 3 is not in the new ISR.
        leader_and_isr(9_000, leader=2, epoch=1, isr=(2, 1)),
    )
    record = health(m, 9_000)
    assert [f.broker for f in record.followers] == [1, 3]
    old_leader, out_of_isr = follower(record, 1), follower(record, 3)
    assert old_leader.last_caught_up_ms == 9_000  # in the new ISR: caught up at election
    # Not in the ISR: Kafka's resetReplicaState stores 0, "not since": no time, no lag time.
    assert (out_of_isr.last_caught_up_ms, out_of_isr.lag_time_ms) == (None, None)
    assert out_of_isr.lag_time_unknown == "NEVER_CAUGHT_UP"
    assert old_leader.fetch_offset is None
    assert out_of_isr.fetch_offset is None

    # last_fetch_leader_leo was reset to the latest leader_leo seen (700), last fetch to
    # 9 000: a fetch at 10 000 with offset 700 < L=800 but >= 700 is caught up at 9 000.
    apply(m, fetch(10_000, follower=1, offset=700, leader_leo=800, leader=2, epoch=1))
    assert follower(health(m, 10_000), 1).last_caught_up_ms == 9_000


def test_same_leader_epoch_does_not_reset_followers() -> None:
    m = model()
    apply(
        m,
        leader_and_isr(1_000, epoch=2, partition_epoch=5),
        fetch(5_000, follower=2, offset=700, leader_leo=700, epoch=2),
        leader_and_isr(6_000, epoch=2, partition_epoch=6, isr=(1, 2)),  # ISR change only
    )
    f = follower(health(m, 6_000), 2)
    assert (f.last_caught_up_ms, f.fetch_offset) == (5_000, 700)


def test_vectorised_batch_equals_one_fetch_at_a_time() -> None:
    """Many followers interleaved in one batch give the same state as applying singly."""
    rng = np.random.default_rng(7)
    events = []
    leo = dict.fromkeys(range(5), 0)
    for i in range(400):
        p = int(rng.integers(0, 5))
        leo[p] += int(rng.integers(0, 50))
        offset = max(0, leo[p] - int(rng.integers(0, 120)))
        follower_id = int(rng.integers(2, 4))
        events.append(
            fetch(
                1_000 + i * 10,
                follower=follower_id,
                offset=offset,
                leader_leo=leo[p],
                partition=p,
                error="NONE" if i % 17 else "NOT_LEADER_OR_FOLLOWER",
            )
        )
    setup = [leader_and_isr(0, partition=p) for p in range(5)]
    batched, single = model(), model()
    apply(batched, *setup, *events)
    apply(single, *setup)
    for e in events:
        apply(single, e)
    columns = ("log_end_offset", "last_fetch_time_ms", "last_fetch_leader_leo", "last_caught_up_ms")
    for name in columns:
        np.testing.assert_array_equal(getattr(batched.table, name), getattr(single.table, name))
    np.testing.assert_array_equal(batched.table.high_watermark, single.table.high_watermark)


def test_fetch_batch_from_frame_treats_missing_error_as_none() -> None:
    import pandas as pd

    table = PartitionTable()
    row = table.create("t", 0, (1, 2))
    table.leader[row], table.leader_epoch[row] = 1, 0
    frame = pd.DataFrame(
        {
            "ts": [10, 20],
            "topic": ["t", "t"],
            "partition": [0, 0],
            "leader": [1, 1],
            "follower": [2, 2],
            "leader_epoch": [0, 0],
            "fetch_offset": [5, 6],
            "leader_leo": [5, 9],
            "high_watermark": [5, 5],
            "error": [None, "FENCED_LEADER_EPOCH"],
        }
    )
    outcome = apply_fetches(table, FetchBatch.from_frame(frame))
    assert outcome.error_responses == 1
    assert table.log_end_offset[row, 1] == 5
    assert table.last_caught_up_ms[row, 1] == 10


def test_new_epoch_with_the_same_leader_keeps_fetch_offsets() -> None:
    m = model()
    apply(
        m,
        leader_and_isr(0, isr=(1, 2), replicas=(1, 2, 3)),
        fetch(1_000, follower=2, offset=800, leader_leo=800, hw=800),
        fetch(1_000, follower=3, offset=800, leader_leo=800, hw=800),
        leader_and_isr(2_000, leader=1, epoch=1, isr=(1, 2), replicas=(1, 2, 3)),
    )
    record = health(m, 2_000)
    f2, f3 = follower(record, 2), follower(record, 3)
    assert (f2.fetch_offset, f2.last_caught_up_ms) == (800, 2_000)  # times reset
    assert (f3.fetch_offset, f3.last_caught_up_ms, f3.status) == (
        800,
        None,
        "CATCHING_UP",
    )
    # At the leader's LEO (800): a lag time of 0 although not caught up since the reset.
    assert (f3.lag_time_ms, f3.lag_time_unknown) == (0, None)
