"""The caught-up rule as one named function (Kafka's Replica.updateFetchState)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from hypothesis import given
from hypothesis import strategies as st

from state.caught_up import (
    FETCH_STATE_FIELDS,
    LAST_CAUGHT_UP,
    LAST_FETCH_LEADER_LEO,
    LAST_FETCH_TIME,
    LOG_END_OFFSET,
    NEVER,
    UNKNOWN_OFFSET,
    update_fetch_state,
)


def record(
    last_fetch_time: int, last_fetch_leader_leo: int, last_caught_up: int
) -> npt.NDArray[np.int64]:
    replica = np.zeros(len(FETCH_STATE_FIELDS), dtype=np.int64)
    replica[[LOG_END_OFFSET, LAST_FETCH_TIME, LAST_FETCH_LEADER_LEO, LAST_CAUGHT_UP]] = (
        UNKNOWN_OFFSET,
        last_fetch_time,
        last_fetch_leader_leo,
        last_caught_up,
    )
    return replica


def test_a_fetch_at_the_leaders_leo_catches_up_at_its_own_time() -> None:
    replica = record(1_000, 500, NEVER)
    update_fetch_state(replica, 2_000, 700, 700)
    assert replica.tolist() == [700, 2_000, 700, 2_000]


def test_a_fetch_past_the_previous_leo_catches_up_at_the_previous_fetch() -> None:
    replica = record(1_000, 500, NEVER)
    update_fetch_state(replica, 2_000, 500, 900)
    assert replica.tolist() == [500, 2_000, 900, 1_000]


def test_a_fetch_behind_the_previous_leo_does_not_catch_up() -> None:
    replica = record(1_000, 500, 400)
    update_fetch_state(replica, 2_000, 499, 900)
    assert replica.tolist() == [499, 2_000, 900, 400]


@given(
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
)
def test_the_compiled_rule_is_the_python_rule_and_never_goes_back(
    last_fetch: int, previous_leo: int, caught_up: int, ts: int, offset: int, leo: int
) -> None:
    compiled, interpreted = (
        record(last_fetch, previous_leo, caught_up),
        record(last_fetch, previous_leo, caught_up),
    )
    update_fetch_state(compiled, ts, offset, leo)
    update_fetch_state.py_func(interpreted, ts, offset, leo)
    assert compiled.tolist() == interpreted.tolist()
    assert compiled[LAST_CAUGHT_UP] >= caught_up
    assert compiled[LAST_CAUGHT_UP] == (
        max(caught_up, ts)
        if offset >= leo
        else max(caught_up, last_fetch)
        if offset >= previous_leo
        else caught_up
    )
