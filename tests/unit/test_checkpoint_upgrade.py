"""A checkpoint of the previous release (routed-v1, commit 544a4fd) restored by this one.

The fixture (tests/unit/data/checkpoints/routed-v1, see its README) holds the shard
snapshots that release's own code pickled after the first part of a simulator capture.
Restored here and fed the rest, the shards must end where this release ends from
scratch, and where ``replay`` ends: nothing lost, nothing counted twice.
"""

from __future__ import annotations

import gzip
import io
import json
import pickle
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from state import HealthRecord, decode_record
from state.events import Source
from state.settings import RuleSettings
from streaming.job import shard_stats
from streaming.job.attribution import CauseAnnotator
from streaming.job.query import CheckpointMismatchError, checkpoint_layout, guard_checkpoint
from streaming.job.routing import DEAD, ROUTED_LAYOUT, route, stable_hash
from streaming.job.shard_snapshot import migrate_routed_v1
from streaming.job.shard_state import (
    HEALTH,
    STATS,
    TOMBSTONE,
    ShardJobSettings,
    ShardSnapshot,
    process,
    restore_snapshot,
)
from streaming.job.state_format import FORMAT_VERSION, stored_version, upgrade, write_snapshot
from streaming.tools.replay import replay
from tests.unit.data.checkpoints.capture_records import kafka_records
from tests.unit.test_checkpoint import config

FIXTURE = Path(__file__).resolve().parent / "data" / "checkpoints" / "routed-v1"
MANIFEST = json.loads((FIXTURE / "manifest.json").read_text(encoding="utf-8"))
SOURCES = {s.value: s for s in Source}


def capture() -> list[dict[str, Any]]:
    with gzip.open(FIXTURE / "capture.jsonl.gz", "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


class Shards:
    """The stateful step of every shard, state stored between batches as the job keeps it;
    Kafka offsets go on from one batch to the next."""

    def __init__(self, states: dict[int, bytes] | None = None, stream_clock: int = -1) -> None:
        shards = int(MANIFEST["shards"])
        self.settings = ShardJobSettings(
            RuleSettings(), shards, int(MANIFEST["watermark_delay_ms"]), snapshot_when_idle=True
        )
        self.states = dict(states or {})
        self.stream_clock = stream_clock
        self.offsets = {s.value: 0 for s in Source}

    def skip(self, envelopes: list[dict[str, Any]]) -> None:
        """Records a previous job consumed: the next batch starts at their offsets."""
        for envelope in envelopes:
            self.offsets[envelope["source"]] += 1

    def batch(self, envelopes: list[dict[str, Any]] | None) -> pd.DataFrame:
        routed = None
        if envelopes is not None:
            routed = route(kafka_records(envelopes, self.offsets), SOURCES, self.settings.shards)
        outputs = []
        for shard in range(self.settings.shards):
            snapshot = (
                restore_snapshot(self.states[shard], self.settings.rules)
                if shard in self.states
                else ShardSnapshot(_model(self.settings, shard))
            )
            mine = None if routed is None else routed[routed["shard"] == shard]
            outputs.append(
                process(
                    snapshot,
                    mine if mine is not None and len(mine) else None,
                    self.stream_clock,
                    self.settings,
                )
            )
            self.states[shard] = write_snapshot(snapshot)
        if routed is not None and len(routed):
            self.stream_clock = max(self.stream_clock, int(routed["ts"].max()))
        return pd.concat(outputs, ignore_index=True)

    def totals(self) -> tuple[Counter[str], int]:
        """Applied events by type and fetch error responses, summed over the shards."""
        applied: Counter[str] = Counter()
        errors = 0
        for state in self.states.values():
            snapshot = restore_snapshot(state, self.settings.rules)
            applied.update(snapshot.applied_total)
            errors += snapshot.fetch_error_responses_total
        return applied, errors


def _model(settings: ShardJobSettings, shard: int) -> Any:
    from state.model import ReplicationModel
    from state.sharding import Shard

    return ReplicationModel(settings.rules, Shard(shard, settings.shards))


def restored() -> Shards:
    states = {s: (FIXTURE / f"shard-{s}.pickle").read_bytes() for s in range(MANIFEST["shards"])}
    shards = Shards(states, int(MANIFEST["stream_clock_ms"]))
    shards.skip(capture()[: MANIFEST["first_part"]])
    return shards


def health(output: pd.DataFrame) -> dict[str, HealthRecord | None]:
    """What the output writes, by key: a record (a healthy partition's health row, an
    unhealthy one's changed record in the stats) or a tombstone (None)."""
    rows = output[output["kind"].isin([HEALTH, TOMBSTONE])]
    written: dict[str, HealthRecord | None] = {
        k: None if v is None else decode_record(v)
        for k, v in zip(rows["key"], rows["value"], strict=True)
    }
    for stats in (shard_stats.decode(v) for v in output[output["kind"] == STATS]["value"]):
        written.update((p.record.key, p.record) for p in stats.unhealthy if p.changed)
    return written


def annotated(flush: pd.DataFrame) -> dict[str, HealthRecord | None]:
    """Health records with their causes, as the driver writes them (and replay does)."""
    stats = [shard_stats.decode(v) for v in flush[flush["kind"] == STATS]["value"]]
    records, _ = CauseAnnotator().annotate(flush[flush["kind"].isin([HEALTH, TOMBSTONE])], stats)
    return health(records)


class _Pickled:
    """A ShardSnapshot's attributes as pickled, without this release's migration."""


class _AsPickled(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("streaming.shard_state", "ShardSnapshot"):
            return _Pickled
        return super().find_class(module, name)


def test_the_fixture_holds_unsigned_keys_and_restoring_signs_them() -> None:
    """What the other tests stand on: the previous release's pickles (no error total,
    digests at or above 2**63 among the keys), read by this release with signed keys."""
    assert MANIFEST["commit"] == "544a4fd"
    for shard in range(MANIFEST["shards"]):
        pickled = (FIXTURE / f"shard-{shard}.pickle").read_bytes()
        kept = _AsPickled(io.BytesIO(pickled)).load().__dict__
        assert "fetch_error_responses_total" not in kept
        unsigned = kept["seen_controller_events"]
        assert any(key >= 1 << 63 for key in unsigned)
        snapshot = restore_snapshot(pickled, RuleSettings())
        assert snapshot.seen_controller_events == {
            (key - (1 << 64) if key >= 1 << 63 else key): ts for key, ts in unsigned.items()
        }
        assert snapshot.fetch_error_responses_total == 0


class StoredShards:
    """A fixture of a release's shard states in tests/unit/data/checkpoints/ (its
    README): each shard's group state as that release stored it (``shard-N.<suffix>``)
    after the first part of the routed-v1 capture, and its ``manifest.json``."""

    def __init__(self, name: str, suffix: str) -> None:
        self.directory = FIXTURE.parent / name
        self.suffix = suffix
        self.manifest: dict[str, Any] = json.loads(
            (self.directory / "manifest.json").read_text(encoding="utf-8")
        )

    def stored(self, shard: int) -> bytes:
        return (self.directory / f"shard-{shard}.{self.suffix}").read_bytes()

    def restored(self) -> Shards:
        """The shards restored from the fixture, the capture's first part behind them."""
        shards = Shards(
            {s: self.stored(s) for s in range(self.manifest["shards"])},
            int(self.manifest["stream_clock_ms"]),
        )
        shards.skip(capture()[: self.manifest["first_part"]])
        return shards

    def migrated_beside_scratch(self) -> Iterator[tuple[ShardSnapshot, ShardSnapshot]]:
        """Each shard's state brought to this release's format (checked) and restored,
        beside what a run of this release from scratch over the same first part holds."""
        rules = RuleSettings()
        scratch = Shards()
        scratch.batch(capture()[: self.manifest["first_part"]])
        for shard in range(self.manifest["shards"]):
            migrated = upgrade(self.stored(shard))
            assert stored_version(migrated) == FORMAT_VERSION
            yield restore_snapshot(migrated, rules), restore_snapshot(scratch.states[shard], rules)


def assert_the_rest_ends_as_from_scratch_and_replay(upgraded: Shards) -> None:
    """Fed the rest of the capture and one idle batch, ``upgraded`` (restored after the
    capture's first part) writes what this release writes from scratch, and its health
    records are replay's: nothing lost, nothing counted twice, no dead letter."""
    envelopes = capture()
    first = MANIFEST["first_part"]
    scratch = Shards()
    scratch.batch(envelopes[:first])
    scratch_second = scratch.batch(envelopes[first:])
    scratch_flush = scratch.batch(None)

    upgraded_second = upgraded.batch(envelopes[first:])
    upgraded_flush = upgraded.batch(None)

    assert health(upgraded_second) == health(scratch_second)
    assert len(health(upgraded_second)) > 0
    assert annotated(upgraded_flush) == annotated(scratch_flush)
    lines = [json.dumps(envelope) for envelope in envelopes]
    replayed = replay(lines, RuleSettings(), None)
    expected = {r.key: r for r in replayed.records}
    assert annotated(upgraded_flush) == expected
    assert len(expected) == 12  # isr-churn-storm: 12 partitions
    for output in (upgraded_second, upgraded_flush):
        assert (output["kind"] == DEAD).sum() == 0


def test_restored_then_the_rest_equals_this_release_from_scratch_and_replay() -> None:
    assert_the_rest_ends_as_from_scratch_and_replay(restored())


def test_applied_totals_count_every_event_once_across_the_upgrade() -> None:
    envelopes = capture()
    first = MANIFEST["first_part"]
    # By hand from the capture: 4,644 fetch responses, every 400th an error response
    # (11: 7 in the first 3,000 records, 4 after); 32 controller events.
    fetches = [e for e in envelopes if e["source"] == Source.FETCH_RESPONSES.value]
    errors_before = sum(e["value"].get("error", "NONE") != "NONE" for e in envelopes[:first])
    errors_after = sum(e["value"].get("error", "NONE") != "NONE" for e in envelopes[first:])
    assert (len(fetches), errors_before, errors_after) == (4644, 7, 4)

    scratch = Shards()
    scratch.batch(envelopes[:first])
    scratch.batch(envelopes[first:])
    scratch_applied, scratch_errors = scratch.totals()
    assert scratch_applied["FetchResponse"] == 4644 - 11
    assert scratch_errors == 11

    upgraded = restored()
    upgraded.batch(envelopes[first:])
    applied, errors = upgraded.totals()
    # Controller events: exactly the same. Fetches: the error responses of the previous
    # release stay inside "FetchResponse" (it counted them there); the sum is exact.
    assert {k: v for k, v in applied.items() if k != "FetchResponse"} == {
        k: v for k, v in scratch_applied.items() if k != "FetchResponse"
    }
    assert sum(applied.values()) - applied["FetchResponse"] == 32
    assert applied["FetchResponse"] == 4644 - 11 + 7
    assert errors == 4
    assert applied["FetchResponse"] + errors == scratch_applied["FetchResponse"] + scratch_errors
    replayed = replay([json.dumps(e) for e in envelopes], RuleSettings(), None)
    assert replayed.report.applied == scratch_applied
    assert replayed.report.fetch_error_responses == scratch_errors


def test_a_controller_event_retried_across_the_upgrade_is_a_duplicate() -> None:
    """A producer retry: the event was applied by the previous release, its copy arrives
    after the upgrade. Its digest is at or above 2**63, the keys that had to be converted."""
    envelopes = capture()
    first = MANIFEST["first_part"]
    retried = next(
        e
        for e in envelopes[:first]
        if e["value"].get("type") == "IsrChange" and stable_hash(json.dumps(e["value"])) >= 1 << 63
    )
    upgraded = restored()
    output = upgraded.batch([retried, *envelopes[first:]])
    dead = output[output["kind"] == DEAD]
    letters = [json.loads(v) for v in dead["value"]]
    assert [(d["reason"], d["raw"]) for d in letters] == [
        ("duplicate", json.dumps(retried["value"]))
    ]
    plain = restored()
    plain.batch(envelopes[first:])
    assert upgraded.totals() == plain.totals()  # the shrink is not counted twice


def test_migrating_converts_unsigned_keys_and_starts_the_error_total() -> None:
    state = {
        "seen_controller_events": {(1 << 64) - 1: 10, 1 << 63: 11, (1 << 63) - 1: 12, 5: 13},
        "applied_total": Counter({"FetchResponse": 9}),
    }
    migrated = migrate_routed_v1(state)
    assert migrated["seen_controller_events"] == {-1: 10, -(1 << 63): 11, (1 << 63) - 1: 12, 5: 13}
    assert migrated["fetch_error_responses_total"] == 0
    assert migrated["applied_total"] == Counter({"FetchResponse": 9})
    # A snapshot of this release is left alone (its keys are signed already).
    current = ShardSnapshot(_model(Shards().settings, 0), seen_controller_events={-1: 10})
    current.fetch_error_responses_total = 3
    again = pickle.loads(pickle.dumps(current))
    assert (again.seen_controller_events, again.fetch_error_responses_total) == ({-1: 10}, 3)


def test_a_layout_file_of_the_previous_release_is_accepted_and_rewritten(tmp_path: Path) -> None:
    location = tmp_path / "checkpoint"
    location.mkdir()
    layout_file = location / "isrwatch-layout.json"
    previous = {
        "state_shards": 16,
        "controller_events": "controller-events",
        "fetch_responses": "fetch-responses",
        "source_format": "python",
    }
    layout_file.write_text(json.dumps(previous))
    now = config(str(location), **{"streaming.state_shards": 16})
    guard_checkpoint(now)
    assert json.loads(layout_file.read_text()) == {**previous, "routed_layout": ROUTED_LAYOUT}
    assert json.loads(layout_file.read_text()) == checkpoint_layout(now)
    guard_checkpoint(now)  # and again, now as this release's


def test_a_previous_release_layout_with_other_settings_is_still_refused(tmp_path: Path) -> None:
    location = tmp_path / "checkpoint"
    location.mkdir()
    previous = {
        "state_shards": 16,
        "controller_events": "controller-events",
        "fetch_responses": "fetch-responses",
        "source_format": "python",
    }
    (location / "isrwatch-layout.json").write_text(json.dumps(previous))
    with pytest.raises(CheckpointMismatchError, match=r"state_shards: 16 in the checkpoint, 8 now"):
        guard_checkpoint(config(str(location), **{"streaming.state_shards": 8}))
    assert "routed_layout" not in json.loads((location / "isrwatch-layout.json").read_text())


def test_an_unknown_state_layout_is_refused_by_name(tmp_path: Path) -> None:
    location = tmp_path / "checkpoint"
    location.mkdir()
    later = {
        "state_shards": 16,
        "routed_layout": "routed-v5",
        "controller_events": "controller-events",
        "fetch_responses": "fetch-responses",
        "source_format": "python",
    }
    (location / "isrwatch-layout.json").write_text(json.dumps(later))
    with pytest.raises(
        CheckpointMismatchError,
        match=r"another release of isrwatch.*routed-v5.*"
        r"routed-v4.*new streaming.checkpoint_location",
    ):
        guard_checkpoint(config(str(location), **{"streaming.state_shards": 16}))
