"""The timeline's facts against what really happened in a simulated cluster.

Each scenario runs once (shortened to what the assertions need); its records go, as a
capture's lines, through ``isrwatch timeline``'s facts layer, and the facts are compared
with the simulator's ground truth (streaming/feeds/simulator/ground_truth.py): shrinks and
expansions at their exact times, Kafka's deadlines, offline periods, propagations.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from state.settings import RuleSettings
from streaming.feeds.simulator import ClusterSimulator, load_scenario
from streaming.feeds.wire import envelope_line
from streaming.tools.timeline.assemble import assemble
from streaming.tools.timeline.facts import Timeline
from streaming.tools.timeline.words import propagation_verdict

START_MS = 1_700_000_000_000
STEP_MS = 1_000

Run = tuple[Timeline, list[dict[str, Any]]]


def simulated(name: str, overrides: dict[str, object], seed: int = 7) -> Run:
    sim = ClusterSimulator(load_scenario(name, overrides), seed=seed, start_ms=START_MS)
    lines = [envelope_line(record) for record in sim.events()]
    return assemble(RuleSettings(), capture=lines, step_ms=STEP_MS), sim.truth.records


@pytest.fixture(scope="module")
def slow_follower() -> Run:
    return simulated("slow-follower", {"duration_s": 125, "fetch.produce_interval_ms": 500})


@pytest.fixture(scope="module")
def stuck_leader() -> Run:
    return simulated("stuck-leader", {"duration_s": 70, "fetch.produce_interval_ms": 500})


@pytest.fixture(scope="module")
def crash() -> Run:
    return simulated(
        "broker-crash-and-bounce", {"duration_s": 90, "fetch.produce_interval_ms": 500}
    )


def of(truth: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [fact for fact in truth if fact["kind"] == kind]


def test_leader_shrinks_at_their_times_predicted_before_the_deadline(slow_follower: Run) -> None:
    timeline, truth = slow_follower
    shrinks = of(truth, "isr_shrink")
    assert shrinks  # the scenario shrinks broker 3 wherever it follows
    expected = {(s["ts"], s["topic"], s["partition"], s["follower"], s["leader"]) for s in shrinks}
    found = {(s.ts, s.topic, s.partition, s.follower, s.leader) for s in timeline.shrinks}
    assert found == expected
    by_key = {(s.ts, s.topic, s.partition, s.follower): s for s in timeline.shrinks}
    for fact in shrinks:
        shrink = by_key[(fact["ts"], fact["topic"], fact["partition"], fact["follower"])]
        assert shrink.exact
        assert shrink.by_controller is False
        assert shrink.deadline_ms == fact["deadline_ms"]  # the shrink deadline
        assert shrink.late_by_ms == 0
        # predicted at an evaluation after lag passed T, unless Kafka acted within the step
        crossed = fact["last_caught_up_ms"] + fact["lag_time_max_ms"]
        if shrink.predicted_ms is None:
            assert fact["ts"] - crossed <= STEP_MS
        else:
            assert crossed < shrink.predicted_ms <= crossed + STEP_MS
            assert shrink.lead_ms == fact["ts"] - shrink.predicted_ms
    assert timeline.overdue == []


def test_followers_fell_behind_when_they_last_caught_up(slow_follower: Run) -> None:
    timeline, truth = slow_follower
    for fact in of(truth, "isr_shrink"):
        key = (fact["topic"], fact["partition"], fact["follower"])
        (episode,) = [e for e in timeline.episodes if e.key == key]
        assert episode.behind_since_ms == fact["last_caught_up_ms"]
        assert episode.lag_time_max_ms == fact["lag_time_max_ms"]
        assert episode.removed_ms == fact["ts"]
        assert episode.deadline_ms == fact["deadline_ms"]
        # LAGGING is first seen at the first evaluation past warn_ratio x T
        warn = fact["last_caught_up_ms"] + fact["lag_time_max_ms"] // 2
        assert episode.first_lagging_ms is not None
        assert warn < episode.first_lagging_ms <= warn + STEP_MS


def test_expansions_and_under_replicated_periods(slow_follower: Run) -> None:
    timeline, truth = slow_follower
    expands = {
        (e["ts"], e["topic"], e["partition"], e["follower"]) for e in of(truth, "isr_expand")
    }
    added = {(c.ts, c.topic, c.partition, b) for c in timeline.isr_changes for b in c.added}
    assert added == expands
    shrunk = {(s["topic"], s["partition"]): s["ts"] for s in of(truth, "isr_shrink")}
    back = {(e["topic"], e["partition"]): e["ts"] for e in of(truth, "isr_expand")}
    periods = {
        (p.topic, p.partition): (p.start_ms, p.end_ms)
        for p in timeline.periods
        if p.kind == "under_replicated"
    }
    assert periods == {tp: (shrunk[tp], back[tp]) for tp in shrunk}


def test_propagations_end_at_the_last_cache_update_within_their_window(slow_follower: Run) -> None:
    timeline, truth = slow_follower
    arrivals: dict[tuple[str, int], list[int]] = defaultdict(list)
    for update in of(truth, "update_metadata"):
        for state in update["partitions"]:
            arrivals[(state["topic"], state["partition"])].append(update["ts"])
    propagated = {
        (change["topic"], change["partition"], change["first_change_ms"]): p["ts"]
        for p in of(truth, "propagation")
        for change in p["changes"]
    }
    assert propagated
    blackouts = {(b.topic, b.partition, b.changed_ms): b for b in timeline.blackouts}
    for (topic, partition, changed), propagation_ts in propagated.items():
        blackout = blackouts[(topic, partition, changed)]
        assert blackout.exact
        assert blackout.observed_ms is not None
        # the last cache took it from an UpdateMetadata the propagation caused
        assert blackout.observed_ms in arrivals[(topic, partition)]
        assert blackout.observed_ms > propagation_ts
        assert blackout.latest_ms is not None
        assert propagation_ts <= blackout.latest_ms
        assert propagation_verdict(timeline, blackout)[0] in ("within", "early")


def test_a_stuck_leader_leaves_overdue_shrinks_counted_to_the_end(stuck_leader: Run) -> None:
    timeline, truth = stuck_leader
    assert of(truth, "isr_shrink") == []
    assert timeline.shrinks == []
    failed: dict[tuple[str, int, int], int] = {}
    for fact in of(truth, "shrink_failed"):
        key = (fact["topic"], fact["partition"], fact["follower"])
        failed[key] = min(failed.get(key, fact["deadline_ms"]), fact["deadline_ms"])
    assert failed
    overdue = {(o.topic, o.partition, o.follower): o for o in timeline.overdue}
    assert set(overdue) == set(failed)
    for key, deadline in failed.items():
        item = overdue[key]
        assert item.leader == 1
        assert item.deadline_ms == deadline
        assert deadline < item.seen_ms <= deadline + STEP_MS
        assert item.resolved_ms is None
        assert item.overdue_by_ms(timeline.end_ms) == timeline.end_ms - deadline
        (episode,) = [e for e in timeline.episodes if e.key == key]
        assert episode.worst == "SHRINK_OVERDUE"
        assert episode.overdue_ms == item.seen_ms


def test_controller_removals_and_offline_periods_of_a_crash(crash: Run) -> None:
    timeline, truth = crash
    decisions = of(truth, "leader_and_isr")
    # what the controller removed from ISRs, decision after decision of each partition
    last_isr: dict[tuple[str, int], list[int]] = {}
    last_leader: dict[tuple[str, int], int] = {}
    removed: set[tuple[int, str, int, int]] = set()
    leaders_removed: set[tuple[int, str, int, int]] = set()  # the dead broker led it
    offline: dict[tuple[str, int], list[tuple[int, int | None]]] = defaultdict(list)
    for d in decisions:
        tp = (d["topic"], d["partition"])
        before = last_isr.get(tp)
        if before is not None:
            removed |= {(d["ts"], *tp, b) for b in set(before) - set(d["isr"])}
            if last_leader[tp] not in d["isr"]:
                leaders_removed.add((d["ts"], *tp, last_leader[tp]))
        last_isr[tp], last_leader[tp] = d["isr"], d["leader"]
        spans = offline[tp]
        if d["leader"] == -1 and (not spans or spans[-1][1] is not None):
            spans.append((d["ts"], None))
        elif d["leader"] != -1 and spans and spans[-1][1] is None:
            spans[-1] = (spans[-1][0], d["ts"])
    by_controller = {
        (s.ts, s.topic, s.partition, s.follower) for s in timeline.shrinks if s.by_controller
    }
    assert removed
    assert by_controller == removed
    assert all(s.late_by_ms == 0 for s in timeline.shrinks)  # no leader's deadline applies
    # a removed leader was no follower: it had no deadline under the leader's rule
    assert leaders_removed
    for shrink in timeline.shrinks:
        if (shrink.ts, shrink.topic, shrink.partition, shrink.follower) in leaders_removed:
            assert shrink.deadline_ms is None
    expected_offline = {tp: spans for tp, spans in offline.items() if spans}
    assert {("audit", 0), ("audit", 1)} <= set(expected_offline)
    found: dict[tuple[str, int], list[tuple[int, int | None]]] = defaultdict(list)
    for period in timeline.periods:
        if period.kind == "offline":
            found[(period.topic, period.partition)].append((period.start_ms, period.end_ms))
    assert dict(found) == expected_offline
    under_min = {(p.topic, p.partition) for p in timeline.periods if p.kind == "under_min_isr"}
    both = {
        (d["topic"], d["partition"])
        for d in decisions
        if d["reason"] == "topic created" and {2, 3} <= set(d["isr"]) and len(d["isr"]) == 3
    }
    assert both
    assert both <= under_min  # min ISR 2 with two of three replicas gone
