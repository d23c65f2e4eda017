"""Cause attribution (state/causes.py): each rule on hand-built clusters, boundaries included.

Records are whole (``tests.unit.builders.partition_health``); shapes say how many replicas
each broker follows from each leader (``pairs``: follower, leader, count) and how many
partitions each leader leads with followers (``led``).
"""

from __future__ import annotations

from state import (
    Cause,
    CauseKind,
    ClusterShape,
    HealthRecord,
    MetadataHealth,
    UnhealthyPartitions,
    annotate,
    attribute,
    with_causes,
)
from state.health_record import MetadataStateName, StatusName
from tests.unit.builders import partition_health


def record(
    partition: int,
    leader: int,
    followers: dict[int, StatusName],
    *,
    topic: str = "t",
    isr: tuple[int, ...] | None = None,
    offline: bool = False,
    metadata: MetadataStateName = "CONSISTENT",
    stale: tuple[int, ...] = (),
    silent_since: int | None = None,
) -> HealthRecord:
    return partition_health(
        followers,
        topic=topic,
        partition=partition,
        leader=leader,
        isr=isr if isr is not None else (leader, *followers),
        offline=offline,
        leader_silent_since_ms=silent_since,
        metadata=MetadataHealth(
            stale_brokers=list(stale),
            state=metadata,
            blackout_earliest_ms=None,
            blackout_latest_ms=None,
        ),
    )


def shape(
    pairs: list[list[int]], led: list[list[int]], live: list[int] | None = None
) -> ClusterShape:
    return ClusterShape.from_json({"pairs": pairs, "led": led, "live": live})


def causes(records: list[HealthRecord], cluster: ClusterShape) -> list[tuple[str, int | None]]:
    """(kind, broker) of every lagging follower, in record order."""
    attribution = attribute(UnhealthyPartitions.of(records), cluster)
    return [(c.kind, c.broker) for c in attribution.follower_cause]


# Broker 3 follows 10 partitions: 5 from leader 1, 5 from leader 2 (leaders 1 and 2 lead
# 20 partitions each, so neither looks slow).
TEN = [[3, 1, 5], [3, 2, 5], [4, 1, 15], [4, 2, 15]]
LED = [[1, 20], [2, 20]]


def lagging_on(from_1: int, from_2: int) -> list[HealthRecord]:
    return [record(p, 1, {3: "LAGGING", 4: "IN_SYNC"}) for p in range(from_1)] + [
        record(10 + p, 2, {3: "SHRINK_ELIGIBLE"}) for p in range(from_2)
    ]


def test_behind_on_more_than_half_from_two_leaders_is_the_follower_broker() -> None:
    # 6 of 10 > 5, from leaders 1 and 2
    assert causes(lagging_on(3, 3), shape(TEN, LED)) == [("follower_broker_behind", 3)] * 6
    text = attribute(UnhealthyPartitions.of(lagging_on(3, 3)), shape(TEN, LED)).follower_cause[0]
    assert text.text == "broker 3 is behind on 6 of the 10 partitions it follows, from 2 leaders"


def test_behind_on_exactly_half_is_not_most_then_each_leader_is_judged() -> None:
    # 5 of 10 is not more than half. From leader 1: 3 of 5 > 2.5 and at least 2: the
    # fetcher from leader 1. From leader 2: 2 of 5 is not most: each partition alone.
    got = causes(lagging_on(3, 2), shape(TEN, LED))
    assert got == [("fetcher_from_leader", 3)] * 3 + [("partition_alone", None)] * 2


def test_behind_on_most_but_from_one_leader_is_that_fetcher() -> None:
    # 6 of 10 but all from leader 1 (it follows 6 from 1, 4 from 2): not many leaders
    cluster = shape([[3, 1, 6], [3, 2, 4], [4, 1, 14], [4, 2, 16]], LED)
    assert causes(lagging_on(6, 0), cluster) == [("fetcher_from_leader", 3)] * 6


def test_one_partition_from_a_leader_is_the_partition_alone() -> None:
    # 1 of 1 from leader 1: most, but a single partition is no pattern
    cluster = shape([[3, 1, 1], [3, 2, 9], [4, 1, 19], [4, 2, 11]], LED)
    got = attribute(UnhealthyPartitions.of(lagging_on(1, 0)), cluster).follower_cause
    assert [(c.kind, c.broker) for c in got] == [("partition_alone", None)]
    assert got[0].text == (
        "only t-0 lags on broker 3 (from leader 1): a hot partition or one log, not the brokers"
    )


# Leader 1 leads 5 partitions, followed by brokers 2 and 3; both also follow 20 partitions
# from leader 4, so neither is behind on most of what it follows.
SLOW_LEADER = [[2, 1, 5], [3, 1, 5], [2, 4, 20], [3, 4, 20], [1, 4, 20]]


def test_followers_on_two_brokers_lag_in_four_fifths_of_what_a_leader_leads() -> None:
    records = [record(p, 1, {2: "LAGGING", 3: "LAGGING"}) for p in range(3)]
    records.append(record(3, 1, {2: "LAGGING", 3: "IN_SYNC"}))  # 4 of 5 >= 0.8 x 5
    got = attribute(UnhealthyPartitions.of(records), shape(SLOW_LEADER, [[1, 5], [4, 20]]))
    assert {(c.kind, c.broker) for c in got.follower_cause} == {("leader_slow", 1)}
    assert got.follower_cause[0].text == (
        "leader 1 is slow to serve: followers on 2 brokers lag in 4 of the 5 partitions it leads"
    )


def test_lag_in_three_fifths_of_a_leaders_partitions_is_not_every_partition() -> None:
    records = [record(p, 1, {2: "LAGGING", 3: "LAGGING"}) for p in range(3)]  # 3 < 4
    got = causes(records, shape(SLOW_LEADER, [[1, 5], [4, 20]]))
    assert got == [("fetcher_from_leader", 2), ("fetcher_from_leader", 3)] * 3


def test_one_broker_lagging_in_all_of_a_leaders_partitions_is_not_the_leader() -> None:
    # every partition of leader 1 lags, but only on broker 2: broker 2's fetcher from 1
    records = [record(p, 1, {2: "LAGGING", 3: "IN_SYNC"}) for p in range(5)]
    assert (
        causes(records, shape(SLOW_LEADER, [[1, 5], [4, 20]])) == [("fetcher_from_leader", 2)] * 5
    )


def test_an_offline_or_unregistered_follower_is_its_broker_down() -> None:
    records = [
        record(0, 1, {2: "OFFLINE", 3: "IN_SYNC"}, isr=(1, 3)),
        record(1, 1, {5: "LAGGING"}),  # broker 5 is not in the live set
    ]
    cluster = shape([[2, 1, 40], [3, 1, 40], [5, 1, 40]], [[1, 40]], live=[1, 2, 3, 4])
    got = attribute(UnhealthyPartitions.of(records), cluster).follower_cause
    assert [(c.kind, c.broker) for c in got] == [("broker_down", 2), ("broker_down", 5)]
    assert got[0].text == "broker 2 is down (not registered)"


def test_a_silent_leaders_followers_and_partitions_are_that_leader() -> None:
    """docs/domain.md#silent-leader: leader 1 is heard of no more. Its lagging followers
    would otherwise read as a slow leader (two brokers, every partition it leads), and a
    partition whose followers are all in sync would be unexplained; a follower whose own
    broker is down is still that broker's."""
    records = [record(p, 1, {2: "LAGGING", 3: "LAGGING"}, silent_since=5_000) for p in range(4)]
    records.append(record(4, 1, {2: "IN_SYNC", 3: "IN_SYNC"}, silent_since=5_000))
    records.append(record(5, 1, {2: "OFFLINE", 3: "LAGGING"}, isr=(1, 3), silent_since=5_000))
    cluster = shape(SLOW_LEADER, [[1, 6], [4, 20]])
    got = attribute(UnhealthyPartitions.of(records), cluster)
    assert [(c.kind, c.broker) for c in got.follower_cause] == [("leader_silent", 1)] * 8 + [
        ("broker_down", 2),
        ("leader_silent", 1),
    ]
    # broker_down ranks first: the partition with the down follower is broker 2's
    assert [(c.kind, c.broker) for c in got.partition_cause] == [("leader_silent", 1)] * 5 + [
        ("broker_down", 2)
    ]
    assert got.partition_cause[4].text == (
        "no news of leader 1 for more than half its replica.lag.time.max.ms (no fetch it "
        "served to a follower of the partition, no election) while the controller counts "
        "it live: hung, or out of the collectors' reach"
    )
    heard = [record(p, 1, {2: "LAGGING", 3: "LAGGING"}) for p in range(4)]
    assert causes(heard, shape(SLOW_LEADER, [[1, 5], [4, 20]])) == [("leader_slow", 1)] * 8


def test_overdue_shrinks_under_one_leader_are_that_leader_under_two_the_cluster() -> None:
    one = [record(p, 1, {3: "SHRINK_OVERDUE", 2: "LAGGING"}) for p in range(2)]
    cluster = shape([[2, 1, 10], [3, 1, 10], [2, 4, 10], [3, 4, 10]], [[1, 10], [4, 10]])
    got = attribute(UnhealthyPartitions.of(one), cluster)
    assert [(c.kind, c.broker) for c in got.follower_cause] == [
        ("leader_not_shrinking", 1),
        ("partition_alone", None),
    ] * 2
    assert got.follower_cause[0].text == (
        "leader 1 keeps 2 followers in the ISR past their shrink deadline: its "
        "isr-expiration task or ISR updates are stuck"
    )
    # the partition's principal cause is Kafka not acting, ahead of the lag
    assert [(c.kind, c.broker) for c in got.partition_cause] == [("leader_not_shrinking", 1)] * 2
    two = [*one, record(9, 4, {2: "SHRINK_OVERDUE"})]
    got = attribute(UnhealthyPartitions.of(two), cluster)
    overdue = [c for c in got.follower_cause if c.kind == "cluster_not_shrinking"]
    assert len(overdue) == 3
    assert {c.broker for c in overdue} == {None}
    assert overdue[0].text == (
        "3 followers past their shrink deadline under 2 leaders: ISR updates fail "
        "cluster-wide (controller or ZooKeeper)"
    )


def test_partition_causes_without_lagging_followers() -> None:
    records = [
        record(0, -1, {}, isr=(3,), offline=True),  # no leader: waits for broker 3
        record(1, 2, {1: "IN_SYNC"}, metadata="STALE_OVERDUE", stale=(4,)),
        record(2, 2, {1: "IN_SYNC"}, metadata="STALE_OVERDUE", stale=(4,)),
        record(3, 2, {1: "IN_SYNC"}, metadata="STALE_OVERDUE", stale=(3, 4)),
        record(4, 2, {1: "IN_SYNC"}, metadata="STALE_EXPECTED", stale=(3,)),
        record(5, 2, {1: "IN_SYNC"}),
    ]
    got = attribute(UnhealthyPartitions.of(records), shape([[1, 2, 5]], [[2, 5]]))
    assert [(c.kind, c.broker) for c in got.partition_cause] == [
        ("offline_leader", 3),
        ("metadata_stale_on_broker", 4),
        ("metadata_stale_on_broker", 4),
        ("metadata_not_sent", None),
        ("metadata_propagating", None),
        ("unexplained", None),
    ]
    assert got.partition_cause[0].text == (
        "no live leader: waiting for broker 3, the last in-sync replica"
    )
    assert got.partition_cause[1].text == (
        "broker 4 still caches an old ISR past the propagation window (2 partitions): "
        "UpdateMetadata did not reach it"
    )


def test_the_issue_example_counts_with_thousands_separators() -> None:
    # broker 3 follows 1,500 partitions from 5 leaders (300 each), lags on 1,204
    pairs = [[3, leader, 300] for leader in range(4, 9)] + [
        [9, leader, 900] for leader in range(4, 9)
    ]
    records = [record(p, 4 + p % 5, {3: "LAGGING", 9: "IN_SYNC"}) for p in range(1204)]
    cluster = shape(pairs, [[leader, 1200] for leader in range(4, 9)])
    got = attribute(UnhealthyPartitions.of(records), cluster)
    assert got.follower_cause[0].text == (
        "broker 3 is behind on 1,204 of the 1,500 partitions it follows, from 5 leaders"
    )
    [summary] = got.summary()
    assert (
        summary.kind,
        summary.broker,
        summary.followers,
        summary.partitions,
        summary.leaders,
    ) == ("follower_broker_behind", 3, 1204, 1204, 5)


def test_shapes_of_shards_add_up() -> None:
    a = shape([[3, 1, 2], [4, 1, 1]], [[1, 3]], live=[1, 3, 4])
    b = shape([[3, 1, 5], [3, 2, 1]], [[1, 5], [2, 1]], live=[1, 3, 4])
    merged = ClusterShape.merge([a, b]).to_json()
    assert merged == {
        "pairs": [[3, 1, 7], [3, 2, 1], [4, 1, 1]],
        "led": [[1, 8], [2, 1]],
        "live": [1, 3, 4],
        "maintenance": [],
    }


def test_shape_of_a_frame_counts_follower_slots() -> None:
    import numpy as np

    followers = np.array([[-1, 2, 3], [-1, 3, -1], [-1, -1, -1]])  # -1: no follower
    leaders = np.array([1, 1, 2])
    assert ClusterShape.of(followers, leaders, None).to_json() == {
        "pairs": [[2, 1, 1], [3, 1, 2]],
        "led": [[1, 2]],
        "live": None,
        "maintenance": [],
    }


def test_healthy_records_and_in_sync_followers_carry_null() -> None:
    healthy = record(0, 1, {2: "IN_SYNC"})
    sick = record(1, 1, {2: "IN_SYNC", 3: "OFFLINE"})
    cluster = shape([[2, 1, 2], [3, 1, 1]], [[1, 2]], live=[1, 2])
    out = annotate([healthy, sick], [1], cluster)
    assert out[0].cause is None
    assert out[0].followers[0].cause is None
    assert out[1].cause == Cause(CauseKind.BROKER_DOWN, 3, "broker 3 is down (not registered)")
    assert [f.cause for f in out[1].followers] == [None, out[1].cause]
    assert with_causes(healthy, None) == out[0]


def test_followers_of_a_down_broker_are_no_evidence_against_their_leader() -> None:
    # leader 1's 5 partitions: broker 2 is down (OFFLINE) and broker 3 lags in all of them.
    # Two brokers lag, but broker 2's absence is its own cause: leader 1 is not slow, broker
    # 3 is behind on everything it follows from leader 1 (it follows nothing else).
    records = [record(p, 1, {2: "OFFLINE", 3: "LAGGING"}, isr=(1, 3)) for p in range(5)]
    cluster = shape([[2, 1, 5], [3, 1, 5]], [[1, 5]], live=[1, 3])
    assert causes(records, cluster) == [("broker_down", 2), ("fetcher_from_leader", 3)] * 5
