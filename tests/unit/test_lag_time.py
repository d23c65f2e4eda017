"""Lag time when a follower has not caught up since its leader's election (state.lag_time).

Set-up: leader 1 of orders-0 with replicas [1, 2, 3]. At B it is elected with ISR
[1, 2, 3] and follower 2 fetches 400 while the leader's LEO is 500; at B + 10 000 it is
re-elected (epoch 1) with ISR [1, 2]: Kafka's resetReplicaState gives follower 2 (in the
ISR) the election time as its last caught-up time and follower 3 (not in the ISR) 0, "not
caught up since". The leader's LEO at that election, 500, is what a follower must reach
to count as caught up at the election. Default T = 30 000 ms. Times are real epoch
milliseconds (B), as in a cluster: 0 is never an event time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from state import FollowerHealth, ReplicationModel
from state.lag_time import caught_up_known, lag_time_known, shrink_deadline_known
from tests.unit.builders import (
    apply,
    fetch,
    follower,
    health,
    isr_change,
    leader_and_isr,
    model,
    running_health,
)

B = 1_700_000_000_000
ELECTION = B + 10_000


def re_elected_model() -> ReplicationModel:
    m = model()
    apply(
        m,
        leader_and_isr(B, isr=(1, 2, 3)),
        fetch(B + 1_000, follower=2, offset=400, leader_leo=500),
        leader_and_isr(ELECTION, epoch=1, isr=(1, 2)),
    )
    return m


def lag_fields(f: FollowerHealth) -> tuple[int | None, int | None, str | None]:
    return f.last_caught_up_ms, f.lag_time_ms, f.lag_time_unknown


def test_in_isr_at_the_election_counts_from_the_election() -> None:
    f = follower(health(re_elected_model(), B + 25_000), 2)
    assert lag_fields(f) == (ELECTION, 15_000, None)  # 25 000 - 10 000, at 400 < 500
    assert f.status == "IN_SYNC"  # 15 000 = warn_ratio 0.5 x T: not beyond it


def test_out_of_isr_at_the_election_has_no_lag_time() -> None:
    f = follower(health(re_elected_model(), B + 25_000), 3)
    assert lag_fields(f) == (None, None, "NEVER_CAUGHT_UP")
    assert (f.status, f.fetch_offset, f.lag_messages) == ("OUT_OF_SYNC", None, None)


@pytest.mark.parametrize(
    ("offset", "expected"),
    [
        # Below the leader's LEO at the election (500): still not caught up since.
        (499, (None, None, "NEVER_CAUGHT_UP")),
        # At it: Kafka's updateFetchState takes the previous fetch time, here the election
        # (resetReplicaState set it), so the lag counts from B + 10 000: 26 000 - 10 000.
        (500, (ELECTION, 16_000, None)),
    ],
)
def test_first_fetch_after_the_election(offset: int, expected: tuple[Any, ...]) -> None:
    m = re_elected_model()
    apply(m, fetch(B + 26_000, follower=3, offset=offset, leader_leo=900, hw=500, epoch=1))
    assert lag_fields(follower(health(m, B + 26_000), 3)) == expected


def test_caught_up_after_the_election_counts_from_that_fetch() -> None:
    m = re_elected_model()
    apply(
        m,
        fetch(B + 26_000, follower=3, offset=499, leader_leo=900, hw=500, epoch=1),
        # 900 >= the leader's LEO of the previous fetch (900): caught up at B + 26 000.
        fetch(B + 28_000, follower=3, offset=900, leader_leo=1_000, hw=900, epoch=1),
    )
    assert lag_fields(follower(health(m, B + 29_000), 3)) == (B + 26_000, 3_000, None)


def test_at_the_leaders_leo_the_lag_time_is_zero_without_a_catch_up_time() -> None:
    """Same leader, new epoch: fetch offsets stay known (makeLeader without isNewLeader)."""
    m = model()
    apply(
        m,
        leader_and_isr(B, isr=(1, 2, 3)),
        fetch(B + 1_000, follower=3, offset=800, leader_leo=800),
        leader_and_isr(ELECTION, epoch=1, isr=(1, 2)),
    )
    f = follower(health(m, B + 20_000), 3)
    assert lag_fields(f) == (None, 0, None)  # at 800 = the leader's LEO
    assert f.status == "CATCHING_UP"


def test_re_entered_the_isr_without_catching_up() -> None:
    """Added back by the leader with its 0 kept (Kafka's maybeExpandIsr): no lag time, but a
    deadline from the entry, T / 2 later (the next isr-expiration run)."""
    m = re_elected_model()
    entry = B + 20_000
    apply(m, isr_change(entry, (1, 2), (1, 2, 3), epoch=1))
    eligible = follower(running_health(m, entry + 15_000, by=2), 3)
    assert lag_fields(eligible) == (None, None, "NEVER_CAUGHT_UP")
    assert (eligible.status, eligible.shrink_by_ms) == ("SHRINK_ELIGIBLE", entry + 15_000)
    overdue = follower(running_health(m, entry + 15_001, by=2), 3)
    assert (overdue.status, overdue.shrink_by_ms) == ("SHRINK_OVERDUE", entry + 15_000)
    assert overdue.lag_time_ms is None


def test_no_value_of_any_record_is_a_time_from_epoch_0() -> None:
    m = re_elected_model()
    record = health(m, B + 25_000)
    times: list[int | None] = [record.as_of_ms]
    for f in record.followers:
        times += [f.last_caught_up_ms, f.shrink_deadline_ms]
        if f.lag_time_ms is not None:
            times.append(record.as_of_ms - f.lag_time_ms)  # when it was caught up
    assert all(t is None or t >= B for t in times)


def test_known_masks_boundaries() -> None:
    never, time = 0, B
    lcu = np.array([never, 1, time, never, never], dtype=np.int64)
    leo = np.array([-1, 5, 5, 7, 6], dtype=np.int64)
    leader_leo = np.array([7, 7, 7, 7, 7], dtype=np.int64)
    isr_since = np.array([never, never, never, B, never], dtype=np.int64)
    assert caught_up_known(lcu).tolist() == [False, True, True, False, False]
    assert lag_time_known(lcu, leo == leader_leo).tolist() == [False, True, True, True, False]
    assert shrink_deadline_known(lcu, isr_since).tolist() == [False, True, True, True, False]
