"""The partitions of one admin poll as columns, readable as the mappings they replace.

A poll of 100,000 partitions x 3 replicas described each partition as a ``PartitionInfo``
in a dict, and each replica's log end offset as a dict entry keyed by (topic, partition,
broker): 400,000 Python objects made, compared and read again every second, the larger
part of the collector's CPU (docs/real-kafka.md#admin-cost). Here they are numpy columns,
rows in the order the diff and the fetch responses need (topics by name, partitions by
index), compared and joined as arrays.

Each class is also the ``Mapping`` it replaces (``ClusterSnapshot.partitions``,
``log_end_offsets``, ``high_watermarks``), made into Python objects only when read so: by
the diff of a partition that changed, the state file, a test.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from streaming.feeds.collectors.admin_poller import PartitionInfo

Ints = npt.NDArray[np.int64]
# Out of any value's range, so that a mapping's -1 (a test's broken offset) stays a value:
NO_EPOCH = int(np.iinfo(np.int64).min)  # no leader epoch in the Metadata (None)
NO_OFFSET = int(np.iinfo(np.int64).min)  # no ListOffsets answer for it


def _ints(values: Any) -> Ints:
    return np.asarray(values, dtype=np.int64)


def lists_differ(start_a: Ints, flat_a: Ints, start_b: Ints, flat_b: Ints) -> npt.NDArray[np.bool_]:
    """Per row, whether its list (``flat[start[i]:start[i + 1]]``) differs between a and
    b, order included: by length, then slot by slot for the rows of equal length."""
    length_a, length_b = np.diff(start_a), np.diff(start_b)
    differ = length_a != length_b
    same = np.flatnonzero(~differ)
    lengths = length_a[same]
    # each slot of the rows of equal length: its row (in ``same``) and place in the list
    row = np.repeat(np.arange(len(same)), lengths)
    place = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    a = flat_a[start_a[same][row] + place]
    b = flat_b[start_b[same][row] + place]
    differ[same[row[a != b]]] = True
    return np.asarray(differ, np.bool_)


class PolledPartitions(Mapping[str, Mapping[int, "PartitionInfo"]]):
    """Every partition a poll described: rows by topic name then partition index, the
    replicas and ISR of row i at ``replicas[replica_start[i]:replica_start[i + 1]]`` (and
    likewise ``isr``). Read as a mapping: topic -> partition -> ``PartitionInfo``."""

    __slots__ = (
        "_index",
        "_views",
        "isr",
        "isr_start",
        "leader",
        "leader_epoch",
        "partition",
        "replica_start",
        "replicas",
        "topic_start",
        "topics",
    )

    def __init__(
        self,
        topics: tuple[str, ...],
        topic_start: Any,
        partition: Any,
        leader: Any,
        leader_epoch: Any,
        replica_start: Any,
        replicas: Any,
        isr_start: Any,
        isr: Any,
    ) -> None:
        """Columns already in order: ``topics`` sorted, the rows of ``topics[t]`` at
        ``topic_start[t]:topic_start[t + 1]`` sorted by partition."""
        self.topics = topics
        self.topic_start = _ints(topic_start)
        self.partition = _ints(partition)
        self.leader = _ints(leader)
        self.leader_epoch = _ints(leader_epoch)
        self.replica_start = _ints(replica_start)
        self.replicas = _ints(replicas)
        self.isr_start = _ints(isr_start)
        self.isr = _ints(isr)
        self._views: dict[str, dict[int, PartitionInfo]] = {}
        self._index: dict[str, int] | None = None

    @staticmethod
    def of(partitions: Mapping[str, Mapping[int, PartitionInfo]]) -> PolledPartitions:
        """``partitions`` as a table (itself if it is one): a snapshot made of dicts (the
        state file's, a test's)."""
        if isinstance(partitions, PolledPartitions):
            return partitions
        topics = tuple(sorted(partitions))
        rows = [(p, partitions[t][p]) for t in topics for p in sorted(partitions[t])]
        return PolledPartitions(
            topics,
            np.cumsum([0, *(len(partitions[t]) for t in topics)]),
            [p for p, _ in rows],
            [i.leader for _, i in rows],
            [NO_EPOCH if i.leader_epoch is None else i.leader_epoch for _, i in rows],
            np.cumsum([0, *(len(i.replicas) for _, i in rows)]),
            [r for _, i in rows for r in i.replicas],
            np.cumsum([0, *(len(i.isr) for _, i in rows)]),
            [r for _, i in rows for r in i.isr],
        )

    @staticmethod
    def sorted_from(
        names: list[str],
        topic_of_row: Any,
        partition: Any,
        leader: Any,
        leader_epoch: Any,
        replica_start: Any,
        replicas: Any,
        isr_start: Any,
        isr: Any,
    ) -> PolledPartitions:
        """A table of rows in any order (a Metadata answer's), row i of topic
        ``names[topic_of_row[i]]``: sorted by topic name, then partition."""
        order_of_name = sorted(range(len(names)), key=names.__getitem__)
        rank = np.empty(len(names), np.int64)
        rank[order_of_name] = np.arange(len(names))
        topic_rank = rank[_ints(topic_of_row)]
        partition = _ints(partition)
        order = np.lexsort((partition, topic_rank))
        replica_start, replicas = _gathered(_ints(replica_start), _ints(replicas), order)
        isr_start, isr = _gathered(_ints(isr_start), _ints(isr), order)
        counts = np.bincount(topic_rank, minlength=len(names))
        return PolledPartitions(
            tuple(names[i] for i in order_of_name),
            np.concatenate(([0], np.cumsum(counts))),
            partition[order],
            _ints(leader)[order],
            _ints(leader_epoch)[order],
            replica_start,
            replicas,
            isr_start,
            isr,
        )

    # ------------------------------------------------------------------ as columns

    @property
    def rows(self) -> int:
        return len(self.partition)

    def topic_of_row(self) -> Ints:
        """Each row's topic, as an index into ``topics``."""
        return np.repeat(np.arange(len(self.topics)), np.diff(self.topic_start))

    def row_of_slot(self) -> Ints:
        """Each replica slot's row."""
        return np.repeat(np.arange(self.rows), np.diff(self.replica_start))

    def same_partitions(self, other: PolledPartitions) -> bool:
        """Whether both describe the same topics and partitions (row i the same
        partition in both)."""
        return (
            self.topics == other.topics
            and np.array_equal(self.topic_start, other.topic_start)
            and np.array_equal(self.partition, other.partition)
        )

    def changed_rows(self, before: PolledPartitions) -> Ints:
        """The rows whose leader, leader epoch, replicas or ISR (in order) differ from
        ``before``'s, which holds the same partitions (``same_partitions``)."""
        differ = (self.leader != before.leader) | (self.leader_epoch != before.leader_epoch)
        differ |= lists_differ(
            before.replica_start, before.replicas, self.replica_start, self.replicas
        )
        differ |= lists_differ(before.isr_start, before.isr, self.isr_start, self.isr)
        return np.flatnonzero(differ)

    def info(self, row: int) -> PartitionInfo:
        from streaming.feeds.collectors.admin_poller import PartitionInfo

        epoch = int(self.leader_epoch[row])
        r0, r1 = self.replica_start[row], self.replica_start[row + 1]
        i0, i1 = self.isr_start[row], self.isr_start[row + 1]
        return PartitionInfo(
            leader=int(self.leader[row]),
            leader_epoch=None if epoch == NO_EPOCH else epoch,
            replicas=tuple(self.replicas[r0:r1].tolist()),
            isr=tuple(self.isr[i0:i1].tolist()),
        )

    def topic_index(self) -> dict[str, int]:
        """Each topic's index into ``topics``."""
        if self._index is None:
            self._index = {topic: index for index, topic in enumerate(self.topics)}
        return self._index

    # ------------------------------------------------------------------ as a mapping

    def __getitem__(self, topic: str) -> Mapping[int, PartitionInfo]:
        view = self._views.get(topic)
        if view is None:
            index = self.topic_index()[topic]  # KeyError for a topic not described
            start, end = int(self.topic_start[index]), int(self.topic_start[index + 1])
            view = {int(self.partition[row]): self.info(row) for row in range(start, end)}
            self._views[topic] = view
        return view

    def __iter__(self) -> Iterator[str]:
        return iter(self.topics)

    def __len__(self) -> int:
        return len(self.topics)

    def __contains__(self, topic: object) -> bool:
        return topic in self.topic_index()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PolledPartitions):
            return self.same_partitions(other) and not len(self.changed_rows(other))
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]  # a mapping: unhashable, as a dict


def _gathered(start: Ints, flat: Ints, order: Ints) -> tuple[Ints, Ints]:
    """The lists of rows ``order`` (``flat[start[i]:start[i + 1]]`` for i in order), as
    new starts and flat values."""
    lengths = np.diff(start)[order]
    new_start = np.concatenate(([0], np.cumsum(lengths)))
    place = np.arange(int(new_start[-1])) - np.repeat(new_start[:-1], lengths)
    return new_start, flat[np.repeat(start[order], lengths) + place]


class ReplicaOffsets(Mapping[tuple[str, int, int], int]):
    """Each replica's log end offset, aligned with a table's replica slots (``NO_OFFSET``:
    no answer). Read as a mapping: (topic, partition, broker) -> offset."""

    __slots__ = ("_dict", "offsets", "table")

    def __init__(self, table: PolledPartitions, offsets: Any) -> None:
        self.table = table
        self.offsets = _ints(offsets)
        self._dict: dict[tuple[str, int, int], int] | None = None

    @staticmethod
    def aligned(offsets: Mapping[tuple[str, int, int], int], table: PolledPartitions) -> Ints:
        """``offsets`` as the column of ``table``'s replica slots."""
        if isinstance(offsets, ReplicaOffsets) and offsets.table is table:
            return offsets.offsets
        topic = table.topic_of_row()
        slots = table.row_of_slot()
        keys = zip(
            topic[slots].tolist(),
            table.partition[slots].tolist(),
            table.replicas.tolist(),
            strict=True,
        )
        return _ints([offsets.get((table.topics[t], p, b), NO_OFFSET) for t, p, b in keys]).reshape(
            -1
        )

    def _as_dict(self) -> dict[tuple[str, int, int], int]:
        if self._dict is None:
            table = self.table
            slots = table.row_of_slot()
            topic = table.topic_of_row()[slots]
            known = np.flatnonzero(self.offsets != NO_OFFSET)
            self._dict = {
                (table.topics[t], p, b): o
                for t, p, b, o in zip(
                    topic[known].tolist(),
                    table.partition[slots][known].tolist(),
                    table.replicas[known].tolist(),
                    self.offsets[known].tolist(),
                    strict=True,
                )
            }
        return self._dict

    def __getitem__(self, key: tuple[str, int, int]) -> int:
        return self._as_dict()[key]

    def __iter__(self) -> Iterator[tuple[str, int, int]]:
        return iter(self._as_dict())

    def __len__(self) -> int:
        return int(np.count_nonzero(self.offsets != NO_OFFSET))


class PartitionOffsets(Mapping[tuple[str, int], int]):
    """One offset per partition (its high watermark), aligned with a table's rows
    (``NO_OFFSET``: no answer). Read as a mapping: (topic, partition) -> offset."""

    __slots__ = ("_dict", "offsets", "table")

    def __init__(self, table: PolledPartitions, offsets: Any) -> None:
        self.table = table
        self.offsets = _ints(offsets)
        self._dict: dict[tuple[str, int], int] | None = None

    @staticmethod
    def aligned(offsets: Mapping[tuple[str, int], int], table: PolledPartitions) -> Ints:
        """``offsets`` as the column of ``table``'s rows."""
        if isinstance(offsets, PartitionOffsets) and offsets.table is table:
            return offsets.offsets
        keys = zip(table.topic_of_row().tolist(), table.partition.tolist(), strict=True)
        return _ints([offsets.get((table.topics[t], p), NO_OFFSET) for t, p in keys]).reshape(-1)

    def _as_dict(self) -> dict[tuple[str, int], int]:
        if self._dict is None:
            table = self.table
            known = np.flatnonzero(self.offsets != NO_OFFSET)
            self._dict = {
                (table.topics[t], p): o
                for t, p, o in zip(
                    table.topic_of_row()[known].tolist(),
                    table.partition[known].tolist(),
                    self.offsets[known].tolist(),
                    strict=True,
                )
            }
        return self._dict

    def __getitem__(self, key: tuple[str, int]) -> int:
        return self._as_dict()[key]

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(self._as_dict())

    def __len__(self) -> int:
        return int(np.count_nonzero(self.offsets != NO_OFFSET))
