"""``collect admin`` against real followers: Apache Kafka 4.1 from the Maven jars.

ListOffsets with replica id -2 (``DEBUGGING_REPLICA_ID``) asks each replica for its own log
end offset: the only way follower progress is read from outside. Checked here against
what only a real replicating cluster can show: a paused follower's end stays put while its
leader's moves on, the leader's DescribeConfigs reply names Kafka's T, a hung broker costs
one poll its answers and not the others', and a resumed follower reaches the leader's end
again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from streaming.config import IsrwatchConfig
from streaming.feeds.collectors.admin_poller import ClusterSnapshot
from streaming.feeds.collectors.admin_source import KafkaAdminSource
from streaming.tools.lab.cluster import BrokerFault, LabCluster
from streaming.tools.lab.distribution import LINES
from streaming.tools.lab.workload import create_topics

LAG_TIME_MAX_MS = 20_000  # long: the paused follower stays in the ISR for the test


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabCluster]:
    lab = LabCluster(
        LINES["4.1"], 3, tmp_path_factory.mktemp("kafka"), lag_time_max_ms=LAG_TIME_MAX_MS
    )
    with lab:
        lab.start()
        create_topics(lab.bootstrap_servers, 3)
        yield lab


def produce(bootstrap: str, partition: int, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5})
    for i in range(count):
        producer.produce("clicks", value=b"%d" % i, partition=partition)
    assert producer.flush(30) == 0


def source_for(cluster: LabCluster, gaps: list[str]) -> KafkaAdminSource:
    config = IsrwatchConfig.model_validate(
        {"kafka": {"bootstrap_servers": cluster.bootstrap_servers, "request_timeout_ms": 3000}}
    )
    return KafkaAdminSource(
        config.kafka, on_unavailable=lambda api, error: gaps.append(api), broker_timeout_ms=3000
    )


def test_a_paused_follower_stays_behind_and_catches_up_when_resumed(cluster: LabCluster) -> None:
    gaps: list[str] = []
    source = source_for(cluster, gaps)
    try:
        first = source.snapshot()
        info = first.partitions["clicks"][0]
        leader = info.leader
        controller = cluster.active_controller()
        follower = next(b for b in info.replicas if b not in (leader, controller))
        assert first.replica_lag_time_max_ms == {
            1: LAG_TIME_MAX_MS,
            2: LAG_TIME_MAX_MS,
            3: LAG_TIME_MAX_MS,
        }
        assert first.min_insync_replicas["clicks"] == 2
        assert first.answered == (1, 2, 3)

        produce(cluster.bootstrap_servers, 0, 200)
        # the leader's high watermark moves at the follower's fetch after the one that
        # brought it level, so a poll can read both ends at 200 and the watermark behind
        # (seen in CI: 0); polled until all three are there
        _until(source, lambda s: _leo(s, leader) == _leo(s, follower) == _hw(s) == 200)

        cluster.apply(BrokerFault.PAUSE, follower)
        try:
            produce(cluster.bootstrap_servers, 0, 300)
            paused = source.snapshot()  # the hung broker costs this poll nothing else
            assert _leo(paused, leader) == 500
            assert ("clicks", 0, follower) not in paused.log_end_offsets  # no answer
            # the hung broker failed its first request of the poll (DescribeCluster if it
            # described the cluster, else its DescribeConfigs) and was not asked again in
            # that poll: no ListOffsets wait on it
            assert gaps[:1] in (["describe_cluster"], ["describe_broker_configs"])
            assert "list_offsets" not in gaps
            # every other replica answered in the same poll
            others = [b for b in info.replicas if b not in (leader, follower)]
            assert all(("clicks", 0, b) in paused.log_end_offsets for b in others)
            # the brokers that answered: every one but the hung broker (BrokersAnswered,
            # ZooKeeper mode's news of a broker)
            assert paused.answered == tuple(b for b in (1, 2, 3) if b != follower)
            # the quorum's report, the news of each broker (docs/domain.md#silent-leader):
            # the hung broker's last catch-up with the metadata log stays where it
            # stopped, while every running broker catches up again
            before = _caught_up(paused)
            running = [b for b in (1, 2, 3) if b != follower]
            later = _until(source, lambda s: all(_caught_up(s)[b] > before[b] for b in running))
            after = _caught_up(later)
            assert after[follower] == before[follower]
        finally:
            cluster.apply(BrokerFault.RESUME, follower)
        _until(source, lambda s: _leo(s, follower) == _leo(s, leader) == _hw(s) == 500)
        _until(source, lambda s: _caught_up(s)[follower] > after[follower])
    finally:
        source.close()


def _caught_up(snapshot: ClusterSnapshot) -> dict[int, int]:
    """Each broker's last catch-up with the metadata log, by the poll's quorum report
    (-1: none reported)."""
    assert snapshot.quorum is not None
    return {
        r.broker: -1 if r.last_caught_up_ms is None else r.last_caught_up_ms
        for r in snapshot.quorum.replicas
    }


def _leo(snapshot: ClusterSnapshot, broker: int) -> int | None:
    return snapshot.log_end_offsets.get(("clicks", 0, broker))


def _hw(snapshot: ClusterSnapshot) -> int | None:
    return snapshot.high_watermarks.get(("clicks", 0))


def _until(
    source: KafkaAdminSource, done: Callable[[ClusterSnapshot], bool], polls: int = 60
) -> ClusterSnapshot:
    """Poll until ``done(snapshot)``, at most ``polls`` times, half a second apart: a
    bound on the wait, not a timed assertion."""
    for _ in range(polls):
        snapshot = source.snapshot()
        if done(snapshot):
            return snapshot
        time.sleep(0.5)
    raise AssertionError(
        f"not reached in {polls} polls: {snapshot.log_end_offsets} {snapshot.high_watermarks}"
    )


def test_a_broker_back_from_a_fence_is_polled_again(cluster: LabCluster) -> None:
    """A controlled shutdown fences the broker; KRaft's Metadata leaves fenced brokers out,
    so the client forgets it. Back, it must be asked again at once, not after the client's
    5-minute metadata refresh (every poll failed with UnknownBrokerIdError before)."""
    gaps: list[str] = []
    source = source_for(cluster, gaps)
    try:
        info = source.snapshot().partitions["clicks"][1]
        controller = cluster.active_controller()
        follower = next(b for b in info.replicas if b not in (info.leader, controller))
        cluster.apply(BrokerFault.STOP, follower)
        gone = source.snapshot()
        assert ("clicks", 1, follower) not in gone.log_end_offsets
        # fenced, so not live, though DescribeCluster v2 can list it (is_fenced)
        assert follower not in gone.brokers
        cluster.apply(BrokerFault.START, follower)
        back = _until(source, lambda s: ("clicks", 1, follower) in s.log_end_offsets)
        assert follower in back.brokers
    finally:
        source.close()


def test_one_broker_describes_the_cluster_until_it_hangs(cluster: LabCluster) -> None:
    """Every poll reads DescribeCluster and Metadata from the same broker's metadata
    cache: another broker's may be behind it for a while, and the partitions' ISR then
    went back and forth between polls (Kafka 3.9, the lab's inter-broker-cut). Hung, that
    broker hands over within the poll, to one that stays."""
    gaps: list[str] = []
    source = source_for(cluster, gaps)
    try:
        controller = cluster.active_controller()
        # the test's choice of broker to hang: not the active controller (no failover)
        source._describing_broker = next(b for b in (1, 2, 3) if b != controller)
        hung = source._describing_broker
        polls = [source.snapshot() for _ in range(5)]
        assert source.describing_broker == hung
        assert all(set(poll.brokers) == {1, 2, 3} for poll in polls)
        cluster.apply(BrokerFault.PAUSE, hung)
        try:
            during = source.snapshot()  # no poll lost
            assert gaps[:1] == ["describe_cluster"]
            successor = source.describing_broker
            assert successor not in (None, hung)
            assert set(during.partitions) >= {"clicks"}
        finally:
            cluster.apply(BrokerFault.RESUME, hung)
        for _ in range(3):
            source.snapshot()
            assert source.describing_broker == successor
    finally:
        source.close()
