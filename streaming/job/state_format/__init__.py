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

Modules: ``schema`` (versions and the current schema), ``writing``, ``decoding`` (the
current version back into objects) and ``migrations`` (older versions, pickles included,
and the health signatures the oldest pickles kept).
"""

from __future__ import annotations

from state.settings import RuleSettings
from streaming.job.shard_snapshot import ShardSnapshot
from streaming.job.state_format.decoding import decode_snapshot
from streaming.job.state_format.migrations import (
    MIGRATIONS,
    MOVED_CLASSES,
    Migration,
    StateUnpickler,
    legacy_signatures,
    migrate_pickled,
    read_pickled,
)
from streaming.job.state_format.schema import (
    FORMAT_VERSION,
    PICKLED,
    STATE_SCHEMA,
    VERSION_KEY,
    StateFormatError,
    arrow_stream,
    describe,
    read_batch,
    state_schema,
)
from streaming.job.state_format.writing import write_batch, write_snapshot

__all__ = [
    "FORMAT_VERSION",
    "MIGRATIONS",
    "MOVED_CLASSES",
    "PICKLED",
    "STATE_SCHEMA",
    "VERSION_KEY",
    "Migration",
    "StateFormatError",
    "StateUnpickler",
    "describe",
    "legacy_signatures",
    "migrate_pickled",
    "read_batch",
    "read_pickled",
    "read_snapshot",
    "state_schema",
    "stored_version",
    "upgrade",
    "write_batch",
    "write_snapshot",
]


def stored_version(data: bytes) -> int:
    """The format version of a group state: :data:`PICKLED` for a pickle."""
    if data[:1] == b"\x80":  # pickle protocol 2 and later start with PROTO
        return PICKLED
    metadata = arrow_stream(data).schema.metadata or {}
    if VERSION_KEY not in metadata:
        raise StateFormatError("the group state's Arrow schema has no format version")
    return int(metadata[VERSION_KEY])


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
    return decode_snapshot(batch, rules)
