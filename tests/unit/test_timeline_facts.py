"""The timeline's facts on small hand-made inputs, every figure computed by hand.

The capture and the health records here are SYNTHETIC: built in code, in the shape the
simulator and the job write, to make the arithmetic easy to follow. The facts against a
real run of the simulator are in test_timeline_ground_truth.py.

One partition ``t-0``, replicas 1, 2, 3, leader 1, T = 10 s (warn ratio 0.5), evaluated
every second. Follower 2 is last caught up at 1 000 ms and falls behind; follower 3 keeps
up. Kafka's rule (state/shrink_rule.py): LAGGING once lag > 5 s (first evaluation 7 000),
SHRINK_ELIGIBLE once lag > 10 s (first evaluation 12 000), deadline 1 000 + 1.5 T = 16 000.
Leader 1 removes follower 2 at 13 000 (1 s after the prediction). Its propagation window
(no earlier propagation of broker 1 seen, so p = a = 13 000): earliest min(13 000 + 5 000,
13 000 + 60 000) = 18 000, latest 18 000 + 2 500 = 20 500. The last broker's cache takes the
change at 18 650. Follower 2 catches up and is added back at 25 000.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from state import Cause, CauseKind, HealthRecord
from state.settings import RuleSettings
from streaming.tools.timeline.assemble import TimelineRange, assemble
from streaming.tools.timeline.builder import TimelineBuilder
from streaming.tools.timeline.facts import IsrChange, StatusSpan, TimelineFilter
from streaming.tools.timeline.health_records import HealthInput
from tests.unit.builders import partition_health

T = 10_000
CONF = Path(__file__).resolve().parents[2] / "conf"
B = 1_700_000_000_000  # conf/samples/incident.jsonl starts here
SETTINGS = RuleSettings(replica_lag_time_max_ms=T)


def controller(ts: int, kind: str, **fields: Any) -> str:
    value = {"ts": ts, "type": kind, "controller_id": 1, "controller_epoch": 1, **fields}
    return json.dumps({"source": "controller-events", "value": value})


def fetch(ts: int, follower: int, offset: int, leo: int) -> str:
    # the high watermark: held back at 100 by follower 2 until the leader removes it
    hw = 100 if 1_000 < ts < 13_000 else leo
    value = {
        "ts": ts,
        "topic": "t",
        "partition": 0,
        "leader": 1,
        "follower": follower,
        "leader_epoch": 0,
        "fetch_offset": offset,
        "leader_leo": leo,
        "high_watermark": hw,
    }
    return json.dumps({"source": "fetch-responses", "value": value})


def metadata(ts: int, broker: int, isr: list[int]) -> str:
    state = {
        "topic": "t",
        "partition": 0,
        "leader": 1,
        "leader_epoch": 0,
        "isr": isr,
        "replicas": [1, 2, 3],
        "offline_replicas": [],
    }
    return controller(
        ts, "UpdateMetadata", broker=broker, live_brokers=[1, 2, 3], partitions=[state]
    )


def capture() -> list[str]:
    lines = [
        controller(0, "BrokerChange", live=[{"id": b, "epoch": 10 + b} for b in (1, 2, 3)]),
        controller(0, "BrokerConfig", broker=1, replica_lag_time_max_ms=T),
        controller(
            0,
            "LeaderAndIsr",
            topic="t",
            partition=0,
            leader=1,
            leader_epoch=0,
            isr=[1, 2, 3],
            replicas=[1, 2, 3],
            partition_epoch=0,
        ),
        *(metadata(10, b, [1, 2, 3]) for b in (1, 2, 3)),
    ]
    leo = 0
    for ts in range(1_000, 30_001, 500):
        leo += 100
        lines.append(fetch(ts, 3, leo, leo))  # follower 3: always at the leader's LEO
        if ts == 1_000:
            lines.append(fetch(ts, 2, leo, leo))  # caught up at 1 000
        elif ts < 25_000:
            lines.append(fetch(ts, 2, 100, leo))  # stuck at offset 100
        else:
            lines.append(fetch(ts, 2, leo, leo))  # caught up again
        if ts == 13_000:
            lines.append(
                controller(
                    ts,
                    "IsrChange",
                    topic="t",
                    partition=0,
                    leader=1,
                    old_isr=[1, 2, 3],
                    new_isr=[1, 3],
                    leader_epoch=0,
                    partition_epoch=1,
                )
            )
        if ts == 18_500:
            lines.append(
                controller(
                    ts,
                    "IsrChangePropagation",
                    broker=1,
                    partitions=[{"topic": "t", "partition": 0}],
                )
            )
            lines += [
                metadata(18_600, 1, [1, 3]),
                metadata(18_600, 2, [1, 3]),
                metadata(18_650, 3, [1, 3]),
            ]
        if ts == 25_000:
            lines.append(
                controller(
                    ts,
                    "IsrChange",
                    topic="t",
                    partition=0,
                    leader=1,
                    old_isr=[1, 3],
                    new_isr=[1, 3, 2],
                    leader_epoch=0,
                    partition_epoch=2,
                )
            )
    return lines


@pytest.fixture(scope="module")
def from_capture() -> Any:
    return assemble(SETTINGS, capture=capture())


def test_capture_follower_falls_behind_is_predicted_then_removed(from_capture: Any) -> None:
    timeline = from_capture
    (episode,) = timeline.episodes
    assert episode.key == ("t", 0, 2)
    assert episode.behind_since_ms == 1_000
    assert episode.lag_time_max_ms == T
    assert episode.first_lagging_ms == 7_000  # lag 6 s > 5 s; at 6 000 it is exactly 5 s
    assert episode.predicted_ms == 12_000  # lag 11 s > T; at 11 000 it is exactly T
    assert (episode.eligible_from_ms, episode.deadline_ms) == (11_000, 16_000)
    assert episode.removed_ms == 13_000
    assert episode.rejoined_ms == 25_000
    assert episode.end_ms == 25_000
    (shrink,) = timeline.shrinks
    assert (shrink.ts, shrink.follower, shrink.leader, shrink.by_controller) == (
        13_000,
        2,
        1,
        False,
    )
    assert shrink.exact
    assert shrink.lead_ms == 1_000
    assert shrink.deadline_ms == 16_000
    assert shrink.late_by_ms == 0
    assert timeline.overdue == []


def test_capture_status_spans_of_the_lagging_follower(from_capture: Any) -> None:
    """From the first evaluation (0, right after the BrokerChange) to the last event."""
    spans = [(s.start_ms, s.end_ms, s.status) for s in from_capture.lanes[("t", 0, 2)]]
    assert spans == [
        (0, 7_000, "IN_SYNC"),
        (7_000, 12_000, "LAGGING"),
        (12_000, 13_000, "SHRINK_ELIGIBLE"),
        (13_000, 25_000, "OUT_OF_SYNC"),
        (25_000, 30_000, "IN_SYNC"),
    ]
    assert [s.status for s in from_capture.lanes[("t", 0, 3)]] == ["IN_SYNC"]
    assert (from_capture.start_ms, from_capture.end_ms) == (0, 30_000)


def test_capture_propagation_against_its_window(from_capture: Any) -> None:
    (blackout,) = [b for b in from_capture.blackouts if b.changed_ms == 13_000]
    assert (blackout.earliest_ms, blackout.latest_ms) == (18_000, 20_500)
    assert blackout.observed_ms == 18_650  # the last live broker's cache
    assert blackout.exact
    assert blackout.late_by_ms(2_000, from_capture.end_ms) == 0


def test_capture_under_replicated_period(from_capture: Any) -> None:
    (period,) = from_capture.periods
    assert (period.kind, period.start_ms, period.end_ms) == ("under_replicated", 13_000, 25_000)


def test_capture_range_and_filters() -> None:
    later = assemble(SETTINGS, capture=capture(), within=TimelineRange(14_000, 20_000))
    assert (later.start_ms, later.end_ms) == (14_000, 20_000)
    assert later.shrinks == []  # at 13 000, before the range
    assert later.lanes[("t", 0, 2)][0].start_ms == 14_000
    assert [b.observed_ms for b in later.blackouts] == [18_650]
    only_3 = assemble(SETTINGS, capture=capture(), where=TimelineFilter(brokers=frozenset({3})))
    assert list(only_3.lanes) == [("t", 0, 3)]
    assert only_3.shrinks == []
    assert only_3.episodes == []
    other = assemble(SETTINGS, capture=capture(), where=TimelineFilter(topics=frozenset({"u"})))
    assert other.lanes == {}
    assert other.periods == []


# ---------------------------------------------------------------- health records alone


def record_json(now: int, isr: list[int], status: str, **extra: Any) -> dict[str, Any]:
    """A health record of t-0 as the job writes it; follower 2 is described by ``extra``
    (it last caught up at 1 000), follower 3 is in sync."""
    behind = status != "IN_SYNC"
    follower = {
        "broker": 2,
        "in_isr": 2 in isr,
        "fetch_offset": 100 if behind else 500,
        "last_caught_up_ms": 1_000 if behind else now,
        "lag_time_ms": now - 1_000 if behind else 0,
        "lag_time_unknown": None,
        "lag_messages": 400 if behind else 0,
        "status": status,
        "cause": None,
        **extra.pop("follower", {}),
    }
    in_sync = {
        "broker": 3,
        "in_isr": True,
        "fetch_offset": 500,
        "last_caught_up_ms": now,
        "lag_time_ms": 0,
        "lag_time_unknown": None,
        "lag_messages": 0,
        "status": "IN_SYNC",
        "cause": None,
    }
    return {
        "topic": "t",
        "partition": 0,
        "as_of_ms": now,
        "leader": 1,
        "leader_epoch": 0,
        "replicas": [1, 2, 3],
        "isr": isr,
        "min_insync_replicas": 1,
        "high_watermark": 100 if 2 in isr and behind else 500,
        "leader_leo": 500,
        "under_replicated": len(isr) < 3,
        "under_min_isr": False,
        "at_min_isr": False,
        "offline": False,
        "predicted_under_replicated": status in ("SHRINK_ELIGIBLE", "SHRINK_OVERDUE"),
        "followers": [follower, in_sync],
        "metadata": extra.pop(
            "metadata",
            {
                "stale_brokers": [],
                "state": "CONSISTENT",
                "blackout_earliest_ms": None,
                "blackout_latest_ms": None,
            },
        ),
        "cause": None,
        **extra,
    }


def record(now: int, isr: list[int], status: str, **extra: Any) -> HealthRecord:
    return msgspec.convert(record_json(now, isr, status, **extra), HealthRecord)


SLOW = Cause(CauseKind.FETCHER_FROM_LEADER, 2, "broker 2 fetches slowly")
SLOW_JSON = msgspec.to_builtins(SLOW)


def health_lines() -> list[str]:
    stale = {
        "stale_brokers": [1, 2, 3],
        "state": "STALE_EXPECTED",
        "blackout_earliest_ms": 18_000,
        "blackout_latest_ms": 20_500,
    }
    slow = {"cause": SLOW_JSON}
    records = [
        record_json(5_000, [1, 2, 3], "IN_SYNC"),
        record_json(7_000, [1, 2, 3], "LAGGING", follower=slow, cause=SLOW_JSON),
        record_json(
            12_000,
            [1, 2, 3],
            "SHRINK_ELIGIBLE",
            follower={"shrink_by_ms": 16_000, **slow},
            cause=SLOW_JSON,
        ),
        record_json(14_000, [1, 3], "OUT_OF_SYNC", follower=slow, metadata=stale, cause=SLOW_JSON),
        record_json(19_000, [1, 3], "OUT_OF_SYNC", follower=slow, cause=SLOW_JSON),
        record_json(30_000, [1, 3, 2], "IN_SYNC"),
    ]
    no_time = {**records[0], "as_of_ms": "5000"}  # a time that is not a number: skipped
    return [json.dumps(r) for r in [*records, no_time]] + ["not json", json.dumps({"topic": "t"})]


def test_health_records_alone_infer_changes_at_the_first_record_showing_them() -> None:
    reader = HealthInput()
    records = list(reader.from_lines(health_lines()))
    assert reader.records == 6
    assert reader.skipped == {"invalid_json": 1, "not_a_health_record": 2}
    timeline = TimelineBuilder(30_000, 2_000).add_all(records).finish()
    assert (timeline.start_ms, timeline.end_ms) == (5_000, 30_000)
    (shrink,) = timeline.shrinks
    assert (shrink.ts, shrink.exact, shrink.by_controller) == (14_000, False, None)
    assert shrink.predicted_ms == 12_000
    assert shrink.lead_ms == 2_000
    assert shrink.deadline_ms == 16_000
    (episode,) = timeline.episodes
    # T read back from the deadline: (16 000 - 1 000) / 1.5
    assert episode.lag_time_max_ms == T
    assert (episode.behind_since_ms, episode.first_lagging_ms) == (1_000, 7_000)
    assert (episode.removed_ms, episode.rejoined_ms, episode.end_ms) == (14_000, 30_000, 30_000)
    assert episode.cause == SLOW
    (blackout,) = timeline.blackouts
    assert (blackout.changed_ms, blackout.observed_ms, blackout.exact) == (14_000, 19_000, False)
    assert (blackout.earliest_ms, blackout.latest_ms) == (18_000, 20_500)
    (period,) = timeline.periods
    assert (period.start_ms, period.end_ms, period.cause) == (14_000, 30_000, SLOW)
    assert [c.added for c in timeline.isr_changes] == [(), (2,)]


def test_health_records_without_causes_are_fine() -> None:
    """Records of a release that wrote no causes (nor lag_time_unknown, nor
    min_insync_replicas) still load."""
    lines = [json.loads(line) for line in health_lines()[:6]]
    for line in lines:
        del line["cause"], line["min_insync_replicas"]
        for follower in line["followers"]:
            del follower["cause"], follower["lag_time_unknown"]
    reader = HealthInput()
    records = list(reader.from_lines(json.dumps(line) for line in lines))
    assert (reader.records, reader.skipped) == (6, {})
    timeline = TimelineBuilder(30_000, 2_000).add_all(records).finish()
    assert timeline.episodes[0].cause is None
    assert timeline.periods[0].cause is None


@pytest.mark.parametrize(("by_controller", "late_by"), [(False, 5_000), (True, 0)])
def test_overdue_shrink_lasts_until_the_removal(by_controller: bool, late_by: int) -> None:
    """A slow leader: SHRINK_OVERDUE seen at 17 000 (deadline 16 000), removed at 21 000:
    overdue by 5 s. Removed by the leader, it acted 5 s past its deadline; by the
    controller (a broker's death), no deadline of the leader's rule applies."""
    builder = TimelineBuilder(T, 2_000, exact_changes=True)
    builder.add(record(12_000, [1, 2, 3], "SHRINK_ELIGIBLE", follower={"shrink_by_ms": 16_000}))
    builder.add(record(17_000, [1, 2, 3], "SHRINK_OVERDUE", follower={"shrink_by_ms": 16_000}))
    builder.add(IsrChange(21_000, "t", 0, 1, (1, 2, 3), (1, 3), by_controller, exact=True))
    builder.add(record(21_000, [1, 3], "OUT_OF_SYNC"))
    timeline = builder.finish(end_ms=40_000)
    (overdue,) = timeline.overdue
    assert (overdue.deadline_ms, overdue.seen_ms, overdue.resolved_ms) == (16_000, 17_000, 21_000)
    assert overdue.resolution == "removed"
    assert overdue.overdue_by_ms(timeline.end_ms) == 5_000
    (shrink,) = timeline.shrinks
    assert shrink.deadline_ms == 16_000
    assert shrink.late_by_ms == late_by
    assert shrink.lead_ms == 9_000
    assert timeline.episodes[0].overdue_ms == 17_000
    assert timeline.episodes[0].worst == "SHRINK_OVERDUE"


def test_still_overdue_at_the_end_counts_to_the_end() -> None:
    builder = TimelineBuilder(T, 2_000)
    builder.add(record(17_000, [1, 2, 3], "SHRINK_OVERDUE", follower={"shrink_by_ms": 16_000}))
    timeline = builder.finish(end_ms=26_000)
    (overdue,) = timeline.overdue
    assert overdue.resolved_ms is None
    assert overdue.overdue_by_ms(timeline.end_ms) == 10_000


def test_capture_and_health_records_together() -> None:
    """The capture's exact changes, the records' causes; no change counted twice."""
    records = list(HealthInput().from_lines(health_lines()))
    timeline = assemble(SETTINGS, capture=capture(), health=records)
    (shrink,) = timeline.shrinks
    assert (shrink.ts, shrink.exact, shrink.by_controller) == (13_000, True, False)
    (episode,) = timeline.episodes
    assert episode.cause == SLOW
    assert episode.removed_ms == 13_000
    (period,) = timeline.periods
    assert (period.start_ms, period.cause) == (13_000, SLOW)
    assert [c.exact for c in timeline.isr_changes] == [True, True]
    assert any("Health records (health records): 6" in note for note in timeline.notes)


# ---------------------------------------------------------------- leaders are no followers


def test_a_follower_that_becomes_the_leader_leaves_its_lane() -> None:
    """t-0: follower 3 out of the ISR under leader 1; at 5 000 broker 3 is elected and
    leads, broker 1 follows. Broker 3's lane and episode end at 5 000 (a leader is no
    follower of itself); broker 1's lane starts there."""
    before = partition_health({2: "IN_SYNC", 3: "OUT_OF_SYNC"}, topic="t", as_of_ms=1_000)
    after = partition_health(
        {1: "IN_SYNC", 2: "IN_SYNC"}, topic="t", as_of_ms=5_000, leader=3, replicas=[1, 2, 3]
    )
    timeline = TimelineBuilder(T, 2_000).add_all([before, after]).finish(end_ms=9_000)
    assert timeline.lanes[("t", 0, 3)] == [StatusSpan(1_000, 5_000, "OUT_OF_SYNC")]
    assert timeline.lanes[("t", 0, 1)] == [StatusSpan(5_000, 9_000, "IN_SYNC")]
    (episode,) = timeline.episodes
    assert (episode.broker, episode.start_ms, episode.end_ms) == (3, 1_000, 5_000)


def test_the_sample_incident_has_no_creation_outage_and_no_leader_as_follower() -> None:
    """conf/samples/incident.jsonl, by hand: its three partitions are created at +0 s and
    elected at +0.1 s (never offline, never under min ISR); orders-0 is shrunk at +45 s
    and orders-1 at +96 s (under-replicated from then); broker 1, a follower of
    payments-0, becomes its leader at +80.05 s (its lane ends by the next evaluation,
    at most 1 s later, and broker 3, the old leader, follows from then)."""
    with (CONF / "samples" / "incident.jsonl").open() as lines:
        timeline = assemble(SETTINGS, capture=list(lines))
    periods = {(p.kind, p.topic, p.partition, p.start_ms) for p in timeline.periods}
    assert periods == {
        ("under_replicated", "orders", 0, B + 45_000),
        ("under_replicated", "orders", 1, B + 96_000),
    }
    assert ("orders", 0, 1) not in timeline.lanes  # broker 1 leads orders-0 throughout
    assert ("orders", 1, 2) not in timeline.lanes  # broker 2 leads orders-1 throughout
    assert B + 80_050 <= timeline.lanes[("payments", 0, 1)][-1].end_ms <= B + 81_050
    assert timeline.lanes[("payments", 0, 3)][0].start_ms >= B + 80_050
