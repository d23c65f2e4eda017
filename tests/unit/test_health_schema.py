"""replay's health records follow conf/schemas/partition-health.schema.json, causes included."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, get_args

import jsonschema
import msgspec
import pytest
from click.testing import CliRunner

from state import (
    STATUS_NAMES,
    Cause,
    CauseKind,
    FollowerHealth,
    FollowerStatus,
    HealthRecord,
    LagTimeUnknown,
    MetadataHealth,
    MetadataState,
    encode_record,
)
from state.health_record import LagTimeUnknownName, MetadataStateName, StatusName
from state.settings import RuleSettings
from streaming.cli import main
from streaming.feeds.simulator import ClusterSimulator, load_scenario
from streaming.feeds.wire import InputRecord
from streaming.tools.replay import replay
from tests.health_schema import SCHEMA, VALIDATOR, assert_health_records_valid

CONF = Path(__file__).resolve().parents[2] / "conf"


def envelope(record: InputRecord) -> str:
    return json.dumps({"source": record.source.value, "value": record.value})


def as_written(records: list[HealthRecord]) -> list[dict[str, Any]]:
    """The records as their JSON says (what the topic and replay carry)."""
    return [json.loads(encode_record(r)) for r in records]


def replayed(lines: Iterable[str]) -> list[dict[str, Any]]:
    return as_written(replay(lines, RuleSettings(), None).records)


def simulated_records(scenario: str, at_s: int) -> list[dict[str, Any]]:
    sim = ClusterSimulator(load_scenario(scenario), seed=7, start_ms=1_700_000_000_000)
    return replayed(envelope(r) for r in sim.events(1_700_000_000_000 + at_s * 1000))


def test_the_schema_is_valid_and_names_every_cause_kind() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    kinds = SCHEMA["$defs"]["cause"]["properties"]["kind"]["enum"]
    assert kinds == [k.value for k in CauseKind]


def test_replay_of_the_sample_incident_follows_the_schema() -> None:
    with (CONF / "samples" / "incident.jsonl").open() as lines:
        records = replayed(lines)
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
        record = copy.deepcopy(replayed(lines)[0])
    breakage(record)
    with pytest.raises(jsonschema.ValidationError):
        VALIDATOR.validate(record)


def test_the_lines_isrwatch_replay_prints_follow_the_schema() -> None:
    result = CliRunner().invoke(main, ["replay", str(CONF / "samples" / "incident.jsonl")])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert assert_health_records_valid(map(json.loads, lines)) == len(lines) > 0


def test_replay_of_shrinks_follows_the_schema_with_deadlines() -> None:
    # broker 3 falls behind: SHRINK_ELIGIBLE followers with a shrink_by_ms, before Kafka acts
    records = simulated_records("slow-follower", 45)
    eligible = [f for r in records for f in r["followers"] if f["status"] == "SHRINK_ELIGIBLE"]
    assert eligible
    assert all(isinstance(f["shrink_by_ms"], int) for f in eligible)
    assert_health_records_valid(records)


@pytest.mark.parametrize(
    "breakage",
    [
        lambda f: f.__setitem__("shrink_by_ms", 1),
        lambda f: f.pop("lag_time_unknown"),
        lambda f: f.__setitem__("lag_time_unknown", "NEVER_CAUGHT_UP"),
    ],
    ids=["deadline of a follower not shrinking", "no lag_time_unknown", "unknown with a lag"],
)
def test_the_schema_rejects_followers_that_break_the_record(breakage: Any) -> None:
    with (CONF / "samples" / "incident.jsonl").open() as lines:
        records = copy.deepcopy(replayed(lines))
    record, follower = next(
        (r, f)
        for r in records
        for f in r["followers"]
        if f["status"] == "IN_SYNC" and f["lag_time_ms"] is not None
    )
    VALIDATOR.validate(record)
    breakage(follower)
    with pytest.raises(jsonschema.ValidationError):
        VALIDATOR.validate(record)


def test_the_readme_sample_record_follows_the_schema() -> None:
    readme = (CONF.parent / "README.md").read_text(encoding="utf-8")
    samples = re.findall(r"```json\n(.*?)```", readme, re.S)
    assert samples
    assert assert_health_records_valid(map(json.loads, samples)) == len(samples)


def json_type(annotation: Any, components: dict[str, Any]) -> set[str]:
    """The JSON Schema types a struct field's msgspec schema allows."""
    if "anyOf" in annotation:
        return set().union(*(json_type(a, components) for a in annotation["anyOf"]))
    if "$ref" in annotation:
        return json_type(components[annotation["$ref"].split("/")[-1]], components)
    if "enum" in annotation:
        return {"string"}
    return {annotation["type"]}


def schema_type(definition: dict[str, Any]) -> set[str]:
    if "$ref" in definition:
        return schema_type(SCHEMA["$defs"][definition["$ref"].split("/")[-1]])
    if "enum" in definition:
        return {"null" if v is None else "string" for v in definition["enum"]}
    if "anyOf" in definition or "oneOf" in definition:
        return set().union(
            *(schema_type(d) for d in definition.get("anyOf", definition.get("oneOf", [])))
        )
    kind = definition.get("type", "object")
    return set(kind) if isinstance(kind, list) else {kind}


@pytest.mark.parametrize(
    ("struct", "definition"),
    [
        (HealthRecord, SCHEMA),
        (FollowerHealth, SCHEMA["$defs"]["follower"]),
        (MetadataHealth, SCHEMA["$defs"]["metadata"]),
        (Cause, SCHEMA["$defs"]["cause"]),
    ],
    ids=["record", "follower", "metadata", "cause"],
)
def test_the_structs_and_the_schema_have_the_same_fields(
    struct: type[msgspec.Struct], definition: dict[str, Any]
) -> None:
    """conf/schemas/partition-health.schema.json is written by hand (its rules between
    fields, such as shrink_by_ms only while shrinking, are more than a struct says): it
    and the structs the writer fills must name the same fields, in the same order, of
    the same JSON types. A field every record has is required in the schema; a struct
    may default it (records of earlier releases lack it)."""
    (generated,), components = msgspec.json.schema_components([struct])
    own = components[generated["$ref"].split("/")[-1]]
    assert list(own["properties"]) == list(definition["properties"])
    for name, annotation in own["properties"].items():
        assert json_type(annotation, components) == schema_type(definition["properties"][name]), (
            name
        )
    # absent unless shrinking
    written = {f for f in own["properties"] if f not in ("shrink_by_ms", "shrink_at_ms")}
    assert set(definition["required"]) == written


def test_the_records_words_are_the_models_codes_and_the_schemas_enums() -> None:
    follower = SCHEMA["$defs"]["follower"]["properties"]
    metadata = SCHEMA["$defs"]["metadata"]["properties"]
    assert get_args(StatusName) == tuple(s.name for s in FollowerStatus) == STATUS_NAMES
    assert list(get_args(StatusName)) == follower["status"]["enum"]
    assert get_args(MetadataStateName) == tuple(s.name for s in MetadataState)
    assert list(get_args(MetadataStateName)) == metadata["state"]["enum"]
    assert get_args(LagTimeUnknownName) == tuple(u.value for u in LagTimeUnknown)
    assert [None, *get_args(LagTimeUnknownName)] == follower["lag_time_unknown"]["enum"]
