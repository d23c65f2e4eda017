"""PartitionTable's columns, each declared once: allocation, growth, clearing, old pickles."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from state.partition_table import CLEARED, COLUMNS, LIST_COLUMNS, PartitionTable
from state.table_columns import Column


def filled_table() -> PartitionTable:
    table = PartitionTable(partition_capacity=2, replica_capacity=2)
    table.create("t", 0, (1, 2))
    table.set_isr(0, (1, 2))
    table.mark_isr_entries(0, {2}, 5_000)
    table.leader[0], table.leader_epoch[0] = 1, 3
    table.last_caught_up_ms[0, 1] = 4_000
    table.cached_isr[0][2] = frozenset({1})
    return table


SHAPED_BY = {"exists", "replica_broker"}
"""The columns a pickled table's capacities are read from: every release had them."""


@pytest.mark.parametrize(
    "column", [c for c in COLUMNS if c.name not in SHAPED_BY], ids=lambda c: c.name
)
def test_a_pickle_from_before_a_column_existed_gets_its_fills(column: Column[np.generic]) -> None:
    table = filled_table()
    del table.__dict__[column.name]
    restored = pickle.loads(pickle.dumps(table))
    fresh = column.allocate(table.partition_capacity, table.replica_capacity)
    np.testing.assert_array_equal(getattr(restored, column.name), fresh)


def test_growth_keeps_every_value_at_its_row_and_slot() -> None:
    table = filled_table()
    before = {c.name: getattr(table, c.name).copy() for c in COLUMNS}
    lists = {c.name: list(getattr(table, c.name)) for c in LIST_COLUMNS}
    table.create("t", 1, (2, 3))
    table.create("t", 2, (1, 2, 3, 4, 5))  # more rows and more replica slots
    assert (table.partition_capacity, table.replica_capacity) == (4, 5)
    for name, old in before.items():
        kept = getattr(table, name)[tuple(slice(0, n) for n in old.shape)]
        np.testing.assert_array_equal(kept[0], old[0])
    assert table.isr[0] == lists["isr"][0]
    assert table.cached_isr[0] == {2: frozenset({1})}
    assert table.last_caught_up_ms[0, 1] == 4_000
    assert table.isr_since_ms[0, 1] == 5_000


def test_a_deleted_row_holds_the_fills_of_a_new_one_but_its_identity() -> None:
    table = filled_table()
    fresh = PartitionTable(partition_capacity=2, replica_capacity=2)
    table.delete(0)
    for column in CLEARED:
        np.testing.assert_array_equal(
            getattr(table, column.name)[0], getattr(fresh, column.name)[0]
        )
    for listed in LIST_COLUMNS:
        assert getattr(table, listed.name)[0] == getattr(fresh, listed.name)[0]
    assert (int(table.topic_id[0]), int(table.partition[0])) == (0, 0)
