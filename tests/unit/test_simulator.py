"""The cluster simulator against its own ground truth, as seen through the monitor's model.

Each scenario runs in simulated time; ``tests.simulation.run_monitor`` feeds its records,
parsed as the job parses them, to ``state.ReplicationModel`` and evaluates every second and
right before each shrink and propagation. The assertions compare what the monitor said
with what the simulator recorded as having happened.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

from state import parse_json_line
from state.events import DeadLetter, DeadLetterReason, LeaderAndIsr, Source
from streaming.feeds.simulator import ClusterSimulator, ScenarioError, load_scenario, scenario_names
from streaming.feeds.simulator.partition import RemoteReplica
from tests.simulation import START_MS, MonitorRun, run_monitor

T = 30_000

BEHAVING: dict[str, dict[str, object] | None] = {
    "steady": {"duration_s": 90},
    "slow-follower": None,
    "broker-crash-and-bounce": None,
    "controller-failover": None,
    "isr-churn-storm": None,
    "topic-lifecycle": None,
    "demo": {"duration_s": 150},
}

SEEDS = (7, 29, 37)
"""The ground truth must hold for any seed: a few, each making different timings."""

_runs: dict[tuple[str, tuple[tuple[str, object], ...], int], MonitorRun] = {}


def monitored(name: str, overrides: dict[str, object] | None = None, seed: int = 7) -> MonitorRun:
    """Each scenario runs once per test session; the tests only read the result."""
    key = (name, tuple(sorted((overrides or {}).items())), seed)
    if key not in _runs:
        _runs[key] = run_monitor(name, overrides, seed=seed)
    return _runs[key]


def behaving(name: str, seed: int = 7) -> MonitorRun:
    return monitored(name, BEHAVING[name], seed)


every_seed = pytest.mark.parametrize("seed", SEEDS)


# ---------------------------------------------------------------- the leader's rule


def test_remote_replica_follows_the_last_caught_up_rule() -> None:
    """docs/domain.md#caught-up, by hand: caught up at t, or at the previous fetch's time."""
    replica = RemoteReplica(last_fetch_time_ms=1_000, last_fetch_leader_leo=100)
    replica.update_fetch_state(fetch_offset=100, leader_leo=150, now=2_000)
    # o=100 < L=150 but >= the LEO at the previous fetch (100): caught up at 1000
    assert (replica.last_caught_up_ms, replica.last_fetch_leader_leo) == (1_000, 150)
    replica.update_fetch_state(fetch_offset=120, leader_leo=200, now=3_000)
    # 120 < 150: not caught up with what the leader had at 2000
    assert replica.last_caught_up_ms == 1_000
    replica.update_fetch_state(fetch_offset=200, leader_leo=200, now=4_000)
    assert (replica.last_caught_up_ms, replica.log_end_offset) == (4_000, 200)


# ---------------------------------------------------------------- the simulator itself


def first_events(seed: int, count: int = 3_000) -> list[Mapping[str, object]]:
    sim = ClusterSimulator(load_scenario("demo"), seed=seed, start_ms=START_MS)
    return [event.value for event in itertools.islice(sim.events(), count)]


def test_a_seed_determines_the_run() -> None:
    assert first_events(3) == first_events(3)
    assert first_events(3) != first_events(4)


def test_events_come_in_time_order_with_contract_keys() -> None:
    sim = ClusterSimulator(load_scenario("topic-lifecycle"), seed=1, start_ms=START_MS)
    previous = START_MS
    for event in sim.events():
        assert event.ts >= previous
        previous = event.ts
        if "topic" in event.value and "partition" in event.value:
            assert event.key == f"{event.value['topic']}:{event.value['partition']}"
        else:
            assert event.key.isdigit()


@pytest.mark.parametrize("name", scenario_names())
def test_every_shipped_scenario_loads(name: str) -> None:
    scenario = load_scenario(name)
    assert scenario.name == name
    assert scenario.description


def test_overrides_scale_a_scenario() -> None:
    scenario = load_scenario(
        "large-cluster", {"cluster.brokers": 30, "topics.0.count": 7, "duration_s": 5}
    )
    assert (scenario.cluster.brokers, scenario.topics[0].count, scenario.duration_s) == (30, 7, 5)
    sim = ClusterSimulator(scenario, seed=1, start_ms=START_MS)
    list(sim.events())
    assert len(sim.partitions) == 7 * 100


def test_the_admin_poll_interval_is_read_under_its_older_name_too() -> None:
    # scenarios written before ZooKeeper mode's polls named it after KRaft's reports
    older = load_scenario("steady", {"cluster.kraft_progress_interval_ms": 2_500})
    newer = load_scenario("steady", {"cluster.admin_poll_interval_ms": 2_500})
    assert older.cluster.admin_poll_interval_ms == newer.cluster.admin_poll_interval_ms == 2_500
    assert load_scenario("steady").cluster.admin_poll_interval_ms == 1_000


def test_scenario_problems_are_reported_with_where_and_why() -> None:
    with pytest.raises(ScenarioError, match=r"no such scenario \(known: .*slow-follower"):
        load_scenario("no-such-scenario")
    with pytest.raises(ScenarioError, match=r"cluster\.brokers: Input should be greater than 0"):
        load_scenario("steady", {"cluster.brokers": 0})
    with pytest.raises(ScenarioError, match=r"timeline\.0\.broker: no broker 9 \(1\.\.4\)"):
        load_scenario("slow-follower", {"timeline.0.broker": 9})
    with pytest.raises(ScenarioError, match=r"topics\.0: .*lists a broker twice"):
        load_scenario("steady", {"topics.0.replica_assignment": [[1, 1]]})
    with pytest.raises(ScenarioError, match=r"topics\.0: .*one replication factor"):
        load_scenario("steady", {"topics.0.replica_assignment": [[1, 2], [2]]})
    not_an_index = r"topics\.5\.partitions: '5' is not an index of a 2-item list"
    with pytest.raises(ScenarioError, match=not_an_index):
        load_scenario("slow-follower", {"topics.5.partitions": 3})


# ---------------------------------------------------------------- ground truth, all scenarios


@every_seed
@pytest.mark.parametrize("name", BEHAVING)
def test_every_shrink_was_predicted_and_came_by_the_deadline(name: str, seed: int) -> None:
    run = monitored(name, BEHAVING.get(name), seed)
    for shrink in run.sim.truth.of("isr_shrink"):
        key = (shrink["topic"], shrink["partition"], shrink["follower"])
        reported = run.before_shrink[(shrink["ts"], key)]
        lag_max = shrink["lag_time_max_ms"]
        # the monitor tracked the leader's last_caught_up exactly and called it eligible
        assert reported.last_caught_up_ms == shrink["last_caught_up_ms"]
        assert reported.status == "SHRINK_ELIGIBLE"
        # the deadline the monitor reported held: Kafka shrank by then (its exact value
        # is checked by hand in test_one_stalled_follower_by_hand)
        assert shrink["ts"] <= reported.shrink_by_ms
        # Kafka: removed once out of sync (lag > T), at the latest by its shrink deadline
        assert shrink["last_caught_up_ms"] + lag_max < shrink["ts"] <= shrink["deadline_ms"]
        # and it was reported SHRINK_ELIGIBLE strictly before, at a periodic evaluation,
        # unless Kafka acted within the evaluation period of the follower crossing T
        first = run.first("SHRINK_ELIGIBLE", key)
        crossed = shrink["last_caught_up_ms"] + lag_max
        assert (first is not None and first < shrink["ts"]) or shrink["ts"] - crossed <= 1_000


def one_stalled_follower(tmp_path: Path, *, stuck_leader: bool) -> str:
    """One partition on brokers 1 (leader), 2 and 3, T = 10,000 ms, nothing produced
    until 12 s; then 10 records/s, and broker 2 stops fetching (a 100 s stall). With a
    round trip of 0 and nothing to read, the leader holds each fetch
    replica.fetch.wait.max.ms = 500 ms, so broker 2 fetches at 0, 500, ..., 11,500 ms,
    each time at the leader's log end: its last caught-up time is 11,500 ms. Broker 3
    keeps fetching, which shows the monitor the leader's log end moving on."""
    timeline: list[dict[str, object]] = [
        {"at_s": 12, "action": "slow_follower", "broker": 2, "fetch_delay_ms": 100_000},
        {"at_s": 12, "action": "produce_rate", "topic": "t", "rate": 10},
    ]
    if stuck_leader:  # its ISR updates fail: it never shrinks
        timeline.append({"at_s": 0, "action": "stuck_leader", "broker": 1})
    scenario = {
        "description": "one follower stalls at 12 s",
        "duration_s": 30,
        "cluster": {"brokers": 3, "replica_lag_time_max_ms": 10_000},
        "fetch": {"round_trip_ms": [0, 0]},
        "topics": [
            {"name": "t", "replica_assignment": [[1, 2, 3]], "produce_rate": 0},
        ],
        "timeline": timeline,
    }
    path = tmp_path / "one-stalled-follower.yaml"
    path.write_text(yaml.safe_dump(scenario), encoding="utf-8")
    return str(path)


# By hand, from Kafka's rule (docs/domain.md#shrink-rule), ms after the start; T = 10,000
# and the monitor evaluates every 1,000 ms:
#   last caught up  L = 11,500 (one_stalled_follower)
#   LAGGING         lag time > warn_ratio x T = 0.5 x 10,000 = 5,000: now > 16,500;
#                   first evaluation after it: 17,000
#   out of sync     now - L > T: now > 11,500 + 10,000 = 21,500; first evaluation: 22,000
#   shrink deadline the isr-expiration task runs every T/2 = 5,000, so the first run past
#                   21,500 comes by 21,500 + 5,000 = 26,500 = L + 1.5 T
#   overdue         a leader that has not shrunk by 26,500; first evaluation: 27,000
ONE_STALLED_FOLLOWER = {
    "last_caught_up_ms": 11_500,
    "first_lagging_ms": 17_000,
    "first_eligible_ms": 22_000,
    "out_of_sync_after_ms": 21_500,
    "shrink_by_ms": 26_500,
    "first_overdue_ms": 27_000,
}


@every_seed
def test_one_stalled_follower_by_hand(tmp_path: Path, seed: int) -> None:
    hand = ONE_STALLED_FOLLOWER
    run = run_monitor(one_stalled_follower(tmp_path, stuck_leader=False), seed=seed)
    key = ("t", 0, 2)
    ((ts, follower), reported), *others = run.before_shrink.items()
    assert (follower, others) == (key, [])
    assert reported.last_caught_up_ms == START_MS + hand["last_caught_up_ms"]
    assert reported.shrink_by_ms == START_MS + hand["shrink_by_ms"]
    assert run.first("LAGGING", key) == START_MS + hand["first_lagging_ms"]
    assert run.first("SHRINK_ELIGIBLE", key) == START_MS + hand["first_eligible_ms"]
    # Kafka shrank at an isr-expiration run (its phase is the seed's) between the two
    assert hand["out_of_sync_after_ms"] < ts - START_MS <= hand["shrink_by_ms"]
    assert run.first("SHRINK_OVERDUE", key) is None


def test_one_stalled_follower_under_a_stuck_leader_by_hand(tmp_path: Path) -> None:
    hand = ONE_STALLED_FOLLOWER
    run = run_monitor(one_stalled_follower(tmp_path, stuck_leader=True))
    key = ("t", 0, 2)
    assert run.sim.truth.count("isr_shrink") == 0
    assert run.sim.truth.count("shrink_failed") > 0
    assert run.first("SHRINK_ELIGIBLE", key) == START_MS + hand["first_eligible_ms"]
    assert run.first("SHRINK_OVERDUE", key) == START_MS + hand["first_overdue_ms"]


@every_seed
@pytest.mark.parametrize("name", BEHAVING)
def test_no_overdue_report_when_the_cluster_behaves(name: str, seed: int) -> None:
    """One exception, inherent in the rules (docs/domain.md): a broker that died but whose
    session has not expired yet is still live to the controller (and the monitor), and a dead broker
    cannot take UpdateMetadata, so a change made meanwhile leaves its cache stale until
    the controller notices (at most the session timeout). Every other cache must be on
    time."""
    run = monitored(name, BEHAVING.get(name), seed)
    assert run.statuses["SHRINK_OVERDUE"] == 0
    for ts, tp, stale in run.stale_overdue:
        assert stale, (ts, tp)
        assert all(run.down_at(broker, ts) for broker in stale), (ts, tp, stale)
    assert run.statuses["IN_SYNC"] > 0


@every_seed
@pytest.mark.parametrize("name", [*BEHAVING, "stuck-leader", "slow-controller"])
def test_every_propagation_falls_inside_the_predicted_blackout_window(name: str, seed: int) -> None:
    """The leader's window just before its task fired: the latest bound always holds; the
    earliest once the monitor has seen that broker propagate.

    Before that, the monitor assumes p = a (docs/domain.md#decision-unseen-propagation),
    conservative for the latest bound; a broker whose real last propagation is over 60 s
    old then propagates at its next tick, earlier than the ``c + 5 s`` the assumption gives.
    """
    run = monitored(name, BEHAVING.get(name), seed)
    seen_propagating: set[int] = set()
    for propagation in run.sim.truth.of("propagation"):
        broker = propagation["broker"]
        window = run.window_before_propagation[(propagation["ts"], broker)]
        assert window is not None  # the monitor knew the leader had changes pending
        assert propagation["ts"] <= window.latest_ms
        if broker in seen_propagating:
            assert window.earliest_ms <= propagation["ts"]
        seen_propagating.add(broker)
        for change in propagation["changes"]:
            key = (propagation["ts"], broker, change["topic"], change["partition"])
            metadata = run.before_propagation[key]
            # stale caches show that window (consistent ones: the ISR came back, or a
            # controller decision already carried the change)
            if metadata.state != "CONSISTENT":
                assert metadata.state == "STALE_EXPECTED"
                assert (metadata.blackout_earliest_ms, metadata.blackout_latest_ms) == (
                    window.earliest_ms,
                    window.latest_ms,
                )
    if run.sim.truth.count("isr_shrink") or run.sim.truth.count("isr_expand"):
        assert seen_propagating


@every_seed
@pytest.mark.parametrize("name", BEHAVING)
def test_final_leaders_and_isrs_match_the_cluster(name: str, seed: int) -> None:
    run = monitored(name, BEHAVING.get(name), seed)
    reported = {(r.topic, r.partition): (r.leader, r.isr) for r in run.final}
    actual = {tp: (p.leader, p.isr) for tp, p in run.sim.partitions.items()}
    assert reported == actual


@every_seed
@pytest.mark.parametrize("name", BEHAVING)
def test_only_fenced_events_are_rejected(name: str, seed: int) -> None:
    run = monitored(name, BEHAVING.get(name), seed)
    zombies = run.sim.truth.count("zombie_event")
    assert [reason for _, reason in run.rejected] == [
        DeadLetterReason.STALE_CONTROLLER_EPOCH
    ] * zombies


# ---------------------------------------------------------------- each scenario's story


def followers_of(run: MonitorRun, broker: int, leader: int | None = None) -> set[tuple[str, int]]:
    """Partitions where ``broker`` follows (``leader``, if given), from the assignment."""
    return {
        tp
        for tp, p in run.sim.partitions.items()
        if broker in p.replicas
        and p.replicas[0] != broker
        and (leader is None or p.replicas[0] == leader)
    }


@every_seed
def test_slow_follower_is_dropped_everywhere_it_follows_and_comes_back(seed: int) -> None:
    run = behaving("slow-follower", seed)
    shrinks = list(run.sim.truth.of("isr_shrink"))
    assert {s["follower"] for s in shrinks} == {3}
    assert {(s["topic"], s["partition"]) for s in shrinks} == followers_of(run, 3)
    # slow from 15 s (at 100 records/s, payments still gets some catch-ups in after that),
    # recovered at 110 s: every shrink is in between
    for shrink in shrinks:
        assert shrink["last_caught_up_ms"] >= START_MS + 14_000
        assert START_MS + 15_000 + T < shrink["ts"] < START_MS + 110_000
    expands = list(run.sim.truth.of("isr_expand"))
    assert sorted((e["topic"], e["partition"]) for e in expands) == sorted(
        (s["topic"], s["partition"]) for s in shrinks
    )
    assert all(e["ts"] > START_MS + 110_000 for e in expands)
    for tp in followers_of(run, 3):
        assert run.first("LAGGING", (*tp, 3)) is not None  # for T/2: every 1 s evaluation sees it
        assert run.first("under_replicated", tp) is not None
    # predicted: unless Kafka shrank within the 1 s between evaluations of crossing T
    assert any(run.first("predicted_under_replicated", tp) for tp in followers_of(run, 3))
    assert not any(r.under_replicated for r in run.final)


def test_a_leader_that_never_shrinks_is_reported_overdue() -> None:
    run = monitored("stuck-leader")
    assert run.sim.truth.count("isr_shrink") == 0
    failed = list(run.sim.truth.of("shrink_failed"))
    assert {(s["leader"], s["follower"]) for s in failed} == {(1, 3)}
    stuck = followers_of(run, 3, leader=1)
    assert stuck
    for tp in stuck:
        deadline = min(s["deadline_ms"] for s in failed if (s["topic"], s["partition"]) == tp)
        first = run.first("SHRINK_OVERDUE", (*tp, 3))
        assert first is not None
        assert deadline < first <= deadline + 1_000  # the first evaluation past 1.5 T
    overdue = {key[1] for key in run.first_seen if key[0] == "SHRINK_OVERDUE"}
    assert overdue == {(*tp, 3) for tp in stuck}


def test_a_slow_controller_makes_metadata_staleness_overdue() -> None:
    run = monitored("slow-controller")
    assert run.metadata_states["STALE_OVERDUE"] > 0
    slack = run.settings.propagation.overdue_slack_ms
    arrivals = list(run.sim.truth.of("update_metadata"))
    for propagation in run.sim.truth.of("propagation"):
        for change in propagation["changes"]:
            tp = (change["topic"], change["partition"])
            key = (propagation["ts"], propagation["broker"], *tp)
            latest = run.before_propagation[key].blackout_latest_ms
            assert latest is not None
            first = run.first("STALE_OVERDUE", tp)
            # the caches got the change only at the last UpdateMetadata arrival (truth), 20 s
            # after the propagation; overdue from the first evaluation past latest + slack
            fixed = max(
                a["ts"]
                for a in arrivals
                if a["ts"] > propagation["ts"]
                and any((m["topic"], m["partition"]) == tp for m in a["partitions"])
            )
            assert fixed - propagation["ts"] >= 20_000
            assert first is not None
            assert propagation["ts"] + slack < first < fixed
            assert latest + slack < first <= latest + slack + 1_000


def test_crashes_make_partitions_offline_and_under_min_isr_then_recover() -> None:
    run = behaving("broker-crash-and-bounce")
    both = {tp for tp, p in run.sim.partitions.items() if set(p.replicas) == {2, 3}}
    assert {("audit", 0), ("audit", 1)} <= both  # placed on exactly brokers 2 and 3
    for tp in both:
        assert run.first("offline", tp) is not None
    for tp, p in run.sim.partitions.items():
        if {2, 3} <= set(p.replicas) and len(p.replicas) == 3:
            assert run.first("under_min_isr", tp) is not None
    assert run.statuses["OFFLINE"] > 0
    changes = list(run.sim.truth.of("broker_change"))
    assert [c["bounced"] for c in changes if c["bounced"]] == [[4]]
    assert not any(r.offline or r.under_replicated for r in run.final)


def test_controller_failover_fences_the_old_controller() -> None:
    run = behaving("controller-failover")
    (zombie,) = run.rejected
    assert isinstance(zombie[0], LeaderAndIsr)
    assert zombie[0].controller_epoch == 2
    epochs = [c["controller_epoch"] for c in run.sim.truth.of("controller_change")]
    assert epochs == [3, 4]


def test_churn_on_one_leader_delays_its_propagation_towards_a_minute() -> None:
    run = behaving("isr-churn-storm")
    shrinks = list(run.sim.truth.of("isr_shrink"))
    assert len(shrinks) >= 15
    assert {(s["leader"], s["follower"]) for s in shrinks} == {(1, 4)}
    waits = [
        p["ts"] - min(c["first_change_ms"] for c in p["changes"])
        for p in run.sim.truth.of("propagation")
        if p["broker"] == 1
    ]
    assert max(waits) > 40_000  # held back by the churn, released by the 60 s rule
    props = [p["ts"] for p in run.sim.truth.of("propagation") if p["broker"] == 1]
    assert all(b - a <= 60_000 + 2_500 for a, b in itertools.pairwise(props))


def test_deleted_topics_leave_the_monitor() -> None:
    run = behaving("topic-lifecycle")
    topics = sorted({r.topic for r in run.final})
    assert topics == ["orders", "signups"]
    assert len([r for r in run.final if r.topic == "signups"]) == 2
    assert all(r.leader_epoch == 0 for r in run.final if r.topic == "signups")


def test_kraft_mode_emits_what_the_metadata_log_and_quorum_collectors_do() -> None:
    """No UpdateMetadata (KRaft has none): each decision is the next metadata log record,
    and a DescribeQuorum report every second says how far each broker has fetched."""
    scenario = load_scenario("slow-follower", {"cluster.propagation": "kraft", "duration_s": 70})
    events = list(ClusterSimulator(scenario, seed=3, start_ms=START_MS).events())
    kinds = Counter(e.event_type for e in events)
    assert kinds["UpdateMetadata"] == 0
    assert kinds["IsrChange"] > 0
    offsets = [e.value["metadata_offset"] for e in events if "metadata_offset" in e.value]
    assert offsets == list(range(len(offsets)))
    for event in events:
        if event.event_type in ("LeaderAndIsr", "IsrChange"):
            assert "metadata_offset" in event.value
    reports = [e.value for e in events if e.event_type == "MetadataLogProgress"]
    assert len(reports) == 70  # one per second of the run (interval 1 000 ms)
    ends: dict[int, int] = {}
    for report in reports:
        assert not isinstance(parse_json_line(Source.CONTROLLER_EVENTS, dict(report)), DeadLetter)
        for replica in report["replicas"]:
            assert replica["log_end_offset"] <= report["high_watermark"]
            assert replica["log_end_offset"] >= ends.get(replica["broker"], 0)
            ends[replica["broker"]] = replica["log_end_offset"]


def test_kraft_mode_has_no_propagation_task_and_stays_within_its_bound() -> None:
    # brokers replay a change within 20-400 ms: evaluate every 50 ms to catch them stale
    run = run_monitor("slow-follower", {"cluster.propagation": "kraft"}, every_ms=50)
    assert run.sim.truth.count("propagation") == 0
    assert run.sim.truth.count("isr_shrink") > 0
    assert run.metadata_states["STALE_EXPECTED"] > 0
    assert run.metadata_states["STALE_OVERDUE"] == 0


# ---------------------------------------------------------------- news of a broker


def a_leader_dies_unseen(tmp_path: Path, mode: str = "zk") -> str:
    """One partition on brokers 1 (leader) and 2, T = 10,000 ms, the controller on broker
    3. Broker 1 dies at 12.5 s; its session (ZooKeeper's, or KRaft's broker session)
    expires 20 s later, so the controller moves the leadership to broker 2 at 32.5 s."""
    scenario = {
        "description": "a leader dies; its session outlives T",
        "duration_s": 40,
        "cluster": {
            "brokers": 3,
            "controller": 3,
            "replica_lag_time_max_ms": 10_000,
            "session_timeout_ms": 20_000,
            "propagation": mode,
        },
        "topics": [{"name": "t", "replica_assignment": [[1, 2]], "produce_rate": 10}],
        "timeline": [{"at_s": 12.5, "action": "crash_broker", "broker": 1}],
    }
    path = tmp_path / "a-leader-dies-unseen.yaml"
    path.write_text(yaml.safe_dump(scenario), encoding="utf-8")
    return str(path)


def test_zookeeper_mode_polls_name_the_brokers_that_answered(tmp_path: Path) -> None:
    """``collect admin`` publishes ``BrokersAnswered`` at every poll of a ZooKeeper-mode
    cluster: a dead broker is listed live until its session expires, and answers nothing
    meanwhile."""
    scenario = load_scenario(a_leader_dies_unseen(tmp_path))
    events = list(ClusterSimulator(scenario, seed=3, start_ms=START_MS).events())
    assert not any(e.event_type == "MetadataLogProgress" for e in events)
    polls = [e.value for e in events if e.event_type == "BrokersAnswered"]
    assert [p["ts"] - START_MS for p in polls] == list(range(1_000, 40_001, 1_000))
    for poll in polls:
        assert not isinstance(parse_json_line(Source.CONTROLLER_EVENTS, dict(poll)), DeadLetter)
        expected = [1, 2, 3] if poll["ts"] - START_MS <= 12_000 else [2, 3]
        assert poll["brokers"] == expected


def test_kraft_mode_quorum_reports_say_when_each_broker_last_caught_up(tmp_path: Path) -> None:
    """DescribeQuorum's ``LastCaughtUpTimestamp`` (KIP-836): a running broker keeps
    fetching the metadata log and is caught up at every report; a dead one's time stays
    where it stopped."""
    scenario = load_scenario(a_leader_dies_unseen(tmp_path, "kraft"))
    events = list(ClusterSimulator(scenario, seed=3, start_ms=START_MS).events())
    assert not any(e.event_type == "BrokersAnswered" for e in events)
    reports = [e.value for e in events if e.event_type == "MetadataLogProgress"]
    assert len(reports) == 40
    for report in reports:
        caught_up = {r["broker"]: r["last_caught_up_ms"] - START_MS for r in report["replicas"]}
        at = report["ts"] - START_MS
        if at <= 12_000:
            assert caught_up == {1: at, 2: at, 3: at}
        else:
            assert caught_up[1] == 12_000  # its last report before it died at 12,500
        assert caught_up[3] == at  # the controller, running all along


# By hand (docs/domain.md#silent-leader), ms after the start; T = 10,000, one poll a
# second, the monitor evaluates every 1,000 ms:
#   broker 1's last news            12,000 (it dies at 12,500): the last poll it answered
#                                   (zk), its last catch-up with the metadata log (kraft)
#   its leader silent               2 (now - 12,000) > 10,000: now > 17,000; first
#                                   evaluation after it: 18,000
#   the follower's lag time         past T from about 22,500, while its leader is silent:
#                                   never SHRINK_ELIGIBLE (nobody runs the check)
A_LEADER_DIES_UNSEEN = {"first_silent_ms": 18_000}


@every_seed
@pytest.mark.parametrize("mode", ["zk", "kraft"])
def test_a_dead_leader_is_found_silent(tmp_path: Path, mode: str, seed: int) -> None:
    run = run_monitor(a_leader_dies_unseen(tmp_path, mode), seed=seed)
    assert (
        run.first("leader_silent", ("t", 0)) == START_MS + A_LEADER_DIES_UNSEEN["first_silent_ms"]
    )
    assert run.first("LAGGING", ("t", 0, 2)) is not None
    assert run.first("SHRINK_ELIGIBLE", ("t", 0, 2)) is None
    assert run.sim.truth.count("isr_shrink") == 0
    (final,) = run.final
    assert (final.leader, final.isr) == (2, [2])
