"""The vectorised health signature (state.health_signature) changes exactly when a
partition's health record changes in what defines a health change: everything but the
clock and the lag figures. The referee is the per-partition signature the shards used
before (``state.health_signature.legacy_health_signature``, a digest of those facts)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state import NO_FOLLOWER, HealthFrame, health_signatures, legacy_health_signature

Row = dict[str, Any]

BASE: Row = {
    "leader": 1,
    "leader_epoch": 4,
    "replicas": (1, 2, 3),
    "isr": (1, 2, 3),
    "flags": (False, False, True, False, False),
    "metadata_state": 0,
    "stale_brokers": [],
    "blackout": (None, None),
    # slots: (broker, status, in_isr); status NO_FOLLOWER: the slot holds no follower
    "slots": [(1, NO_FOLLOWER, True), (2, 0, True), (3, 1, True)],
    # left out of the signature
    "as_of_ms": 1_000,
    "high_watermark": 50,
    "leader_leo": 60,
    "lag": (0, 7_000),
}


def frame_of(rows: list[Row], width: int | None = None) -> HealthFrame:
    """A frame of ``rows``, each with ``width`` replica slots (padded with no follower)."""
    n = len(rows)
    width = max([len(r["slots"]) for r in rows] + [width or 0])
    broker = np.full((n, width), NO_FOLLOWER, dtype=np.int64)
    status = np.full((n, width), NO_FOLLOWER, dtype=np.int8)
    in_isr = np.zeros((n, width), dtype=np.bool_)
    lag = np.zeros((n, width), dtype=np.int64)
    for i, row in enumerate(rows):
        for k, (b, s, member) in enumerate(row["slots"]):
            broker[i, k], status[i, k], in_isr[i, k] = b, s, member
            lag[i, k] = row["lag"][k % len(row["lag"])]

    def column(name: str, dtype: Any = np.int64) -> Any:
        return np.asarray([r[name] for r in rows], dtype=dtype)

    flags = np.asarray([r["flags"] for r in rows], dtype=np.bool_).reshape(n, 5)
    zeros = np.zeros(n, dtype=np.int64)
    return HealthFrame(
        as_of_ms=int(rows[0]["as_of_ms"]) if rows else 0,
        rows=np.arange(n),
        topic=["t"] * n,
        partition=np.arange(n, dtype=np.int64),
        leader=column("leader"),
        leader_epoch=column("leader_epoch"),
        replicas=[r["replicas"] for r in rows],
        isr=[r["isr"] for r in rows],
        high_watermark=column("high_watermark"),
        leader_leo=column("leader_leo"),
        under_replicated=flags[:, 0],
        under_min_isr=flags[:, 1],
        at_min_isr=flags[:, 2],
        offline=flags[:, 3],
        predicted_under_replicated=flags[:, 4],
        lag_time_max_ms=zeros + 30_000,
        min_insync_replicas=zeros + 2,
        follower_broker=broker,
        follower_status=status,
        follower_in_isr=in_isr,
        follower_fetch_offset=lag,
        follower_last_caught_up_ms=lag,
        follower_lag_time_ms=lag,
        follower_lag_time_known=lag > 0,
        follower_shrink_by_ms=lag,
        follower_shrink_by_known=lag > 0,
        metadata_state=column("metadata_state", np.int8),
        stale_brokers=[list(r["stale_brokers"]) for r in rows],
        blackout_earliest_ms=[r["blackout"][0] for r in rows],
        blackout_latest_ms=[r["blackout"][1] for r in rows],
    )


def signatures(rows: list[Row], width: int | None = None) -> list[int]:
    signature: list[int] = health_signatures(frame_of(rows, width)).tolist()
    return signature


def changed(row: Row, **change: Any) -> bool:
    before, after = signatures([row, {**row, **change}])
    return before != after


# ----------------------------------------------------------- by hand, one fact at a time


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # the clock and the lag figures: not a health change
        ({"as_of_ms": 99_000}, False),
        ({"high_watermark": 51}, False),
        ({"leader_leo": 61}, False),
        ({"lag": (5, 25_000)}, False),
        # a slot that holds no follower is not part of the record, whatever its broker
        ({"slots": [(9, NO_FOLLOWER, False), (2, 0, True), (3, 1, True)]}, False),
        # the same followers in the same order, the empty slot elsewhere: same record
        ({"slots": [(2, 0, True), (1, NO_FOLLOWER, True), (3, 1, True)]}, False),
        # every fact of the record's health
        ({"leader": 2}, True),
        ({"leader": -1}, True),
        ({"leader_epoch": 5}, True),
        ({"replicas": (1, 3, 2)}, True),  # order is part of the record
        ({"replicas": (1, 2)}, True),
        ({"isr": (1, 3, 2)}, True),
        ({"isr": (1, 2)}, True),
        ({"isr": ()}, True),
        ({"flags": (True, False, True, False, False)}, True),
        ({"flags": (False, True, True, False, False)}, True),
        ({"flags": (False, False, False, False, False)}, True),
        ({"flags": (False, False, True, True, False)}, True),
        ({"flags": (False, False, True, False, True)}, True),
        ({"metadata_state": 1}, True),
        ({"stale_brokers": [2]}, True),
        ({"blackout": (0, None)}, True),  # 0 is a time, None is none
        ({"blackout": (None, 0)}, True),
        ({"blackout": (5_000, 9_000)}, True),
        ({"slots": [(1, NO_FOLLOWER, True), (2, 1, True), (3, 1, True)]}, True),  # status
        ({"slots": [(1, NO_FOLLOWER, True), (2, 0, False), (3, 1, True)]}, True),  # ISR
        ({"slots": [(1, NO_FOLLOWER, True), (4, 0, True), (3, 1, True)]}, True),  # broker
        ({"slots": [(1, NO_FOLLOWER, True), (3, 1, True), (2, 0, True)]}, True),  # order
        ({"slots": [(1, NO_FOLLOWER, True), (2, 0, True)]}, True),  # one follower fewer
    ],
)
def test_one_change(change: Row, expected: bool) -> None:
    assert changed(BASE, **change) is expected


def test_blackout_times_and_their_order() -> None:
    with_window = {**BASE, "metadata_state": 2, "stale_brokers": [3], "blackout": (5, 9)}
    assert changed(with_window, blackout=(9, 5))
    assert changed(with_window, blackout=(5, 10))
    assert not changed(with_window, blackout=(5, 9))


def test_stale_brokers_in_order() -> None:
    stale = {**BASE, "stale_brokers": [2, 3]}
    assert changed(stale, stale_brokers=[3, 2])
    assert changed(stale, stale_brokers=[2])
    assert not changed(stale, stale_brokers=[2, 3])


def test_a_partition_keeps_its_signature_in_a_wider_frame_among_others() -> None:
    """Neither the frame's number of replica slots nor its other rows enter."""
    alone = signatures([BASE])[0]
    other = {
        **BASE,
        "slots": [(1, NO_FOLLOWER, True)] + [(b, 0, True) for b in range(2, 7)],
        "replicas": (1, 2, 3, 4, 5, 6),
        "isr": (1, 2, 3, 4, 5, 6),
    }
    assert signatures([other, BASE], width=8)[1] == alone
    assert signatures([BASE, BASE]) == [alone, alone]


def test_empty_frame() -> None:
    assert signatures([]) == []


# ------------------------------------------------------------------------ property

brokers = st.integers(-1, 4)
broker_lists = st.lists(st.integers(0, 4), max_size=4)
slots = st.lists(
    st.tuples(
        brokers, st.sampled_from((NO_FOLLOWER, NO_FOLLOWER, 0, 1, 2, 3, 4, 5, 6)), st.booleans()
    ),
    max_size=5,
)
optional_time = st.none() | st.integers(0, 3)


@st.composite
def health_rows(draw: st.DrawFn) -> Row:
    """A partition's health facts from small domains, so that equal rows are frequent."""
    return {
        "leader": draw(brokers),
        "leader_epoch": draw(st.integers(0, 2)),
        "replicas": tuple(draw(broker_lists)),
        "isr": tuple(draw(broker_lists)),
        "flags": tuple(draw(st.lists(st.booleans(), min_size=5, max_size=5))),
        "metadata_state": draw(st.integers(0, 2)),
        "stale_brokers": draw(broker_lists),
        "blackout": (draw(optional_time), draw(optional_time)),
        "slots": draw(slots),
        "as_of_ms": draw(st.integers(0, 10)),
        "high_watermark": draw(st.integers(0, 10)),
        "leader_leo": draw(st.integers(0, 10)),
        "lag": (draw(st.integers(0, 10)), draw(st.integers(0, 10))),
    }


FIELDS = (
    "leader",
    "leader_epoch",
    "replicas",
    "isr",
    "flags",
    "metadata_state",
    "stale_brokers",
    "blackout",
    "slots",
    "as_of_ms",
    "high_watermark",
    "leader_leo",
    "lag",
)


@st.composite
def frames(draw: st.DrawFn) -> tuple[list[Row], int]:
    """Rows, and among them variants of earlier rows with a few facts redrawn."""
    rows = draw(st.lists(health_rows(), min_size=1, max_size=6))
    for _ in range(draw(st.integers(0, 12))):
        base = rows[draw(st.integers(0, len(rows) - 1))]
        fresh = draw(health_rows())
        redrawn = draw(st.lists(st.sampled_from(FIELDS), max_size=3))
        variant = {**base, **{name: fresh[name] for name in redrawn}}
        if draw(st.booleans()):  # the same followers in other replica slots
            variant["slots"] = draw(relaid(variant["slots"]))
        rows.append(variant)
    return rows, draw(st.integers(0, 7))


def relaid(slots: list[tuple[int, int, bool]]) -> st.SearchStrategy[list[tuple[int, int, bool]]]:
    """``slots`` with its followers in the same order and empty slots put anywhere."""
    followers = [slot for slot in slots if slot[1] != NO_FOLLOWER]
    empty = st.tuples(brokers, st.just(NO_FOLLOWER), st.booleans())
    return st.lists(st.tuples(st.integers(0, len(followers)), empty), max_size=3).map(
        lambda gaps: _with_gaps(followers, gaps)
    )


def _with_gaps(
    followers: list[tuple[int, int, bool]], gaps: list[tuple[int, tuple[int, int, bool]]]
) -> list[tuple[int, int, bool]]:
    out = list(followers)
    for at, slot in sorted(gaps, reverse=True):
        out.insert(at, slot)
    return out


@settings(max_examples=300, deadline=None)
@given(frames())
def test_signatures_are_equal_exactly_when_the_legacy_ones_are(
    generated: tuple[list[Row], int],
) -> None:
    rows, width = generated
    frame = frame_of(rows, width)
    new = health_signatures(frame).tolist()
    legacy = [legacy_health_signature(frame, i) for i in range(len(frame))]
    for i in range(len(rows)):
        for j in range(len(rows)):
            assert (new[i] == new[j]) == (legacy[i] == legacy[j]), (rows[i], rows[j])
    # and a row's signature does not depend on the frame around it
    for i, row in enumerate(rows):
        assert signatures([row])[0] == new[i]
