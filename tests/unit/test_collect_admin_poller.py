"""streaming.feeds.collectors.admin_poller: snapshots of a cluster -> events between them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from state import parse_json_line
from state.events import DeadLetter, Source
from streaming.feeds.collectors.admin_poller import (
    AdminPoller,
    ClusterSnapshot,
    PartitionInfo,
    QuorumReplica,
    QuorumSnapshot,
)
from streaming.feeds.wire import InputRecord


def snap(
    ts: int,
    partitions: Mapping[str, Mapping[int, PartitionInfo]],
    brokers: Sequence[int] = (1, 2, 3),
    **more: Any,
) -> ClusterSnapshot:
    return ClusterSnapshot(
        ts=ts,
        controller_id=more.pop("controller_id", 1),
        controller_epoch=more.pop("controller_epoch", None),
        brokers=tuple(brokers),
        partitions=partitions,
        **more,
    )


def info(
    leader: int, epoch: int | None, isr: tuple[int, ...], replicas: tuple[int, ...] = (1, 2, 3)
) -> PartitionInfo:
    return PartitionInfo(leader, epoch, replicas, isr)


def checked(events: Sequence[InputRecord]) -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for event in events:
        assert not isinstance(parse_json_line(event.source, dict(event.value)), DeadLetter)
        out.append((event.source.value, event.key, dict(event.value)))
    return out


def types(events: Sequence[InputRecord]) -> list[str]:
    return [e.event_type for e in events]


def test_first_poll_is_a_baseline() -> None:
    poller = AdminPoller(fetch_responses=False)
    events = poller.diff(
        snap(
            1000,
            {"t": {0: info(1, 4, (1, 2, 3)), 1: info(2, 0, (2,))}},
            min_insync_replicas={"t": 2},
            replica_lag_time_max_ms={1: 30000},
        )
    )
    assert checked(events) == [
        (
            "controller-events",
            "1",
            {
                "type": "BrokerChange",
                "ts": 1000,
                "controller_id": 1,
                "live": [{"id": 1, "epoch": 0}, {"id": 2, "epoch": 0}, {"id": 3, "epoch": 0}],
            },
        ),
        (
            "controller-events",
            "1",
            {
                "type": "TopicChange",
                "ts": 1000,
                "controller_id": 1,
                "created": {"t": {"0": [1, 2, 3], "1": [1, 2, 3]}},
                "deleted": [],
            },
        ),
        (
            "controller-events",
            "t:0",
            {
                "type": "LeaderAndIsr",
                "ts": 1000,
                "controller_id": 1,
                "topic": "t",
                "partition": 0,
                "leader": 1,
                "leader_epoch": 4,
                "isr": [1, 2, 3],
                "replicas": [1, 2, 3],
                "partition_epoch": 4,
            },
        ),
        (
            "controller-events",
            "t:1",
            {
                "type": "LeaderAndIsr",
                "ts": 1000,
                "controller_id": 1,
                "topic": "t",
                "partition": 1,
                "leader": 2,
                "leader_epoch": 0,
                "isr": [2],
                "replicas": [1, 2, 3],
                "partition_epoch": 0,
            },
        ),
        (
            "controller-events",
            "1",
            {
                "type": "TopicConfig",
                "ts": 1000,
                "controller_id": 1,
                "topic": "t",
                "min_insync_replicas": 2,
            },
        ),
        (
            "controller-events",
            "1",
            {
                "type": "BrokerConfig",
                "ts": 1000,
                "controller_id": 1,
                "broker": 1,
                "replica_lag_time_max_ms": 30000,
            },
        ),
    ]


def test_an_unchanged_cluster_gives_nothing() -> None:
    poller = AdminPoller(fetch_responses=False)
    first = snap(1000, {"t": {0: info(1, 4, (1, 2, 3))}}, min_insync_replicas={"t": 2})
    poller.diff(first)
    again = snap(2000, {"t": {0: info(1, 4, (3, 2, 1))}}, min_insync_replicas={"t": 2})
    assert poller.diff(again) == []


def test_isr_leader_and_config_changes() -> None:
    poller = AdminPoller(fetch_responses=False)
    poller.diff(
        snap(
            1000,
            {"t": {0: info(1, 4, (1, 2, 3)), 1: info(2, 7, (2, 3))}},
            min_insync_replicas={"t": 2},
        )
    )
    events = poller.diff(
        snap(
            2000, {"t": {0: info(1, 4, (1, 2)), 1: info(3, 8, (3,))}}, min_insync_replicas={"t": 1}
        )
    )
    assert [(key, value) for _, key, value in checked(events)] == [
        (
            "t:0",
            {
                "type": "IsrChange",
                "ts": 2000,
                "controller_id": 1,
                "topic": "t",
                "partition": 0,
                "leader": 1,
                "old_isr": [1, 2, 3],
                "new_isr": [1, 2],
                "leader_epoch": 4,
            },
        ),
        (
            "t:1",
            {
                "type": "LeaderAndIsr",
                "ts": 2000,
                "controller_id": 1,
                "topic": "t",
                "partition": 1,
                "leader": 3,
                "leader_epoch": 8,
                "isr": [3],
                "replicas": [1, 2, 3],
                "partition_epoch": 8,
            },
        ),
        (
            "1",
            {
                "type": "TopicConfig",
                "ts": 2000,
                "controller_id": 1,
                "topic": "t",
                "min_insync_replicas": 1,
            },
        ),
    ]


def test_reassignment_is_a_leader_and_isr() -> None:
    poller = AdminPoller(fetch_responses=False)
    poller.diff(snap(1000, {"t": {0: info(1, 4, (1, 2), replicas=(1, 2))}}))
    events = poller.diff(snap(2000, {"t": {0: info(1, 4, (1, 2, 3), replicas=(1, 2, 3))}}))
    assert types(events) == ["LeaderAndIsr"]


def test_topics_created_and_deleted_and_new_partitions() -> None:
    poller = AdminPoller(fetch_responses=False)
    poller.diff(snap(1000, {"a": {0: info(1, 0, (1,))}, "b": {0: info(2, 0, (2,))}}))
    events = poller.diff(
        snap(
            2000,
            {
                "a": {0: info(1, 0, (1,)), 1: info(2, 0, (2,), replicas=(2, 3))},
                "c": {0: info(3, 0, (3,), replicas=(3,))},
            },
        )
    )
    changes = [
        (e.value["created"], e.value["deleted"]) for e in events if e.event_type == "TopicChange"
    ]
    assert changes == [({"a": {"1": [2, 3]}, "c": {"0": [3]}}, []), ({}, ["b"])]
    assert [e.key for e in events if e.event_type == "LeaderAndIsr"] == ["a:1", "c:0"]


def test_a_large_baseline_is_split_under_the_record_size_limit() -> None:
    partitions = {
        "big": {p: info(1, 0, (1,)) for p in range(1500)},
        "small": {p: info(1, 0, (1,)) for p in range(700)},
    }
    events = AdminPoller(fetch_responses=False).diff(snap(1, partitions))
    created = [e.value["created"] for e in events if e.event_type == "TopicChange"]
    assert [{t: len(p) for t, p in part.items()} for part in created] == [
        {"big": 1000},
        {"big": 500, "small": 500},
        {"small": 200},
    ]
    checked(events)


def test_broker_epochs_count_reappearances() -> None:
    poller = AdminPoller(fetch_responses=False)
    lives = []
    for ts, brokers in ((1, (1, 2, 3)), (2, (1, 2)), (3, (1, 2)), (4, (1, 2, 3)), (5, (1, 3))):
        for event in poller.diff(snap(ts, {}, brokers=brokers)):
            if event.event_type == "BrokerChange":
                lives.append((ts, [(b["id"], b["epoch"]) for b in event.value["live"]]))
    assert lives == [
        (1, [(1, 0), (2, 0), (3, 0)]),
        (2, [(1, 0), (2, 0)]),
        (4, [(1, 0), (2, 0), (3, 1)]),
        (5, [(1, 0), (3, 1)]),
    ]


def test_broker_changes_can_be_left_to_the_log_collector() -> None:
    poller = AdminPoller(fetch_responses=False, broker_changes=False)
    assert types(poller.diff(snap(1, {}, brokers=(1, 2)))) == []
    assert types(poller.diff(snap(2, {}, brokers=(1,)))) == []
    assert AdminPoller(poller.state()).diff(snap(3, {}, brokers=(1, 2)))[0].value["live"] == [
        {"id": 1, "epoch": 0},
        {"id": 2, "epoch": 1},
    ]


def test_without_a_quorum_report_every_poll_names_the_brokers_that_answered() -> None:
    """ZooKeeper mode's news of each broker (docs/domain.md#silent-leader): at every
    poll, answered or not; a KRaft poll's quorum report tells of the brokers instead, and
    a snapshot that does not know who answered (a state file's) names nobody."""
    poller = AdminPoller(fetch_responses=False, broker_changes=False)
    for ts, answered in ((1, (1, 2, 3)), (2, (1, 3)), (3, (1, 3)), (4, ())):
        events = poller.diff(snap(ts, {}, answered=answered))
        value = {"type": "BrokersAnswered", "ts": ts, "controller_id": 1, "brokers": [*answered]}
        assert checked(events) == [("controller-events", "1", value)]
    quorum = QuorumSnapshot(3000, 7, 10, (QuorumReplica(1, 10, 5, 5),))
    kraft = poller.diff(snap(5, {}, answered=(1, 2, 3), quorum=quorum, controller_epoch=7))
    assert "BrokersAnswered" not in types(kraft)
    assert "BrokersAnswered" not in types(poller.diff(snap(6, {})))


def test_controller_change_only_with_a_known_epoch() -> None:
    """KRaft gives the epoch (the metadata quorum's); ZooKeeper mode gives none."""
    poller = AdminPoller(fetch_responses=False)
    assert "ControllerChange" not in types(poller.diff(snap(1, {}, controller_id=1)))
    assert "ControllerChange" not in types(poller.diff(snap(2, {}, controller_id=2)))
    events = poller.diff(snap(3, {}, controller_id=2, controller_epoch=9))
    change = {"type": "ControllerChange", "ts": 3, "controller_id": 2, "controller_epoch": 9}
    assert checked(events)[0] == ("controller-events", "2", change)
    assert poller.diff(snap(4, {}, controller_id=2, controller_epoch=9)) == []


def test_no_controller() -> None:
    events = AdminPoller(fetch_responses=False).diff(snap(1, {}, controller_id=None))
    live = [{"id": 1, "epoch": 0}, {"id": 2, "epoch": 0}, {"id": 3, "epoch": 0}]
    change = {"type": "BrokerChange", "ts": 1, "live": live}
    assert checked(events) == [("controller-events", "-1", change)]


def test_metadata_without_leader_epochs() -> None:
    """Brokers before 2.1 send no leader epoch: no LeaderAndIsr can be described."""
    poller = AdminPoller(fetch_responses=False)
    events = poller.diff(snap(1, {"t": {0: info(1, None, (1, 2))}}))
    assert "LeaderAndIsr" not in types(events)
    assert poller.skipped == {"leader_and_isr_without_leader_epoch": 1}
    events = poller.diff(snap(2, {"t": {0: info(1, None, (1,))}}))
    assert checked(events)[0][2] == {
        "type": "IsrChange",
        "ts": 2,
        "controller_id": 1,
        "topic": "t",
        "partition": 0,
        "leader": 1,
        "old_isr": [1, 2],
        "new_isr": [1],
    }


def test_fetch_responses_from_replica_log_end_offsets() -> None:
    poller = AdminPoller(fetch_responses=True)
    snapshot = snap(
        1000,
        {"t": {0: info(1, 4, (1, 2, 3)), 1: info(2, 5, (2,)), 2: info(-1, 6, ())}},
        log_end_offsets={
            ("t", 0, 1): 500,
            ("t", 0, 2): 500,
            ("t", 0, 3): 420,
            ("t", 1, 2): 80,
            ("t", 1, 3): 10,
        },  # t-1's follower 1: no answer
        high_watermarks={("t", 0): 420, ("t", 1): 80},
        offsets_ts=1005,
    )
    fetches = [
        (key, value)
        for source, key, value in checked(poller.diff(snapshot))
        if source == Source.FETCH_RESPONSES.value
    ]
    common = {"ts": 1005, "topic": "t"}
    assert fetches == [
        (
            "t:0",
            {
                **common,
                "partition": 0,
                "leader": 1,
                "follower": 2,
                "leader_epoch": 4,
                "fetch_offset": 500,
                "leader_leo": 500,
                "high_watermark": 420,
            },
        ),
        (
            "t:0",
            {
                **common,
                "partition": 0,
                "leader": 1,
                "follower": 3,
                "leader_epoch": 4,
                "fetch_offset": 420,
                "leader_leo": 500,
                "high_watermark": 420,
            },
        ),
        (
            "t:1",
            {
                **common,
                "partition": 1,
                "leader": 2,
                "follower": 3,
                "leader_epoch": 5,
                "fetch_offset": 10,
                "leader_leo": 80,
                "high_watermark": 80,
            },
        ),
    ]
    # every poll reports progress, not only changes
    again = [e for e in poller.diff(snapshot) if e.source is Source.FETCH_RESPONSES]
    assert len(again) == 3


def test_no_fetch_without_the_leaders_offsets() -> None:
    poller = AdminPoller(fetch_responses=True)
    snapshot = snap(
        1,
        {"t": {0: info(1, 4, (1, 2))}},
        log_end_offsets={("t", 0, 2): 5},
        high_watermarks={},
        offsets_ts=2,
    )
    assert [e for e in poller.diff(snapshot) if e.source is Source.FETCH_RESPONSES] == []
    assert poller.skipped == {"fetch_without_leader_offsets": 1}


def test_state_round_trip_resumes_the_diff() -> None:
    first = snap(
        1000,
        {"t": {0: info(1, 4, (1, 2, 3))}},
        brokers=(1, 2),
        min_insync_replicas={"t": 2},
        replica_lag_time_max_ms={1: 10000},
    )
    poller = AdminPoller(fetch_responses=False)
    poller.diff(first)
    poller.diff(
        snap(
            1500,
            {"t": {0: info(1, 4, (1, 2, 3))}},
            brokers=(1,),
            min_insync_replicas={"t": 2},
            replica_lag_time_max_ms={1: 10000},
        )
    )
    restarted = AdminPoller(poller.state(), fetch_responses=False)
    later = snap(
        2000,
        {"t": {0: info(1, 4, (1, 2))}},
        brokers=(1, 2),
        min_insync_replicas={"t": 2},
        replica_lag_time_max_ms={1: 10000},
    )
    events = restarted.diff(later)
    assert types(events) == ["BrokerChange", "IsrChange"]
    assert events[0].value["live"] == [{"id": 1, "epoch": 0}, {"id": 2, "epoch": 1}]
