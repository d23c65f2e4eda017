"""Older versions brought to the current one: the registry of migrations, and the first of
them, from the pickles of the releases before this format."""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable
from typing import Any

from streaming.job.shard_snapshot import ShardSnapshot
from streaming.job.state_format.schema import PICKLED, StateFormatError
from streaming.job.state_format.writing import write_snapshot

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


Migration = Callable[[bytes], bytes]
MIGRATIONS: dict[int, Migration] = {PICKLED: migrate_pickled}
"""Version -> the migration of a group state of that version to the next one. A new
format version N adds ``MIGRATIONS[N - 1]`` (``read_batch``, change the columns,
``write_batch`` with the metadata of version N) and its schema to
tests/unit/data/state_format.json."""
