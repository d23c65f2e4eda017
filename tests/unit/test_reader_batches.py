"""How the source's reader bounds what it holds by the bytes of the records' values: how
many records a poll asks for (``partition_reader.records_wanted``) and how it cuts a
poll's records into reader batches (``runs_within``): a boundary table each, then the
cut as a property."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.job.kafka_source.partition_reader import (
    FIRST_POLL_RECORDS,
    READ_BATCH_BYTES,
    READ_BATCH_RECORDS,
    records_wanted,
    runs_within,
)

MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("remaining", "records_read", "bytes_read", "wanted"),
    [
        (1_000_000, 0, 0, FIRST_POLL_RECORDS),  # nothing read yet: sizes unknown
        (5, 0, 0, 5),  # the range holds fewer
        (1_000_000, 1_000, 200_000, READ_BATCH_RECORDS),  # JSON, 200 B: the record cap
        (1_000_000, 100, 100 * 300_000, 111),  # packs of 300,000 B: 32 MiB // 300,000
        (1_000_000, 1, READ_BATCH_BYTES, 1),  # one record of the whole budget
        (1_000_000, 1, READ_BATCH_BYTES - 1, 1),  # just under: 32 MiB // (32 MiB - 1)
        (1_000_000, 2, READ_BATCH_BYTES, 2),  # half the budget each
        (1_000_000, 1, 2 * READ_BATCH_BYTES, 1),  # larger than the budget: still one
        (1_000_000, 50, 0, READ_BATCH_RECORDS),  # empty values (tombstones) weigh nothing
        (7, 100, 100 * 300_000, 7),  # the range holds fewer than fit
    ],
)
def test_a_poll_asks_for_the_records_that_fit_the_budget(
    remaining: int, records_read: int, bytes_read: int, wanted: int
) -> None:
    assert READ_BATCH_BYTES == 32 * MIB
    assert READ_BATCH_RECORDS == 10_000
    assert records_wanted(remaining, records_read, bytes_read) == wanted


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
    assert found == list(itertools.pairwise(bounds))  # each from the last end
    assert bounds[-1] == len(sizes)
    assert all(end > start for start, end in found)
    for start, end in found:
        held = sum(sizes[start:end])
        assert held <= budget or end == start + 1  # over the budget only alone
        if end < len(sizes):
            assert held + sizes[end] > budget  # the next record would not have fitted
