"""A checkpoint of the last release of state format 2, restored by this one.

The fixture (tests/unit/data/checkpoints/format-2-40e75f6, see its README) holds the shard
states that release (commit 40e75f6) stored after the first part of the routed-v1
capture. Format 3 adds the last admin poll each live broker answered
(``BrokersAnswered``, ZooKeeper mode's news of a broker); this release migrates the group
state once (``streaming.job.state_format.migrate_2_to_3``) and must end where it ends
from scratch and where ``replay`` ends.
"""

from __future__ import annotations

from streaming.job.state_format import read_batch, stored_version
from tests.unit.test_checkpoint_upgrade import (
    StoredShards,
    assert_the_rest_ends_as_from_scratch_and_replay,
)
from tests.unit.test_state_format import state_of

FIXTURE = StoredShards("format-2-40e75f6", "arrow")
MANIFEST = FIXTURE.manifest


def test_the_fixture_is_format_2_of_40e75f6() -> None:
    assert MANIFEST == {
        "commit": "40e75f6",
        "format_version": 2,
        "shards": 3,
        "first_part": 3000,
        "watermark_delay_ms": 60000,
        "stream_clock_ms": 1700000012602,
    }
    for shard in range(MANIFEST["shards"]):
        assert stored_version(FIXTURE.stored(shard)) == 2
        assert "brokers_answered_ms" not in read_batch(FIXTURE.stored(shard)).schema.names


def test_migrated_state_knows_no_answered_poll_and_keeps_everything_else() -> None:
    """Format 2 kept no answered polls: none is known. The rest of the state is what a
    run of this release from scratch over the same records holds (that capture, from the
    simulator, has no BrokersAnswered either)."""
    rows = 0
    for snapshot, fresh in FIXTURE.migrated_beside_scratch():
        rows += snapshot.model.table.size
        assert snapshot.model.cluster.answered_ms == {}
        assert state_of(snapshot) == state_of(fresh)
    assert rows == 12  # the capture's partitions (shard 0 owns none of them)


def test_restored_then_the_rest_equals_this_release_from_scratch_and_replay() -> None:
    assert_the_rest_ends_as_from_scratch_and_replay(FIXTURE.restored())
