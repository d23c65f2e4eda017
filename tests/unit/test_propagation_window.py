"""docs/domain.md#propagation-window: ISR change propagation and its blackout window."""

from __future__ import annotations

from state import MetadataHealth, ReplicationModel, Shard, shard_of
from state.events import IsrChangePropagation, TopicPartition
from state.propagation_window import BlackoutWindow, zk_blackout_window
from state.settings import PropagationMode, PropagationSettings, RuleSettings
from tests.unit.builders import (
    apply,
    brokers,
    health,
    isr_change,
    leader_and_isr,
    model,
    update_metadata,
)

ZK = PropagationSettings()


def test_quiet_minute_propagates_at_the_next_tick_without_the_5s_wait() -> None:
    # Last propagation at 0, a single change at 100 000: p + 60 000 < a, so d = 60 000
    # and the window starts at a itself.
    assert zk_blackout_window(100_000, 100_000, 0, ZK) == BlackoutWindow(100_000, 102_500)


def test_burst_waits_5s_after_the_latest_change() -> None:
    # Changes at 70 000, 72 000, 74 000; last propagation at 60 000:
    # d = min(74 000 + 5 000, 60 000 + 60 000) = 79 000.
    assert zk_blackout_window(70_000, 74_000, 60_000, ZK) == BlackoutWindow(79_000, 81_500)


def test_long_burst_is_capped_60s_after_the_last_propagation() -> None:
    # Changes every 3 s from 10 000 to 70 000, last propagation at 0:
    # d = min(75 000, 60 000) = 60 000, never past p + 62 500.
    assert zk_blackout_window(10_000, 70_000, 0, ZK) == BlackoutWindow(60_000, 62_500)


def test_unknown_last_propagation_is_taken_as_the_oldest_change() -> None:
    # p = a = 100 000: d = min(105 000, 160 000) = 105 000. (Taking p as 0, or as "long
    # ago", would wrongly predict the quiet-minute case: a window starting at 100 000.)
    assert zk_blackout_window(100_000, 100_000, None, ZK) == BlackoutWindow(105_000, 107_500)
    # Churn: a = 100 000, c = 170 000, p = a: d = min(175 000, 160 000) = 160 000.
    assert zk_blackout_window(100_000, 170_000, None, ZK) == BlackoutWindow(160_000, 162_500)


def test_or_rule_uses_the_earlier_of_the_two_conditions() -> None:
    # c + 5 000 = 45 000 is earlier than p + 60 000 = 100 000.
    assert zk_blackout_window(40_000, 40_000, 40_000, ZK) == BlackoutWindow(45_000, 47_500)


def consistent_model(**settings: object):  # type: ignore[no-untyped-def]
    """Leader 1, ISR [1, 2, 3]; brokers 1-3 live and all caching the ISR."""
    m = model(**settings)
    apply(
        m,
        brokers(0, (1, 1), (2, 1), (3, 1)),
        leader_and_isr(0),
        *(update_metadata(10, b, isr=(1, 2, 3)) for b in (1, 2, 3)),
    )
    return m


def test_stale_caches_inside_and_after_the_window() -> None:
    m = consistent_model()
    apply(m, isr_change(120_000, (1, 2, 3), (1, 2)))
    # Never propagated before: p = a = 120 000, d = 125 000, window (125 000, 127 500];
    # stale is expected up to 127 500 + 2 000 (overdue_slack_ms).
    meta = health(m, 129_500).metadata
    assert meta == MetadataHealth(
        stale_brokers=[1, 2, 3],
        state="STALE_EXPECTED",
        blackout_earliest_ms=125_000,
        blackout_latest_ms=127_500,
    )
    assert health(m, 129_501).metadata.state == "STALE_OVERDUE"


def test_churn_on_another_partition_of_the_same_leader_delays_the_window() -> None:
    m = consistent_model()
    apply(m, leader_and_isr(0, partition=1), update_metadata(10, 2, (1, 2, 3), partition=1))
    apply(m, isr_change(20_000, (1, 2, 3), (1, 2)))
    apply(m, isr_change(23_000, (1, 2, 3), (1, 3), partition=1))
    # Leader 1: a = 20 000, c = 23 000, p = a: d = min(28 000, 80 000) = 28 000.
    assert health(m, 23_000).metadata.blackout_earliest_ms == 28_000
    assert health(m, 23_000, partition=1).metadata.blackout_latest_ms == 30_500


def test_propagation_freezes_the_window_and_update_metadata_ends_staleness() -> None:
    m = consistent_model()
    apply(m, isr_change(20_000, (1, 2, 3), (1, 2)))
    apply(
        m,
        IsrChangePropagation(ts=25_100, broker=1, partitions=(TopicPartition("orders", 0),)),
    )
    report = apply(m, update_metadata(25_300, 1, (1, 2)), update_metadata(25_400, 2, (1, 2)))
    meta = health(m, 25_400).metadata
    assert meta.stale_brokers == [3]
    assert (meta.blackout_earliest_ms, meta.blackout_latest_ms) == (25_000, 27_500)
    assert report.propagation_delays_ms == []
    report = apply(m, update_metadata(25_500, 3, (1, 2)))
    assert health(m, 25_500).metadata == MetadataHealth(
        stale_brokers=[],
        state="CONSISTENT",
        blackout_earliest_ms=None,
        blackout_latest_ms=None,
    )
    assert report.propagation_delays_ms == [5_500]  # 25 500 - 20 000


def test_next_change_after_a_propagation_uses_the_learnt_p() -> None:
    m = consistent_model()
    apply(
        m,
        isr_change(20_000, (1, 2, 3), (1, 2)),
        IsrChangePropagation(ts=25_100, broker=1, partitions=(TopicPartition("orders", 0),)),
        *(update_metadata(25_300, b, (1, 2)) for b in (1, 2, 3)),
        isr_change(100_000, (1, 2), (1, 2, 3)),  # a quiet minute later
    )
    # p = 25 100, a = c = 100 000: p + 60 000 < a, so the window starts at a.
    meta = health(m, 100_000).metadata
    assert (meta.blackout_earliest_ms, meta.blackout_latest_ms) == (100_000, 102_500)


def test_brokers_that_never_cached_the_partition_or_are_dead_do_not_count() -> None:
    m = model()
    apply(
        m,
        brokers(0, (1, 1), (2, 1), (3, 1), (4, 1)),
        leader_and_isr(0),
        update_metadata(10, 1, (1, 2, 3)),
        update_metadata(10, 4, (1, 2, 3)),
        isr_change(20_000, (1, 2, 3), (1, 2)),
    )
    assert health(m, 20_000).metadata.stale_brokers == [1, 4]
    apply(m, brokers(21_000, (1, 1), (2, 1), (3, 1)))  # broker 4 dies
    assert health(m, 21_000).metadata.stale_brokers == [1]


def test_bounced_broker_starts_with_an_empty_cache() -> None:
    m = consistent_model()
    apply(m, isr_change(20_000, (1, 2, 3), (1, 2)), update_metadata(21_000, 1, (1, 2)))
    apply(m, update_metadata(21_000, 2, (1, 2)))
    report = apply(m, brokers(22_000, (1, 1), (2, 1), (3, 2)))  # broker 3: epoch 1 -> 2
    assert report.bounced_brokers == [3]
    assert health(m, 22_000).metadata.state == "CONSISTENT"


def test_controller_change_in_zk_mode_is_sent_with_update_metadata() -> None:
    m = consistent_model()
    apply(m, leader_and_isr(50_000, leader=2, epoch=1, isr=(2, 3)))
    meta = health(m, 52_000).metadata
    assert (meta.state, meta.blackout_earliest_ms, meta.blackout_latest_ms) == (
        "STALE_EXPECTED",
        50_000,
        50_000,
    )
    assert health(m, 52_001).metadata.state == "STALE_OVERDUE"


def test_kraft_mode_window_is_the_change_plus_the_configured_bound() -> None:
    kraft = {
        "propagation": PropagationSettings(
            mode=PropagationMode.KRAFT, kraft_propagation_max_ms=1_000
        )
    }
    m = consistent_model(**kraft)
    apply(m, isr_change(20_000, (1, 2, 3), (1, 2)))
    meta = health(m, 23_000).metadata
    assert (meta.state, meta.blackout_earliest_ms, meta.blackout_latest_ms) == (
        "STALE_EXPECTED",
        20_000,
        21_000,
    )
    assert health(m, 23_001).metadata.state == "STALE_OVERDUE"  # 21 000 + 2 000 slack


def test_deleted_partition_in_update_metadata_leaves_the_cache() -> None:
    m = consistent_model()
    apply(m, isr_change(20_000, (1, 2, 3), (1, 2)))
    apply(m, *(update_metadata(21_000, b, (1, 2)) for b in (1, 2)))
    apply(m, update_metadata(21_000, 3, (1, 2, 3), leader=-2))
    assert health(m, 21_000).metadata.state == "CONSISTENT"


def test_a_change_left_pending_does_not_make_later_changes_overdue() -> None:
    m = consistent_model()
    apply(m, leader_and_isr(0, partition=1), update_metadata(10, 1, (1, 2, 3), partition=1))
    apply(
        m,
        isr_change(1_000, (1, 2, 3), (1, 2)),  # pending at leader 1: window (6 000, 8 500]
        # The controller changes the ISR again and every cache follows it: no propagation
        # event of leader 1 is ever seen for partition 0.
        leader_and_isr(2_000, epoch=0, partition_epoch=1, isr=(1, 3)),
        *(update_metadata(2_100, b, (1, 3)) for b in (1, 2, 3)),
        isr_change(300_000, (1, 2, 3), (1, 2), partition=1),
    )
    # Partition 0's entry expired with its window (8 500 < 300 000), so for partition 1
    # a = c = 300 000 and p unknown: d = 305 000, window (305 000, 307 500].
    meta = health(m, 300_000, partition=1).metadata
    assert meta == MetadataHealth(
        stale_brokers=[1],
        state="STALE_EXPECTED",
        blackout_earliest_ms=305_000,
        blackout_latest_ms=307_500,
    )


def test_expired_pending_change_is_judged_against_its_own_window() -> None:
    m = consistent_model()
    apply(m, leader_and_isr(0, partition=1), update_metadata(10, 1, (1, 2, 3), partition=1))
    # Partition 0 changes at 1 000 and no cache ever takes it; partition 1 changes later.
    apply(
        m, isr_change(1_000, (1, 2, 3), (1, 2)), isr_change(20_000, (1, 2, 3), (1, 3), partition=1)
    )
    meta = health(m, 20_000).metadata
    assert (meta.state, meta.blackout_latest_ms) == ("STALE_OVERDUE", 8_500)


def test_first_broker_change_is_a_baseline_not_new_brokers() -> None:
    m = model()
    apply(
        m,
        leader_and_isr(0),
        *(update_metadata(10, b, isr=(1, 2, 3)) for b in (1, 2, 3)),
        isr_change(1_000, (1, 2, 3), (1, 2)),
        brokers(1_001, (1, 1), (2, 1), (3, 1)),  # the first membership the monitor sees
    )
    meta = health(m, 1_001).metadata
    assert (meta.stale_brokers, meta.state) == ([1, 2, 3], "STALE_EXPECTED")


def test_eviction_for_deletion_is_not_an_observed_propagation() -> None:
    m = consistent_model()
    apply(m, isr_change(1_000, (1, 2, 3), (1, 2)))
    report = apply(m, *(update_metadata(1_500, b, (1, 2, 3), leader=-2) for b in (1, 2, 3)))
    assert report.propagation_delays_ms == []
    assert health(m, 1_500).metadata.state == "CONSISTENT"


def test_churn_in_another_shard_delays_the_window_of_the_same_leader() -> None:
    # orders-0 hashes to shard 0 of 2, orders-4 to shard 1; both are led by broker 1.
    assert (shard_of("orders", 0, 2), shard_of("orders", 4, 2)) == (0, 1)
    shard0 = ReplicationModel(RuleSettings(), Shard(0, 2))
    everything = [
        leader_and_isr(0, partition=0),
        leader_and_isr(0, partition=4),
        update_metadata(10, 2, (1, 2, 3), partition=0),
        isr_change(20_000, (1, 2, 3), (1, 2), partition=0),
        isr_change(23_000, (1, 2, 3), (1, 3), partition=4),  # held by shard 1
    ]
    apply(shard0, *everything)
    assert shard0.partitions() == [TopicPartition("orders", 0)]
    # Leader 1: a = 20 000, c = 23 000 (from the other shard's partition), p = a.
    meta = health(shard0, 23_000).metadata
    assert (meta.blackout_earliest_ms, meta.blackout_latest_ms) == (28_000, 30_500)


def test_the_owning_shard_reports_the_observed_propagation_delay() -> None:
    """A shrink at 1 000 reaches the last cache at 7 000: 6 000 ms, reported once, by the
    shard that owns orders-0 (shard 0 counts the UpdateMetadata events themselves)."""
    owner = shard_of("orders", 0, 4)
    assert owner != 0
    events = [
        brokers(0, (1, 1), (2, 1), (3, 1)),
        leader_and_isr(0),
        *(update_metadata(10, b, isr=(1, 2, 3)) for b in (1, 2, 3)),
        isr_change(1_000, (1, 2, 3), (1, 2)),
        *(update_metadata(ts, b, isr=(1, 2)) for ts, b in ((6_500, 1), (6_800, 2), (7_000, 3))),
    ]
    delays = {}
    for index in range(4):
        report = apply(ReplicationModel(RuleSettings(), Shard(index, 4)), *events)
        delays[index] = report.propagation_delays_ms
    assert delays[owner] == [6_000]
    assert all(found == [] for index, found in delays.items() if index != owner)


def test_a_restarted_leader_counts_the_60s_rule_from_its_registration() -> None:
    # Leader 1 propagated at 0 and re-registered at 100 s; it changes an ISR at 130 s.
    # Counted from the old propagation, p + 60 s = 60 s has long passed: the window would
    # be (130 s, 132.5 s]. A restarted broker's last propagation time is its start, so
    # p = 100 s: the 5 s rule decides, d = min(135 s, 160 s) = 135 s: (135 s, 137.5 s].
    from state.propagation_window import PropagationWindows

    windows = PropagationWindows(PropagationSettings())
    tp = TopicPartition("orders", 0)
    windows.record_propagation(1, (), 0)
    windows.registered(1, 100_000)
    windows.record_isr_change(1, tp, 130_000)
    assert windows.window_of(1) == BlackoutWindow(135_000, 137_500)
    # a registration older than the last propagation seen changes nothing
    windows.registered(1, 50_000)
    assert windows.window_of(1) == BlackoutWindow(135_000, 137_500)
