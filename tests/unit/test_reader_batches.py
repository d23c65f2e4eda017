"""How the source's reader cuts a poll's records into reader batches by the bytes of their
values (``partition_reader.runs_within``): a boundary table, then the rule as a property."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.job.kafka_source.partition_reader import runs_within


def runs(sizes: list[int], budget: int) -> list[tuple[int, int]]:
    return list(runs_within(np.asarray(sizes, np.int64), budget))


@pytest.mark.parametrize(
    ("sizes", "budget", "expected"),
    [
        ([], 10, []),
        ([10], 10, [(0, 1)]),  # exactly the budget: one run
        ([5, 5], 10, [(0, 2)]),  # two that sum to the budget
        ([5, 6], 10, [(0, 1), (1, 2)]),  # one byte over: cut before the second
        ([11], 10, [(0, 1)]),  # larger than the budget: alone
        ([3, 11, 3], 10, [(0, 1), (1, 2), (2, 3)]),  # the large one alone, in its place
        ([0, 0, 10, 0], 10, [(0, 4)]),  # empty values (tombstones) weigh nothing
        ([4, 4, 4, 4, 4], 8, [(0, 2), (2, 4), (4, 5)]),
        ([9, 1, 9, 1], 10, [(0, 2), (2, 4)]),
    ],
)
def test_runs_within_a_budget(
    sizes: list[int], budget: int, expected: list[tuple[int, int]]
) -> None:
    assert runs(sizes, budget) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 50), max_size=60), st.integers(1, 60))
def test_runs_cover_every_record_in_order_and_each_is_as_long_as_the_budget_allows(
    sizes: list[int], budget: int
) -> None:
    found = runs(sizes, budget)
    bounds = [0, *(end for _, end in found)]
    assert found == list(zip(bounds[:-1], bounds[1:], strict=True))  # each from the last end
    assert bounds[-1] == len(sizes)
    assert all(end > start for start, end in found)
    for start, end in found:
        held = sum(sizes[start:end])
        assert held <= budget or end == start + 1  # over the budget only alone
        if end < len(sizes):
            assert held + sizes[end] > budget  # the next record would not have fitted
