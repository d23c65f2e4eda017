"""The vectorised health signature (state.health_signature) changes exactly when a
partition's health record changes in what defines a health change: everything but the
clock and the lag figures. By hand, one fact at a time; generated frames are held against
the signature the shards used before in test_legacy_signatures."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from state import NO_FOLLOWER, HealthFrame, health_signatures
from state.eligible_leaders import EligibleLeaders

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
    "eligible_leaders": None,  # (elr, last_known_elr), None: never stated
    "leader_silent": False,
    "leader_heard_ms": 900,  # left out: a time, moving with every fetch
    # slots: (broker, status, in_isr); status NO_FOLLOWER: the slot holds no follower
    "slots": [(1, NO_FOLLOWER, True), (2, 0, True), (3, 1, True)],
    # left out of the signature
    "as_of_ms": 1_000,
    "high_watermark": 50,
    "leader_leo": 60,
    "lag": (0, 7_000),
}


BASE_SIGNATURE_BEFORE_ELR = 137080300347420383


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
        eligible_leaders=[
            None if r.get("eligible_leaders") is None else EligibleLeaders(*r["eligible_leaders"])
            for r in rows
        ],
        high_watermark=column("high_watermark"),
        # derived from under_min_isr and a setting: not a fact of its own
        high_watermark_frozen=flags[:, 1],
        leader_leo=column("leader_leo"),
        under_replicated=flags[:, 0],
        under_min_isr=flags[:, 1],
        at_min_isr=flags[:, 2],
        offline=flags[:, 3],
        # derived from offline, the ISR and the ELR: not a fact of its own
        offline_recovery=np.full(n, -1, dtype=np.int8),
        leader_silent=np.asarray([r.get("leader_silent", False) for r in rows], dtype=np.bool_),
        leader_heard_ms=np.asarray([r.get("leader_heard_ms", 0) for r in rows], dtype=np.int64),
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
        follower_shrink_at_ms=lag,  # a deadline: left out, as shrink_by_ms is
        follower_shrink_at_known=lag > 0,
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
        ({"leader_heard_ms": 1_000}, False),
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
        # Kafka 4.0+: a stated ELR, its members and order, and the last known ELR
        ({"eligible_leaders": ((), ())}, True),  # stated, even empty, is not "never"
        ({"eligible_leaders": ((2,), ())}, True),
        ({"eligible_leaders": ((), (2,))}, True),
        # no news of the leader for more than T / 2 (state.leader_news)
        ({"leader_silent": True}, True),
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


def test_elr_members_order_and_lists_count() -> None:
    elr = {**BASE, "isr": (1,), "eligible_leaders": ((2, 3), ())}
    assert changed(elr, eligible_leaders=((3, 2), ()))
    assert changed(elr, eligible_leaders=((2,), (3,)))
    assert changed(elr, eligible_leaders=((), (2, 3)))  # moved to the other list
    assert not changed(elr, eligible_leaders=((2, 3), ()))


def test_a_partition_without_a_stated_elr_keeps_the_signature_of_the_release_before() -> None:
    """BASE's signature as bbd9956 computed it, before the ELR existed (this file's
    ``signatures([BASE])`` run in a checkout of that commit): after an upgrade, a
    partition whose health did not change is not written again."""
    assert signatures([BASE]) == [BASE_SIGNATURE_BEFORE_ELR]


def test_empty_frame() -> None:
    assert signatures([]) == []
