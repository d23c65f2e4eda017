"""The versioned state format (streaming/job/state_format/): what it keeps, how it is
versioned, and how older group states are migrated to it."""

from __future__ import annotations

import io
import json
import pickle
import sys
from collections import Counter, deque
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state import ReplicationModel, Shard, health_signatures
from state.events import (
    BrokerChange,
    BrokerConfig,
    BrokerRegistration,
    BrokersAnswered,
    ControllerChange,
    Event,
    LeaderAndIsr,
    MetadataLogProgress,
    ReplicaProgress,
    TopicChange,
    TopicConfig,
)
from state.partition_table import PartitionTable
from state.settings import PropagationMode, PropagationSettings, RuleSettings
from state.table_columns import Column
from streaming.job import state_format
from streaming.job.shard_snapshot import LEGACY_SIGNATURES, SIGNATURES, ShardSnapshot
from streaming.job.state_format import (
    FORMAT_VERSION,
    MIGRATIONS,
    MOVED_CLASSES,
    PICKLED,
    STATE_SCHEMA,
    VERSION_KEY,
    StateFormatError,
    StateUnpickler,
    describe,
    read_batch,
    read_snapshot,
    state_schema,
    stored_version,
    upgrade,
    write_batch,
    write_snapshot,
)
from tests.unit.builders import fetch, isr_change, leader_and_isr, update_metadata
from tests.unit.test_batching_property import events

DATA = Path(__file__).resolve().parent / "data"
GOLDEN = json.loads((DATA / "state_format.json").read_text(encoding="utf-8"))
CHECKPOINTS = DATA / "checkpoints"
RULES = RuleSettings()


# ------------------------------------------------------------------ helpers


def state_of(value: Any) -> Any:
    """Everything an object holds, as plain comparable data: its class and attributes,
    recursively; numpy arrays with their dtype and shape (rows past the table's size
    included). Optional parts of a model made on first use are made first."""
    if isinstance(value, ReplicationModel):
        _ = value.flaps, value.maintenance, value.epoch_floors, value.schedules
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tolist())
    if isinstance(value, dict):
        return (type(value).__name__, {k: state_of(v) for k, v in value.items()})
    if isinstance(value, list | tuple | deque):
        return (type(value).__name__, [state_of(v) for v in value])
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return (type(value).__qualname__, {k: state_of(v) for k, v in sorted(vars(value).items())})
    return value


def snapshot_of(model: ReplicationModel, now: int, **kept: Any) -> ShardSnapshot:
    """A snapshot with signatures of the model's health at ``now``, as a batch leaves it."""
    frame = model.evaluate(now)
    keys = [f"{t}:{p}" for t, p in zip(frame.topic, frame.partition.tolist(), strict=True)]
    signatures = dict(zip(keys, health_signatures(frame).tolist(), strict=True))
    return ShardSnapshot(model, clock_ms=now, signatures=signatures, **kept)


def rich_events() -> list[Event]:
    """Events that leave something in every part of the state (checked below)."""
    return [
        BrokerChange(ts=1_000, live=tuple(BrokerRegistration(id=b, epoch=0) for b in (1, 2, 3))),
        ControllerChange(ts=1_000, controller_id=1, controller_epoch=2),
        BrokerConfig(ts=1_000, broker=1, replica_lag_time_max_ms=10_000),
        TopicConfig(ts=1_000, topic="orders", min_insync_replicas=2),
        leader_and_isr(1_000, leader=1, partition=0),
        leader_and_isr(1_000, leader=2, partition=1, isr=(2, 3, 1), replicas=(2, 3, 1)),
        fetch(1_500, follower=2, offset=10, leader_leo=10),
        fetch(1_600, follower=3, offset=4, leader_leo=12),
        # the leader shrinks its ISR: a pending propagation, a flap record
        # the record of leader 1's commit (its partition epoch): one of its runs
        replace(
            isr_change(2_000, old=(1, 2, 3), new=(1, 2), leader=1, partition=0), partition_epoch=1
        ),
        # broker 2 still caches the old ISR: a stale cache, an ISR set
        update_metadata(2_100, broker=2, isr=(1, 2, 3)),
        # the controller removes live broker 1: a controlled shutdown
        leader_and_isr(2_200, leader=2, epoch=1, partition=1, isr=(2, 3), replicas=(2, 3, 1)),
        BrokerChange(ts=2_300, live=tuple(BrokerRegistration(id=b, epoch=0) for b in (1, 2, 3, 4))),
        TopicChange(ts=2_400, created={"gone": {0: (1, 2)}}),
        TopicChange(ts=2_500, deleted=("gone",)),  # a deleted row, kept for reuse
        LeaderAndIsr(ts=2_600, topic="orders", partition=1, leader=3),  # an epoch floor
        MetadataLogProgress(
            ts=2_700,
            high_watermark=40,
            fetch_timeout_ms=2_000,
            interval_ms=1_000,
            replicas=(
                ReplicaProgress(broker=1, log_end_offset=40, last_caught_up_ms=2_650),
                ReplicaProgress(broker=2, log_end_offset=38),
            ),
        ),
        BrokersAnswered(ts=2_800, brokers=(1, 2, 4)),  # ZooKeeper mode's news of brokers
    ]


def rich_snapshot() -> ShardSnapshot:
    model = ReplicationModel(RULES, Shard(0, 1))
    report = model.apply(enumerate(rich_events()))
    assert not report.rejected_ids, report.rejections_by_reason()
    return snapshot_of(
        model,
        3_000,
        seen_controller_events={-(1 << 63): 2_000, (1 << 63) - 1: 2_100, 5: 2_200},
        applied_total=Counter(report.applied),
        fetch_error_responses_total=3,
    )


# ------------------------------------------------------- what the format keeps


def test_every_part_of_the_rich_state_is_written() -> None:
    """What the round trip below stands on: each table of the format has rows, each
    optional field a value, so nothing passes for want of content."""
    batch = read_batch(write_snapshot(rich_snapshot()))
    for field in STATE_SCHEMA:
        column = batch.column(field.name)
        if pa.types.is_list(field.type):
            assert len(column.flatten()) > 0, field.name
        else:
            assert column.null_count == 0, field.name
            values = column[0].as_py()
            assert None not in values.values(), (field.name, values)


def test_a_restored_snapshot_holds_everything_that_was_saved() -> None:
    snapshot = rich_snapshot()
    restored = read_snapshot(write_snapshot(snapshot), RULES)
    assert state_of(restored) == state_of(snapshot)
    assert restored.model.caches.table is restored.model.table  # one table, as before


def test_legacy_signatures_and_digests_keep_all_64_bits() -> None:
    model = ReplicationModel(RULES, Shard(2, 3))
    snapshot = ShardSnapshot(
        model,
        signatures={"a:0": (1 << 64) - 1, "b:1": 1 << 63, "c:2": 0},
        seen_controller_events={-1: 7, -(1 << 63): 8},
        signature_scheme=LEGACY_SIGNATURES,
    )
    restored = read_snapshot(write_snapshot(snapshot), RULES)
    assert restored.signatures == {"a:0": (1 << 64) - 1, "b:1": 1 << 63, "c:2": 0}
    assert restored.seen_controller_events == {-1: 7, -(1 << 63): 8}
    assert restored.signature_scheme == LEGACY_SIGNATURES
    assert (restored.model.shard, restored.clock_ms) == (Shard(2, 3), -1)


def test_an_unsharded_empty_model_round_trips() -> None:
    snapshot = ShardSnapshot(ReplicationModel(RULES))
    restored = read_snapshot(write_snapshot(snapshot), RULES)
    assert state_of(restored) == state_of(snapshot)
    assert restored.model.shard is None
    assert restored.signature_scheme == SIGNATURES


def test_the_restored_model_is_judged_by_the_rules_it_is_restored_with() -> None:
    changed = RuleSettings(warn_ratio=0.8, propagation=PropagationSettings(overdue_slack_ms=9))
    restored = read_snapshot(write_snapshot(rich_snapshot()), changed)
    assert restored.model.settings == changed
    assert restored.model.windows.settings.overdue_slack_ms == 9


kraft_progress = st.builds(
    MetadataLogProgress,
    ts=st.integers(0, 200_000),
    high_watermark=st.integers(0, 60),
    replicas=st.lists(
        st.builds(
            ReplicaProgress,
            broker=st.sampled_from((1, 2, 3)),
            log_end_offset=st.integers(-1, 60),
            last_caught_up_ms=st.none() | st.integers(0, 200_000),
        ),
        unique_by=lambda r: r.broker,
        max_size=3,
    ).map(tuple),
    fetch_timeout_ms=st.none() | st.integers(1, 5_000),
    interval_ms=st.none() | st.integers(1, 5_000),
)


@st.composite
def sequences(draw: st.DrawFn) -> list[Event]:
    """The batching property's events, elections with a metadata-log offset (KRaft) and
    DescribeQuorum reports mixed in."""
    sequence = draw(events())
    for _ in range(draw(st.integers(0, 4))):
        sequence.insert(draw(st.integers(0, len(sequence))), draw(kraft_progress))
    return [
        LeaderAndIsr(
            **{
                **{f: getattr(e, f) for f in e.__dataclass_fields__},
                "metadata_offset": draw(st.none() | st.integers(0, 60)),
            }
        )
        if isinstance(e, LeaderAndIsr) and e.isr is not None
        else e
        for e in sequence
    ]


@settings(max_examples=100, deadline=None)
@given(
    sequence=sequences(),
    cut=st.integers(0, 100),
    mode=st.sampled_from(list(PropagationMode)),
    shard=st.sampled_from((None, 0, 1)),
    now=st.integers(0, 300_000),
)
def test_save_and_restore_anywhere_changes_nothing(
    sequence: list[Event], cut: int, mode: PropagationMode, shard: int | None, now: int
) -> None:
    """Apply events, save, restore, apply the rest: the same reports, health and
    signatures as without the save, and the same state after it."""
    rules = RuleSettings(propagation=PropagationSettings(mode=mode))
    where = None if shard is None else Shard(shard, 2)
    numbered = list(enumerate(sequence))
    cut = min(cut, len(numbered))
    kept, saved = ReplicationModel(rules, where), ReplicationModel(rules, where)
    kept.apply(numbered[:cut])
    saved.apply(numbered[:cut])
    kept.evaluate(now)  # as snapshot_of evaluates the saved one (a batch always does)
    before = snapshot_of(saved, now)
    restored = read_snapshot(write_snapshot(before), rules)
    assert state_of(restored) == state_of(before)
    reports = [kept.apply(numbered[cut:]), restored.model.apply(numbered[cut:])]
    assert reports[0] == reports[1]
    for at in (now, now + 60_000):
        ours, theirs = kept.evaluate(at), restored.model.evaluate(at)
        assert list(theirs.records()) == list(ours.records())
        assert health_signatures(theirs).tolist() == health_signatures(ours).tolist()
    assert kept.flaps.recent(now, rules.flapping_window_ms) == restored.model.flaps.recent(
        now, rules.flapping_window_ms
    )


# ------------------------------------------------------- versions and migrations


def drift(golden: dict[str, Any], version: int, schema: Any) -> str | None:
    """Why ``schema`` may not be written as ``version``, if it may not."""
    described = golden["versions"].get(str(version))
    if described is None:
        return (
            f"state format {version} is not described in tests/unit/data/state_format.json: "
            "add its schema there (describe(STATE_SCHEMA))"
        )
    if described != describe(schema):
        return (
            f"the shard-state schema changed but its version is still {version}: bump the "
            "format version and add a migration (state_format.MIGRATIONS) from "
            f"{version}, then describe the new version in tests/unit/data/state_format.json"
        )
    return None


def test_the_format_written_is_the_one_described_for_its_version() -> None:
    message = drift(GOLDEN, FORMAT_VERSION, STATE_SCHEMA)
    if message:
        pytest.fail(message)
    assert stored_version(write_snapshot(rich_snapshot())) == FORMAT_VERSION
    assert read_batch(write_snapshot(rich_snapshot())).schema == STATE_SCHEMA


def test_the_state_is_stored_as_one_zstandard_frame_of_the_arrow_stream() -> None:
    stored = write_snapshot(rich_snapshot())
    assert stored[:4] == b"\x28\xb5\x2f\xfd"  # the frame's magic number, RFC 8878 3.1.1
    inside = pa.input_stream(pa.py_buffer(stored), compression="zstd").read()
    assert inside[:4] == b"\xff\xff\xff\xff"  # an Arrow stream's continuation marker
    assert pa.ipc.open_stream(inside).schema == STATE_SCHEMA
    assert len(stored) < len(inside)


def test_a_plain_arrow_state_of_the_releases_before_compression_is_read() -> None:
    """Up to 3ca2557 the group state was the Arrow stream itself: such a checkpoint's
    shards restore to what they held, and their next save is compressed."""
    snapshot = rich_snapshot()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, STATE_SCHEMA) as writer:
        writer.write_batch(read_batch(write_snapshot(snapshot)))
    plain = sink.getvalue().to_pybytes()
    assert plain[:4] == b"\xff\xff\xff\xff"
    assert stored_version(plain) == FORMAT_VERSION
    assert upgrade(plain) == plain  # nothing to migrate: read as it is
    restored = read_snapshot(plain, RULES)
    assert state_of(restored) == state_of(snapshot)
    assert write_snapshot(restored)[:4] == b"\x28\xb5\x2f\xfd"


def test_a_new_table_column_without_a_new_version_is_caught() -> None:
    """PartitionTable with one more column: the schema derived from it no longer matches
    the golden description of this version."""
    wider = type("PartitionTable", (), {**vars(PartitionTable), "moved_at_ms": Column(np.int64)})
    message = drift(GOLDEN, FORMAT_VERSION, state_schema(wider))
    assert message is not None
    assert "bump the format version and add a migration" in message
    assert drift(GOLDEN, FORMAT_VERSION + 1, STATE_SCHEMA) is not None  # not described yet
    described = describe(state_schema(wider))
    partitions = next(c["type"] for c in described if c["name"] == "partitions")
    assert "moved_at_ms: int64 not null" in partitions


def test_every_older_version_has_a_migration_and_a_description() -> None:
    assert set(GOLDEN["versions"]) == {str(v) for v in range(1, FORMAT_VERSION + 1)}
    assert set(MIGRATIONS) == set(range(PICKLED, FORMAT_VERSION))


def test_a_list_column_the_format_does_not_know_stops_the_schema() -> None:
    from state.table_columns import ListColumn

    wider = type(
        "PartitionTable", (), {**vars(PartitionTable), "notes": ListColumn[list[str]](list)}
    )
    with pytest.raises(StateFormatError, match=r"list columns \['notes'\]"):
        state_schema(wider)


def pickled_fixture(shard: int = 1) -> bytes:
    return (CHECKPOINTS / "pickled-9711ad5" / f"shard-{shard}.pickle").read_bytes()


def test_a_pickle_is_migrated_to_the_current_version() -> None:
    pickled = pickled_fixture()
    assert stored_version(pickled) == PICKLED
    migrated = upgrade(pickled)
    assert stored_version(migrated) == FORMAT_VERSION
    from_pickle = StateUnpickler(io.BytesIO(pickled)).load()  # the objects the pickle holds
    # The restored model is judged by the job's configured rules, never by the settings
    # a pickle holds (which lack the settings added since): compare under the same rules.
    from_pickle.model.settings = RULES
    assert state_of(read_snapshot(migrated, RULES)) == state_of(from_pickle)
    assert state_of(read_snapshot(pickled, RULES)) == state_of(from_pickle)


def test_migrations_run_in_turn_up_to_the_current_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """A next format that adds a column: the pickle goes to this one (its objects,
    written in this release's format), then this one to the next."""
    this, following = FORMAT_VERSION, FORMAT_VERSION + 1
    ran: list[int] = []

    def to_the_next(data: bytes) -> bytes:
        ran.append(stored_version(data))
        batch = read_batch(data)
        schema = batch.schema.append(pa.field("added", pa.int64())).with_metadata(
            {VERSION_KEY: str(following).encode()}
        )
        added = pa.array([42], pa.int64())
        return write_batch(pa.RecordBatch.from_arrays([*batch.columns, added], schema=schema))

    monkeypatch.setattr(state_format, "FORMAT_VERSION", following)
    monkeypatch.setitem(MIGRATIONS, this, to_the_next)
    migrated = upgrade(pickled_fixture())
    assert ran == [this]
    assert stored_version(migrated) == following
    assert read_batch(migrated).column("added").to_pylist() == [42]
    assert upgrade(migrated) == migrated  # the current version: left alone


def test_a_migration_that_does_not_move_forward_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    this = FORMAT_VERSION
    monkeypatch.setattr(state_format, "FORMAT_VERSION", this + 1)
    monkeypatch.setitem(MIGRATIONS, this, lambda data: data)
    with pytest.raises(StateFormatError, match=f"migration from state format {this} wrote {this}"):
        upgrade(pickled_fixture())


def test_a_state_of_a_later_release_is_refused_by_version() -> None:
    batch = read_batch(write_snapshot(rich_snapshot()))
    later = write_batch(batch.replace_schema_metadata({VERSION_KEY: str(FORMAT_VERSION + 1)}))
    with pytest.raises(
        StateFormatError,
        match=rf"state format {FORMAT_VERSION + 1}, written by a "
        r"later release.*reads formats up to",
    ):
        read_snapshot(later, RULES)


def test_bytes_that_are_no_state_are_refused() -> None:
    with pytest.raises(StateFormatError, match="neither a pickle nor an Arrow stream"):
        read_snapshot(b"{}", RULES)
    with pytest.raises(StateFormatError, match="not a ShardSnapshot"):
        read_snapshot(pickle.dumps({"model": None}, protocol=pickle.HIGHEST_PROTOCOL), RULES)
    unversioned = write_batch(pa.RecordBatch.from_pydict({"x": [1]}))
    with pytest.raises(StateFormatError, match="no format version"):
        read_snapshot(unversioned, RULES)


def test_a_pickle_restores_after_its_class_moved(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pickles name ``streaming.shard_state.ShardSnapshot``; with that module gone
    (moved to another package) plain pickle fails, the state's unpickler does not."""
    pickled = pickled_fixture()
    monkeypatch.setitem(sys.modules, "streaming.shard_state", None)
    with pytest.raises(ImportError):
        pickle.loads(pickled)
    snapshot = StateUnpickler(io.BytesIO(pickled)).load()
    assert isinstance(snapshot, ShardSnapshot)
    assert read_snapshot(pickled, RULES).applied_total == snapshot.applied_total
    assert MOVED_CLASSES[("streaming.shard_state", "ShardSnapshot")] is ShardSnapshot
