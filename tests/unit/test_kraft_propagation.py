"""KRaft: which brokers have applied an ISR change, and whether it is late, judged on
DescribeQuorum reports (MetadataLogProgress) instead of a fixed guess."""

from __future__ import annotations

from dataclasses import replace

import pytest

from state import ReplicationModel
from state.events import MetadataLogProgress, ReplicaProgress
from state.propagation_window import (
    BlackoutWindow,
    applied_by_ms,
    has_applied,
    kraft_observed_window,
)
from state.settings import PropagationMode, PropagationSettings
from tests.unit.builders import apply, brokers, health, isr_change, leader_and_isr, model

KRAFT = {"propagation": PropagationSettings(mode=PropagationMode.KRAFT)}


@pytest.mark.parametrize(
    ("log_end_offset", "change_offset", "applied"),
    [(151, 150, True), (150, 150, False), (149, 150, False), (0, 0, False), (1, 0, True)],
)
def test_applied_once_the_log_end_offset_is_past_the_record(
    log_end_offset: int, change_offset: int, applied: bool
) -> None:
    assert has_applied(log_end_offset, change_offset) is applied


@pytest.mark.parametrize(
    ("caught_up", "expected"),
    [
        (1_500, 1_500),  # caught up after the change: had it then
        (1_000, 1_000),  # caught up at the very append time
        (999, 5_000),  # caught up before the change: only the report proves it
        (5_001, 5_000),  # a time past the report is not believed
        (None, 5_000),
    ],
)
def test_applied_by(caught_up: int | None, expected: int) -> None:
    assert applied_by_ms(1_000, 5_000, caught_up) == expected


@pytest.mark.parametrize(
    ("behind_ms", "next_report_ms", "window"),
    [
        # change at 10 000, fetch timeout 2 000: due by 12 000
        (None, 20_000, BlackoutWindow(10_000, 20_000)),  # not reported late: until next report
        (11_000, 20_000, BlackoutWindow(10_000, 20_000)),  # behind, but before the deadline
        (12_000, 20_000, BlackoutWindow(10_000, 20_000)),  # at the deadline: not yet late
        (12_001, 20_000, BlackoutWindow(10_000, 12_000)),  # behind after it: late
        (None, 11_000, BlackoutWindow(10_000, 12_000)),  # reports due sooner: the deadline
    ],
)
def test_observed_window(
    behind_ms: int | None, next_report_ms: int, window: BlackoutWindow
) -> None:
    assert kraft_observed_window(10_000, 2_000, behind_ms, next_report_ms) == window


def progress(
    ts: int,
    offsets: dict[int, int],
    caught_up: dict[int, int] | None = None,
    interval_ms: int = 10_000,
) -> MetadataLogProgress:
    caught_up = caught_up or {}
    return MetadataLogProgress(
        ts=ts,
        high_watermark=max(offsets.values()),
        fetch_timeout_ms=2_000,
        interval_ms=interval_ms,
        replicas=tuple(
            ReplicaProgress(broker=b, log_end_offset=o, last_caught_up_ms=caught_up.get(b))
            for b, o in offsets.items()
        ),
    )


def kraft_model() -> ReplicationModel:
    """t-0 on [1, 2, 3], ISR [1, 2, 3] (record 100); every broker past it at 1 000."""
    m = model(**KRAFT)
    apply(
        m,
        brokers(0, (1, 10), (2, 20), (3, 30)),
        replace(leader_and_isr(0), metadata_offset=100),
        progress(1_000, {1: 101, 2: 101, 3: 101}),
    )
    return m


def test_a_change_is_pending_at_every_broker_until_a_report_shows_it_applied() -> None:
    m = kraft_model()
    apply(m, replace(isr_change(5_000, (1, 2, 3), (1, 2)), metadata_offset=150))
    meta = health(m, 6_000).metadata
    # due by 5 000 + 2 000 = 7 000, but the next report is only due at 1 000 + 10 000
    assert (meta.state, meta.stale_brokers) == ("STALE_EXPECTED", [1, 2, 3])
    assert (meta.blackout_earliest_ms, meta.blackout_latest_ms) == (5_000, 11_000)
    assert health(m, 13_000).metadata.state == "STALE_EXPECTED"  # 11 000 + 2 000 slack
    assert health(m, 13_001).metadata.state == "STALE_OVERDUE"  # the reports stopped


def test_a_broker_reported_behind_after_the_deadline_is_overdue() -> None:
    m = kraft_model()
    apply(m, replace(isr_change(5_000, (1, 2, 3), (1, 2)), metadata_offset=150))
    report = apply(
        m, progress(11_000, {1: 151, 2: 151, 3: 140}, caught_up={1: 5_500, 2: 10_990, 3: 4_000})
    )
    assert report.propagation_delays_ms == []
    meta = health(m, 11_000).metadata
    assert meta.stale_brokers == [3]
    # reported behind at 11 000 > 7 000: the window is (5 000, 7 000], overdue after 9 000
    assert (meta.blackout_earliest_ms, meta.blackout_latest_ms) == (5_000, 7_000)
    assert meta.state == "STALE_OVERDUE"
    done = apply(m, progress(21_000, {1: 160, 2: 160, 3: 151}, caught_up={3: 20_500}))
    assert health(m, 21_000).metadata.state == "CONSISTENT"
    assert done.propagation_delays_ms == [15_500]  # broker 3 caught up at 20 500


def test_all_applied_in_one_report_gives_the_latest_catch_up_as_the_delay() -> None:
    m = kraft_model()
    apply(m, replace(isr_change(5_000, (1, 2, 3), (1, 2)), metadata_offset=150))
    done = apply(
        m, progress(6_000, {1: 151, 2: 151, 3: 151}, caught_up={1: 5_100, 2: 5_300, 3: 4_900})
    )
    # 1 and 2 had it at their catch-ups (5 100, 5 300); 3 caught up before the change,
    # so only the report (6 000) proves it: complete at 6 000, 1 000 after the change
    assert done.propagation_delays_ms == [1_000]
    assert health(m, 6_000).metadata.state == "CONSISTENT"


def test_a_fenced_broker_behind_is_not_counted() -> None:
    m = kraft_model()
    apply(
        m,
        replace(isr_change(5_000, (1, 2, 3), (1, 2)), metadata_offset=150),
        brokers(5_100, (1, 10), (2, 20)),
    )
    apply(m, progress(11_000, {1: 151, 2: 151, 3: 140}))
    assert health(m, 11_000).metadata.state == "CONSISTENT"


def test_a_change_without_offset_makes_no_claim_about_the_caches() -> None:
    """Events from collect admin carry no metadata offset: no report can tell whether a
    broker has the change, so no broker is called stale for it."""
    m = kraft_model()
    apply(m, isr_change(5_000, (1, 2, 3), (1, 2)))
    apply(m, progress(11_000, {1: 120, 2: 120, 3: 120}))
    meta = health(m, 11_000).metadata
    assert (meta.state, meta.stale_brokers) == ("CONSISTENT", [])


def test_a_report_older_than_the_change_event_that_shows_it_applied() -> None:
    """Reports and changes come from two collectors: a report taken after the change may
    arrive first; the change is then applied at once where the report says so."""
    m = model(**KRAFT)
    apply(
        m,
        brokers(0, (1, 10), (2, 20)),
        replace(leader_and_isr(0, isr=(1, 2), replicas=(1, 2)), metadata_offset=100),
    )
    apply(m, progress(6_000, {1: 151, 2: 140}))
    apply(m, replace(isr_change(5_000, (1, 2), (1,)), metadata_offset=150))
    assert health(m, 6_000).metadata.stale_brokers == [2]
