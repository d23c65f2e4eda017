"""Fetch rows travel packed, one routed row per shard (``streaming.job.routing.pack_fetches``).

The invariants: a pack holds exactly the valid fetches of its shard, in input order,
with the facts each record states; its ``ts`` is the latest of them (Spark's watermark
reads it); and a shard's output is the same whether its fetches arrive packed or one
row each.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st

from state import ReplicationModel, Shard, shard_of
from state.events import Source
from state.settings import RuleSettings
from streaming.job.routing import FETCH, FETCHES, route, unpack_fetches
from streaming.job.shard_state import ShardJobSettings, ShardSnapshot, process, restore_snapshot
from streaming.job.state_format import write_snapshot
from tests.unit.test_shard_state import kafka_records

SOURCES = {s.value: s for s in Source}
SHARDS = 4
FACTS = (
    "partition",
    "leader",
    "follower",
    "leader_epoch",
    "fetch_offset",
    "leader_leo",
    "high_watermark",
)

fetch_value = st.fixed_dictionaries(
    {
        "ts": st.integers(0, 10_000),
        "topic": st.sampled_from(("a", "b", "c")),
        "partition": st.integers(0, 5),
        "leader": st.integers(1, 3),
        "follower": st.integers(1, 3),
        "leader_epoch": st.integers(0, 2),
        "fetch_offset": st.integers(0, 50),
        "leader_leo": st.integers(0, 50),
        "high_watermark": st.integers(0, 50),
    },
    optional={"error": st.sampled_from(("NONE", "NOT_LEADER_OR_FOLLOWER"))},
)
# Invalid records ride along: they become dead letters, never part of a pack.
fetch_record = st.one_of(fetch_value, st.just(b"{"), st.just({"ts": 1, "topic": "a"}))


def _fetches(values: list[Any]) -> list[dict[str, Any]]:
    return [{"source": "fetch-responses", "value": value} for value in values]


@settings(max_examples=150, deadline=None)
@given(st.lists(fetch_record, min_size=1, max_size=60))
def test_each_pack_holds_its_shards_fetches_in_input_order(values: list[Any]) -> None:
    routed = route(kafka_records(_fetches(values)), SOURCES, SHARDS)
    assert not (routed["kind"] == FETCH).any()  # no fetch travels alone
    packs = routed[routed["kind"] == FETCHES]
    assert packs["shard"].is_unique
    for event in packs["event"]:
        # a pack's strings are dictionary-encoded, its dictionaries the names it uses
        columns = pa.ipc.open_stream(event).read_all()
        for name in ("topic", "src_topic", "error"):
            (column,) = columns.column(name).chunks
            used = {cell for cell in column.to_pylist() if cell is not None}
            assert sorted(column.dictionary.to_pylist()) == sorted(used), name
    unpacked = unpack_fetches(routed)
    fetches = unpacked[unpacked["kind"] == FETCH]
    for shard in range(SHARDS):
        # Expected from the records themselves: offset = position in the input.
        expected = [
            (offset, value["topic"], *(value[name] for name in FACTS), value.get("error", "NONE"))
            for offset, value in enumerate(values)
            if isinstance(value, dict)
            and "partition" in value
            and shard_of(value["topic"], value["partition"], SHARDS) == shard
        ]
        mine = fetches[fetches["shard"] == shard]
        got = list(
            zip(
                mine["src_offset"].astype(int).tolist(),
                mine["topic"].tolist(),
                *(mine[name].astype(int).tolist() for name in FACTS),
                mine["error"].tolist(),
                strict=True,
            )
        )
        assert got == expected
        pack = packs[packs["shard"] == shard]
        if expected:
            assert pack["ts"].astype(int).tolist() == [max(values[o]["ts"] for o, *_ in expected)]
            assert (mine["ts"].to_numpy() == [values[o]["ts"] for o, *_ in expected]).all()
            assert (mine["src_topic"] == "fetch-responses").all()
        else:
            assert pack.empty
    dead = unpacked[unpacked["kind"] == "dead"]
    assert len(dead) == sum(not (isinstance(v, dict) and "partition" in v) for v in values)


def test_a_hand_counted_batch_makes_one_pack_per_shard() -> None:
    """Partitions a-0 and a-1 hash to different shards of 4 (crc32 of ``a:0``, ``a:1``);
    three fetches of a-0 and one of a-1 make two packs of 3 and 1 fetches."""
    assert shard_of("a", 0, SHARDS) != shard_of("a", 1, SHARDS)
    base = {
        "topic": "a",
        "leader": 1,
        "follower": 2,
        "leader_epoch": 0,
        "fetch_offset": 0,
        "leader_leo": 0,
        "high_watermark": 0,
    }
    values = [
        {**base, "ts": 5, "partition": 0},
        {**base, "ts": 9, "partition": 1},
        {**base, "ts": 7, "partition": 0},
        {**base, "ts": 3, "partition": 0},
    ]
    routed = route(kafka_records(_fetches(values)), SOURCES, SHARDS)
    packs = routed[routed["kind"] == FETCHES]
    latest = dict(
        zip(packs["shard"].astype(int).tolist(), packs["ts"].astype(int).tolist(), strict=True)
    )
    assert latest == {shard_of("a", 0, SHARDS): 7, shard_of("a", 1, SHARDS): 9}
    unpacked = unpack_fetches(routed)
    of_a0 = unpacked[unpacked["shard"] == shard_of("a", 0, SHARDS)]
    assert of_a0["ts"].tolist() == [5, 7, 3]  # input order; the shard sorts by time itself
    assert of_a0["src_offset"].tolist() == [0, 2, 3]


def _one_row_per_fetch(routed: pd.DataFrame, order: random.Random) -> pd.DataFrame:
    """The routed rows one per fetch, in any order: Spark hands a shard its rows in no
    order it promises, and before packing fetch rows came before dead letters."""
    rows = unpack_fetches(routed)
    return rows.iloc[order.sample(range(len(rows)), len(rows))].reset_index(drop=True)


def _as_set(output: pd.DataFrame) -> list[str]:
    return sorted(
        json.dumps(row, sort_keys=True) for row in json.loads(output.to_json(orient="records"))
    )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(fetch_record, min_size=1, max_size=25), min_size=1, max_size=3), st.randoms()
)
def test_a_shard_gives_the_same_output_packed_or_not(
    batches: list[list[Any]], order: random.Random
) -> None:
    rules = RuleSettings()
    job = ShardJobSettings(rules, SHARDS, 60_000, True)
    leaders = [
        {
            "source": "controller-events",
            "value": {
                "type": "LeaderAndIsr",
                "ts": 0,
                "topic": topic,
                "partition": p,
                "leader": 1,
                "leader_epoch": 0,
                "isr": [1, 2, 3],
                "replicas": [1, 2, 3],
                "partition_epoch": 0,
            },
        }
        for topic in ("a", "b", "c")
        for p in range(6)
    ]
    states: dict[bool, dict[int, bytes]] = {True: {}, False: {}}
    clock = -1
    for number, values in enumerate(batches):
        envelopes = (leaders if number == 0 else []) + _fetches(values)
        routed = route(kafka_records(envelopes), SOURCES, SHARDS)
        for packed in (True, False):
            rows = routed if packed else _one_row_per_fetch(routed, order)
            outputs = []
            for shard in range(SHARDS):
                mine = rows[rows["shard"] == shard]
                snapshot = (
                    restore_snapshot(states[packed][shard], rules)
                    if shard in states[packed]
                    else ShardSnapshot(ReplicationModel(rules, Shard(shard, SHARDS)))
                )
                outputs.append(process(snapshot, mine if len(mine) else None, clock, job))
                states[packed][shard] = write_snapshot(snapshot)
            if packed:
                with_packs = pd.concat(outputs, ignore_index=True)
            else:
                one_each = pd.concat(outputs, ignore_index=True)
        # Rows of one batch as a set: dead letters leave in the order their rows came.
        assert _as_set(with_packs) == _as_set(one_each)
        times = routed["ts"].dropna()  # dead letters have none
        clock = max(clock, int(times.max())) if len(times) else clock
