"""Which shards receive which part of a controller event (state.controller_routing).

Shards of the topic ``t`` with 4 shards (CRC-32 of ``"t:<p>"`` mod 4, computed by hand
once with ``zlib.crc32``): t:0 -> 3, t:1 -> 1, t:2 -> 3, t:3 -> 1, t:4 -> 2, t:5 -> 0.
"""

from __future__ import annotations

import pandas as pd

from state import shard_of
from state.controller_routing import (
    ControllerEpochSeen,
    ShardPart,
    route_controller_events,
    split_for_shards,
)
from state.events import (
    BrokerConfig,
    IsrChange,
    LeaderAndIsr,
    MetadataPartitionState,
    Source,
    TopicChange,
    UpdateMetadata,
)
from streaming.job.routing import CONTROLLER, DEAD, FETCH, FETCHES, route, unpack_fetches
from tests.unit.test_shard_state import kafka_records

SHARDS = 4


def election(partition: int, ts: int = 1, epoch: int | None = None) -> LeaderAndIsr:
    return LeaderAndIsr(
        ts=ts,
        topic="t",
        partition=partition,
        leader=1,
        leader_epoch=0,
        isr=(1, 2),
        replicas=(1, 2),
        partition_epoch=0,
        controller_id=9 if epoch is not None else None,
        controller_epoch=epoch,
    )


def metadata_state(partition: int) -> MetadataPartitionState:
    return MetadataPartitionState(
        topic="t",
        partition=partition,
        leader=1,
        leader_epoch=0,
        isr=(1, 2),
        replicas=(1, 2),
        offline_replicas=(),
    )


def test_the_shards_of_the_docstring() -> None:
    assert [shard_of("t", p, SHARDS) for p in range(6)] == [3, 1, 3, 1, 2, 0]


def test_leader_and_isr_goes_to_its_owner_only() -> None:
    assert split_for_shards(election(4), SHARDS) == [ShardPart(2, election(4), True)]


def test_isr_change_is_counted_by_its_owner_and_seen_by_every_shard() -> None:
    change = IsrChange(ts=1, topic="t", partition=1, leader=1, old_isr=(1, 2), new_isr=(1,))
    parts = split_for_shards(change, SHARDS)
    assert [(p.shard, p.counted) for p in parts] == [(1, True), (0, False), (2, False), (3, False)]


def test_update_metadata_is_split_by_owner_and_shard_0_counts_it() -> None:
    event = UpdateMetadata(ts=1, broker=2, partitions=tuple(metadata_state(p) for p in (0, 1, 2)))
    parts = {p.shard: p for p in split_for_shards(event, SHARDS)}
    assert sorted(parts) == [0, 1, 3]  # t:0 and t:2 -> 3, t:1 -> 1, shard 0 counts
    assert [s.partition for s in parts[3].event.partitions] == [0, 2]  # type: ignore[union-attr]
    assert [s.partition for s in parts[1].event.partitions] == [1]  # type: ignore[union-attr]
    assert parts[0].event.partitions == ()  # type: ignore[union-attr]
    assert [p.counted for p in parts.values()] == [True, False, False]


def test_created_partitions_are_split_and_deletions_go_everywhere() -> None:
    created = TopicChange(ts=1, created={"t": {4: (1, 2), 5: (2, 1)}})
    assert {p.shard: p.event.created for p in split_for_shards(created, SHARDS)} == {  # type: ignore[union-attr]
        0: {"t": {5: (2, 1)}},
        2: {"t": {4: (1, 2)}},
    }
    deleted = TopicChange(ts=1, deleted=("t",))
    assert [p.shard for p in split_for_shards(deleted, SHARDS)] == [0, 1, 2, 3]


def test_cluster_events_go_to_every_shard_counted_by_shard_0() -> None:
    config = BrokerConfig(ts=1, broker=1, replica_lag_time_max_ms=10_000)
    assert split_for_shards(config, SHARDS) == [ShardPart(s, config, s == 0) for s in range(4)]


def test_only_a_raise_of_the_largest_epoch_reaches_the_skipped_shards() -> None:
    # epochs 5, 5, 4, 6: the first 5 and the 6 raise the largest epoch seen so far
    events = [election(0, 1, 5), election(1, 2, 5), election(4, 3, 4), election(5, 4, 6)]
    routed = route_controller_events(events, SHARDS)
    carriers = [[(p.shard, p.event) for p in parts if not p.counted] for parts in routed]
    seen5 = ControllerEpochSeen(ts=1, controller_id=9, controller_epoch=5)
    seen6 = ControllerEpochSeen(ts=4, controller_id=9, controller_epoch=6)
    assert carriers == [
        [(0, seen5), (1, seen5), (2, seen5)],
        [],
        [],
        [(1, seen6), (2, seen6), (3, seen6)],
    ]
    assert [[p.shard for p in parts if p.counted] for parts in routed] == [[3], [1], [2], [0]]


def test_a_cold_start_routes_one_row_per_partition_not_one_per_shard() -> None:
    """100 LeaderAndIsr with 64 shards: 100 routed rows (no controller epoch), not 6,400."""
    envelopes = [
        {
            "source": "controller-events",
            "value": {
                "type": "LeaderAndIsr",
                "ts": 1,
                "topic": "t",
                "partition": p,
                "leader": 1,
                "leader_epoch": 0,
                "isr": [1, 2],
                "replicas": [1, 2],
                "partition_epoch": 0,
            },
        }
        for p in range(100)
    ]
    fetch = {
        "source": "fetch-responses",
        "value": {
            "ts": 2,
            "topic": "t",
            "partition": 4,
            "leader": 1,
            "follower": 2,
            "leader_epoch": 0,
            "fetch_offset": 1,
            "leader_leo": 1,
            "high_watermark": 1,
        },
    }
    bad = {"source": "fetch-responses", "value": b"{"}
    routed = route(kafka_records([*envelopes, fetch, bad]), {s.value: s for s in Source}, 64)
    controller = routed[routed["kind"] == CONTROLLER]
    assert len(controller) == 100
    assert controller["counted"].all()
    assert (controller["shard"] == [shard_of("t", p, 64) for p in range(100)]).all()
    assert (routed["kind"] == FETCHES).sum() == 1  # one fetch, one shard: one pack
    unpacked = unpack_fetches(routed)
    fetches = unpacked[unpacked["kind"] == FETCH]
    assert fetches[["shard", "topic", "partition", "fetch_offset"]].values.tolist() == [
        [shard_of("t", 4, 64), "t", 4, 1]
    ]
    assert fetches["value"].isna().all()  # the raw value travels with dead letters only
    dead = routed[routed["kind"] == DEAD]
    assert dead[["shard", "reason", "value"]].values.tolist() == [[0, "invalid_json", "{"]]
    assert isinstance(routed, pd.DataFrame)
