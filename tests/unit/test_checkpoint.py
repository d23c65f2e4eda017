"""Where the job keeps its checkpoint and source status, and the checkpoint's layout guard."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.config import IsrwatchConfig, load_config
from streaming.job.query import (
    CheckpointMismatchError,
    checkpoint_location,
    guard_checkpoint,
    source_status_file,
)


def config(location: str, **overrides: object) -> IsrwatchConfig:
    return load_config(None, {"streaming.checkpoint_location": location, **overrides}, environ={})


def test_a_local_checkpoint_is_made_absolute_and_keeps_the_status_file(tmp_path: Path) -> None:
    local = config(str(tmp_path / "ckpt"))
    assert checkpoint_location(local) == str(tmp_path / "ckpt")
    assert source_status_file(local) == tmp_path / "ckpt" / "source-status.json"


def test_an_object_store_checkpoint_is_passed_as_given() -> None:
    remote = config("s3a://bucket/isrwatch/ckpt")
    assert checkpoint_location(remote) == "s3a://bucket/isrwatch/ckpt"
    status = source_status_file(remote)
    assert status.name == "source-status.json"
    assert "s3a" not in str(status)  # a local file, one directory per checkpoint URI
    assert source_status_file(config("s3a://bucket/other")) != status


def test_the_layout_is_recorded_and_a_changed_one_refused(tmp_path: Path) -> None:
    location = str(tmp_path / "ckpt")
    guard_checkpoint(config(location, **{"streaming.state_shards": 16}))
    guard_checkpoint(config(location, **{"streaming.state_shards": 16, "rules.warn_ratio": 0.8}))
    with pytest.raises(CheckpointMismatchError, match=r"state_shards: 16 in the checkpoint, 8 now"):
        guard_checkpoint(config(location, **{"streaming.state_shards": 8}))
    with pytest.raises(CheckpointMismatchError, match=r"fetch_responses: 'fetch-responses' in"):
        guard_checkpoint(
            config(location, **{"streaming.state_shards": 16, "topics.fetch_responses": "fetches"})
        )


def test_restored_state_is_judged_by_the_current_rules() -> None:
    from state import ReplicationModel
    from state.settings import PropagationSettings, RuleSettings
    from streaming.job.shard_state import ShardSnapshot, restore_snapshot, save_snapshot

    saved = save_snapshot(ShardSnapshot(ReplicationModel(RuleSettings())))
    changed = RuleSettings(warn_ratio=0.8, propagation=PropagationSettings(overdue_slack_ms=500))
    model = restore_snapshot(saved, changed).model
    assert model.settings == changed
    assert model.windows.settings.overdue_slack_ms == 500
