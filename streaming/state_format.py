"""The versioned format of a shard's state in Spark's group state (docs/upgrades.md).

The job rewrites every shard's :class:`ShardSnapshot` in its group state after each
micro-batch. It is stored as data, not as pickled classes, so that a release that
renames a module or changes a class still reads the checkpoint of the one before: the
bytes of an Arrow IPC stream holding one record batch of one row, whose schema metadata
carries ``isrwatch.state_format`` (:data:`FORMAT_VERSION`). Each column of that row is
either a record (a struct: the snapshot's scalars, the cluster's, the table's sizes) or
a table (a list of structs): the partition table's rows (each with its brokers' cached
ISRs, as indexes into the distinct ISRs) and its replica slots, their columns derived
from ``PartitionTable``'s declarations (``state.table_columns``); the topics' slot
ranges (the slot index itself is rebuilt from the rows), the propagation windows, the
DescribeQuorum report, flapping history, maintenance, epoch floors, health signatures,
controller events seen and the applied totals (docs/upgrades.md lists them).
``tests/unit/data/state_format.json`` describes the schema of every version; a test
fails when the schema changes without a new version. This module reads and writes the
classes' private attributes too (``_topic_ids``, ``_followers``...): it is the one place
that knows everything a shard keeps.

Reading: a state of an older version is first brought to this one by
:data:`MIGRATIONS` (each one reads the bytes of its version and returns those of a later
one); the group state of the releases that pickled it (version :data:`PICKLED`) is read
once through :class:`StateUnpickler` and written in this format by the same batch.
A state of a later version than this release knows is refused with a clear error.

The settings a model was judged by are not stored: a restored model is judged by the
rules of the run that restores it (as a restart with changed ``rules`` wants).
"""

from __future__ import annotations

import io
import pickle
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]

from state.cluster_state import ClusterState
from state.events import TopicPartition
from state.flapping import _Follower
from state.metadata_cache import MetadataCaches
from state.model import ReplicationModel
from state.partition_table import PartitionTable, TopicSlots
from state.propagation_window import LeaderPropagationState, PropagationWindows, QuorumProgress
from state.settings import RuleSettings
from state.sharding import Shard
from state.table_columns import Column, Field, Scope, columns_of
from streaming.shard_snapshot import ShardSnapshot

FORMAT_VERSION = 1
"""The version this release writes. Change the schema only with a new version and a
migration to it in :data:`MIGRATIONS` (docs/upgrades.md#changing-the-format)."""
PICKLED = 0
"""The version of a group state pickled by the releases before this format (up to 9711ad5)."""
VERSION_KEY = b"isrwatch.state_format"

_ARROW_STREAM = b"\xff\xff\xff\xff"  # an Arrow IPC stream starts with its continuation marker


class StateFormatError(Exception):
    """The group state is not a shard state this release can read."""


# ------------------------------------------------------------------ the schema

I32, I64, U64, STR, BOOL = pa.int32(), pa.int64(), pa.uint64(), pa.string(), pa.bool_()


def _field(name: str, kind: Any, *, nullable: bool = False) -> Any:
    return pa.field(name, kind, nullable=nullable)


def _record(*fields: Any) -> Any:
    return pa.struct(list(fields))


def _table(*fields: Any) -> Any:
    return pa.list_(pa.field("row", pa.struct(list(fields)), nullable=False))


def _int_list(kind: Any) -> Any:
    return pa.list_(pa.field("item", kind, nullable=False))


@dataclass(frozen=True)
class TableField:
    """A field of the partition table in the format: a whole column, or one field of a
    record column (``state.table_columns.Field``), under that field's name."""

    name: str
    column: Column[Any]
    index: int | None

    def values(self, table: PartitionTable) -> npt.NDArray[Any]:
        """The values of the table's first ``size`` rows (and all their slots)."""
        array: npt.NDArray[Any] = table.__dict__[self.column.name][: table.size]
        return array if self.index is None else array[..., self.index]

    def restore(self, table: PartitionTable, values: npt.NDArray[Any]) -> None:
        array: npt.NDArray[Any] = table.__dict__[self.column.name]
        if self.index is None:
            array[: table.size] = values
        else:
            array[: table.size, ..., self.index] = values


LIST_FIELDS = ("isr", "replicas")
"""List columns of the table kept in its rows (broker ids, in order). ``cached_isr`` (per
broker, the ISR its cache holds) is kept in them as two lists, ``cached_isr_brokers`` and
``cached_isr_sets`` (each an index into the ``isr_sets`` column, which holds each ISR
once: brokers cache the same few sets)."""
CACHED_ISR = "cached_isr"


def table_fields(owner: type = PartitionTable) -> tuple[list[TableField], list[TableField]]:
    """The partition-scope and replica-scope fields of ``owner``'s columns, in declaration
    order. A list column the format does not know stops it: the format must change first."""
    columns, listed = columns_of(owner)
    unknown = {c.name for c in listed} - {*LIST_FIELDS, CACHED_ISR}
    if unknown:
        raise StateFormatError(f"PartitionTable's list columns {sorted(unknown)} are not in "
                               "the state format: add them with a new format version")  # fmt: skip
    names = {(f.column.name, f.index): name for name, f in vars(owner).items()
             if isinstance(f, Field)}  # fmt: skip
    scopes: dict[Scope, list[TableField]] = {Scope.PARTITION: [], Scope.REPLICA: []}
    for column in columns:
        indexes: list[int | None] = list(range(column.record)) if column.record else [None]
        for index in indexes:
            name = column.name if index is None else names.get((column.name, index))
            scopes[column.scope].append(TableField(name or f"{column.name}_{index}", column, index))
    return scopes[Scope.PARTITION], scopes[Scope.REPLICA]


def _arrow_type(column: Column[Any]) -> Any:
    return pa.from_numpy_dtype(np.dtype(column.dtype))


def state_schema(owner: type = PartitionTable) -> Any:
    """The schema this release writes (the partition table's part from ``owner``)."""
    partition_fields, replica_fields = table_fields(owner)
    broker_ms = (_field("broker", I32), _field("ms", I64))
    partition_row = [_field(f.name, _arrow_type(f.column)) for f in partition_fields]
    partition_row += [_field(name, _int_list(I32)) for name in LIST_FIELDS]
    partition_row += [_field("cached_isr_brokers", _int_list(I32)),
                      _field("cached_isr_sets", _int_list(I32))]  # fmt: skip
    topic_partition = (_field("topic", STR), _field("partition", I32))
    return pa.schema([
        _field("snapshot", _record(
            _field("clock_ms", I64), _field("fetch_error_responses_total", I64),
            _field("signature_scheme", STR),
            _field("shard_index", I32, nullable=True), _field("shard_count", I32, nullable=True),
        )),
        # slot_count: the length of the table's slot_to_row, which the rows and topics
        # give (each live row at its topic's slot_base + partition, -1 elsewhere).
        _field("partition_table", _record(
            _field("size", I64), _field("partition_capacity", I64),
            _field("replica_capacity", I64), _field("slot_count", I64),
        )),
        _field("partitions", _table(*partition_row)),
        # size x replica_capacity rows: the slots of row 0, then of row 1...
        _field("replicas", _table(*(_field(f.name, _arrow_type(f.column))
                                    for f in replica_fields))),
        _field("topics", _table(_field("name", STR), _field("slot_base", I64),
                                _field("slot_capacity", I64))),  # in topic_id order
        _field("deleted_rows", _table(*topic_partition, _field("row", I64))),
        _field("isr_sets", pa.list_(pa.field("set", _int_list(I32), nullable=False))),
        _field("metadata_mismatched", _int_list(I64)),
        _field("cluster", _record(
            _field("controller_id", I32, nullable=True),
            _field("controller_epoch", I32, nullable=True),
            _field("live_brokers_known", BOOL),
        )),
        _field("live_brokers", _table(_field("broker", I32), _field("broker_epoch", I64))),
        _field("lag_time_max_ms", _table(*broker_ms)),
        _field("min_insync_replicas", _table(_field("topic", STR), _field("value", I32))),
        _field("propagation_leaders", _table(
            _field("leader", I32), _field("latest_change_ms", I64, nullable=True),
            _field("last_propagation_ms", I64, nullable=True),
        )),
        _field("propagation_pending", _table(_field("leader", I32), *topic_partition,
                                             _field("oldest_change_ms", I64))),
        _field("quorum", _table(  # the newest DescribeQuorum report: none or one row
            _field("report_ms", I64), _field("fetch_timeout_ms", I64),
            _field("next_report_ms", I64),
        )),
        _field("quorum_log_end_offsets", _table(_field("broker", I32),
                                                _field("log_end_offset", I64))),
        _field("quorum_last_caught_up_ms", _table(*broker_ms)),
        _field("flap_followers", _table(
            *topic_partition, _field("broker", I32), _field("leader", I32),
            _field("shrinks_ms", _int_list(I64)), _field("expands_ms", _int_list(I64)),
        )),
        _field("maintenance_registered_ms", _table(*broker_ms)),
        _field("maintenance_shutdown_ms", _table(*broker_ms)),
        _field("epoch_floors", _table(*topic_partition, _field("leader_epoch", I32))),
        _field("signatures", _table(_field("key", STR), _field("signature", U64))),
        _field("seen_controller_events", _table(_field("digest", I64), _field("ts", I64))),
        _field("applied_total", _table(_field("event_type", STR), _field("count", I64))),
    ], metadata={VERSION_KEY: str(FORMAT_VERSION).encode()})  # fmt: skip


STATE_SCHEMA = state_schema()
PARTITION_FIELDS, REPLICA_FIELDS = table_fields()


def describe(schema: Any) -> list[dict[str, Any]]:
    """The schema as JSON-able data: one entry per column, its Arrow type in full."""
    return [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema]


# ------------------------------------------------------------------- writing


def _rows(kind: Any, columns: Sequence[Any]) -> Any:
    """A table column's one value: the rows of ``columns`` (one sequence per field)."""
    struct = kind.value_type
    children = [pa.array(values, type=struct.field(i).type) for i, values in enumerate(columns)]
    count = len(children[0]) if children else 0
    rows = pa.StructArray.from_arrays(children, fields=list(struct))
    return pa.ListArray.from_arrays(pa.array([0, count], I32), rows, type=kind)


def _one(kind: Any, values: Sequence[Any]) -> Any:
    """A record column's one value."""
    children = [pa.array([value], type=kind.field(i).type) for i, value in enumerate(values)]
    return pa.StructArray.from_arrays(children, fields=list(kind))


def _lists(kind: Any, lists: Sequence[Iterable[int]]) -> Any:
    """Lists of integers as one list array of ``kind`` (offsets and values)."""
    counts = np.fromiter(map(len, lists), dtype=np.int32, count=len(lists))  # type: ignore[arg-type]
    offsets = np.zeros(len(lists) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    values = np.fromiter(chain.from_iterable(lists), dtype=kind.value_type.to_pandas_dtype(),
                         count=int(offsets[-1]))  # fmt: skip
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values), type=kind)


def _one_list(kind: Any, values: Sequence[int] | npt.NDArray[Any]) -> Any:
    """A list column's one value."""
    items = pa.array(values, type=kind.value_type)
    return pa.ListArray.from_arrays(pa.array([0, len(items)], I32), items, type=kind)


def _cached_isrs(caches: Sequence[dict[int, frozenset[int]]], kind: Any) -> tuple[
    Any, Any, list[list[int]]
]:  # fmt: skip
    """Per row, the brokers of its cache entries and the index of each one's ISR in the
    distinct ISRs (returned too), as two list arrays with the same offsets. Iterating a
    dict gives its keys; each step is a C-level pass over all entries."""
    brokers = _lists(kind, caches)
    isrs = list(chain.from_iterable(map(dict.values, caches)))
    index: dict[frozenset[int], int] = dict.fromkeys(isrs, 0)
    for i, isr in enumerate(index):
        index[isr] = i
    ids = np.fromiter(map(index.__getitem__, isrs), dtype=np.int32, count=len(isrs))
    sets = pa.ListArray.from_arrays(brokers.offsets, pa.array(ids), type=kind)
    return brokers, sets, [sorted(isr) for isr in index]


def _pairs(mapping: dict[Any, Any]) -> tuple[list[Any], list[Any]]:
    return list(mapping.keys()), list(mapping.values())


def write_snapshot(snapshot: ShardSnapshot) -> bytes:
    """The bytes the job stores in a shard's group state (this release's format)."""
    columns = _columns(snapshot)
    batch = pa.RecordBatch.from_arrays([columns[f.name] for f in STATE_SCHEMA], schema=STATE_SCHEMA)
    return write_batch(batch)


def write_batch(batch: Any) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def _columns(snapshot: ShardSnapshot) -> dict[str, Any]:
    model = snapshot.model
    table, cluster, windows = model.table, model.cluster, model.windows
    kind = {f.name: f.type for f in STATE_SCHEMA}
    size = table.size
    out: dict[str, Any] = {}
    shard = model.shard
    out["snapshot"] = _one(kind["snapshot"], (
        snapshot.clock_ms, snapshot.fetch_error_responses_total, snapshot.signature_scheme,
        None if shard is None else shard.index, None if shard is None else shard.count,
    ))  # fmt: skip
    out["partition_table"] = _one(
        kind["partition_table"],
        (size, table.partition_capacity, table.replica_capacity, len(table.slot_to_row)),
    )
    partition_kind = kind["partitions"].value_type
    cached_brokers, cached_sets, isr_sets = _cached_isrs(
        table.cached_isr[:size], partition_kind.field("cached_isr_brokers").type
    )
    out["partitions"] = _rows(kind["partitions"], [
        *(np.ascontiguousarray(f.values(table)) for f in PARTITION_FIELDS),
        *(_lists(partition_kind.field(name).type, table.__dict__[name][:size])
          for name in LIST_FIELDS),
        cached_brokers, cached_sets,
    ])  # fmt: skip
    out["isr_sets"] = pa.array([isr_sets], type=kind["isr_sets"])
    out["replicas"] = _rows(kind["replicas"], [
        np.ascontiguousarray(f.values(table)).reshape(-1) for f in REPLICA_FIELDS])  # fmt: skip
    topics = [table._topic_ids[name] for name in table.topic_names]
    out["topics"] = _rows(kind["topics"], [
        table.topic_names, [s.base for s in topics], [s.capacity for s in topics]])  # fmt: skip
    deleted = list(table._deleted_rows.items())
    out["deleted_rows"] = _rows(kind["deleted_rows"], [[k[0] for k, _ in deleted],
                                                       [k[1] for k, _ in deleted],
                                                       [r for _, r in deleted]])  # fmt: skip
    out["metadata_mismatched"] = _one_list(kind["metadata_mismatched"],
                                           sorted(model.caches.mismatched))  # fmt: skip
    out["cluster"] = _one(
        kind["cluster"],
        (cluster.controller_id, cluster.controller_epoch, cluster.live_brokers is not None),
    )
    out["live_brokers"] = _rows(kind["live_brokers"], _pairs(cluster.live_brokers or {}))
    out["lag_time_max_ms"] = _rows(kind["lag_time_max_ms"], _pairs(cluster.lag_time_max_ms))
    out["min_insync_replicas"] = _rows(kind["min_insync_replicas"],
                                       _pairs(cluster.min_insync_replicas))  # fmt: skip
    leaders = list(windows.leaders.items())
    out["propagation_leaders"] = _rows(kind["propagation_leaders"], [
        [b for b, _ in leaders], [s.latest_change_ms for _, s in leaders],
        [s.last_propagation_ms for _, s in leaders]])  # fmt: skip
    pending = [(b, tp, ms) for b, s in leaders for tp, ms in s.pending.items()]
    out["propagation_pending"] = _rows(kind["propagation_pending"], [
        [b for b, _, _ in pending], [tp.topic for _, tp, _ in pending],
        [tp.partition for _, tp, _ in pending], [ms for _, _, ms in pending]])  # fmt: skip
    quorum = [] if windows.quorum is None else [windows.quorum]
    out["quorum"] = _rows(kind["quorum"], [[q.report_ms for q in quorum],
                                           [q.fetch_timeout_ms for q in quorum],
                                           [q.next_report_ms for q in quorum]])  # fmt: skip
    q = windows.quorum
    out["quorum_log_end_offsets"] = _rows(kind["quorum_log_end_offsets"],
                                          _pairs(q.log_end_offsets if q else {}))  # fmt: skip
    out["quorum_last_caught_up_ms"] = _rows(kind["quorum_last_caught_up_ms"],
                                            _pairs(q.last_caught_up_ms if q else {}))  # fmt: skip
    flaps = list(model.flaps._followers.items())
    out["flap_followers"] = _rows(kind["flap_followers"], [
        [k[0] for k, _ in flaps], [k[1] for k, _ in flaps], [k[2] for k, _ in flaps],
        [f.leader for _, f in flaps], [list(f.shrinks) for _, f in flaps],
        [list(f.expands) for _, f in flaps]])  # fmt: skip
    out["maintenance_registered_ms"] = _rows(kind["maintenance_registered_ms"],
                                             _pairs(model.maintenance.registered_ms))  # fmt: skip
    out["maintenance_shutdown_ms"] = _rows(kind["maintenance_shutdown_ms"],
                                           _pairs(model.maintenance.shutdown_ms))  # fmt: skip
    floors = list(model.epoch_floors.items())
    out["epoch_floors"] = _rows(kind["epoch_floors"], [
        [k[0] for k, _ in floors], [k[1] for k, _ in floors], [e for _, e in floors]])  # fmt: skip
    out["signatures"] = _rows(kind["signatures"], _pairs(snapshot.signatures))
    out["seen_controller_events"] = _rows(kind["seen_controller_events"],
                                          _pairs(snapshot.seen_controller_events))  # fmt: skip
    out["applied_total"] = _rows(kind["applied_total"], _pairs(snapshot.applied_total))
    return out


# ------------------------------------------------------------------- reading


def stored_version(data: bytes) -> int:
    """The format version of a group state: :data:`PICKLED` for a pickle."""
    if data[:1] == b"\x80":  # pickle protocol 2 and later start with PROTO
        return PICKLED
    if data[:4] != _ARROW_STREAM:
        raise StateFormatError("the group state is neither a pickle nor an Arrow stream")
    metadata = pa.ipc.open_stream(data).schema.metadata or {}
    if VERSION_KEY not in metadata:
        raise StateFormatError("the group state's Arrow schema has no format version")
    return int(metadata[VERSION_KEY])


def read_batch(data: bytes) -> Any:
    """The record batch of a group state in an Arrow version (for migrations, too)."""
    batch = pa.ipc.open_stream(data).read_next_batch()
    return batch


def upgrade(data: bytes) -> bytes:
    """The group state in this release's format, by the migrations from its version."""
    version = stored_version(data)
    if version > FORMAT_VERSION:
        raise StateFormatError(
            f"the group state is in state format {version}, written by a later release of "
            f"isrwatch; this one reads formats up to {FORMAT_VERSION}. Run that release "
            "again, or restore the checkpoint's copy taken before the upgrade"
        )
    while version < FORMAT_VERSION:
        migration = MIGRATIONS.get(version)
        if migration is None:
            raise StateFormatError(f"no migration from state format {version}")
        data = migration(data)
        after = stored_version(data)
        if not version < after <= FORMAT_VERSION:
            raise StateFormatError(f"the migration from state format {version} wrote {after}")
        version = after
    return data


def read_snapshot(data: bytes, rules: RuleSettings) -> ShardSnapshot:
    """A shard's snapshot from its group state, of any version this release reads,
    judged by ``rules``."""
    batch = read_batch(upgrade(data))
    if batch.schema != STATE_SCHEMA:
        raise StateFormatError(f"the group state's schema is not that of format {FORMAT_VERSION}")
    return _snapshot(batch, rules)


def _rows_of(batch: Any, name: str) -> Any:
    rows = batch.column(name).flatten()
    return rows


def _ints(array: Any) -> list[int]:
    values: list[int] = array.to_numpy(zero_copy_only=False).tolist()
    return values


def _fields(batch: Any, name: str) -> list[list[Any]]:
    """A table column's rows, one Python list per field."""
    rows = _rows_of(batch, name)
    return [rows.field(i).to_pylist() for i in range(rows.type.num_fields)]


def _record_of(batch: Any, name: str) -> dict[str, Any]:
    record = batch.column(name)
    return {f.name: record.field(i)[0].as_py() for i, f in enumerate(record.type)}


def _per_row(offsets: npt.NDArray[Any], values: npt.NDArray[Any]) -> list[list[Any]]:
    """The values of each row of a list array (``offsets`` into ``values``) as a list.
    Rows are gathered by length, each length one gather and ``tolist`` (a table's rows
    mostly have the same replication factor): no Python step per value."""
    counts = np.diff(offsets)
    lengths = np.unique(counts).tolist()
    if len(lengths) == 1:  # one reshape (or no values at all)
        if lengths[0] == 0:
            return [[] for _ in range(len(counts))]
        whole: list[list[Any]] = values[offsets[0] : offsets[-1]].reshape(-1, lengths[0]).tolist()
        return whole
    out: list[list[Any]] = [[]] * len(counts)
    for length in lengths:
        rows = np.flatnonzero(counts == length).tolist()
        chunk: list[list[Any]] = (
            [[] for _ in rows] if length == 0  # each row its own empty list
            else values[offsets[rows][:, None] + np.arange(length)].tolist()
        )  # fmt: skip
        for row, items in zip(rows, chunk, strict=True):
            out[row] = items
    return out


def _offsets(array: Any) -> npt.NDArray[np.int32]:
    offsets: npt.NDArray[np.int32] = array.offsets.to_numpy()  # into ``values``, even of a slice
    return offsets


def _tuples(array: Any) -> list[tuple[int, ...]]:
    """A list array of integers as one tuple per row."""
    values = array.values.to_numpy(zero_copy_only=False)
    return list(map(tuple, _per_row(_offsets(array), values)))


def _snapshot(batch: Any, rules: RuleSettings) -> ShardSnapshot:
    kept = _record_of(batch, "snapshot")
    shard = (None if kept["shard_index"] is None
             else Shard(kept["shard_index"], kept["shard_count"]))  # fmt: skip
    model = ReplicationModel(rules, shard)
    model.table = table = _table_of(batch)
    model.caches = MetadataCaches(table)
    model.caches.mismatched = set(_ints(batch.column("metadata_mismatched").flatten()))
    model.cluster = _cluster(batch)
    model.windows = _windows(batch, rules)
    flaps = model.flaps
    for topic, partition, broker, leader, shrinks, expands in zip(
        *_fields(batch, "flap_followers"), strict=True
    ):
        flaps._followers[(topic, partition, broker)] = _Follower(deque(shrinks), deque(expands),
                                                                 leader)  # fmt: skip
    maintenance = model.maintenance
    maintenance.registered_ms = dict(zip(*_fields(batch, "maintenance_registered_ms"),
                                         strict=True))  # fmt: skip
    maintenance.shutdown_ms = dict(zip(*_fields(batch, "maintenance_shutdown_ms"), strict=True))
    floors = model.epoch_floors
    for topic, partition, epoch in zip(*_fields(batch, "epoch_floors"), strict=True):
        floors[(topic, partition)] = epoch
    signatures = _rows_of(batch, "signatures")
    keys, digests = signatures.field(0).to_pylist(), _ints(signatures.field(1))
    seen = _rows_of(batch, "seen_controller_events")
    return ShardSnapshot(
        model=model,
        clock_ms=kept["clock_ms"],
        signatures=dict(zip(keys, digests, strict=True)),
        seen_controller_events=dict(zip(_ints(seen.field(0)), _ints(seen.field(1)), strict=True)),
        applied_total=Counter(dict(zip(*_fields(batch, "applied_total"), strict=True))),
        fetch_error_responses_total=kept["fetch_error_responses_total"],
        signature_scheme=kept["signature_scheme"],
    )


def _table_of(batch: Any) -> PartitionTable:
    sizes = _record_of(batch, "partition_table")
    size, replica_capacity = sizes["size"], sizes["replica_capacity"]
    table = PartitionTable(sizes["partition_capacity"], replica_capacity)
    table.size = size
    rows = _rows_of(batch, "partitions")
    for f in PARTITION_FIELDS:
        f.restore(table, rows.field(f.name).to_numpy(zero_copy_only=False))
    for name in LIST_FIELDS:
        table.__dict__[name][:size] = _tuples(rows.field(name))
    slots = _rows_of(batch, "replicas")
    for f in REPLICA_FIELDS:
        values = slots.field(f.name).to_numpy(zero_copy_only=False)
        f.restore(table, values.reshape(size, replica_capacity))
    names, bases, capacities = _fields(batch, "topics")
    table.topic_names = names
    table._topic_ids = {name: TopicSlots(i, base, capacity) for i, (name, base, capacity)
                        in enumerate(zip(names, bases, capacities, strict=True))}  # fmt: skip
    slot_to_row = np.full(sizes["slot_count"], -1, dtype=np.int64)
    live = np.flatnonzero(table.exists[:size])
    slot_bases = np.asarray(bases, dtype=np.int64)
    slot_to_row[slot_bases[table.topic_id[live]] + table.partition[live]] = live
    table._slot_to_row = slot_to_row
    topics, partitions, deleted = _fields(batch, "deleted_rows")
    table._deleted_rows = {(t, p): r for t, p, r in zip(topics, partitions, deleted, strict=True)}
    listed = batch.column("isr_sets").flatten()
    isr_sets = np.fromiter(map(frozenset, _tuples(listed)), dtype=object, count=len(listed))
    brokers, sets = rows.field("cached_isr_brokers"), rows.field("cached_isr_sets")
    if len(brokers.values) == 0:  # no broker's cache known (KRaft without reports, say)
        table.cached_isr[:size] = [{} for _ in range(size)]
        return table
    offsets = _offsets(brokers)
    keys = _per_row(offsets, brokers.values.to_numpy())
    values = _per_row(offsets, isr_sets[sets.values.to_numpy()])
    table.cached_isr[:size] = list(map(dict, map(zip, keys, values)))
    return table


def _cluster(batch: Any) -> ClusterState:
    kept = _record_of(batch, "cluster")
    live = dict(zip(*_fields(batch, "live_brokers"), strict=True))
    return ClusterState(
        controller_id=kept["controller_id"],
        controller_epoch=kept["controller_epoch"],
        live_brokers=live if kept["live_brokers_known"] else None,
        lag_time_max_ms=dict(zip(*_fields(batch, "lag_time_max_ms"), strict=True)),
        min_insync_replicas=dict(zip(*_fields(batch, "min_insync_replicas"), strict=True)),
    )


def _windows(batch: Any, rules: RuleSettings) -> PropagationWindows:
    windows = PropagationWindows(rules.propagation)
    for leader, latest, last in zip(*_fields(batch, "propagation_leaders"), strict=True):
        windows.leaders[leader] = LeaderPropagationState({}, latest, last)
    for leader, topic, partition, ms in zip(*_fields(batch, "propagation_pending"), strict=True):
        windows.leaders[leader].pending[TopicPartition(topic, partition)] = ms
    for report_ms, fetch_timeout_ms, next_report_ms in zip(*_fields(batch, "quorum"),
                                                           strict=True):  # fmt: skip
        windows.quorum = QuorumProgress(
            report_ms=report_ms,
            log_end_offsets=dict(zip(*_fields(batch, "quorum_log_end_offsets"), strict=True)),
            last_caught_up_ms=dict(zip(*_fields(batch, "quorum_last_caught_up_ms"), strict=True)),
            fetch_timeout_ms=fetch_timeout_ms,
            next_report_ms=next_report_ms,
        )
    return windows


# ---------------------------------------------------------------- migrations


MOVED_CLASSES: dict[tuple[str, str], type] = {
    ("streaming.shard_state", "ShardSnapshot"): ShardSnapshot,
    ("streaming.shard_snapshot", "ShardSnapshot"): ShardSnapshot,
}
"""(module, name) a pickle of an earlier release names -> the class now. Releases up to
9711ad5 pickled ``streaming.shard_state.ShardSnapshot``; the ``state/`` classes they
pickled are at the same paths still (``tests/unit/test_checkpoint_state_layout.py``)."""


class StateUnpickler(pickle.Unpickler):
    """Reads a pickled group state with the classes of this release where they moved."""

    def find_class(self, module: str, name: str) -> Any:
        moved = MOVED_CLASSES.get((module, name))
        return moved if moved is not None else super().find_class(module, name)


def read_pickled(data: bytes) -> ShardSnapshot:
    """A snapshot pickled by a release before this format; its classes' ``__setstate__``
    migrate the attributes of still older ones (``streaming.shard_snapshot``)."""
    snapshot = StateUnpickler(io.BytesIO(data)).load()
    if not isinstance(snapshot, ShardSnapshot):
        raise StateFormatError(
            f"the group state holds a {type(snapshot).__name__}, not a ShardSnapshot"
        )
    return snapshot


def migrate_pickled(data: bytes) -> bytes:
    """:data:`PICKLED` -> 1: the objects the pickle holds, written in this format. (It
    goes through this release's objects, so it writes the current version, later ones
    included: the pickle is migrated in one step.)"""
    return write_snapshot(read_pickled(data))


Migration = Callable[[bytes], bytes]
MIGRATIONS: dict[int, Migration] = {PICKLED: migrate_pickled}
"""Version -> the migration of a group state of that version to the next one. A new
format version N adds ``MIGRATIONS[N - 1]`` (``read_batch``, change the columns,
``write_batch`` with the metadata of version N) and its schema to
tests/unit/data/state_format.json."""
