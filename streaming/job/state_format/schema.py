"""The state format's versions and the Arrow schema of the current one: each column of the
one-row record batch, the partition table's columns derived from ``PartitionTable``'s
declarations (``state.table_columns``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]

from state.partition_table import PartitionTable
from state.table_columns import Column, Field, Scope, columns_of

FORMAT_VERSION = 3
"""The version this release writes. Change the schema only with a new version and a
migration to it in :data:`MIGRATIONS` (docs/upgrades.md#changing-the-format)."""
PICKLED = 0
"""The version of a group state pickled by the releases before this format (up to 9711ad5)."""
VERSION_KEY = b"isrwatch.state_format"


class StateFormatError(Exception):
    """The group state is not a shard state this release can read."""


ARROW_STREAM_START = b"\xff\xff\xff\xff"  # an Arrow IPC stream starts with its continuation marker
ZSTD_FRAME_START = b"\x28\xb5\x2f\xfd"  # a Zstandard frame's magic number (RFC 8878, 3.1.1)
STORED_COMPRESSION = "zstd"
"""How the Arrow stream is stored: one Zstandard frame (Arrow's default level, 1). Spark
hands the group state to Python pickled by Pyrolite, which turns a ``byte[]`` into a
string one byte at a time (``PickleUtils.rawStringFromBytes``) and encodes that to UTF-8;
the state store writes and checkpoints it again every batch. At 100,000 partitions a
batch's states took 35 MB (half of it zero bytes: unset slots, small integers in int64
columns), 1.7 MB compressed, in 37 ms of CPU to compress and 32 ms to read back
(docs/performance.md#compressed-state). States written before are plain Arrow streams
and are read as they are."""


def arrow_stream(data: bytes) -> Any:
    """A reader of the Arrow stream a stored group state holds, compressed or not."""
    if data[:4] == ZSTD_FRAME_START:
        source = pa.CompressedInputStream(pa.BufferReader(data), STORED_COMPRESSION)
        return pa.ipc.open_stream(source)
    if data[:4] == ARROW_STREAM_START:
        return pa.ipc.open_stream(data)
    raise StateFormatError("the group state is neither a pickle nor an Arrow stream")


def read_batch(data: bytes) -> Any:
    """The record batch of a group state in an Arrow version (for migrations, too)."""
    return arrow_stream(data).read_next_batch()


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
ELIGIBLE_LEADERS = "eligible_leaders"
"""Kafka 4.0+'s ELR of each row (``state.eligible_leaders``), kept in its rows as two
nullable lists, ``elr`` and ``last_known_elr`` (null: never stated). Format 2."""
ELR_FIELDS = ("elr", "last_known_elr")


def table_fields(owner: type = PartitionTable) -> tuple[list[TableField], list[TableField]]:
    """The partition-scope and replica-scope fields of ``owner``'s columns, in declaration
    order. A list column the format does not know stops it: the format must change first."""
    columns, listed = columns_of(owner)
    unknown = {c.name for c in listed} - {*LIST_FIELDS, CACHED_ISR, ELIGIBLE_LEADERS}
    if unknown:
        raise StateFormatError(
            f"PartitionTable's list columns {sorted(unknown)} are not in "
            "the state format: add them with a new format version"
        )
    names = {
        (f.column.name, f.index): name for name, f in vars(owner).items() if isinstance(f, Field)
    }
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
    partition_row += [
        _field("cached_isr_brokers", _int_list(I32)),
        _field("cached_isr_sets", _int_list(I32)),
    ]
    partition_row += [_field(name, _int_list(I32), nullable=True) for name in ELR_FIELDS]
    topic_partition = (_field("topic", STR), _field("partition", I32))
    return pa.schema(
        [
            _field(
                "snapshot",
                _record(
                    _field("clock_ms", I64),
                    _field("fetch_error_responses_total", I64),
                    _field("signature_scheme", STR),
                    _field("shard_index", I32, nullable=True),
                    _field("shard_count", I32, nullable=True),
                ),
            ),
            # slot_count: the length of the table's slot_to_row, which the rows and topics
            # give (each live row at its topic's slot_base + partition, -1 elsewhere).
            _field(
                "partition_table",
                _record(
                    _field("size", I64),
                    _field("partition_capacity", I64),
                    _field("replica_capacity", I64),
                    _field("slot_count", I64),
                ),
            ),
            _field("partitions", _table(*partition_row)),
            # size x replica_capacity rows: the slots of row 0, then of row 1...
            _field(
                "replicas", _table(*(_field(f.name, _arrow_type(f.column)) for f in replica_fields))
            ),
            _field(
                "topics",
                _table(_field("name", STR), _field("slot_base", I64), _field("slot_capacity", I64)),
            ),  # in topic_id order
            _field("deleted_rows", _table(*topic_partition, _field("row", I64))),
            _field("isr_sets", pa.list_(pa.field("set", _int_list(I32), nullable=False))),
            _field("metadata_mismatched", _int_list(I64)),
            _field(
                "cluster",
                _record(
                    _field("controller_id", I32, nullable=True),
                    _field("controller_epoch", I32, nullable=True),
                    _field("live_brokers_known", BOOL),
                ),
            ),
            _field("live_brokers", _table(_field("broker", I32), _field("broker_epoch", I64))),
            _field("lag_time_max_ms", _table(*broker_ms)),
            _field("min_insync_replicas", _table(_field("topic", STR), _field("value", I32))),
            # format 3: the last admin poll each live broker answered (BrokersAnswered)
            _field("brokers_answered_ms", _table(*broker_ms)),
            _field(
                "propagation_leaders",
                _table(
                    _field("leader", I32),
                    _field("latest_change_ms", I64, nullable=True),
                    _field("last_propagation_ms", I64, nullable=True),
                ),
            ),
            _field(
                "propagation_pending",
                _table(_field("leader", I32), *topic_partition, _field("oldest_change_ms", I64)),
            ),
            _field(
                "quorum",
                _table(  # the newest DescribeQuorum report: none or one row
                    _field("report_ms", I64),
                    _field("fetch_timeout_ms", I64),
                    _field("next_report_ms", I64),
                ),
            ),
            _field(
                "quorum_log_end_offsets",
                _table(_field("broker", I32), _field("log_end_offset", I64)),
            ),
            _field("quorum_last_caught_up_ms", _table(*broker_ms)),
            _field(
                "flap_followers",
                _table(
                    *topic_partition,
                    _field("broker", I32),
                    _field("leader", I32),
                    _field("shrinks_ms", _int_list(I64)),
                    _field("expands_ms", _int_list(I64)),
                ),
            ),
            _field("maintenance_registered_ms", _table(*broker_ms)),
            _field("maintenance_shutdown_ms", _table(*broker_ms)),
            _field("epoch_floors", _table(*topic_partition, _field("leader_epoch", I32))),
            # format 2: each leader's isr-expiration schedule (state.expiration_schedule)
            _field("expiration_anchor_ms", _table(*broker_ms)),
            _field("expiration_started_ms", _table(*broker_ms)),
            _field("signatures", _table(_field("key", STR), _field("signature", U64))),
            _field("seen_controller_events", _table(_field("digest", I64), _field("ts", I64))),
            _field("applied_total", _table(_field("event_type", STR), _field("count", I64))),
        ],
        metadata={VERSION_KEY: str(FORMAT_VERSION).encode()},
    )


STATE_SCHEMA = state_schema()
PARTITION_FIELDS, REPLICA_FIELDS = table_fields()


def describe(schema: Any) -> list[dict[str, Any]]:
    """The schema as JSON-able data: one entry per column, its Arrow type in full."""
    return [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema]
