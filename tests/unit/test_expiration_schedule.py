"""docs/domain.md#shrink-at: the leader's isr-expiration runs, learned from its shrinks,
give the run at which Kafka removes a follower. Boundary tables worked out by hand from
``ReplicaManager``'s fixed-rate schedule (period T // 2) and ``isCaughtUp``'s strict
``now - lastCaughtUpTimeMs > T``."""

from __future__ import annotations

from dataclasses import replace

import msgspec
import numpy as np
import pytest

from state.events import Event, IsrChange
from state.expiration_schedule import NO_ANCHOR, ExpirationSchedules, shrink_at_ms
from tests.unit.builders import (
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

T = 10_000


@pytest.mark.parametrize(
    ("anchor", "last_caught_up", "isr_since", "expected"),
    [
        # runs at ..., 95 000, 100 000, 105 000, ... (anchor 100 000, period 5 000)
        (100_000, 80_000, 0, 95_000),  # lag passes T after 90 000: the run at 95 000
        (100_000, 85_000, 0, 100_000),  # after 95 000: at 95 000 the lag is T, not above
        (100_000, 84_999, 0, 95_000),  # at 95 000 the lag is T + 1
        (100_000, 85_001, 0, 100_000),
        (100_000, 120_000, 0, 135_000),  # runs after the anchor too
        (100_003, 80_000, 0, 90_003),  # the phase to the ms: 90 003 is past 90 000
        # entered the ISR after its lag passed T: the first run after the entry
        (100_000, 50_000, 96_000, 100_000),
        (100_000, 50_000, 100_000, 105_000),  # a run at the entry's very ms: not counted
    ],
)
def test_the_run_that_removes_a_follower(
    anchor: int, last_caught_up: int, isr_since: int, expected: int
) -> None:
    at, known = shrink_at_ms(
        np.array([anchor]), np.array([T]), np.array([last_caught_up]), np.array([isr_since])
    )
    assert known.tolist() == [True]
    assert at.tolist() == [expected]


def test_an_odd_t_rounds_the_period_down_and_an_unknown_anchor_gives_nothing() -> None:
    # T = 10 001: Kafka's period is 10 001 / 2 = 5 000 ms (integer division)
    at, known = shrink_at_ms(
        np.array([100_000, NO_ANCHOR]),
        np.array([10_001, T]),
        np.array([80_000, 80_000]),
        np.array([0, 0]),
    )
    assert known.tolist() == [True, False]
    assert at.tolist()[0] == 95_000  # 80 000 + 10 001 = 90 001 < 95 000


def test_a_restart_forgets_the_schedule_and_refuses_shrinks_of_the_old_one() -> None:
    schedules = ExpirationSchedules()
    schedules.observe_shrink(1, 100_000, T)
    schedules.observe_shrink(1, 90_000, T)  # older than the anchor: nothing new
    assert schedules.anchor_ms == {1: 100_000}
    schedules.restarted(frozenset({1}), 120_000)
    assert schedules.anchor_ms == {}
    schedules.observe_shrink(1, 110_000, T)  # a late event of the schedule before the restart
    assert schedules.anchor_ms == {}
    schedules.observe_shrink(1, 121_234, T)
    assert schedules.anchor_ms == {1: 121_234}


@pytest.mark.parametrize(
    ("second", "anchor"),
    [
        (100_051, 100_000),  # the same run's next partition: its first commit stays
        (101_249, 100_000),  # less than a quarter period (1,250 ms) after it
        (101_250, 101_250),  # a quarter period: another run
        (105_020, 105_020),  # the next run
    ],
)
def test_one_runs_commits_keep_the_first(second: int, anchor: int) -> None:
    schedules = ExpirationSchedules()
    schedules.observe_shrink(1, 100_000, T)
    schedules.observe_shrink(1, second, T)
    assert schedules.anchor_ms == {1: anchor}


def committed(ts: int, old: tuple[int, ...], new: tuple[int, ...]) -> IsrChange:
    """The record of the leader's commit: the partition epoch it committed is stated."""
    return replace(isr_change(ts, old, new), partition_epoch=1)


def test_the_model_learns_from_the_leaders_shrink_and_predicts_the_next() -> None:
    """Leader 1 removes follower 3 at 30 700 (one of its runs: 700 + k x 5 000). Then
    follower 2 stops at 40 000 (last caught up 40 000): its lag passes T after 50 000,
    so the run at 50 700 removes it; the bound says 55 000."""
    m = model(replica_lag_time_max_ms=T)
    apply(
        m,
        brokers(0, (1, 5), (2, 5), (3, 5)),
        leader_and_isr(0),
        committed(30_700, (1, 2, 3), (1, 2)),
        fetch(40_000, follower=2, offset=100, leader_leo=100),
        fetch(40_500, follower=2, offset=100, leader_leo=200),
    )
    stalled = follower(running_health(m, 50_500), 2)
    assert stalled.status == "SHRINK_ELIGIBLE"
    assert (stalled.shrink_by_ms, stalled.shrink_at_ms) == (55_000, 50_700)


@pytest.mark.parametrize(
    "removal",
    [
        # collect admin's change seen between two polls: the poll's time, no partition
        # epoch; not a commit's record, so not a run of the leader
        (isr_change(30_700, (1, 2, 3), (1, 2)),),
        # broker 3's registration is gone when 3 leaves the ISR: the controller's fence
        (brokers(30_000, (1, 5), (2, 5)), committed(30_700, (1, 2, 3), (1, 2))),
    ],
    ids=["seen between polls", "a dead broker removed"],
)
def test_a_removal_that_is_not_the_leaders_run_teaches_nothing(
    removal: tuple[Event, ...],
) -> None:
    m = model(replica_lag_time_max_ms=T)
    apply(
        m,
        brokers(0, (1, 5), (2, 5), (3, 5)),
        leader_and_isr(0),
        *removal,
        fetch(40_000, follower=2, offset=100, leader_leo=100),
        fetch(40_500, follower=2, offset=100, leader_leo=200),
    )
    stalled = follower(running_health(m, 50_500), 2)
    assert stalled.status == "SHRINK_ELIGIBLE"
    assert stalled.shrink_at_ms is None


def test_only_shrinking_followers_carry_it() -> None:
    m = model(replica_lag_time_max_ms=T)
    apply(m, leader_and_isr(0), fetch(1_000, follower=2, offset=5, leader_leo=10))
    lagging = follower(health(m, 8_000), 2)
    assert lagging.status == "LAGGING"
    assert "shrink_at_ms" not in msgspec.to_builtins(lagging)
