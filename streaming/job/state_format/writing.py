"""Writing a shard's snapshot in the current format: the snapshot's objects as the columns
of one Arrow record batch of one row."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]

from state.eligible_leaders import EligibleLeaders
from streaming.job.shard_snapshot import ShardSnapshot
from streaming.job.state_format.schema import (
    ELR_FIELDS,
    I32,
    LIST_FIELDS,
    PARTITION_FIELDS,
    REPLICA_FIELDS,
    STATE_SCHEMA,
    STORED_COMPRESSION,
)


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
    values = np.fromiter(
        chain.from_iterable(lists), dtype=kind.value_type.to_pandas_dtype(), count=int(offsets[-1])
    )
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values), type=kind)


def _one_list(kind: Any, values: Sequence[int] | npt.NDArray[Any]) -> Any:
    """A list column's one value."""
    items = pa.array(values, type=kind.value_type)
    return pa.ListArray.from_arrays(pa.array([0, len(items)], I32), items, type=kind)


def _cached_isrs(
    caches: Sequence[dict[int, frozenset[int]]], kind: Any
) -> tuple[Any, Any, list[list[int]]]:
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


def _eligible_leaders(held: Sequence[EligibleLeaders | None], partition_kind: Any) -> list[Any]:
    """The rows' ``elr`` and ``last_known_elr`` list arrays, null where none was stated."""
    elr, last_known = [], []
    for leaders in held:
        elr.append(None if leaders is None else leaders.elr)
        last_known.append(None if leaders is None else leaders.last_known_elr)
    return [
        pa.array(values, type=partition_kind.field(name).type)
        for name, values in zip(ELR_FIELDS, (elr, last_known), strict=True)
    ]


def _pairs(mapping: dict[Any, Any]) -> tuple[list[Any], list[Any]]:
    return list(mapping.keys()), list(mapping.values())


def write_snapshot(snapshot: ShardSnapshot) -> bytes:
    """The bytes the job stores in a shard's group state (this release's format)."""
    columns = _columns(snapshot)
    batch = pa.RecordBatch.from_arrays([columns[f.name] for f in STATE_SCHEMA], schema=STATE_SCHEMA)
    return write_batch(batch)


def write_batch(batch: Any) -> bytes:
    """The group state's bytes: ``batch`` as an Arrow stream, compressed
    (``schema.STORED_COMPRESSION``)."""
    sink = pa.BufferOutputStream()
    with (
        pa.CompressedOutputStream(sink, STORED_COMPRESSION) as compressed,
        pa.ipc.new_stream(compressed, batch.schema) as writer,
    ):
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
    out["snapshot"] = _one(
        kind["snapshot"],
        (
            snapshot.clock_ms,
            snapshot.fetch_error_responses_total,
            snapshot.signature_scheme,
            None if shard is None else shard.index,
            None if shard is None else shard.count,
        ),
    )
    out["partition_table"] = _one(
        kind["partition_table"],
        (size, table.partition_capacity, table.replica_capacity, len(table.slot_to_row)),
    )
    partition_kind = kind["partitions"].value_type
    cached_brokers, cached_sets, isr_sets = _cached_isrs(
        table.cached_isr[:size], partition_kind.field("cached_isr_brokers").type
    )
    out["partitions"] = _rows(
        kind["partitions"],
        [
            *(np.ascontiguousarray(f.values(table)) for f in PARTITION_FIELDS),
            *(
                _lists(partition_kind.field(name).type, table.__dict__[name][:size])
                for name in LIST_FIELDS
            ),
            cached_brokers,
            cached_sets,
            *_eligible_leaders(table.eligible_leaders[:size], partition_kind),
        ],
    )
    out["isr_sets"] = pa.array([isr_sets], type=kind["isr_sets"])
    out["replicas"] = _rows(
        kind["replicas"],
        [np.ascontiguousarray(f.values(table)).reshape(-1) for f in REPLICA_FIELDS],
    )
    topics = [table._topic_ids[name] for name in table.topic_names]
    out["topics"] = _rows(
        kind["topics"], [table.topic_names, [s.base for s in topics], [s.capacity for s in topics]]
    )
    deleted = list(table._deleted_rows.items())
    out["deleted_rows"] = _rows(
        kind["deleted_rows"],
        [[k[0] for k, _ in deleted], [k[1] for k, _ in deleted], [r for _, r in deleted]],
    )
    out["metadata_mismatched"] = _one_list(
        kind["metadata_mismatched"], sorted(model.caches.mismatched)
    )
    out["cluster"] = _one(
        kind["cluster"],
        (cluster.controller_id, cluster.controller_epoch, cluster.live_brokers is not None),
    )
    out["live_brokers"] = _rows(kind["live_brokers"], _pairs(cluster.live_brokers or {}))
    out["lag_time_max_ms"] = _rows(kind["lag_time_max_ms"], _pairs(cluster.lag_time_max_ms))
    out["min_insync_replicas"] = _rows(
        kind["min_insync_replicas"], _pairs(cluster.min_insync_replicas)
    )
    out["brokers_answered_ms"] = _rows(kind["brokers_answered_ms"], _pairs(cluster.answered_ms))
    leaders = list(windows.leaders.items())
    out["propagation_leaders"] = _rows(
        kind["propagation_leaders"],
        [
            [b for b, _ in leaders],
            [s.latest_change_ms for _, s in leaders],
            [s.last_propagation_ms for _, s in leaders],
        ],
    )
    pending = [(b, tp, ms) for b, s in leaders for tp, ms in s.pending.items()]
    out["propagation_pending"] = _rows(
        kind["propagation_pending"],
        [
            [b for b, _, _ in pending],
            [tp.topic for _, tp, _ in pending],
            [tp.partition for _, tp, _ in pending],
            [ms for _, _, ms in pending],
        ],
    )
    quorum = [] if windows.quorum is None else [windows.quorum]
    out["quorum"] = _rows(
        kind["quorum"],
        [
            [q.report_ms for q in quorum],
            [q.fetch_timeout_ms for q in quorum],
            [q.next_report_ms for q in quorum],
        ],
    )
    q = windows.quorum
    out["quorum_log_end_offsets"] = _rows(
        kind["quorum_log_end_offsets"], _pairs(q.log_end_offsets if q else {})
    )
    out["quorum_last_caught_up_ms"] = _rows(
        kind["quorum_last_caught_up_ms"], _pairs(q.last_caught_up_ms if q else {})
    )
    flaps = list(model.flaps._followers.items())
    out["flap_followers"] = _rows(
        kind["flap_followers"],
        [
            [k[0] for k, _ in flaps],
            [k[1] for k, _ in flaps],
            [k[2] for k, _ in flaps],
            [f.leader for _, f in flaps],
            [list(f.shrinks) for _, f in flaps],
            [list(f.expands) for _, f in flaps],
        ],
    )
    out["maintenance_registered_ms"] = _rows(
        kind["maintenance_registered_ms"], _pairs(model.maintenance.registered_ms)
    )
    out["maintenance_shutdown_ms"] = _rows(
        kind["maintenance_shutdown_ms"], _pairs(model.maintenance.shutdown_ms)
    )
    floors = list(model.epoch_floors.items())
    out["epoch_floors"] = _rows(
        kind["epoch_floors"],
        [[k[0] for k, _ in floors], [k[1] for k, _ in floors], [e for _, e in floors]],
    )
    schedules = model.schedules
    out["expiration_anchor_ms"] = _rows(kind["expiration_anchor_ms"], _pairs(schedules.anchor_ms))
    out["expiration_started_ms"] = _rows(
        kind["expiration_started_ms"], _pairs(schedules.started_ms)
    )
    out["signatures"] = _rows(kind["signatures"], _pairs(snapshot.signatures))
    out["seen_controller_events"] = _rows(
        kind["seen_controller_events"], _pairs(snapshot.seen_controller_events)
    )
    out["applied_total"] = _rows(kind["applied_total"], _pairs(snapshot.applied_total))
    return out
