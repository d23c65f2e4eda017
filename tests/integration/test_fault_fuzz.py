"""The fuzzing of the fault campaign, short mode (bench/faults/fuzz.py): 300 fuzzed records
of every mutation kind through the running job (``isrwatch run``, embedded broker, Kafka
source). The job must not crash, and every record the contract refuses must be a dead
letter with a reason of the parser. No timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PARSER_REASONS = {
    "invalid_json",
    "not_an_object",
    "missing_field",
    "wrong_type",
    "invalid_value",
    "unknown_type",
}
KINDS = {
    "field_type",
    "drop_field",
    "duplicate_field",
    "out_of_range",
    "past_int64",
    "nan_infinity",
    "extreme_ts",
    "wrong_enum",
    "huge_array",
    "swapped_topic",
    "invalid_utf8",
    "lone_surrogate",
    "10mb_value",
    "deep_nesting",
    "empty_value",
    "null_value",
    "null_key",
    "not_an_object",
    "truncated",
}


@pytest.mark.timeout(2400)  # the job's start and 300 records on a busy 2-core machine
def test_300_fuzzed_records_through_the_running_job(tmp_path: Path) -> None:
    out = tmp_path / "fuzz.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.faults.fuzz",
            "--records",
            "300",
            "--workdir",
            str(tmp_path / "work"),
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=2300,
    )
    assert out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["failures"] == [], done.stdout[-5000:]
    assert (figures["alive"], figures["query_failures"]) == (True, 0)
    first, last = figures["batches"]
    assert last > first  # batches went on while the fuzzed records were read
    kinds = figures["kinds"]
    assert set(kinds) == KINDS
    assert sum(k["tried"] for k in kinds.values()) == 300
    for name, kind in kinds.items():
        assert kind["refused"] == 0, name  # the broker takes 10 MB records
        assert kind["no_letter"] == 0, name  # nothing the contract refuses is lost
        invalid = kind["tried"] - kind["valid"]
        parser = sum(n for reason, n in kind["reasons"].items() if reason in PARSER_REASONS)
        assert parser == invalid, name  # each one the parser's, and only those
    # kinds that can only give invalid records: all are dead letters of the parser
    for name in (
        "invalid_utf8",
        "lone_surrogate",
        "nan_infinity",
        "empty_value",
        "null_value",
        "not_an_object",
        "truncated",
        "past_int64",
    ):
        assert kinds[name]["valid"] == 0, name
    assert figures["lost"] == figures["misjudged"] == 0
    assert done.returncode == 0
