"""A shard applies its events in the order a stable pandas sort of the unpacked rows
gives (``streaming.job.shard_events``): event time, Kafka topic, partition, offset, row of
the pack (nulls last), then the order the rows came in; fetches packed or one a row, in
any order of the rows. And a fetch's dead letter is the one the unpacked row makes."""

from __future__ import annotations

import pickle
import random
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st

from state import FetchBatch
from state.events import DeadLetterReason
from streaming.job.routing import (
    CONTROLLER,
    DEAD,
    FETCH,
    ROUTED_ARROW_SCHEMA,
    pack_fetches,
    pandas_type,
    unpack_fetches,
)
from streaming.job.shard_events import (
    SORT_KEYS,
    ShardEvents,
    _order_by_every_key,
    _order_by_record,
)
from streaming.job.shard_state import dead_letter_row

event = st.fixed_dictionaries(
    {
        "kind": st.sampled_from((FETCH, FETCH, FETCH, CONTROLLER, DEAD)),
        "ts": st.integers(0, 3),
        "src_topic": st.sampled_from(("fetch-responses", "controller-events", "b")),
        "src_partition": st.integers(0, 1),
        "src_offset": st.integers(0, 2),
        "src_row": st.one_of(st.none(), st.integers(0, 1)),
        "packed": st.booleans(),
        "pack": st.integers(0, 2),
    }
)


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    count = len(rows)
    arrays = [
        pa.array([row.get(f.name) for row in rows], f.type) if count else pa.nulls(0, f.type)
        for f in ROUTED_ARROW_SCHEMA
    ]
    table = pa.Table.from_arrays(arrays, schema=ROUTED_ARROW_SCHEMA)
    frame: pd.DataFrame = table.to_pandas(types_mapper=pandas_type)
    return frame


def _routed(events: list[dict[str, Any]], order: random.Random) -> pd.DataFrame:
    """The events as routed rows, each with an identity (a fetch's ``leader``, a
    controller part's ``digest``); fetches marked ``packed`` in up to 3 packs."""
    loose: list[dict[str, Any]] = []
    packs: dict[int, list[dict[str, Any]]] = {}
    for identity, spec in enumerate(events):
        row = {k: v for k, v in spec.items() if k not in ("packed", "pack")} | {"shard": 0}
        if spec["kind"] == FETCH:
            row |= {
                "topic": "t",
                "partition": 0,
                "leader": identity,
                "follower": 1,
                "leader_epoch": 0,
                "fetch_offset": 5,
                "leader_leo": 5,
                "high_watermark": 5,
                "error": "NONE",
            }
            if spec["packed"]:
                packs.setdefault(spec["pack"], []).append(row)
                continue
        elif spec["kind"] == CONTROLLER:
            row |= {
                "digest": identity,
                "counted": True,
                "event": pickle.dumps(identity),
                "value": "{}",
            }
        else:
            row |= {"source": "fetch-responses", "value": "x", "reason": "invalid", "detail": "d"}
        loose.append(row)
    frames = [_frame(loose)]
    for pack in packs.values():
        table = pa.Table.from_pandas(_frame(pack), schema=ROUTED_ARROW_SCHEMA)
        packed = pack_fetches(table.to_batches()[0])
        frames.append(packed.to_pandas(types_mapper=pandas_type))
    routed = pd.concat(frames, ignore_index=True)
    shuffled: pd.DataFrame = routed.iloc[order.sample(range(len(routed)), len(routed))]
    return shuffled.reset_index(drop=True)


def _identity(row: pd.Series) -> int:
    return int(row["leader"] if row["kind"] == FETCH else row["digest"])


@settings(max_examples=200, deadline=None)
@given(st.lists(event, min_size=1, max_size=40), st.randoms())
def test_the_order_is_a_stable_sort_of_the_unpacked_rows(
    events: list[dict[str, Any]], order: random.Random
) -> None:
    rows = _routed(events, order)
    unpacked = unpack_fetches(rows)
    expected = (
        unpacked[unpacked["kind"] != DEAD]
        .sort_values(list(SORT_KEYS), kind="stable")
        .reset_index(drop=True)
    )
    got = ShardEvents.of(rows)
    assert len(got) == len(expected)
    assert got.ts.tolist() == expected["ts"].astype(int).tolist()
    every = list(range(len(got)))
    mine = got.rows_at(every)
    assert [_identity(row) for row in mine] == [_identity(row) for _, row in expected.iterrows()]
    for row, (_, theirs) in zip(mine, expected.iterrows(), strict=True):
        assert dead_letter_row(row, DeadLetterReason.LATE, "d") == dead_letter_row(
            theirs, DeadLetterReason.LATE, "d"
        )
    dead = unpacked[unpacked["kind"] == DEAD]
    assert got.dead["value"].tolist() == dead["value"].tolist()
    # a run of fetches reaches the model in that order
    fetched = [
        leader
        for _, part in got.model_input()
        if isinstance(part, FetchBatch)
        for leader in part.leader.tolist()
    ]
    assert fetched == [_identity(row) for row in mine if row["kind"] == FETCH]


key_cell = st.one_of(st.none(), st.integers(-1, 2))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(*(key_cell for _ in SORT_KEYS)), min_size=1, max_size=30), st.randoms())
def test_ordering_by_record_is_ordering_by_every_key(
    cells: list[tuple[int | None, ...]], order: random.Random
) -> None:
    """The two ways ``ShardEvents`` orders events agree, on keys with nulls, a record's
    rows apart or together, a record twice, and rows in any order (``came``); where the
    shortcut declines (a null time, a negative row), it says so."""
    keys = {
        name: (
            np.array([0 if row[i] is None else row[i] for row in cells], np.int64),
            np.array([row[i] is None for row in cells], np.bool_),
        )
        for i, name in enumerate(SORT_KEYS)
    }
    came = np.array(order.sample(range(len(cells)), len(cells)), np.int64)
    expected = _order_by_every_key(keys, came)
    # the same as pandas' stable sort, nulls last, of the keys then ``came``
    frame = pd.DataFrame(
        {name: pd.array([row[i] for row in cells], "Int64") for i, name in enumerate(SORT_KEYS)}
    ).assign(came=came)
    by_pandas = frame.sort_values([*SORT_KEYS, "came"], kind="stable").index.to_numpy()
    assert expected.tolist() == by_pandas.tolist()
    got = _order_by_record(keys, came)
    times, rows = keys["ts"], keys["src_row"]
    if times[1].any() or (rows[0] < 0).any():
        assert got is None
    else:
        assert got is not None
        assert got.tolist() == expected.tolist()
