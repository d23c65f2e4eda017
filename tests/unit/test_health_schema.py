"""replay's health records follow conf/schemas/partition-health.schema.json, causes included."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from state import CauseKind
from state.settings import RuleSettings
from streaming.input_records import InputRecord
from streaming.replay import replay
from streaming.simulator import ClusterSimulator, load_scenario

CONF = Path(__file__).resolve().parents[2] / "conf"
SCHEMA = json.loads((CONF / "schemas" / "partition-health.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())


def envelope(record: InputRecord) -> str:
    return json.dumps({"source": record.source.value, "value": record.value})


def simulated_records(scenario: str, at_s: int) -> list[dict[str, Any]]:
    sim = ClusterSimulator(load_scenario(scenario), seed=7, start_ms=1_700_000_000_000)
    lines = [envelope(r) for r in sim.events(1_700_000_000_000 + at_s * 1000)]
    return replay(lines, RuleSettings(), None).records


def test_the_schema_is_valid_and_names_every_cause_kind() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    kinds = SCHEMA["$defs"]["cause"]["properties"]["kind"]["enum"]
    assert kinds == [k.value for k in CauseKind]


def test_replay_of_the_sample_incident_follows_the_schema() -> None:
    with (CONF / "samples" / "incident.jsonl").open() as lines:
        records = replay(lines, RuleSettings(), None).records
    assert records
    for record in records:
        VALIDATOR.validate(record)


def test_replay_of_a_crash_follows_the_schema_with_causes() -> None:
    # broker 2 crashed at 20 s and its session expired at 26 s: its followers are OFFLINE
    records = simulated_records("broker-crash-and-bounce", 28)
    causes = [r["cause"] for r in records if r["cause"] is not None]
    assert causes
    assert {c["kind"] for c in causes} == {"broker_down"}
    for record in records:
        VALIDATOR.validate(record)


@pytest.mark.parametrize(
    "breakage",
    [
        lambda r: r.pop("cause"),
        lambda r: r.__setitem__("cause", {"kind": "broker_down", "broker": 2}),
        lambda r: r.__setitem__("cause", {"kind": "gremlins", "broker": None, "text": "x"}),
        lambda r: r["followers"][0].pop("cause"),
    ],
    ids=["no cause", "cause without text", "unknown kind", "follower without cause"],
)
def test_the_schema_rejects_records_without_a_proper_cause(breakage: Any) -> None:
    with (CONF / "samples" / "incident.jsonl").open() as lines:
        record = copy.deepcopy(replay(lines, RuleSettings(), None).records[0])
    breakage(record)
    with pytest.raises(jsonschema.ValidationError):
        VALIDATOR.validate(record)
