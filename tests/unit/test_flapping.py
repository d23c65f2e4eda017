"""Flapping followers (state/flapping.py): hand-computed histories and the simulator's storm."""

from __future__ import annotations

from state.flapping import FlapHistory
from tests.unit.test_causes_simulated import simulate_model

WINDOW = 600_000


def bounce(history: FlapHistory, removed_at: int, added_at: int, broker: int = 4) -> None:
    history.record("orders", 0, 1, [broker], [], removed_at)
    history.record("orders", 0, 1, [], [broker], added_at)


def test_one_clean_bounce_is_no_flap() -> None:
    history = FlapHistory()
    bounce(history, 10_000, 15_000)
    assert history.recent(20_000, WINDOW) == []  # one removal: not even a candidate


def test_three_removals_each_re_added_within_the_window_flap_with_their_period() -> None:
    history = FlapHistory()
    for start in (0, 40_000, 100_000):
        bounce(history, start, start + 5_000)
    [flap] = history.recent(110_000, WINDOW)
    assert (flap.topic, flap.partition, flap.broker, flap.leader) == ("orders", 0, 4, 1)
    assert (flap.shrinks, flap.expands, flap.last_shrink_ms) == (3, 3, 100_000)
    assert flap.period_ms == 50_000  # (100 000 - 0) / 2
    assert flap.flapping(3)
    assert not flap.flapping(4)


def test_two_removals_are_reported_but_not_flapping() -> None:
    history = FlapHistory()
    bounce(history, 0, 5_000)
    bounce(history, 30_000, 35_000)
    [flap] = history.recent(40_000, WINDOW)
    assert (flap.shrinks, flap.period_ms, flap.flapping(3)) == (2, 30_000, False)


def test_removals_without_re_adds_are_not_flapping() -> None:
    # out, then a controller removal of a replica already out: never re-added in between
    history = FlapHistory()
    for ts in (0, 10_000, 20_000):
        history.record("orders", 0, 1, [4], [], ts)
    [flap] = history.recent(30_000, WINDOW)
    assert (flap.shrinks, flap.expands, flap.flapping(3)) == (3, 0, False)


def test_the_window_forgets_old_removals_at_its_boundary() -> None:
    history = FlapHistory()
    for start in (0, 40_000, 100_000):
        bounce(history, start, start + 5_000)
    # at 600 000 the removal at 0 is exactly window old: still counted
    assert history.recent(WINDOW, WINDOW)[0].shrinks == 3
    # 1 ms later it is out, and so is its re-add at 5 000 only after 605 000
    [flap] = history.recent(WINDOW + 1, WINDOW)
    assert (flap.shrinks, flap.expands, flap.period_ms) == (2, 3, 60_000)
    assert history.recent(WINDOW + 100_001, WINDOW) == []  # every removal gone: forgotten


def test_the_churn_storm_flaps_broker_4_under_leader_1_every_four_and_a_half_seconds() -> None:
    # isr-churn-storm: from 10 s, every 4.5 s broker 4 cannot fetch from broker 1 for 3.5 s;
    # broker 1 (T = 2 s) removes it once its lag passes T, at an isr-expiration run (every
    # T / 2 = 1 s), and re-adds it when it catches up: one removal per 4.5 s cycle.
    model, now = simulate_model("isr-churn-storm", 60)
    flaps = model.flaps.recent(now, WINDOW)
    assert flaps
    assert {(f.broker, f.leader) for f in flaps} == {(4, 1)}
    for flap in flaps:
        assert flap.flapping(3)
        assert 3_500 <= flap.period_ms <= 5_500  # 4.5 s, give or take one expiration run


def test_a_crash_and_a_bounce_flap_nothing() -> None:
    # broker-crash-and-bounce: brokers 2 and 3 crash and return, broker 4 bounces at 110 s:
    # each replica leaves and rejoins an ISR once
    model, now = simulate_model("broker-crash-and-bounce", 170)
    assert [f for f in model.flaps.recent(now, WINDOW) if f.flapping(3)] == []
