"""Older versions brought to the current one: the registry of migrations (from the pickles
of the releases before this format, then from each version to the next), and the health
signature the oldest of those pickles kept (:func:`legacy_signatures`)."""

from __future__ import annotations

import hashlib
import io
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]

from state import HealthFrame
from streaming.job.shard_snapshot import ShardSnapshot
from streaming.job.state_format.schema import (
    ELR_FIELDS,
    PICKLED,
    VERSION_KEY,
    StateFormatError,
    read_batch,
)
from streaming.job.state_format.writing import write_batch, write_snapshot

MOVED_CLASSES: dict[tuple[str, str], type] = {
    ("streaming.shard_state", "ShardSnapshot"): ShardSnapshot,
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
    migrate the attributes of still older ones (``streaming.job.shard_snapshot``)."""
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


_BROKER_MS = pa.list_(
    pa.field(
        "row",
        pa.struct(
            [
                pa.field("broker", pa.int32(), nullable=False),
                pa.field("ms", pa.int64(), nullable=False),
            ]
        ),
        nullable=False,
    )
)
"""A table of (broker, ms) rows, as the format writes one (``schema.state_schema``)."""


def migrate_1_to_2(data: bytes) -> bytes:
    """1 -> 2: each partition row gains ``elr`` and ``last_known_elr`` (Kafka 4.0+'s
    Eligible Leader Replicas), null: no release before 2 read them, so none was stated;
    the state gains each leader's isr-expiration schedule (``expiration_anchor_ms``,
    ``expiration_started_ms``), empty: none was learned."""
    batch = read_batch(data)
    struct = batch.column("partitions").flatten()
    ids = pa.list_(pa.field("item", pa.int32(), nullable=False))
    added = [pa.field(name, ids) for name in ELR_FIELDS]
    row_fields = [*struct.type, *added]
    children = [struct.field(i) for i in range(struct.type.num_fields)]
    children += [pa.nulls(len(struct), type=field.type) for field in added]
    kind = pa.list_(pa.field("row", pa.struct(row_fields), nullable=False))
    partitions = pa.ListArray.from_arrays(
        pa.array([0, len(struct)], pa.int32()),
        pa.StructArray.from_arrays(children, fields=row_fields),
        type=kind,
    )
    index = batch.schema.get_field_index("partitions")
    fields = [batch.schema.field(i) for i in range(batch.num_columns)]
    columns = [batch.column(i) for i in range(batch.num_columns)]
    fields[index], columns[index] = fields[index].with_type(kind), partitions
    # the two schedule tables after epoch_floors, empty
    at = batch.schema.get_field_index("epoch_floors") + 1
    for name in ("expiration_started_ms", "expiration_anchor_ms"):
        fields.insert(at, pa.field(name, _BROKER_MS, nullable=False))
        columns.insert(at, pa.array([[]], type=_BROKER_MS))
    schema = pa.schema(fields, metadata={VERSION_KEY: b"2"})
    return write_batch(pa.RecordBatch.from_arrays(columns, schema=schema))


def migrate_2_to_3(data: bytes) -> bytes:
    """2 -> 3: the state gains the last admin poll each live broker answered
    (``brokers_answered_ms``, after ``min_insync_replicas``), empty: no release before 3
    read ``BrokersAnswered``. The next poll's event fills it."""
    batch = read_batch(data)
    fields = [batch.schema.field(i) for i in range(batch.num_columns)]
    columns = [batch.column(i) for i in range(batch.num_columns)]
    at = batch.schema.get_field_index("min_insync_replicas") + 1
    fields.insert(at, pa.field("brokers_answered_ms", _BROKER_MS, nullable=False))
    columns.insert(at, pa.array([[]], type=_BROKER_MS))
    schema = pa.schema(fields, metadata={VERSION_KEY: b"3"})
    return write_batch(pa.RecordBatch.from_arrays(columns, schema=schema))


Migration = Callable[[bytes], bytes]
MIGRATIONS: dict[int, Migration] = {
    PICKLED: migrate_pickled,
    1: migrate_1_to_2,
    2: migrate_2_to_3,
}
"""Version -> the migration of a group state of that version to the next one. A new
format version N adds ``MIGRATIONS[N - 1]`` (``read_batch``, change the columns,
``write_batch`` with the metadata of version N) and its schema to
tests/unit/data/state_format.json."""


def legacy_signatures(frame: HealthFrame) -> list[int]:
    """The signature of every partition of ``frame`` as the snapshots pickled before
    ``state.health_signature`` kept them (``LEGACY_SIGNATURES``), in frame order.

    Such a snapshot (the routed-v2 pickles) keeps the signature of the health each
    partition last emitted in this scheme; the first batch after its restore compares
    with these once, so that it writes only what changed, and keeps this release's from
    then on. A frozen format: blake2b of the facts' ``repr``, whatever the job uses now.
    """
    return [_legacy_signature(frame, i) for i in range(len(frame))]


def _legacy_signature(frame: HealthFrame, i: int) -> int:
    """The legacy signature of partition ``i``: a digest of the facts of its health."""
    statuses = frame.follower_status[i]
    followers = tuple(
        (int(frame.follower_broker[i, k]), int(statuses[k]), bool(frame.follower_in_isr[i, k]))
        for k in np.flatnonzero(statuses >= 0).tolist()
    )
    facts = repr(
        (
            int(frame.leader[i]),
            int(frame.leader_epoch[i]),
            frame.isr[i],
            frame.replicas[i],
            bool(frame.under_replicated[i]),
            bool(frame.under_min_isr[i]),
            bool(frame.at_min_isr[i]),
            bool(frame.offline[i]),
            bool(frame.predicted_under_replicated[i]),
            followers,
            int(frame.metadata_state[i]),
            tuple(frame.stale_brokers[i]),
            frame.blackout_earliest_ms[i],
            frame.blackout_latest_ms[i],
        )
    )
    return int.from_bytes(hashlib.blake2b(facts.encode(), digest_size=8).digest(), "big")
