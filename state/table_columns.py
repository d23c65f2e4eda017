"""Columns of the partition table, each declared once as a class attribute.

A :class:`Column` declaration says everything the table does with the column: the
array it allocates (``fill`` everywhere), how it grows (values kept at their rows and
slots), what a cleared row holds, whether a replica's value moves with it to another
slot, and what a pickle of a table from before the column existed gets (its fills).
Adding a column to ``state.partition_table.PartitionTable`` is one line there.

The arrays live in the table's ``__dict__`` under the columns' names: the declarations
are non-data descriptors, so reading a column costs what reading any attribute does,
and a pickled table keeps the same keys as before the columns were declared this way.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, Generic, TypeVar, overload

import numpy as np
import numpy.typing as npt

S = TypeVar("S", bound=np.generic)
T = TypeVar("T")


class Scope(Enum):
    PARTITION = "partition"  # one value per row
    REPLICA = "replica"  # one value per row and replica slot


class Column(Generic[S]):
    """A numpy column: one value per row, or per row and replica slot.

    A ``record`` column holds ``record`` values per cell, read and written together (one
    cache line); :meth:`field` names each of them.
    """

    def __init__(
        self,
        dtype: type[S],
        fill: int = 0,
        *,
        scope: Scope = Scope.PARTITION,
        record: int = 0,
        cleared: bool = True,
        follows_replica: bool = False,
    ) -> None:
        self.dtype = dtype
        self.fills = [fill] * max(record, 1)
        self.scope = scope
        self.record = record
        self.cleared = cleared  # reset to its fills when the row is cleared
        self.follows_replica = follows_replica  # moves with its replica to a new slot
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, table: None, owner: type) -> Column[S]: ...
    @overload
    def __get__(self, table: object, owner: type) -> npt.NDArray[S]: ...
    def __get__(self, table: object, owner: type) -> Column[S] | npt.NDArray[S]:
        if table is None:
            return self
        # Reached only when the table's __dict__ lacks the array.
        raise AttributeError(f"the table holds no column {self.name!r}")

    def field(self, index: int, fill: int) -> Field[S]:
        """Field ``index`` of this record column, ``fill`` where the row is new or cleared."""
        self.fills[index] = fill
        return Field(self, index)

    def allocate(self, partitions: int, replicas: int) -> npt.NDArray[S]:
        rows = (partitions, replicas) if self.scope is Scope.REPLICA else (partitions,)
        array = np.empty((*rows, self.record) if self.record else rows, dtype=self.dtype)
        array[...] = self.fills if self.record else self.fills[0]
        return array

    def reset(self, array: npt.NDArray[S], where: Any) -> None:
        """Set the cells at ``where`` (rows, or a row and its slots) to the fills."""
        array[where] = self.fills if self.record else self.fills[0]

    def grown(self, old: npt.NDArray[S], partitions: int, replicas: int) -> npt.NDArray[S]:
        array = self.allocate(partitions, replicas)
        array[tuple(slice(0, n) for n in old.shape)] = old
        return array


class Field(Generic[S]):
    """One field of a record :class:`Column`: a view of the whole column at its index."""

    def __init__(self, column: Column[S], index: int) -> None:
        self.column = column
        self.index = index

    @overload
    def __get__(self, table: None, owner: type) -> Field[S]: ...
    @overload
    def __get__(self, table: object, owner: type) -> npt.NDArray[S]: ...
    def __get__(self, table: object, owner: type) -> Field[S] | npt.NDArray[S]:
        if table is None:
            return self
        array: npt.NDArray[S] = table.__dict__[self.column.name]
        return array[..., self.index]


class ListColumn(Generic[T]):
    """A column of Python values (tuples, dicts), one list entry per row; a row that is
    new or cleared gets a fresh ``empty()``."""

    def __init__(self, empty: Callable[[], T]) -> None:
        self.empty = empty
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, table: None, owner: type) -> ListColumn[T]: ...
    @overload
    def __get__(self, table: object, owner: type) -> list[T]: ...
    def __get__(self, table: object, owner: type) -> ListColumn[T] | list[T]:
        if table is None:
            return self
        raise AttributeError(f"the table holds no column {self.name!r}")

    def allocate(self, partitions: int) -> list[T]:
        return [self.empty() for _ in range(partitions)]


def columns_of(owner: type) -> tuple[tuple[Column[Any], ...], tuple[ListColumn[Any], ...]]:
    """The numpy columns and the list columns declared on ``owner``, in declaration order."""
    declared = vars(owner).values()
    return (
        tuple(value for value in declared if isinstance(value, Column)),
        tuple(value for value in declared if isinstance(value, ListColumn)),
    )
