"""A checkpoint of the last release of state format 1, restored by this one.

The fixture (tests/unit/data/checkpoints/format-1-bbd9956, see its README) holds the shard
states that release (commit bbd9956) stored after the first part of the routed-v1
capture. Format 2 adds each partition's ELR (Kafka 4.0+); this release migrates the
group state once (``streaming.job.state_format.migrate_1_to_2``) and must end where it
ends from scratch and where ``replay`` ends.
"""

from __future__ import annotations

from streaming.job.state_format import read_batch, stored_version
from tests.unit.test_checkpoint_upgrade import (
    StoredShards,
    assert_the_rest_ends_as_from_scratch_and_replay,
)
from tests.unit.test_state_format import state_of

FIXTURE = StoredShards("format-1-bbd9956", "arrow")
MANIFEST = FIXTURE.manifest


def test_the_fixture_is_format_1_of_bbd9956() -> None:
    assert MANIFEST == {
        "commit": "bbd9956",
        "format_version": 1,
        "shards": 3,
        "first_part": 3000,
        "watermark_delay_ms": 60000,
        "stream_clock_ms": 1700000012602,
    }
    for shard in range(MANIFEST["shards"]):
        assert stored_version(FIXTURE.stored(shard)) == 1
        names = read_batch(FIXTURE.stored(shard)).schema.field("partitions").type.value_type
        assert "elr" not in [field.name for field in names]


def test_migrated_partitions_have_no_stated_elr_and_keep_everything_else() -> None:
    """Format 1 knew no ELR: every row's is None (never stated), and no leader's
    isr-expiration run: none is known. The rest of the state is what a run of this
    release from scratch over the same records holds (that capture states no ELR either;
    the run from scratch learned the runs of the leader of its one IsrChange)."""
    rows = 0
    for snapshot, fresh in FIXTURE.migrated_beside_scratch():
        table = snapshot.model.table
        rows += table.size
        assert table.eligible_leaders[: table.size] == [None] * table.size
        assert snapshot.model.schedules.anchor_ms == {}
        fresh.model.schedules.anchor_ms.clear()
        assert state_of(snapshot) == state_of(fresh)
    assert rows == 12  # the capture's partitions (shard 0 owns none of them)


def test_restored_then_the_rest_equals_this_release_from_scratch_and_replay() -> None:
    assert_the_rest_ends_as_from_scratch_and_replay(FIXTURE.restored())
