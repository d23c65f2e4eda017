"""Columnar storage of the partitions of one shard and of their replicas.

One row per partition, one column slot per assigned replica (in assignment order), so
that the per-follower fetch state is a set of ``(partitions x replication factor)``
arrays that vectorised numpy code can update for a whole batch at once. Topic/partition
names map to rows through dense per-topic slot ranges, which stay valid while rows are
added one at a time (no index rebuild between controller events).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

from state.arrays import BOOL, I64
from state.caught_up import (
    FETCH_STATE_FIELDS,
    LAST_CAUGHT_UP,
    LAST_FETCH_LEADER_LEO,
    LAST_FETCH_TIME,
    LOG_END_OFFSET,
    NEVER,
    UNKNOWN_OFFSET,
)
from state.eligible_leaders import EligibleLeaders
from state.events import NO_LEADER, TopicPartition
from state.propagation_window import NO_TIME, ChangeOrigin
from state.table_columns import Column, ListColumn, Scope, columns_of


def _not_stated() -> None:
    return None


@dataclass
class TopicSlots:
    topic_id: int
    base: int
    capacity: int


class PartitionTable:
    """Partition rows and replica slots of one shard; see the module docstring.

    The columns are the class attributes below, each declared once (state.table_columns).
    """

    exists = Column(np.bool_)
    topic_id = Column(np.int32, -1, cleared=False)  # the row's identity, kept for reuse
    partition = Column(np.int32, -1, cleared=False)
    # Read together on every fetch (fencing), so kept side by side.
    leadership = Column(np.int32, record=2)
    leader = leadership.field(0, NO_LEADER)
    leader_epoch = leadership.field(1, -1)
    partition_epoch = Column(np.int32, -1)
    progress = Column(np.int64, record=2)
    leader_leo = progress.field(0, 0)
    high_watermark = progress.field(1, 0)
    epoch_start_offset = Column(np.int64)
    n_replicas = Column(np.int32)
    n_isr = Column(np.int32)
    # The latest ISR change and its propagation window (state.propagation_window).
    isr_changed_ms = Column(np.int64, NO_TIME)
    change_origin = Column(np.int32, ChangeOrigin.NONE)
    change_broker = Column(np.int32, -1)
    frozen_earliest_ms = Column(np.int64, NO_TIME)
    frozen_latest_ms = Column(np.int64, NO_TIME)
    # KRaft: offset in __cluster_metadata of the latest ISR change (-1: not known).
    isr_change_offset = Column(np.int64, -1)
    isr = ListColumn[tuple[int, ...]](tuple)
    replicas = ListColumn[tuple[int, ...]](tuple)
    # Per broker: the ISR its MetadataCache holds (UpdateMetadata), per row.
    cached_isr = ListColumn[dict[int, frozenset[int]]](dict)
    # Kafka 4.0+: the ELR and last known ELR (state.eligible_leaders); None: never stated.
    eligible_leaders = ListColumn[EligibleLeaders | None](_not_stated)

    replica_broker = Column(np.int32, -1, scope=Scope.REPLICA)
    # Derived from the ISR and the assignment (set_isr), which every new row sets.
    in_isr = Column(np.bool_, scope=Scope.REPLICA, cleared=False)
    # The fetch state of a replica is read and written together on every fetch: one
    # record of FETCH_STATE_FIELDS per replica keeps it in one cache line.
    fetch_state = Column(
        np.int64, scope=Scope.REPLICA, record=len(FETCH_STATE_FIELDS), follows_replica=True
    )
    log_end_offset = fetch_state.field(LOG_END_OFFSET, UNKNOWN_OFFSET)
    last_fetch_time_ms = fetch_state.field(LAST_FETCH_TIME, 0)
    last_fetch_leader_leo = fetch_state.field(LAST_FETCH_LEADER_LEO, 0)
    last_caught_up_ms = fetch_state.field(LAST_CAUGHT_UP, NEVER)
    # When the replica last entered the ISR as the monitor saw it (NEVER: not seen).
    # Not read by the fetch pass, so kept out of the fetch state records.
    isr_since_ms = Column(np.int64, NEVER, scope=Scope.REPLICA, follows_replica=True)

    def __init__(self, partition_capacity: int = 8, replica_capacity: int = 4) -> None:
        self.size = 0
        self._topic_ids: dict[str, TopicSlots] = {}
        self.topic_names: list[str] = []
        self._slot_to_row: I64 = np.full(0, -1, dtype=np.int64)
        self._deleted_rows: dict[tuple[str, int], int] = {}
        for column in COLUMNS:
            self.__dict__[column.name] = column.allocate(partition_capacity, replica_capacity)
        for listed in LIST_COLUMNS:
            self.__dict__[listed.name] = listed.allocate(partition_capacity)

    # ----------------------------------------------------------------- storage

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickle; a column the pickled table did not have yet holds its fills."""
        partitions, replicas = len(state["exists"]), state["replica_broker"].shape[1]
        for column in COLUMNS:
            if column.name not in state:
                state[column.name] = column.allocate(partitions, replicas)
        for listed in LIST_COLUMNS:
            if listed.name not in state:
                state[listed.name] = listed.allocate(partitions)
        self.__dict__.update(state)

    def array_bytes(self) -> int:
        """The memory of the numpy columns."""
        return sum(self.__dict__[column.name].nbytes for column in COLUMNS)

    @property
    def partition_capacity(self) -> int:
        return len(self.exists)

    @property
    def replica_capacity(self) -> int:
        return int(self.replica_broker.shape[1])

    def _grow(self, p_cap: int, r_cap: int) -> None:
        for column in COLUMNS:
            self.__dict__[column.name] = column.grown(self.__dict__[column.name], p_cap, r_cap)
        for listed in LIST_COLUMNS:
            rows: list[Any] = self.__dict__[listed.name]
            rows.extend(listed.allocate(p_cap - len(rows)))

    def ensure_replica_capacity(self, replication_factor: int) -> None:
        if replication_factor > self.replica_capacity:
            self._grow(self.partition_capacity, max(replication_factor, 2 * self.replica_capacity))

    # ---------------------------------------------------------------- lookup

    def live_row_of(self, topic: str, partition: int) -> int:
        """The row of a partition that exists; -1 otherwise."""
        slots = self._topic_ids.get(topic)
        if slots is None or not 0 <= partition < slots.capacity:
            return -1
        return int(self._slot_to_row[slots.base + partition])

    def topic_slots(self, topic: str) -> tuple[int, int]:
        """``(base, capacity)`` of the topic's slot range; ``(-1, 0)`` for an unknown topic.

        Partition ``p`` of the topic is at ``slot_to_row[base + p]`` when ``p < capacity``
        (-1 there: the partition does not exist).
        """
        slots = self._topic_ids.get(topic)
        return (slots.base, slots.capacity) if slots else (-1, 0)

    @property
    def slot_to_row(self) -> I64:
        return self._slot_to_row

    def rows_of_topic(self, topic: str) -> list[int]:
        slots = self._topic_ids.get(topic)
        if slots is None:
            return []
        rows = self._slot_to_row[slots.base : slots.base + slots.capacity]
        return [int(r) for r in rows if r >= 0]

    def live_rows(self) -> I64:
        return np.flatnonzero(self.exists[: self.size]).astype(np.int64)

    def topic_partition(self, row: int) -> TopicPartition:
        return TopicPartition(self.topic_names[self.topic_id[row]], int(self.partition[row]))

    # ------------------------------------------------------------ row life

    def _topic_slots(self, topic: str, partition: int) -> TopicSlots:
        slots = self._topic_ids.get(topic)
        if slots is None:
            slots = TopicSlots(len(self.topic_names), len(self._slot_to_row), 0)
            self._topic_ids[topic] = slots
            self.topic_names.append(topic)
        if partition >= slots.capacity:
            # Move the topic's slot range to the end with room to spare (amortised O(1)).
            new_cap = max(partition + 1, 2 * slots.capacity, 8)
            new_base = len(self._slot_to_row)
            region = np.full(new_cap, -1, dtype=np.int64)
            region[: slots.capacity] = self._slot_to_row[slots.base : slots.base + slots.capacity]
            self._slot_to_row[slots.base : slots.base + slots.capacity] = -1
            self._slot_to_row = np.concatenate([self._slot_to_row, region])
            slots.base, slots.capacity = new_base, new_cap
        return slots

    def create(self, topic: str, partition: int, replicas: tuple[int, ...]) -> int:
        """A row for a new partition (or a recreated one: its old row, reset)."""
        slots = self._topic_slots(topic, partition)
        row = self._deleted_rows.pop((topic, partition), -1)
        if row < 0:
            if self.size == self.partition_capacity:
                self._grow(2 * self.partition_capacity, self.replica_capacity)
            row = self.size
            self.size += 1
            self.topic_id[row] = slots.topic_id
            self.partition[row] = partition
        self._slot_to_row[slots.base + partition] = row
        self._clear(row)
        self.exists[row] = True
        self.set_replicas(row, replicas)
        return row

    def create_rows(
        self, topics: Sequence[str], partitions: Sequence[int], replicas: Sequence[tuple[int, ...]]
    ) -> I64:
        """:meth:`create` of distinct new partitions at once, in order: the same rows, slot
        ranges and capacities as one call per partition, with the columns written in bulk."""
        rows = np.empty(len(topics), dtype=np.int64)
        fresh = self.size
        for i, key in enumerate(zip(topics, partitions, strict=True)):
            self._topic_slots(*key)
            row = self._deleted_rows.pop(key, -1)
            if row < 0:
                row, fresh = fresh, fresh + 1
            rows[i] = row
        while fresh > self.partition_capacity:
            self._grow(2 * self.partition_capacity, self.replica_capacity)
        self.size = fresh
        slots = [self._topic_ids[topic] for topic in topics]
        self.topic_id[rows] = [s.topic_id for s in slots]
        self.partition[rows] = partitions
        self._slot_to_row[[s.base for s in slots] + np.asarray(partitions, dtype=np.int64)] = rows
        self._clear_rows(rows)
        self.exists[rows] = True
        brokers, counts = padded(replicas, self.replica_capacity)
        self.replica_broker[rows] = brokers
        self.n_replicas[rows] = counts
        for row, assigned in zip(rows.tolist(), replicas, strict=True):
            self.replicas[row] = assigned
        self.in_isr[rows] = False  # set_isr of the empty ISR a new row has
        return rows

    def _clear_rows(self, rows: I64) -> None:
        """:meth:`_clear` of several rows."""
        for column in CLEARED:
            column.reset(self.__dict__[column.name], rows)
        for listed in LIST_COLUMNS:
            values: list[Any] = self.__dict__[listed.name]
            for row in rows.tolist():
                values[row] = listed.empty()

    def delete(self, row: int) -> None:
        """The partition is gone: its slot no longer maps to it; the row waits for reuse."""
        tp = self.topic_partition(row)
        slots = self._topic_ids[tp.topic]
        self._slot_to_row[slots.base + tp.partition] = -1
        self._deleted_rows[(tp.topic, tp.partition)] = row
        self._clear(row)

    def _clear(self, row: int) -> None:
        """The row as a new one: every column but the row's identity at its fills."""
        for column in CLEARED:
            column.reset(self.__dict__[column.name], row)
        for listed in LIST_COLUMNS:
            self.__dict__[listed.name][row] = listed.empty()

    def reset_replica_state(self, row: int, slots: BOOL) -> None:
        """The state of the replicas in ``slots`` of the row, as a new replica's."""
        for column in REPLICA_STATE:
            column.reset(self.__dict__[column.name], (row, slots))

    # ------------------------------------------------------ assignment, ISR

    def set_replicas(self, row: int, replicas: tuple[int, ...]) -> None:
        """Assign replicas in order; a replica that stays keeps its fetch state and ISR entry."""
        if replicas == self.replicas[row]:
            return
        self.ensure_replica_capacity(len(replicas))
        old_slot = {int(b): k for k, b in enumerate(self.replica_broker[row]) if b >= 0}
        kept = [old_slot.get(b, -1) for b in replicas]
        saved = {column.name: self.__dict__[column.name][row].copy() for column in REPLICA_STATE}
        self.replica_broker[row] = -1
        self.reset_replica_state(row, np.ones(self.replica_capacity, dtype=np.bool_))
        for k, (broker, old_k) in enumerate(zip(replicas, kept, strict=True)):
            self.replica_broker[row, k] = broker
            if old_k >= 0:
                for name, values in saved.items():
                    self.__dict__[name][row, k] = values[old_k]
        self.replicas[row] = replicas
        self.n_replicas[row] = len(replicas)
        self.set_isr(row, self.isr[row])

    def set_isr(self, row: int, isr: tuple[int, ...]) -> None:
        self.isr[row] = isr
        self.n_isr[row] = len(isr)
        members = np.asarray(isr, dtype=np.int32)
        self.in_isr[row] = np.isin(self.replica_broker[row], members) & (
            self.replica_broker[row] >= 0
        )

    def set_isr_rows(self, rows: I64, isrs: Sequence[tuple[int, ...]]) -> None:
        """:meth:`set_isr` of distinct ``rows`` at once."""
        for row, isr in zip(rows.tolist(), isrs, strict=True):
            self.isr[row] = isr
        members, counts = padded(isrs)
        self.n_isr[rows] = counts
        brokers = self.replica_broker[rows]
        self.in_isr[rows] = is_member(brokers, members, counts) & (brokers >= 0)

    def mark_isr_entries(self, row: int, entered: Collection[int], ts: int) -> None:
        """The ``entered`` brokers joined the row's ISR at ``ts``: their ``isr_since_ms``.

        Only assigned replicas now in the ISR are marked; every other slot keeps its value.
        """
        if not entered:
            return
        brokers = np.asarray(sorted(entered), dtype=np.int32)
        mask = self.in_isr[row] & np.isin(self.replica_broker[row], brokers)
        self.isr_since_ms[row, mask] = ts


def padded(
    broker_lists: Sequence[tuple[int, ...]], width: int = 0
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
    """Lists of broker ids as one matrix, each row padded with -1 to ``width`` (at least
    the longest list), and the length of each list."""
    counts = np.fromiter(map(len, broker_lists), dtype=np.int32, count=len(broker_lists))
    width = max(width, int(counts.max(initial=0)))
    matrix = np.full((len(broker_lists), width), -1, dtype=np.int32)
    total = int(counts.sum())
    flat = np.fromiter(chain.from_iterable(broker_lists), dtype=np.int32, count=total)
    which = np.repeat(np.arange(len(broker_lists)), counts)
    starts = np.cumsum(counts) - counts
    matrix[which, np.arange(total) - np.repeat(starts, counts)] = flat
    return matrix, counts


def is_member(
    brokers: npt.NDArray[np.int32], members: npt.NDArray[np.int32], counts: npt.NDArray[np.int32]
) -> BOOL:
    """Per cell of ``brokers`` (rows x slots): whether it is among the first ``counts[row]``
    entries of ``members[row]`` (a :func:`padded` matrix)."""
    valid = np.arange(members.shape[1]) < counts[:, None]
    hits: BOOL = ((brokers[:, :, None] == members[:, None, :]) & valid[:, None, :]).any(axis=2)
    return hits


COLUMNS, LIST_COLUMNS = columns_of(PartitionTable)
CLEARED: tuple[Column[Any], ...] = tuple(c for c in COLUMNS if c.cleared)
REPLICA_STATE: tuple[Column[Any], ...] = tuple(c for c in COLUMNS if c.follows_replica)
"""A replica's own state: it moves with the replica when the assignment changes, and a
new replica starts from the fills."""
