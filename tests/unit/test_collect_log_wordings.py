"""Every wording of each contract line from Kafka 0.10 to 4.x, one line per version
range: tests/unit/data/kafka_logs/synthetic/wordings-by-version.json.

SYNTHETIC lines: each is built by hand from the format string of the Kafka class it
names, as read in Apache Kafka's source at the release tags; the expected record is
written by hand from the line. The real lines are in corpus/ (test_collect_log_corpus).
A wording of a version or class the collector does not cover must give no record
("ignored"), never a wrong one.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from streaming.feeds.collectors.log_lines import IGNORED, parse_line, record_kind

SYNTHETIC = Path(__file__).resolve().parent / "data" / "kafka_logs" / "synthetic"
DOC = json.loads((SYNTHETIC / "wordings-by-version.json").read_text(encoding="utf-8"))
ENTRIES: list[dict[str, Any]] = DOC["entries"]


def test_the_file_says_it_is_synthetic() -> None:
    assert DOC["synthetic"] is True
    assert DOC["note"].startswith("SYNTHETIC, NOT REAL LOG LINES")


def _plain(value: Any) -> Any:
    """Records as JSON-like values: tuples as lists, mapping keys as strings."""
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


@pytest.mark.parametrize("entry", ENTRIES, ids=[f"{e['versions']} {e['class']}" for e in ENTRIES])
def test_wording(entry: dict[str, Any]) -> None:
    expected = dict(entry["record"])
    kind = expected.pop("kind")
    result = parse_line(entry["line"], ZoneInfo("UTC"))
    if kind == "ignored":
        assert result is IGNORED
        return
    assert not isinstance(result, type(IGNORED)), result
    assert dataclasses.is_dataclass(result)
    assert record_kind(result) == kind  # type: ignore[arg-type]
    fields = _plain(result)
    if "state" in expected:
        state = fields.pop("state")
        assert {k: state[k] for k in expected["state"]} == expected.pop("state")
    assert {k: fields[k] for k in expected} == expected
