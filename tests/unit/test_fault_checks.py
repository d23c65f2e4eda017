"""The fault campaign's reading of a checkpoint (bench/faults/checkpoint_phase.py) and its
output checks (bench/faults/verify.py), on hand-made checkpoints and topics."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from faults.checkpoint_phase import (
    BETWEEN,
    MID_BATCH,
    MID_COMMIT,
    MID_SINK,
    committed_offsets,
    look,
    planned_rows,
)
from faults.verify import (
    Comparison,
    Expected,
    compare_applied,
    compare_dead_letters,
    compare_health,
)

NOW = 1_800_000_000.0


def offsets_file(checkpoint: Path, batch: int, offsets: dict[str, int]) -> None:
    path = checkpoint / "offsets" / str(batch)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'v1\n{{"batchWatermarkMs":0}}\n{json.dumps(offsets)}')


def state_file(checkpoint: Path, store: int, name: str, mtime: float) -> None:
    path = checkpoint / "state" / "0" / str(store) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    os.utime(path, (mtime, mtime))


def test_a_batch_goes_through_its_phases(tmp_path: Path) -> None:
    offsets_file(tmp_path, 0, {"t:0": 10, "t:1": 5})
    (tmp_path / "commits").mkdir()
    (tmp_path / "commits" / "0").write_text("v1\n{}")
    assert look(tmp_path, 2, NOW).phase == BETWEEN
    offsets_file(tmp_path, 1, {"t:0": 25, "t:1": 5, "u:0": 3})
    assert planned_rows(tmp_path, 1) == 15  # u:0 is new: registered, not read
    assert look(tmp_path, 2, NOW).phase == MID_BATCH
    state_file(tmp_path, 0, "2.zip", NOW - 5)  # left by an attempt killed before
    assert look(tmp_path, 2, NOW).phase == MID_BATCH
    state_file(tmp_path, 0, "2.zip", NOW + 1)
    assert look(tmp_path, 2, NOW).phase == MID_COMMIT
    state_file(tmp_path, 1, "2.changelog", NOW + 1)
    assert look(tmp_path, 2, NOW).phase == MID_SINK
    assert committed_offsets(tmp_path) == {"t:0": 10, "t:1": 5}
    (tmp_path / "commits" / "1").write_text("v1\n{}")
    assert look(tmp_path, 2, NOW).phase == BETWEEN
    assert committed_offsets(tmp_path) == {"t:0": 25, "t:1": 5, "u:0": 3}


def expected() -> Expected:
    health = {
        "t:0": {"topic": "t", "partition": 0, "isr": [1, 2]},
        "t:1": {"topic": "t", "partition": 1, "isr": [2]},
    }
    letters = {"in:0:7": "invalid_json", "in:1:3": "stale_leader_epoch"}
    return Expected(Counter({"FetchResponse": 100, "LeaderAndIsr": 4}), health, letters, 106)


def record(key: str, isr: list[int]) -> tuple[str, bytes | None]:
    topic, partition = key.split(":")
    return key, json.dumps({"topic": topic, "partition": int(partition), "isr": isr}).encode()


def test_applied_totals_count_lost_and_doubled_events() -> None:
    comparison = Comparison()
    compare_applied(comparison, expected(), {"FetchResponse": 98, "LeaderAndIsr": 5})
    assert (comparison.events_lost, comparison.events_doubled, comparison.passed) == (2, 1, False)
    exact = Comparison()
    compare_applied(exact, expected(), {"FetchResponse": 100, "LeaderAndIsr": 4})
    assert (exact.events_lost, exact.events_doubled, exact.passed) == (0, 0, True)


def test_health_is_judged_on_the_latest_record_per_key_and_rewrites_are_counted() -> None:
    written = [
        record("t:0", [1]),
        record("t:0", [1]),
        record("t:1", [2]),  # a re-run batch
        record("t:0", [1, 2]),  # then the final snapshot rewrites both on purpose
        record("t:0", [1, 2]),
        record("t:1", [2]),
    ]
    comparison = Comparison()
    compare_health(comparison, expected(), written, rewrites_before=4)
    assert (comparison.passed, comparison.health_rewrites) == (True, 1)
    stale = Comparison()
    compare_health(stale, expected(), [record("t:0", [1, 2]), record("t:1", [1, 2])], 0)
    assert not stale.passed


def test_dead_letters_once_per_source_record_after_dedup() -> None:
    def letter(key: str, reason: str) -> tuple[str, bytes | None]:
        return key, json.dumps({"reason": reason}).encode()

    twice = [
        letter("in:0:7", "invalid_json"),
        letter("in:1:3", "stale_leader_epoch"),
        letter("in:0:7", "invalid_json"),
    ]
    comparison = Comparison()
    compare_dead_letters(comparison, expected(), twice)
    assert (comparison.passed, comparison.dead_letter_duplicates) == (True, 1)
    missing = Comparison()
    compare_dead_letters(missing, expected(), twice[:1])
    assert (missing.passed, missing.events_lost) == (False, 1)
    wrong = Comparison()
    compare_dead_letters(wrong, expected(), [letter("in:0:7", "late"), twice[1]])
    assert not wrong.passed
