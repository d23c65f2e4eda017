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

from state.events import NO_LEADER, TopicPartition

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
BOOL = npt.NDArray[np.bool_]

UNKNOWN_OFFSET = -1
"""``log_end_offset`` of a follower whose fetch offset has not been seen (since election)."""

NEVER = 0
"""``last_caught_up_ms`` of a follower that was never caught up (docs/domain.md#lag-time),
and ``isr_since_ms`` of a replica whose entry into the ISR was not seen."""

NO_TIME = -1
"""Any other time column that has no value."""


FETCH_STATE_FIELDS = ("log_end_offset", "last_fetch_time_ms", "last_fetch_leader_leo",
                      "last_caught_up_ms")  # fmt: skip
LOG_END_OFFSET, LAST_FETCH_TIME, LAST_FETCH_LEADER_LEO, LAST_CAUGHT_UP = range(4)


class ChangeOrigin:
    """Who made the latest change of a partition's ISR; decides its propagation window."""

    NONE = 0
    CONTROLLER = 1  # LeaderAndIsr: the controller sends UpdateMetadata itself
    LEADER = 2  # IsrChange by the leader, waiting in its isrChangeSet (zk mode)
    PROPAGATED = 3  # IsrChange whose propagation was seen: window frozen at that moment
    METADATA_LOG = 4  # kraft mode: any change, applied by brokers replaying the log


@dataclass
class TopicSlots:
    topic_id: int
    base: int
    capacity: int


class PartitionTable:
    """Partition rows and replica slots of one shard; see the module docstring."""

    def __init__(self, partition_capacity: int = 8, replica_capacity: int = 4) -> None:
        self.size = 0
        self._topic_ids: dict[str, TopicSlots] = {}
        self.topic_names: list[str] = []
        self._slot_to_row: I64 = np.full(0, -1, dtype=np.int64)
        self._deleted_rows: dict[tuple[str, int], int] = {}
        self._alloc(partition_capacity, replica_capacity)

    # ----------------------------------------------------------------- storage

    def _alloc(self, p_cap: int, r_cap: int) -> None:
        self.exists: BOOL = np.zeros(p_cap, dtype=np.bool_)
        self.topic_id: I32 = np.full(p_cap, -1, dtype=np.int32)
        self.partition: I32 = np.full(p_cap, -1, dtype=np.int32)
        # Read together on every fetch (fencing), so kept side by side.
        self.leadership: I32 = np.empty((p_cap, 2), dtype=np.int32)
        self.leader[:], self.leader_epoch[:] = NO_LEADER, -1
        self.partition_epoch: I32 = np.full(p_cap, -1, dtype=np.int32)
        self.progress: I64 = np.zeros((p_cap, 2), dtype=np.int64)  # leader LEO, HW
        self.epoch_start_offset: I64 = np.zeros(p_cap, dtype=np.int64)
        self.n_replicas: I32 = np.zeros(p_cap, dtype=np.int32)
        self.n_isr: I32 = np.zeros(p_cap, dtype=np.int32)
        self.isr_changed_ms: I64 = np.full(p_cap, NO_TIME, dtype=np.int64)
        self.change_origin: I32 = np.zeros(p_cap, dtype=np.int32)
        self.change_broker: I32 = np.full(p_cap, -1, dtype=np.int32)
        self.frozen_earliest_ms: I64 = np.full(p_cap, NO_TIME, dtype=np.int64)
        self.frozen_latest_ms: I64 = np.full(p_cap, NO_TIME, dtype=np.int64)
        # KRaft: offset in __cluster_metadata of the latest ISR change (-1: not known).
        self.isr_change_offset: I64 = np.full(p_cap, -1, dtype=np.int64)
        self.isr: list[tuple[int, ...]] = [() for _ in range(p_cap)]
        self.replicas: list[tuple[int, ...]] = [() for _ in range(p_cap)]
        # Per broker: the ISR its MetadataCache holds (UpdateMetadata), per row.
        self.cached_isr: list[dict[int, frozenset[int]]] = [{} for _ in range(p_cap)]
        shape = (p_cap, r_cap)
        self.replica_broker: I32 = np.full(shape, -1, dtype=np.int32)
        self.in_isr: BOOL = np.zeros(shape, dtype=np.bool_)
        # The fetch state of a replica is read and written together on every fetch: one
        # record of FETCH_STATE_FIELDS per replica keeps it in one cache line.
        self.fetch_state: I64 = np.zeros((*shape, len(FETCH_STATE_FIELDS)), dtype=np.int64)
        self.log_end_offset[:] = UNKNOWN_OFFSET
        self.last_caught_up_ms[:] = NEVER
        # When the replica last entered the ISR as the monitor saw it (NEVER: not seen).
        # Not read by the fetch pass, so kept out of the fetch state records.
        self.isr_since_ms: I64 = np.full(shape, NEVER, dtype=np.int64)

    @property
    def leader(self) -> I32:
        return self.leadership[:, 0]

    @property
    def leader_epoch(self) -> I32:
        return self.leadership[:, 1]

    @property
    def leader_leo(self) -> I64:
        return self.progress[:, 0]

    @property
    def high_watermark(self) -> I64:
        return self.progress[:, 1]

    @property
    def log_end_offset(self) -> I64:
        return self.fetch_state[:, :, LOG_END_OFFSET]

    @property
    def last_fetch_time_ms(self) -> I64:
        return self.fetch_state[:, :, LAST_FETCH_TIME]

    @property
    def last_fetch_leader_leo(self) -> I64:
        return self.fetch_state[:, :, LAST_FETCH_LEADER_LEO]

    @property
    def last_caught_up_ms(self) -> I64:
        return self.fetch_state[:, :, LAST_CAUGHT_UP]

    _ROW_ARRAYS = (
        "exists", "topic_id", "partition", "leadership", "partition_epoch",
        "progress", "epoch_start_offset", "n_replicas", "n_isr",
        "isr_changed_ms", "change_origin", "change_broker", "frozen_earliest_ms",
        "frozen_latest_ms", "isr_change_offset",
    )  # fmt: skip
    _ROW_LISTS = ("isr", "replicas", "cached_isr")
    _REPLICA_ARRAYS = ("replica_broker", "in_isr", "fetch_state", "isr_since_ms")

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickle; a table pickled before ``isr_since_ms`` existed gets NEVER there."""
        if "isr_since_ms" not in state:
            state["isr_since_ms"] = np.full(state["replica_broker"].shape, NEVER, dtype=np.int64)
        if "isr_change_offset" not in state:
            state["isr_change_offset"] = np.full(len(state["exists"]), -1, dtype=np.int64)
        self.__dict__.update(state)

    @property
    def partition_capacity(self) -> int:
        return len(self.exists)

    @property
    def replica_capacity(self) -> int:
        return int(self.replica_broker.shape[1])

    def _grow(self, p_cap: int, r_cap: int) -> None:
        old = {name: getattr(self, name) for name in self._ROW_ARRAYS + self._REPLICA_ARRAYS}
        old_lists = {name: getattr(self, name) for name in self._ROW_LISTS}
        old_p, old_r = self.partition_capacity, self.replica_capacity
        self._alloc(p_cap, r_cap)
        for name in self._ROW_ARRAYS:
            getattr(self, name)[:old_p] = old[name]
        for name in self._REPLICA_ARRAYS:
            getattr(self, name)[:old_p, :old_r] = old[name]
        for name in self._ROW_LISTS:
            getattr(self, name)[:old_p] = old_lists[name]

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
        for name, default in self._ROW_DEFAULTS.items():
            getattr(self, name)[rows] = default
        for row in rows.tolist():
            self.isr[row] = ()
            self.replicas[row] = ()
            self.cached_isr[row] = {}
        self.replica_broker[rows] = -1
        self.log_end_offset[rows] = UNKNOWN_OFFSET
        self.last_fetch_time_ms[rows] = 0
        self.last_fetch_leader_leo[rows] = 0
        self.last_caught_up_ms[rows] = NEVER
        self.isr_since_ms[rows] = NEVER

    def delete(self, row: int) -> None:
        """The partition is gone: its slot no longer maps to it; the row waits for reuse."""
        tp = self.topic_partition(row)
        slots = self._topic_ids[tp.topic]
        self._slot_to_row[slots.base + tp.partition] = -1
        self._deleted_rows[(tp.topic, tp.partition)] = row
        self._clear(row)

    def _clear(self, row: int) -> None:
        for name, default in self._ROW_DEFAULTS.items():
            getattr(self, name)[row] = default
        self.isr[row] = ()
        self.replicas[row] = ()
        self.cached_isr[row] = {}
        self.replica_broker[row] = -1
        self._reset_replica_state(row, np.ones(self.replica_capacity, dtype=np.bool_))

    _ROW_DEFAULTS: dict[str, int] = {  # noqa: RUF012 - read-only table of defaults
        "exists": 0, "leader": NO_LEADER, "leader_epoch": -1, "partition_epoch": -1,
        "leader_leo": 0, "high_watermark": 0, "epoch_start_offset": 0, "n_replicas": 0,
        "n_isr": 0, "isr_changed_ms": NO_TIME, "change_origin": ChangeOrigin.NONE,
        "change_broker": -1, "frozen_earliest_ms": NO_TIME, "frozen_latest_ms": NO_TIME,
        "isr_change_offset": -1,
    }  # fmt: skip

    def _reset_replica_state(self, row: int, slots: BOOL) -> None:
        self.log_end_offset[row, slots] = UNKNOWN_OFFSET
        self.last_fetch_time_ms[row, slots] = 0
        self.last_fetch_leader_leo[row, slots] = 0
        self.last_caught_up_ms[row, slots] = NEVER
        self.isr_since_ms[row, slots] = NEVER

    # ------------------------------------------------------ assignment, ISR

    def set_replicas(self, row: int, replicas: tuple[int, ...]) -> None:
        """Assign replicas in order; a replica that stays keeps its fetch state and ISR entry."""
        if replicas == self.replicas[row]:
            return
        self.ensure_replica_capacity(len(replicas))
        old_slot = {int(b): k for k, b in enumerate(self.replica_broker[row]) if b >= 0}
        kept = [old_slot.get(b, -1) for b in replicas]
        saved = self.fetch_state[row].copy()
        saved_since = self.isr_since_ms[row].copy()
        self.replica_broker[row] = -1
        self._reset_replica_state(row, np.ones(self.replica_capacity, dtype=np.bool_))
        for k, (broker, old_k) in enumerate(zip(replicas, kept, strict=True)):
            self.replica_broker[row, k] = broker
            if old_k >= 0:
                self.fetch_state[row, k] = saved[old_k]
                self.isr_since_ms[row, k] = saved_since[old_k]
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

    def slot_of(self, row: int, broker: int) -> int:
        hits = np.flatnonzero(self.replica_broker[row] == broker)
        return int(hits[0]) if len(hits) else -1


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
