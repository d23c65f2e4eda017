"""The health record's JSON Schema (conf/schemas/partition-health.schema.json), for the
tests that check what replay and the job write against it."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jsonschema

SCHEMAS = Path(__file__).resolve().parents[1] / "conf" / "schemas"
SCHEMA_FILE = SCHEMAS / "partition-health.schema.json"
SCHEMA: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())


def assert_health_records_valid(records: Iterable[dict[str, Any]]) -> int:
    """Validate every record (raising the first ValidationError); how many there were."""
    count = 0
    for record in records:
        VALIDATOR.validate(record)
        count += 1
    return count
