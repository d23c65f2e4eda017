"""A checkpoint of the last release that pickled its state, restored by this one.

The fixture (tests/unit/data/checkpoints/pickled-9711ad5, see its README) holds the
shard snapshots that release (commit 9711ad5) pickled after the first part of the
routed-v1 capture. This release reads each pickle once (``streaming.job.state_format``),
writes the versioned format after the batch, and must end where it ends from scratch
and where ``replay`` ends.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from state.settings import RuleSettings
from streaming.job.query import guard_checkpoint
from streaming.job.shard_state import process, restore_snapshot
from streaming.job.state_format import FORMAT_VERSION, PICKLED, StateUnpickler, stored_version
from tests.unit.test_checkpoint import config
from tests.unit.test_checkpoint_upgrade import (
    Shards,
    StoredShards,
    assert_the_rest_ends_as_from_scratch_and_replay,
    capture,
)
from tests.unit.test_state_format import state_of

FIXTURE = StoredShards("pickled-9711ad5", "pickle")
MANIFEST = FIXTURE.manifest


class _Naming(StateUnpickler):
    """Loads as the job does, noting the class paths the pickle names."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self.paths: set[tuple[str, str]] = set()

    def find_class(self, module: str, name: str) -> Any:
        self.paths.add((module, name))
        return super().find_class(module, name)


def test_the_fixture_is_the_pickle_of_9711ad5() -> None:
    assert MANIFEST == {
        "commit": "9711ad5",
        "shards": 3,
        "first_part": 3000,
        "watermark_delay_ms": 60000,
        "stream_clock_ms": 1700000012602,
    }
    for shard in range(MANIFEST["shards"]):
        data = FIXTURE.stored(shard)
        assert stored_version(data) == PICKLED
        naming = _Naming(data)
        kept = naming.load()
        assert ("streaming.shard_state", "ShardSnapshot") in naming.paths
        # 9711ad5 kept the error total and the new signatures: nothing to migrate there
        assert "fetch_error_responses_total" in kept.__dict__
        assert kept.signature_scheme == "columns-splitmix64"


def test_restored_then_the_rest_equals_this_release_from_scratch_and_replay() -> None:
    assert_the_rest_ends_as_from_scratch_and_replay(FIXTURE.restored())


def test_applied_totals_are_those_of_a_run_from_scratch() -> None:
    """9711ad5 counted error responses apart already: the totals carry over exactly.
    By hand from the capture: 4,644 fetch responses, 11 of them errors; 32 controller
    events."""
    envelopes = capture()
    first = MANIFEST["first_part"]
    upgraded = FIXTURE.restored()
    upgraded.batch(envelopes[first:])
    applied, errors = upgraded.totals()
    assert applied["FetchResponse"] == 4644 - 11
    assert errors == 11
    assert sum(applied.values()) - applied["FetchResponse"] == 32
    scratch = Shards()
    scratch.batch(envelopes[:first])
    scratch.batch(envelopes[first:])
    assert (applied, errors) == scratch.totals()


def test_the_first_batch_writes_the_format_and_it_holds_what_the_pickle_held() -> None:
    """Read the pickle once: after one (idle) batch the group state is this release's
    format, and it restores to the snapshot that batch left in memory."""
    rules = RuleSettings()
    shards = FIXTURE.restored()
    shards.batch(None)
    for shard, state in shards.states.items():
        assert stored_version(state) == FORMAT_VERSION
        kept = restore_snapshot(FIXTURE.stored(shard), rules)
        process(kept, None, int(MANIFEST["stream_clock_ms"]), shards.settings)
        assert state_of(restore_snapshot(state, rules)) == state_of(kept)


def test_the_layout_file_of_9711ad5_is_accepted_and_rewritten(tmp_path: Path) -> None:
    """9711ad5 recorded ``routed-v2``; this release restores it and records ``routed-v4``,
    which 9711ad5 refuses by name (it reads ``routed-v1`` and ``routed-v2`` only) rather
    than failing on a state it cannot unpickle."""
    location = tmp_path / "checkpoint"
    location.mkdir()
    layout_file = location / "isrwatch-layout.json"
    previous = {
        "state_shards": 16,
        "routed_layout": "routed-v2",
        "controller_events": "controller-events",
        "fetch_responses": "fetch-responses",
        "source_format": "python",
    }
    layout_file.write_text(json.dumps(previous))
    guard_checkpoint(config(str(location), **{"streaming.state_shards": 16}))
    assert json.loads(layout_file.read_text()) == {**previous, "routed_layout": "routed-v4"}
