"""Reading a record batch of the current format back into a shard's snapshot: the model's
objects rebuilt from the columns, judged by the rules of the run that restores them."""

from __future__ import annotations

from collections import Counter, deque
from typing import Any

import numpy as np
import numpy.typing as npt

from state.cluster_state import ClusterState
from state.eligible_leaders import EligibleLeaders
from state.events import TopicPartition
from state.flapping import _Follower
from state.metadata_cache import MetadataCaches
from state.model import ReplicationModel
from state.partition_table import PartitionTable, TopicSlots
from state.propagation_window import LeaderPropagationState, PropagationWindows, QuorumProgress
from state.settings import RuleSettings
from state.sharding import Shard
from streaming.job.shard_snapshot import ShardSnapshot
from streaming.job.state_format.schema import (
    ELR_FIELDS,
    LIST_FIELDS,
    PARTITION_FIELDS,
    REPLICA_FIELDS,
)


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
            [[] for _ in rows]
            if length == 0  # each row its own empty list
            else values[offsets[rows][:, None] + np.arange(length)].tolist()
        )
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


def decode_snapshot(batch: Any, rules: RuleSettings) -> ShardSnapshot:
    kept = _record_of(batch, "snapshot")
    shard = None if kept["shard_index"] is None else Shard(kept["shard_index"], kept["shard_count"])
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
        flaps._followers[(topic, partition, broker)] = _Follower(
            deque(shrinks), deque(expands), leader
        )
    maintenance = model.maintenance
    maintenance.registered_ms = dict(zip(*_fields(batch, "maintenance_registered_ms"), strict=True))
    maintenance.shutdown_ms = dict(zip(*_fields(batch, "maintenance_shutdown_ms"), strict=True))
    schedules = model.schedules
    schedules.anchor_ms = dict(zip(*_fields(batch, "expiration_anchor_ms"), strict=True))
    schedules.started_ms = dict(zip(*_fields(batch, "expiration_started_ms"), strict=True))
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
    elr, last_known = (rows.field(name).to_pylist() for name in ELR_FIELDS)
    table.eligible_leaders[:size] = [
        None if stated is None else EligibleLeaders(tuple(stated), tuple(known or ()))
        for stated, known in zip(elr, last_known, strict=True)
    ]
    slots = _rows_of(batch, "replicas")
    for f in REPLICA_FIELDS:
        values = slots.field(f.name).to_numpy(zero_copy_only=False)
        f.restore(table, values.reshape(size, replica_capacity))
    names, bases, capacities = _fields(batch, "topics")
    table.topic_names = names
    table._topic_ids = {
        name: TopicSlots(i, base, capacity)
        for i, (name, base, capacity) in enumerate(zip(names, bases, capacities, strict=True))
    }
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
        answered_ms=dict(zip(*_fields(batch, "brokers_answered_ms"), strict=True)),
    )


def _windows(batch: Any, rules: RuleSettings) -> PropagationWindows:
    windows = PropagationWindows(rules.propagation)
    for leader, latest, last in zip(*_fields(batch, "propagation_leaders"), strict=True):
        windows.leaders[leader] = LeaderPropagationState({}, latest, last)
    for leader, topic, partition, ms in zip(*_fields(batch, "propagation_pending"), strict=True):
        windows.leaders[leader].pending[TopicPartition(topic, partition)] = ms
    for report_ms, fetch_timeout_ms, next_report_ms in zip(*_fields(batch, "quorum"), strict=True):
        windows.quorum = QuorumProgress(
            report_ms=report_ms,
            log_end_offsets=dict(zip(*_fields(batch, "quorum_log_end_offsets"), strict=True)),
            last_caught_up_ms=dict(zip(*_fields(batch, "quorum_last_caught_up_ms"), strict=True)),
            fetch_timeout_ms=fetch_timeout_ms,
            next_report_ms=next_report_ms,
        )
    return windows
