"""docs/domain.md#shrink-rule: follower status under the 1.5 x replica.lag.time.max.ms rule.

Set-up used by most tests: leader 1 elected at 0 with ISR [1, 2, 3]; follower 2 fetches
at 10 000 with offset 500 while the leader has 500 (caught up at 10 000); the leader then
appends, so follower 2 stays at 500 while the leader is at 600. Default T = 30 000 ms,
warn_ratio = 0.5: IN_SYNC up to lag 15 000, LAGGING up to 30 000, SHRINK_ELIGIBLE up to
45 000, SHRINK_OVERDUE beyond; the lag is now - 10 000.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from state import ReplicationModel
from state.events import BrokerConfig
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

CAUGHT_UP = 10_000


def lagging_follower_model(**settings: object):  # type: ignore[no-untyped-def]
    m = model(**settings)
    apply(
        m,
        leader_and_isr(0),
        fetch(CAUGHT_UP, follower=2, offset=500, leader_leo=500),
        fetch(CAUGHT_UP, follower=3, offset=600, leader_leo=600),  # leader now at 600
    )
    return m


@pytest.mark.parametrize(
    ("lag", "status"),
    [
        (0, "IN_SYNC"),
        (15_000, "IN_SYNC"),  # = warn_ratio x T: not beyond it
        (15_001, "LAGGING"),
        (30_000, "LAGGING"),  # = T: strictly greater is needed to be out of sync
        (30_001, "SHRINK_ELIGIBLE"),
        (45_000, "SHRINK_ELIGIBLE"),  # = 1.5 T: the last isr-expiration may still be due
        (45_001, "SHRINK_OVERDUE"),
    ],
)
def test_status_boundaries_with_default_t(lag: int, status: str) -> None:
    record = running_health(lagging_follower_model(), CAUGHT_UP + lag)
    f = follower(record, 2)
    assert f.status == status
    assert f.lag_time_ms == lag
    assert f.lag_messages == 100
    assert record.predicted_under_replicated is (status.startswith("SHRINK"))


def test_shrink_by_is_last_caught_up_plus_one_and_a_half_t() -> None:
    f = follower(running_health(lagging_follower_model(), CAUGHT_UP + 30_001), 2)
    assert f.shrink_by_ms == 10_000 + 45_000
    in_sync = follower(running_health(lagging_follower_model(), CAUGHT_UP + 30_001), 3)
    assert in_sync.shrink_by_ms is msgspec.UNSET  # absent from its JSON


def test_follower_at_the_leader_leo_is_never_out_of_sync() -> None:
    m = lagging_follower_model()
    # Follower 3 has everything the leader has (600) and has not fetched for an hour.
    f = follower(running_health(m, CAUGHT_UP + 3_600_000), 3)
    assert (f.status, f.lag_time_ms, f.lag_messages) == ("IN_SYNC", 0, 0)


def test_t_is_the_leaders_replica_lag_time_max() -> None:
    m = lagging_follower_model()
    # Leader 1 runs with replica.lag.time.max.ms = 10 000 (the pre-2.5 default).
    apply(m, BrokerConfig(ts=CAUGHT_UP, broker=1, replica_lag_time_max_ms=10_000))
    assert follower(running_health(m, CAUGHT_UP + 5_000), 2).status == "IN_SYNC"
    assert follower(running_health(m, CAUGHT_UP + 5_001), 2).status == "LAGGING"
    assert follower(running_health(m, CAUGHT_UP + 10_001), 2).status == "SHRINK_ELIGIBLE"
    assert follower(running_health(m, CAUGHT_UP + 15_001), 2).status == "SHRINK_OVERDUE"
    # A follower's own broker setting does not matter.
    apply(m, BrokerConfig(ts=CAUGHT_UP, broker=2, replica_lag_time_max_ms=1))
    assert follower(running_health(m, CAUGHT_UP + 5_000), 2).status == "IN_SYNC"


def test_odd_t_keeps_the_strict_one_and_a_half_boundary() -> None:
    # T = 10 001: 1.5 T = 15 001.5 ms, so lag 15 001 is still eligible, 15 002 overdue.
    m = lagging_follower_model(replica_lag_time_max_ms=10_001)
    assert follower(running_health(m, CAUGHT_UP + 15_001), 2).status == "SHRINK_ELIGIBLE"
    assert follower(running_health(m, CAUGHT_UP + 15_001), 2).shrink_by_ms == CAUGHT_UP + 15_001
    assert follower(running_health(m, CAUGHT_UP + 15_002), 2).status == "SHRINK_OVERDUE"


def test_warn_ratio_setting_moves_only_the_early_warning() -> None:
    m = lagging_follower_model(warn_ratio=0.8)
    assert follower(running_health(m, CAUGHT_UP + 24_000), 2).status == "IN_SYNC"
    assert follower(running_health(m, CAUGHT_UP + 24_001), 2).status == "LAGGING"
    assert follower(running_health(m, CAUGHT_UP + 30_001), 2).status == "SHRINK_ELIGIBLE"


def test_followers_out_of_the_isr() -> None:
    m = model()
    apply(
        m,
        brokers(0, (1, 1), (2, 1), (3, 1), (4, 1)),
        leader_and_isr(0, isr=(1,), replicas=(1, 2, 3, 4)),
        fetch(1_000, follower=2, offset=800, leader_leo=900, hw=800),  # at the HW
        fetch(1_000, follower=3, offset=799, leader_leo=900, hw=800),  # below the HW
        brokers(1_500, (1, 1), (2, 1), (3, 1)),  # broker 4 dies
    )
    record = health(m, 2_000)
    assert follower(record, 2).status == "CATCHING_UP"
    assert follower(record, 3).status == "OUT_OF_SYNC"
    assert follower(record, 4).status == "OFFLINE"


def test_catching_up_needs_the_start_offset_of_the_leader_epoch() -> None:
    m = model()
    apply(
        m,
        leader_and_isr(0, isr=(1, 2), replicas=(1, 2, 3)),
        fetch(1_000, follower=2, offset=900, leader_leo=900, hw=400),
        # Broker 2 becomes leader when the latest leader LEO seen is 900: its epoch starts at
        # offset 900. Follower 3 at 500 is above the HW (400) but below 900.
        leader_and_isr(2_000, leader=2, epoch=1, isr=(2,), replicas=(1, 2, 3)),
        fetch(3_000, follower=3, offset=500, leader_leo=950, hw=400, leader=2, epoch=1),
        fetch(3_000, follower=1, offset=900, leader_leo=950, hw=400, leader=2, epoch=1),
    )
    record = health(m, 3_000)
    assert follower(record, 3).status == "OUT_OF_SYNC"
    assert follower(record, 1).status == "CATCHING_UP"


def test_silent_follower_reaches_shrink_eligible_by_time_alone() -> None:
    m = model()
    apply(m, leader_and_isr(0), fetch(1_000, follower=2, offset=20, leader_leo=20))
    # Follower 3: elected at 0 (caught up at 0 by the reset); no fetch ever again, while
    # follower 2 keeps fetching from the leader.
    statuses = [
        follower(running_health(m, now, by=2), 3).status for now in (15_000, 15_001, 30_001, 45_001)
    ]
    assert statuses == ["IN_SYNC", "LAGGING", "SHRINK_ELIGIBLE", "SHRINK_OVERDUE"]


def test_warn_boundary_is_exact_where_floating_point_is_not() -> None:
    # 0.7 x 45 000 = 31 500 exactly, but 31 499.999... in binary floating point.
    m = lagging_follower_model(warn_ratio=0.7, replica_lag_time_max_ms=45_000)
    assert follower(running_health(m, CAUGHT_UP + 31_500), 2).status == "IN_SYNC"
    assert follower(running_health(m, CAUGHT_UP + 31_501), 2).status == "LAGGING"


# Re-entry into the ISR (docs/domain.md#decision-reentry). Kafka's
# maybeExpandIsr re-adds a follower whose fetch offset reached the HW, possibly still behind
# the leader's LEO, and keeps its last caught-up time; the next isr-expiration run, at most
# T / 2 later, removes it again. Deadline: max(last caught up + 1.5 T, entry + T / 2).

REENTRY = 80_000


def reentered_follower_model(caught_up: int = CAUGHT_UP, **settings: Any) -> ReplicationModel:
    """Follower 2 has the leader's 500 at ``caught_up``; the leader appends (600, follower 3
    has it); the leader shrinks 2 out at 55 000, 2 reaches the HW (600, held there by
    follower 3) at 79 000 while the leader is at 700, and the leader re-adds it at 80 000.
    The 79 000 fetch reached the previous leader LEO (500 >= 500): caught up at ``caught_up``.
    """
    m = model(**settings)
    apply(
        m,
        leader_and_isr(0),
        fetch(caught_up, follower=2, offset=500, leader_leo=500),
        fetch(caught_up, follower=3, offset=600, leader_leo=600),
        isr_change(55_000, (1, 2, 3), (1, 3)),
        fetch(REENTRY - 1_000, follower=2, offset=600, leader_leo=700, hw=600),
        isr_change(REENTRY, (1, 3), (1, 2, 3)),
    )
    return m


def test_follower_re_added_out_of_sync_has_until_the_next_expiration_run() -> None:
    # T = 30 000, last caught up 10 000: lcu + 1.5 T = 55 000 is long past at the re-entry
    # (80 000); Kafka removes it at its first isr-expiration run after 80 000, by 95 000.
    m = reentered_follower_model()
    at_entry = follower(running_health(m, REENTRY), 2)
    assert (at_entry.in_isr, at_entry.last_caught_up_ms) == (True, CAUGHT_UP)
    assert (at_entry.status, at_entry.shrink_by_ms) == ("SHRINK_ELIGIBLE", 95_000)
    f = follower(
        running_health(m, REENTRY + 15_000), 2
    )  # = entry + T / 2: the run may still be due
    assert (f.status, f.shrink_by_ms, f.lag_time_ms) == ("SHRINK_ELIGIBLE", 95_000, 85_000)
    # full ISR, about to shrink
    assert running_health(m, 95_000).predicted_under_replicated is True
    f = follower(running_health(m, 95_001), 2)
    assert (f.status, f.shrink_by_ms) == ("SHRINK_OVERDUE", 95_000)


def test_follower_re_added_out_of_sync_with_odd_t() -> None:
    # T = 30 001: entry + T / 2 = 95 000.5, so 95 000 is the last eligible ms (and
    # lcu + 1.5 T = 55 001.5 is long past).
    m = reentered_follower_model(replica_lag_time_max_ms=30_001)
    f = follower(running_health(m, 95_000), 2)
    assert (f.status, f.shrink_by_ms) == ("SHRINK_ELIGIBLE", 95_000)
    f = follower(running_health(m, 95_001), 2)
    assert (f.status, f.shrink_by_ms) == ("SHRINK_OVERDUE", 95_000)


@pytest.mark.parametrize(
    ("caught_up", "at_entry", "shrink_by"),
    [
        # lcu + T < entry: out of sync when re-added; the entry term decides.
        (49_999, "SHRINK_ELIGIBLE", 95_000),  # lcu + 1.5 T = 94 999
        # lcu + T >= entry: not out of sync when re-added; the 1.5 T rule as before.
        (50_000, "LAGGING", 95_000),  # both terms meet: lcu + 1.5 T = entry + T / 2
        (50_001, "LAGGING", 95_001),
        (70_000, "IN_SYNC", 115_000),
    ],
)
def test_re_entry_deadline_against_the_one_and_a_half_t_rule(
    caught_up: int, at_entry: str, shrink_by: int
) -> None:
    m = reentered_follower_model(caught_up)
    assert follower(running_health(m, REENTRY), 2).status == at_entry
    assert follower(running_health(m, caught_up + 30_000), 2).status in ("IN_SYNC", "LAGGING")
    f = follower(running_health(m, shrink_by), 2)
    assert (f.status, f.shrink_by_ms) == ("SHRINK_ELIGIBLE", shrink_by)
    f = follower(running_health(m, shrink_by + 1), 2)
    assert (f.status, f.shrink_by_ms) == ("SHRINK_OVERDUE", shrink_by)


def test_controller_adding_a_follower_to_the_isr_starts_its_entry_time() -> None:
    m = model()
    apply(
        m,
        leader_and_isr(0, isr=(1, 3)),  # follower 2 out of the ISR
        fetch(CAUGHT_UP, follower=2, offset=500, leader_leo=500),
        fetch(CAUGHT_UP, follower=3, offset=600, leader_leo=600),
        fetch(REENTRY - 1_000, follower=2, offset=600, leader_leo=700, hw=600),
        # Same leader epoch: no reset, follower 2 keeps last caught up 10 000.
        leader_and_isr(REENTRY, isr=(1, 2, 3), partition_epoch=1),
    )
    f = follower(running_health(m, 95_000), 2)
    assert (f.last_caught_up_ms, f.status, f.shrink_by_ms) == (
        CAUGHT_UP,
        "SHRINK_ELIGIBLE",
        95_000,
    )
    assert follower(running_health(m, 95_001), 2).status == "SHRINK_OVERDUE"
    # Later ISR changes that keep follower 2 in the ISR do not move its entry time.
    apply(m, leader_and_isr(90_000, isr=(1, 2), partition_epoch=2))
    f = follower(running_health(m, 95_001), 2)
    assert (f.status, f.shrink_by_ms) == ("SHRINK_OVERDUE", 95_000)
    apply(m, isr_change(92_000, (1, 2), (1, 2, 3)))
    f = follower(running_health(m, 95_001), 2)
    assert (f.status, f.shrink_by_ms) == ("SHRINK_OVERDUE", 95_000)


def test_re_entry_counts_from_the_isr_change_or_from_the_monitors_isr() -> None:
    # Log-derived changes whose old ISR disagrees with the monitor's: a follower entered at
    # the change if the change added it, or if the monitor did not hold it in the ISR.
    m = model()
    apply(
        m,
        leader_and_isr(0),
        fetch(CAUGHT_UP, follower=2, offset=500, leader_leo=500),
        fetch(CAUGHT_UP, follower=3, offset=500, leader_leo=500),
        fetch(REENTRY - 1_000, follower=2, offset=600, leader_leo=700, hw=500),
        # The shrink of 2 was not seen (the monitor holds [1, 2, 3]); this change adds it.
        isr_change(REENTRY, (1, 3), (1, 2, 3), epoch=None),
        # the leader keeps serving follower 2, still at 600 (news that it runs: both
        # followers are under test here)
        fetch(94_000, follower=2, offset=600, leader_leo=700, hw=500),
    )
    f = follower(health(m, 95_000), 2)
    assert (f.last_caught_up_ms, f.status, f.shrink_by_ms) == (
        CAUGHT_UP,
        "SHRINK_ELIGIBLE",
        95_000,
    )
    assert follower(health(m, 95_001), 2).status == "SHRINK_OVERDUE"
    apply(
        m,
        isr_change(82_000, (1, 2, 3), (1, 2)),
        # The expansion that re-added 3 was not seen: this change names 3 in its old ISR,
        # the monitor (ISR [1, 2]) sees 3 enter here.
        isr_change(85_000, (1, 2, 3), (1, 3), epoch=None),
    )
    f = follower(health(m, 100_000), 3)
    assert (f.last_caught_up_ms, f.status, f.shrink_by_ms) == (
        CAUGHT_UP,
        "SHRINK_ELIGIBLE",
        100_000,
    )
    assert follower(health(m, 100_001), 3).status == "SHRINK_OVERDUE"
