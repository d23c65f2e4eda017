"""A checkpoint of the release before ``state/`` was laid out by the rules, restored by this one.

The fixture (tests/unit/data/checkpoints/routed-v2, see its README) holds the shard
snapshots that release (commit e238bf1) pickled after the first part of the routed-v1
capture: the ``state/`` classes at the module paths it pickled them under, with the
attributes it kept (the partition table's columns as it listed them by hand). Restored
and fed the rest, the shards must end where this release ends from scratch.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

import numpy as np

from state.partition_table import COLUMNS, LIST_COLUMNS, PartitionTable
from state.settings import RuleSettings
from streaming.job.shard_state import restore_snapshot
from streaming.job.state_format import MOVED_CLASSES
from tests.unit.test_checkpoint_upgrade import Shards, StoredShards, annotated, capture, health

FIXTURE = StoredShards("routed-v2", "pickle")
MANIFEST = FIXTURE.manifest


class _Recording(pickle.Unpickler):
    """Loads as the job does (classes that moved since are found where they are now),
    noting every class path the pickle names."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self.paths: set[tuple[str, str]] = set()

    def find_class(self, module: str, name: str) -> Any:
        self.paths.add((module, name))
        moved = MOVED_CLASSES.get((module, name))
        return moved if moved is not None else super().find_class(module, name)


def test_the_fixture_pickles_the_state_classes_at_their_old_paths() -> None:
    assert MANIFEST["commit"] == "e238bf1"
    paths: set[tuple[str, str]] = set()
    for shard in range(MANIFEST["shards"]):
        recording = _Recording(FIXTURE.stored(shard))
        recording.load()
        paths |= recording.paths
    assert {
        ("state.model", "ReplicationModel"),
        ("state.partition_table", "PartitionTable"),
        ("state.metadata_cache", "MetadataCaches"),
        ("state.propagation_window", "PropagationWindows"),
        ("state.cluster_state", "ClusterState"),
        ("state.flapping", "FlapHistory"),
        ("state.maintenance", "MaintenanceLog"),
    } <= paths


def test_a_restored_table_holds_every_column_as_pickled() -> None:
    for shard in range(MANIFEST["shards"]):
        kept = _Recording(FIXTURE.stored(shard)).load().model.table.__dict__
        table = restore_snapshot(FIXTURE.stored(shard), RuleSettings()).model.table
        assert isinstance(table, PartitionTable)
        for column in COLUMNS:
            np.testing.assert_array_equal(getattr(table, column.name), kept[column.name])
        for listed in LIST_COLUMNS:
            assert getattr(table, listed.name) == kept[listed.name]
        again = pickle.loads(pickle.dumps(table))
        assert again.__dict__.keys() == kept.keys()


def test_restored_then_the_rest_equals_this_release_from_scratch() -> None:
    envelopes = capture()
    first = MANIFEST["first_part"]
    scratch = Shards()
    scratch.batch(envelopes[:first])
    scratch_second = scratch.batch(envelopes[first:])
    scratch_flush = scratch.batch(None)

    upgraded = FIXTURE.restored()
    upgraded_second = upgraded.batch(envelopes[first:])
    upgraded_flush = upgraded.batch(None)

    assert health(upgraded_second) == health(scratch_second)
    assert len(health(upgraded_second)) > 0
    assert annotated(upgraded_flush) == annotated(scratch_flush)
    assert upgraded.totals() == scratch.totals()
