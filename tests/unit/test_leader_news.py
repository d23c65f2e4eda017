"""docs/domain.md#silent-leader: no news of a leader is not a follower behind it.

Set-up used by most tests: T = 10 000 (warn_ratio 0.5), brokers 1, 2, 3 live. Leader 1
elected at 0 with ISR [1, 2, 3]; at 1 000 follower 3 is at the leader's 500 and follower 2
one record behind (499, caught up at 0 by the election): the last news of leader 1 is
1 000, and it is silent from 2 (now - 1 000) > T on, that is from now = 6 001.
"""

from __future__ import annotations

import numpy as np
import pytest

from state import ReplicationModel
from state.events import BrokersAnswered, MetadataLogProgress, ReplicaProgress
from state.leader_news import broker_news_ms, leader_silent, partition_news_ms
from state.propagation_window import QuorumProgress
from tests.unit.builders import (
    apply,
    brokers,
    fetch,
    follower,
    health,
    leader_and_isr,
    model,
)

T = 10_000
LAST_NEWS = 1_000


def stalled_leader_model() -> ReplicationModel:
    m = model(replica_lag_time_max_ms=T)
    apply(
        m,
        brokers(0, (1, 1), (2, 1), (3, 1)),
        leader_and_isr(0),
        fetch(LAST_NEWS, follower=3, offset=500, leader_leo=500),
        fetch(LAST_NEWS, follower=2, offset=499, leader_leo=500),
    )
    return m


@pytest.mark.parametrize(
    ("now", "silent"),
    [
        (LAST_NEWS, False),
        (LAST_NEWS + T // 2, False),  # = T / 2 old: a poll every T / 2 is never late
        (LAST_NEWS + T // 2 + 1, True),
    ],
)
def test_silent_once_the_news_is_more_than_half_t_old(now: int, silent: bool) -> None:
    record = health(stalled_leader_model(), now)
    assert record.leader_silent_since_ms == (LAST_NEWS if silent else None)
    assert record.conditions()["leader_silent"] is silent


@pytest.mark.parametrize(
    ("age", "t", "silent"),
    [
        (5_000, 10_001, False),  # 2 x 5 000 = 10 000 <= 10 001: T / 2 = 5 000.5 not passed
        (5_001, 10_001, True),
        (0, 1, False),
        (1, 1, True),
    ],
)
def test_half_t_is_exact_for_an_odd_t(age: int, t: int, silent: bool) -> None:
    heard = np.asarray([100_000], dtype=np.int64)
    found = leader_silent(np.asarray([2]), heard, 100_000 + age, np.asarray([t]))
    assert found.tolist() == [silent]


@pytest.mark.parametrize(
    ("live_followers", "judged"), [(0, False), (1, False), (2, True), (5, True)]
)
def test_only_two_followers_or_more_fall_silent_because_of_their_leader(
    live_followers: int, judged: bool
) -> None:
    found = leader_silent(
        np.asarray([live_followers]), np.asarray([0], dtype=np.int64), 10**9, np.asarray([T])
    )
    assert found.tolist() == [judged]


@pytest.mark.parametrize(
    ("lag", "heard_status", "silent_status"),
    [
        (T // 2, "IN_SYNC", "IN_SYNC"),
        (T // 2 + 1, "LAGGING", "LAGGING"),
        (T, "LAGGING", "LAGGING"),
        (T + 1, "SHRINK_ELIGIBLE", "LAGGING"),  # the rule would name it; nobody checks
        (3 * T // 2 + 1, "SHRINK_OVERDUE", "LAGGING"),  # nor is Kafka late
    ],
)
def test_a_silent_leaders_followers_are_lagging_at_most(
    lag: int, heard_status: str, silent_status: str
) -> None:
    """Follower 2 last caught up at 0 (the election); its lag is now - 0. With leader 1
    heard of at ``now`` (follower 3 fetching) the rule applies as ever; with its last news
    at 1 000, it is silent past 6 000, and its followers are LAGGING at most."""
    heard = stalled_leader_model()
    apply(heard, fetch(lag, follower=3, offset=500, leader_leo=500))
    assert follower(health(heard, lag), 2).status == heard_status
    silent = health(stalled_leader_model(), lag)
    assert follower(silent, 2).status == silent_status
    assert silent.predicted_under_replicated is False
    assert follower(silent, 2).shrink_deadline_ms is None  # absent: nobody is to remove it


def test_one_follower_fetching_is_news_of_the_leader() -> None:
    """Follower 3 keeps fetching from leader 1 (at its log end), follower 2 is still one
    record behind since 1 000 (caught up at 0): the leader runs, and follower 2 is named
    as Kafka's rule says."""
    m = stalled_leader_model()
    apply(m, fetch(20_000, follower=3, offset=500, leader_leo=500))
    record = health(m, 20_000)
    assert record.leader_silent_since_ms is None
    assert follower(record, 2).status == "SHRINK_OVERDUE"  # lag 20 000 > 1.5 T


def test_news_of_another_partition_does_not_count() -> None:
    """Leader 1 serves partition 1's follower at 20 000; partition 0's followers are
    silent: the rule is the partition's own, so a shard that holds partition 0 without
    partition 1, and replay, which holds both, judge it the same."""
    m = stalled_leader_model()
    apply(
        m,
        leader_and_isr(0, partition=1),
        fetch(20_000, follower=3, offset=0, leader_leo=0, partition=1),
        fetch(20_000, follower=2, offset=0, leader_leo=0, partition=1),
    )
    assert health(m, 20_000).leader_silent_since_ms == LAST_NEWS
    assert health(m, 20_000, partition=1).leader_silent_since_ms is None


def pair_model(*reports: MetadataLogProgress | BrokersAnswered) -> ReplicationModel:
    """Replication factor 2: leader 1, follower 2 one record behind since 1 000 (caught up
    at 0 by the election), then the news of brokers given (quorum reports, answered polls)."""
    m = model(replica_lag_time_max_ms=T)
    apply(
        m,
        brokers(0, (1, 1), (2, 1), (3, 1)),
        leader_and_isr(0, isr=(1, 2), replicas=(1, 2)),
        fetch(LAST_NEWS, follower=2, offset=499, leader_leo=500),
        *reports,
    )
    return m


def quorum_report(
    ts: int, *, controller_id: int = 3000, controller_epoch: int = 1, **caught_up_ms: int
) -> MetadataLogProgress:
    """The quorum leader's report at ``ts``: broker ``bN`` last caught up with the metadata
    log at ``caught_up_ms["bN"]`` (-1: none, as Kafka states it)."""
    return MetadataLogProgress(
        ts=ts,
        controller_id=controller_id,
        controller_epoch=controller_epoch,
        high_watermark=900,
        replicas=tuple(
            ReplicaProgress(broker=int(name[1:]), log_end_offset=900, last_caught_up_ms=ms)
            for name, ms in caught_up_ms.items()
        ),
        interval_ms=1_000,
    )


def test_one_follower_without_news_of_the_broker_is_not_judged() -> None:
    """Replication factor 2 and no quorum report (ZooKeeper mode): follower 2 alone
    stopped, or its leader did; the partition cannot tell, and follower 2's lag runs on
    as the rule says (docs/domain.md)."""
    record = health(pair_model(), T + 1)
    assert record.leader_silent_since_ms is None
    assert follower(record, 2).status == "SHRINK_ELIGIBLE"


BROKER_NEWS = 3_000  # broker 1 last caught up with the metadata log (paused after it)


@pytest.mark.parametrize(
    ("now", "silent", "status"),
    [
        (BROKER_NEWS + T // 2, False, "LAGGING"),  # = T / 2 old; lag 8 000 > warn 5 000
        (BROKER_NEWS + T // 2 + 1, True, "LAGGING"),
        (T + 1, True, "LAGGING"),  # the rule would name it: nobody is to check
        (3 * T // 2 + 1, True, "LAGGING"),
    ],
)
def test_one_follower_is_judged_by_news_of_its_leaders_broker(
    now: int, silent: bool, status: str
) -> None:
    """Broker 1 last caught up with the metadata log at 3 000, by every report since
    (the reports go on: the quorum leader runs): it is silent from 2 (now - 3 000) > T."""
    reports = range(1_000, now, 1_000)
    m = pair_model(*(quorum_report(ts, b1=min(ts, BROKER_NEWS), b2=ts) for ts in reports))
    record = health(m, now)
    assert record.leader_silent_since_ms == (BROKER_NEWS if silent else None)
    assert record.conditions()["leader_silent"] is silent
    assert follower(record, 2).status == status


def test_a_running_leaders_broker_leaves_the_rule_to_name_its_follower() -> None:
    """Broker 1 catches up with the metadata log at every report: it runs, and follower 2,
    behind since 1 000 (caught up at 0), is named as Kafka's rule says."""
    m = pair_model(*(quorum_report(ts, b1=ts, b2=ts) for ts in range(1_000, 16_001, 1_000)))
    assert follower(health(m, T + 1), 2).status == "SHRINK_ELIGIBLE"
    record = health(m, 16_000)
    assert record.leader_silent_since_ms is None
    assert follower(record, 2).status == "SHRINK_OVERDUE"  # lag 16 000 > 1.5 T


def test_a_report_that_does_not_name_the_leader_is_no_news() -> None:
    m = pair_model(quorum_report(5_000, b2=5_000, b3=5_000))
    record = health(m, T + 1)
    assert record.leader_silent_since_ms is None
    assert follower(record, 2).status == "SHRINK_ELIGIBLE"


def test_two_followers_keep_their_partitions_own_news() -> None:
    """Leader 1's broker stopped catching up with the metadata log at 3 000 (a slow
    controller, or its controller listener cut), while its followers' fetches are served:
    the partition's own news says the leader runs. And the other way: the broker fresh,
    the followers silent since 1 000, the partition says its leader is silent."""
    served = stalled_leader_model()
    apply(served, fetch(20_000, follower=3, offset=500, leader_leo=500))
    apply(served, quorum_report(20_000, b1=BROKER_NEWS, b2=20_000, b3=20_000))
    assert health(served, 20_000).leader_silent_since_ms is None
    unserved = stalled_leader_model()
    apply(unserved, quorum_report(20_000, b1=20_000, b2=20_000, b3=20_000))
    assert health(unserved, 20_000).leader_silent_since_ms == LAST_NEWS


@pytest.mark.parametrize(
    ("leaders", "expected"),
    [
        ([1, 2, 3, 1], [500, 700, 0, 500]),  # broker 3: not in the report
        ([], []),
    ],
)
def test_broker_news_is_each_leaders_last_catch_up_in_the_report(
    leaders: list[int], expected: list[int]
) -> None:
    quorum = QuorumProgress.of(quorum_report(1_000, b1=500, b2=700), 1_000)
    news = broker_news_ms(np.asarray(leaders, dtype=np.int64), quorum, {})
    assert news.tolist() == expected
    none = broker_news_ms(np.asarray(leaders, dtype=np.int64), None, {})
    assert none.tolist() == [0] * len(leaders)


def test_a_follower_on_a_dead_broker_is_not_counted() -> None:
    """Broker 3 is gone: partition 0 has one follower on a live broker, and is not
    judged by its own news (nor by its broker's: no quorum report)."""
    m = stalled_leader_model()
    apply(m, brokers(2_000, (1, 1), (2, 1)))
    record = health(m, T + 1)
    assert record.leader_silent_since_ms is None
    assert follower(record, 2).status == "SHRINK_ELIGIBLE"


def test_an_election_is_news_of_the_new_leader() -> None:
    """The controller elected broker 3 at 30 000 (it heard from it); no fetch since."""
    m = stalled_leader_model()
    apply(m, leader_and_isr(30_000, leader=3, epoch=1, isr=(3, 2)))
    assert health(m, 35_000).leader_silent_since_ms is None
    assert health(m, 35_001).leader_silent_since_ms == 30_000


def test_an_offline_partition_is_offline_not_silent() -> None:
    m = stalled_leader_model()
    apply(m, brokers(2_000, (2, 1), (3, 1)))  # broker 1 is gone
    record = health(m, 20_000)
    assert record.offline is True
    assert record.leader_silent_since_ms is None


def test_news_back_and_the_rule_applies_again() -> None:
    """Leader 1 comes back at 30 000 and serves follower 2 still at 499: its lag is
    30 000 (caught up at 0), past 1.5 T, and Kafka is late to remove it."""
    m = stalled_leader_model()
    assert follower(health(m, 29_999), 2).status == "LAGGING"
    apply(m, fetch(30_000, follower=2, offset=499, leader_leo=510))
    record = health(m, 30_000)
    assert record.leader_silent_since_ms is None
    assert follower(record, 2).status == "SHRINK_OVERDUE"


def test_the_paused_zookeeper_leader_of_the_scoreboard() -> None:
    """docs/real-kafka.md, 3.9 paused-follower, by hand with its shape (T = 10 s, a 1 s
    poll): broker 3 leads clicks-1 with followers 1 and 2. The last poll before broker 3
    was paused (at 60 000) read follower 2 at 548 and leader 3's log end at 549, follower
    1 at 549. No poll reaches broker 3 again, while broker 1's partition is heard of every
    second. ZooKeeper expires broker 3's session 20 s after the pause, and the controller
    elects broker 1 with ISR [1, 2]. Kafka never removed follower 2: the monitor must not
    name it."""
    m = model(replica_lag_time_max_ms=T)
    clicks, other = "clicks", "orders"
    apply(
        m,
        brokers(0, (1, 1), (2, 1), (3, 1)),
        leader_and_isr(0, leader=3, isr=(3, 1, 2), replicas=(3, 1, 2), topic=clicks, partition=1),
        leader_and_isr(0, leader=1, topic=other),
        fetch(59_000, follower=2, offset=548, leader_leo=548, leader=3, topic=clicks, partition=1),
        fetch(60_000, follower=1, offset=549, leader_leo=549, leader=3, topic=clicks, partition=1),
        fetch(60_000, follower=2, offset=548, leader_leo=549, leader=3, topic=clicks, partition=1),
    )
    named = set()
    for now in range(61_000, 80_001, 1_000):
        apply(m, fetch(now, follower=2, offset=0, leader_leo=0, topic=other))
        named.add(follower(health(m, now, topic=clicks, partition=1), 2).status)
    assert named == {"IN_SYNC", "LAGGING"}
    assert health(m, 80_000, topic=clicks, partition=1).leader_silent_since_ms == 60_000
    apply(
        m,
        brokers(80_000, (1, 1), (2, 1)),
        leader_and_isr(
            80_000, leader=1, epoch=1, isr=(1, 2), replicas=(3, 1, 2), topic=clicks, partition=1
        ),
    )
    record = health(m, 80_000, topic=clicks, partition=1)
    assert (record.leader, record.leader_silent_since_ms) == (1, None)
    assert follower(record, 2).status == "IN_SYNC"  # in the ISR at the election: reset


def test_news_is_the_latest_fetch_among_the_followers_heard_from() -> None:
    fetched = np.asarray([[0, 10, 20], [0, 50, 0], [7, 0, 0]], dtype=np.int64)
    heard_from = np.asarray([[False, True, True], [False, True, False], [False, False, False]])
    # the leader's own slot (0 here) and slots not heard from do not count
    assert partition_news_ms(fetched, heard_from).tolist() == [20, 50, 0]


def test_a_follower_last_seen_at_a_silent_leaders_leo_is_not_known_to_be_there() -> None:
    """docs/real-kafka.md, 4.1 paused-twice: the last poll read the followers at the paused
    leader's log end; back before its fence, the leader took the writes queued meanwhile
    and removed them at its first check. Follower 3 was at leader 1's 500 at 1 000: lag 0
    while the leader is heard of; once it is silent (6 001), its lag is counted from that
    catch-up, and it is flagged LAGGING, not named."""
    m = stalled_leader_model()
    heard = follower(health(m, 6_000), 3)
    assert (heard.status, heard.lag_time_ms) == ("IN_SYNC", 0)
    silent = health(m, 6_001)
    assert (follower(silent, 3).status, follower(silent, 3).lag_time_ms) == ("LAGGING", 5_001)
    late = health(m, 30_000)
    assert follower(late, 3).status == "LAGGING"
    assert late.predicted_under_replicated is False


FOLLOWER_NEWS = 1_000  # broker 2 last caught up with the metadata log (paused after it)


def paused_follower_model(now: int, leader_moved: bool = False) -> ReplicationModel:
    """Replication factor 2: leader 1, follower 2 read at the leader's LEO 500 at 1 000,
    then its broker paused: the reports go on, broker 2's catch-up stays at 1 000, and no
    poll reaches broker 2 again. With ``leader_moved``, broker 3 (a follower added to
    the assignment, as a replication factor 3 partition has) tells the leader's LEO went
    on to 600 at 2 000."""
    m = model(replica_lag_time_max_ms=T)
    replicas = (1, 2, 3) if leader_moved else (1, 2)
    apply(
        m,
        brokers(0, (1, 1), (2, 1), (3, 1)),
        leader_and_isr(0, isr=replicas, replicas=replicas),
        fetch(FOLLOWER_NEWS, follower=2, offset=500, leader_leo=500),
        *(
            [
                fetch(FOLLOWER_NEWS, follower=3, offset=500, leader_leo=500),
                fetch(2_000, follower=3, offset=600, leader_leo=600),
            ]
            if leader_moved
            else []
        ),
        *(
            quorum_report(ts, b1=ts, b2=min(ts, FOLLOWER_NEWS), b3=ts)
            for ts in range(1_000, now + 1, 1_000)
        ),
    )
    if leader_moved:  # follower 3 keeps fetching: the leader is heard of
        apply(m, fetch(now, follower=3, offset=600, leader_leo=600))
    return m


@pytest.mark.parametrize(
    ("now", "status", "lag"),
    [
        (FOLLOWER_NEWS + T // 2, "IN_SYNC", 0),  # its broker heard of T / 2 ago: at the LEO
        (FOLLOWER_NEWS + T // 2 + 1, "LAGGING", T // 2 + 1),  # silent: lag from 1 000
        (FOLLOWER_NEWS + T + 1, "LAGGING", T + 1),  # not named: writes since not known
        (FOLLOWER_NEWS + 3 * T, "LAGGING", 3 * T),
    ],
)
def test_a_silent_followers_place_at_the_leaders_leo_is_no_news_of_now(
    now: int, status: str, lag: int
) -> None:
    """docs/real-kafka.md, set w, 4.1 paused-follower: the follower of a replication
    factor 2 partition on the paused broker, last read at its leader's LEO, stayed
    IN_SYNC with lag 0 until Kafka removed it, as no row told of the leader's writes."""
    record = health(paused_follower_model(now), now)
    assert record.leader_silent_since_ms is None  # broker 1 is heard of
    assert (follower(record, 2).status, follower(record, 2).lag_time_ms) == (status, lag)


def test_a_silent_follower_behind_the_leaders_moved_leo_is_named() -> None:
    """The leader's LEO went on past where follower 2 was last seen (another follower's
    fetch said so): the leader has taken writes it lacks, and removes it T after its last
    catch-up, as the rule says."""
    record = health(paused_follower_model(FOLLOWER_NEWS + T + 1, leader_moved=True), 11_001)
    assert follower(record, 2).status == "SHRINK_ELIGIBLE"


def test_a_follower_whose_broker_is_heard_of_stays_in_sync_at_the_leo() -> None:
    """Broker 2 catches up with the metadata log at every report, and follower 2 was last
    read at the leader's LEO: an idle partition, whose follower Kafka keeps in the ISR."""
    m = model(replica_lag_time_max_ms=T)
    apply(
        m,
        brokers(0, (1, 1), (2, 1)),
        leader_and_isr(0, isr=(1, 2), replicas=(1, 2)),
        fetch(FOLLOWER_NEWS, follower=2, offset=500, leader_leo=500),
        *(quorum_report(ts, b1=ts, b2=ts) for ts in range(1_000, 40_001, 1_000)),
    )
    record = health(m, 40_000)
    assert (follower(record, 2).status, follower(record, 2).lag_time_ms) == ("IN_SYNC", 0)


def test_a_new_quorum_leader_that_has_not_heard_from_a_broker_leaves_its_news_as_it_was() -> None:
    """docs/real-kafka.md, set x, 4.1 controller-failover: the killed node was the active
    controller and the follower of a replication factor 2 partition. The new quorum
    leader reported -1 for it, and the follower, last read at its leader's LEO, stayed
    IN_SYNC until Kafka removed it. Its news is still the old leader's (1 000)."""

    def failed_over(now: int) -> ReplicationModel:
        m = model(replica_lag_time_max_ms=T)
        apply(
            m,
            brokers(0, (1, 1), (2, 1), (3, 1)),
            leader_and_isr(0, isr=(1, 2), replicas=(1, 2)),
            fetch(FOLLOWER_NEWS, follower=2, offset=500, leader_leo=500),
            quorum_report(FOLLOWER_NEWS, b1=FOLLOWER_NEWS, b2=FOLLOWER_NEWS, b3=FOLLOWER_NEWS),
            *(
                quorum_report(ts, controller_id=3, controller_epoch=2, b1=ts, b2=-1, b3=ts)
                for ts in range(3_000, now + 1, 1_000)
            ),
        )
        return m

    at_half_t = health(failed_over(FOLLOWER_NEWS + T // 2), FOLLOWER_NEWS + T // 2)
    assert (follower(at_half_t, 2).status, follower(at_half_t, 2).lag_time_ms) == ("IN_SYNC", 0)
    silent = health(failed_over(FOLLOWER_NEWS + T // 2 + 1), FOLLOWER_NEWS + T // 2 + 1)
    assert (follower(silent, 2).status, follower(silent, 2).lag_time_ms) == (
        "LAGGING",
        T // 2 + 1,
    )


@pytest.mark.parametrize(
    ("earlier", "later", "live", "expected"),
    [
        (None, {1: 900}, {1, 2}, {1: 900}),
        ({1: 500, 2: 600}, {1: 900, 2: 950}, {1, 2}, {1: 900, 2: 950}),  # stated: the newer
        ({1: 500, 2: 600}, {1: 900}, {1, 2}, {1: 900, 2: 600}),  # not stated: kept
        ({1: 500, 2: 600}, {1: 900, 2: -1}, {1, 2}, {1: 900, 2: 600}),  # -1: not stated
        ({1: 500, 2: 600}, {1: 900}, {1}, {1: 900}),  # broker 2 no longer live: dropped
        ({1: 500, 2: 600}, {}, set(), {}),
    ],
)
def test_a_reports_news_of_each_broker_is_the_latest_any_report_stated(
    earlier: dict[int, int] | None,
    later: dict[int, int],
    live: set[int],
    expected: dict[int, int],
) -> None:
    def report(ts: int, caught_up: dict[int, int]) -> QuorumProgress:
        named = {f"b{b}": ms for b, ms in caught_up.items()}
        return QuorumProgress.of(quorum_report(ts, **named), 1_000)

    before = None if earlier is None else report(1_000, earlier)
    after = report(2_000, later).keeping_news_of(before, live.__contains__)
    assert after.last_caught_up_ms == expected
    assert after.report_ms == 2_000
    assert after.log_end_offsets == dict.fromkeys(later, 900)  # this report's only


@pytest.mark.parametrize(
    ("caught_up", "answered", "expected"),
    [
        ({}, {}, [0, 0, 0]),  # no news of any
        ({}, {1: 900, 2: 950}, [900, 950, 0]),  # ZooKeeper mode: the polls answered
        ({1: 500}, {1: 900, 2: 950}, [500, 950, 0]),  # Kafka's own report first
        ({1: 500, 3: 400}, {}, [500, 0, 400]),
    ],
)
def test_a_brokers_news_is_the_quorums_report_else_the_last_poll_it_answered(
    caught_up: dict[int, int], answered: dict[int, int], expected: list[int]
) -> None:
    quorum = (
        QuorumProgress.of(quorum_report(1_000, **{f"b{b}": ms for b, ms in caught_up.items()}), 1)
        if caught_up
        else None
    )
    brokers = np.asarray([[1, 2], [3, 1]], dtype=np.int64)  # any shape
    news = broker_news_ms(brokers, quorum, answered)
    assert news.shape == (2, 2)
    assert news.ravel().tolist() == [expected[0], expected[1], expected[2], expected[0]]


def answered(ts: int, *brokers: int) -> BrokersAnswered:
    return BrokersAnswered(ts=ts, brokers=brokers)


@pytest.mark.parametrize(
    ("now", "silent", "status"),
    [
        (BROKER_NEWS + T // 2, False, "LAGGING"),  # = T / 2 old; lag 8 000 > warn 5 000
        (BROKER_NEWS + T // 2 + 1, True, "LAGGING"),
        (T + 1, True, "LAGGING"),  # the rule would name it: nobody is to check
    ],
)
def test_zookeeper_mode_one_follower_is_judged_by_the_polls_its_leader_answered(
    now: int, silent: bool, status: str
) -> None:
    """No quorum report (ZooKeeper mode): broker 1 answered the admin polls up to 3 000
    and none since (paused), broker 2 every one. docs/real-kafka.md, set w: 3.9's
    replication factor 2 partitions were not judged."""
    polls = range(1_000, now, 1_000)
    m = pair_model(*(answered(ts, *((1, 2) if ts <= BROKER_NEWS else (2,))) for ts in polls))
    record = health(m, now)
    assert record.leader_silent_since_ms == (BROKER_NEWS if silent else None)
    assert follower(record, 2).status == status


@pytest.mark.parametrize(
    ("now", "status", "lag"),
    [
        (FOLLOWER_NEWS + T // 2, "IN_SYNC", 0),
        (FOLLOWER_NEWS + T // 2 + 1, "LAGGING", T // 2 + 1),  # silent: lag from 1 000
        (FOLLOWER_NEWS + T + 1, "LAGGING", T + 1),  # not named: writes since not known
    ],
)
def test_zookeeper_mode_a_follower_whose_broker_stopped_answering_is_no_longer_at_the_leo(
    now: int, status: str, lag: int
) -> None:
    """docs/real-kafka.md, set w, 3.9 paused-follower: the follower of a replication
    factor 2 partition on the paused broker, last read at its leader's LEO, stayed
    IN_SYNC with lag 0 until Kafka removed it. Broker 2 answered the polls up to 1 000."""
    m = model(replica_lag_time_max_ms=T)
    apply(
        m,
        brokers(0, (1, 1), (2, 1)),
        leader_and_isr(0, isr=(1, 2), replicas=(1, 2)),
        fetch(FOLLOWER_NEWS, follower=2, offset=500, leader_leo=500),
        *(
            answered(ts, *((1, 2) if ts <= FOLLOWER_NEWS else (1,)))
            for ts in range(1_000, now + 1, 1_000)
        ),
    )
    record = health(m, now)
    assert record.leader_silent_since_ms is None  # broker 1 answers
    assert (follower(record, 2).status, follower(record, 2).lag_time_ms) == (status, lag)


def test_answered_polls_are_kept_for_live_brokers_only_and_never_go_back() -> None:
    m = model(replica_lag_time_max_ms=T)
    apply(m, brokers(0, (1, 1), (2, 1)), answered(2_000, 1, 2, 7))  # 7: not live
    assert m.cluster.answered_ms == {1: 2_000, 2: 2_000}
    apply(m, answered(1_500, 1), answered(3_000, 2))  # an older poll's event, then a newer
    assert m.cluster.answered_ms == {1: 2_000, 2: 3_000}
    apply(m, brokers(4_000, (1, 1)))  # broker 2 dies
    assert m.cluster.answered_ms == {1: 2_000}
