"""The parser of input records: typed events for valid records, dead letters otherwise."""

from __future__ import annotations

import copy
import dataclasses
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from state.event_parser import (
    fast_validator,
    parse_json_line,
    parse_record,
    reload_schemas,
    schema_dir,
    schema_validator,
)
from state.events import (
    CONTROLLER_EVENT_TYPES,
    BrokerChange,
    BrokerConfig,
    BrokerRegistration,
    BrokersAnswered,
    ClearElr,
    ControllerChange,
    DeadLetter,
    DeadLetterReason,
    Event,
    FetchResponse,
    IsrChange,
    IsrChangePropagation,
    LeaderAndIsr,
    MetadataLogProgress,
    MetadataPartitionState,
    ReplicaProgress,
    Source,
    TopicChange,
    TopicConfig,
    TopicPartition,
    UpdateMetadata,
)

C = Source.CONTROLLER_EVENTS
F = Source.FETCH_RESPONSES
R = DeadLetterReason
PARSER_REASONS = {
    R.INVALID_JSON,
    R.NOT_AN_OBJECT,
    R.UNKNOWN_TYPE,
    R.MISSING_FIELD,
    R.WRONG_TYPE,
    R.INVALID_VALUE,
}
INT64_MAX = 2**63 - 1
REPO = Path(__file__).resolve().parents[2]
# The properties are about parsing, not time: Hypothesis's default 200 ms deadline per
# example failed test_arbitrary_json_never_raises on a loaded 2-core CI machine.
UNTIMED = settings(deadline=None)

# --- valid records, with the event written by hand -------------------------------------

VALID: list[tuple[Source, dict[str, Any], Event]] = [
    (
        C,
        {
            "type": "LeaderAndIsr",
            "ts": 1000,
            "controller_id": 1,
            "controller_epoch": 5,
            "topic": "orders",
            "partition": 7,
            "leader": 2,
            "leader_epoch": 4,
            "isr": [2, 3],
            "replicas": [1, 2, 3],
            "partition_epoch": 9,
        },
        LeaderAndIsr(
            ts=1000,
            controller_id=1,
            controller_epoch=5,
            topic="orders",
            partition=7,
            leader=2,
            leader_epoch=4,
            isr=(2, 3),
            replicas=(1, 2, 3),
            partition_epoch=9,
        ),
    ),
    (
        C,
        {
            "type": "IsrChange",
            "ts": 1001,
            "topic": "orders",
            "partition": 0,
            "leader": 1,
            "old_isr": [1, 2, 3],
            "new_isr": [1, 2],
            "leader_epoch": 3,
            "partition_epoch": 6,
        },
        IsrChange(
            ts=1001,
            topic="orders",
            partition=0,
            leader=1,
            old_isr=(1, 2, 3),
            new_isr=(1, 2),
            leader_epoch=3,
            partition_epoch=6,
        ),
    ),
    (
        C,
        {
            "type": "IsrChangePropagation",
            "ts": 1002,
            "broker": 2,
            "partitions": [{"topic": "orders", "partition": 0}, {"topic": "pay", "partition": 3}],
        },
        IsrChangePropagation(
            ts=1002,
            broker=2,
            partitions=(TopicPartition("orders", 0), TopicPartition("pay", 3)),
        ),
    ),
    (
        C,
        {
            "type": "UpdateMetadata",
            "ts": 1003,
            "controller_id": 1,
            "controller_epoch": 5,
            "broker": 3,
            "live_brokers": [1, 2, 3],
            "partitions": [
                {
                    "topic": "orders",
                    "partition": 0,
                    "leader": 1,
                    "leader_epoch": 2,
                    "isr": [1, 2],
                    "replicas": [1, 2, 3],
                    "offline_replicas": [3],
                },
                {
                    "topic": "gone",
                    "partition": 1,
                    "leader": -2,
                    "leader_epoch": 0,
                    "isr": [],
                    "replicas": [],
                    "offline_replicas": [],
                },
            ],
        },
        UpdateMetadata(
            ts=1003,
            controller_id=1,
            controller_epoch=5,
            broker=3,
            live_brokers=(1, 2, 3),
            partitions=(
                MetadataPartitionState(
                    topic="orders",
                    partition=0,
                    leader=1,
                    leader_epoch=2,
                    isr=(1, 2),
                    replicas=(1, 2, 3),
                    offline_replicas=(3,),
                ),
                MetadataPartitionState(
                    topic="gone",
                    partition=1,
                    leader=-2,
                    leader_epoch=0,
                    isr=(),
                    replicas=(),
                    offline_replicas=(),
                ),
            ),
        ),
    ),
    (
        C,
        {
            "type": "BrokerChange",
            "ts": 1004,
            "live": [{"id": 1, "epoch": 10}, {"id": 3, "epoch": 0}],
        },
        BrokerChange(
            ts=1004, live=(BrokerRegistration(id=1, epoch=10), BrokerRegistration(id=3, epoch=0))
        ),
    ),
    (
        C,
        {"type": "ControllerChange", "ts": 1005, "controller_id": 2, "controller_epoch": 6},
        ControllerChange(ts=1005, controller_id=2, controller_epoch=6),
    ),
    (
        C,
        {
            "type": "TopicChange",
            "ts": 1006,
            "created": {"orders": {"0": [1, 2, 3], "1": [2, 3, 1]}, "empty": {}},
            "deleted": ["old"],
        },
        TopicChange(
            ts=1006,
            created={"orders": {0: (1, 2, 3), 1: (2, 3, 1)}, "empty": {}},
            deleted=("old",),
        ),
    ),
    (
        C,
        {"type": "TopicConfig", "ts": 1007, "topic": "orders", "min_insync_replicas": 2},
        TopicConfig(ts=1007, topic="orders", min_insync_replicas=2),
    ),
    (
        C,
        {"type": "ClearElr", "ts": 1007, "topic": "orders"},
        ClearElr(ts=1007, topic="orders"),
    ),
    (
        C,
        {"type": "ClearElr", "ts": 1007},  # every topic (ClearElrRecord's empty TopicName)
        ClearElr(ts=1007),
    ),
    (
        C,
        {"type": "BrokerConfig", "ts": 1008, "broker": 1, "replica_lag_time_max_ms": 30000},
        BrokerConfig(ts=1008, broker=1, replica_lag_time_max_ms=30000),
    ),
    (
        C,
        {
            "type": "MetadataLogProgress",
            "ts": 1009,
            "controller_id": 3,
            "controller_epoch": 7,
            "high_watermark": 120,
            "fetch_timeout_ms": 2000,
            "interval_ms": 10000,
            "replicas": [
                {
                    "broker": 1,
                    "log_end_offset": 120,
                    "last_caught_up_ms": 1005,
                    "last_fetch_ms": 1008,
                },
                {"broker": 2, "log_end_offset": -1},
            ],
        },
        MetadataLogProgress(
            ts=1009,
            controller_id=3,
            controller_epoch=7,
            high_watermark=120,
            fetch_timeout_ms=2000,
            interval_ms=10000,
            replicas=(
                ReplicaProgress(
                    broker=1, log_end_offset=120, last_caught_up_ms=1005, last_fetch_ms=1008
                ),
                ReplicaProgress(broker=2, log_end_offset=-1),
            ),
        ),
    ),
    (
        C,
        {"type": "BrokersAnswered", "ts": 1009, "controller_id": 3, "brokers": [1, 3]},
        BrokersAnswered(ts=1009, controller_id=3, brokers=(1, 3)),
    ),
    (
        F,
        {
            "ts": 1009,
            "topic": "orders",
            "partition": 7,
            "leader": 1,
            "follower": 2,
            "leader_epoch": 4,
            "fetch_offset": 100,
            "leader_leo": 150,
            "high_watermark": 90,
            "log_start_offset": -1,
            "error": "NOT_LEADER_OR_FOLLOWER",
            "bytes": 4096,
        },
        FetchResponse(
            ts=1009,
            topic="orders",
            partition=7,
            leader=1,
            follower=2,
            leader_epoch=4,
            fetch_offset=100,
            leader_leo=150,
            high_watermark=90,
            log_start_offset=-1,
            error="NOT_LEADER_OR_FOLLOWER",
            bytes=4096,
        ),
    ),
]
VALID_IDS = [record.get("type", "FetchResponse") for _, record, _ in VALID]


def valid(type_name: str) -> dict[str, Any]:
    """A deep copy of the valid record of that type (``FetchResponse`` for a fetch)."""
    return copy.deepcopy(VALID[VALID_IDS.index(type_name)][1])


def test_every_controller_event_type_has_a_valid_example() -> None:
    assert set(VALID_IDS) == {*CONTROLLER_EVENT_TYPES, "FetchResponse"}


@pytest.mark.parametrize(("source", "record", "expected"), VALID, ids=VALID_IDS)
def test_valid_record_parses_into_its_event(
    source: Source, record: dict[str, Any], expected: Event
) -> None:
    text = json.dumps(record)
    assert parse_record(source, text) == expected
    assert parse_record(source, text.encode()) == expected
    assert parse_json_line(source, record) == expected


def test_optional_fields_default() -> None:
    fetch = valid("FetchResponse")
    for name in ("log_start_offset", "error", "bytes"):
        del fetch[name]
    parsed = parse_json_line(F, fetch)
    assert isinstance(parsed, FetchResponse)
    assert (parsed.error, parsed.log_start_offset, parsed.bytes) == ("NONE", None, None)

    isr_change = valid("IsrChange")
    del isr_change["leader_epoch"], isr_change["partition_epoch"]
    event = parse_json_line(C, isr_change)
    assert isinstance(event, IsrChange)
    assert (event.leader_epoch, event.partition_epoch) == (None, None)
    assert (event.controller_id, event.controller_epoch) == (None, None)

    update = valid("UpdateMetadata")
    del update["live_brokers"]
    metadata = parse_json_line(C, update)
    assert isinstance(metadata, UpdateMetadata)
    assert metadata.live_brokers is None


def test_topic_change_may_be_empty() -> None:
    record = {"type": "TopicChange", "ts": 1, "created": {}, "deleted": []}
    assert parse_json_line(C, record) == TopicChange(ts=1, created={}, deleted=())


def test_unknown_fields_are_ignored() -> None:
    record = valid("UpdateMetadata")
    record["producer"] = {"host": "b3", "nested": [1, {"x": None}]}
    record["partitions"][0]["extra"] = "ignored"
    record["weird"] = float("nan")
    assert parse_json_line(C, record) == VALID[VALID_IDS.index("UpdateMetadata")][2]
    fetch = valid("FetchResponse") | {"type": "whatever", "rack": "r1"}
    assert parse_json_line(F, fetch) == VALID[VALID_IDS.index("FetchResponse")][2]


def test_integral_floats_become_ints() -> None:
    record = valid("LeaderAndIsr") | {"ts": 1000.0, "partition": 7.0, "isr": [2.0, 3]}
    event = parse_json_line(C, record)
    assert event == VALID[0][2]
    assert isinstance(event, LeaderAndIsr)
    assert event.isr is not None
    assert all(type(value) is int for value in (event.ts, event.partition, *event.isr))
    created = {"type": "TopicChange", "ts": 1, "created": {"t": {"0": [1.0]}}, "deleted": []}
    topic_change = parse_json_line(C, created)
    assert isinstance(topic_change, TopicChange)
    assert type(topic_change.created["t"][0][0]) is int


def test_int64_and_time_bounds_are_accepted() -> None:
    record = valid("FetchResponse") | {"ts": 7_258_118_399_999, "fetch_offset": INT64_MAX}
    parsed = parse_json_line(F, record)
    assert isinstance(parsed, FetchResponse)
    assert (parsed.ts, parsed.fetch_offset) == (7_258_118_399_999, INT64_MAX)


# --- dead letters ------------------------------------------------------------------------


def _with(type_name: str, **changes: Any) -> dict[str, Any]:
    return valid(type_name) | changes


def _without(type_name: str, *names: str) -> dict[str, Any]:
    record = valid(type_name)
    for name in names:
        del record[name]
    return record


def _metadata_partition(index: int, **changes: Any) -> dict[str, Any]:
    record = valid("UpdateMetadata")
    record["partitions"][index] |= changes
    return record


def _metadata_missing(index: int, name: str) -> dict[str, Any]:
    record = valid("UpdateMetadata")
    del record["partitions"][index][name]
    return record


BAD_TEXT: list[tuple[Source, bytes | str | None, DeadLetterReason, str]] = [
    (C, None, R.INVALID_JSON, "no value"),
    (F, None, R.INVALID_JSON, "no value"),
    (C, b"\xff\xfe", R.INVALID_JSON, "UTF-8"),
    (C, '{"type": "BrokerChange", "ts": 1, "live": []}'.encode("utf-16"), R.INVALID_JSON, ""),
    (C, "", R.INVALID_JSON, "JSON"),
    (C, "{", R.INVALID_JSON, "JSON"),
    (F, '{"ts": 1} trailing', R.INVALID_JSON, "JSON"),
    (F, "NaN", R.INVALID_JSON, "NaN"),
    (F, '{"ts": -Infinity}', R.INVALID_JSON, "Infinity"),
    (F, "1" * 5000, R.INVALID_JSON, "JSON"),
    (C, "[" * 100_000 + "]" * 100_000, R.INVALID_JSON, "JSON"),
    (C, "[1,2]", R.NOT_AN_OBJECT, "array"),
    (C, "null", R.NOT_AN_OBJECT, "null"),
    (F, '"text"', R.NOT_AN_OBJECT, "string"),
    (F, "42", R.NOT_AN_OBJECT, "integer"),
    (F, b"true", R.NOT_AN_OBJECT, "boolean"),
]


@pytest.mark.parametrize(("source", "value", "reason", "detail"), BAD_TEXT)
def test_bad_text_is_a_dead_letter(
    source: Source, value: bytes | str | None, reason: DeadLetterReason, detail: str
) -> None:
    letter = parse_record(source, value)
    assert isinstance(letter, DeadLetter)
    assert (letter.source, letter.reason) == (source, reason)
    assert detail in letter.detail
    assert len(letter.detail) <= 200


def test_raw_of_a_dead_letter() -> None:
    assert parse_record(C, None) == DeadLetter(C, "", R.INVALID_JSON, "record has no value (null)")
    letter = parse_record(C, b"\xff\xfe")
    assert isinstance(letter, DeadLetter)
    assert letter.raw == "\ufffd\ufffd"
    text = '{"type": "Foo", "ts": 1}'
    assert parse_record(C, text.encode()) == DeadLetter(
        C, text, R.UNKNOWN_TYPE, "unknown event type 'Foo'"
    )
    letter = parse_json_line(C, {"type": "Foo", "ts": 1})
    assert isinstance(letter, DeadLetter)
    assert json.loads(letter.raw) == {"type": "Foo", "ts": 1}


BAD_RECORDS: list[tuple[Source, object, DeadLetterReason, str]] = [
    (C, [1, 2], R.NOT_AN_OBJECT, "array"),
    (C, None, R.NOT_AN_OBJECT, "null"),
    (C, {"type": "Foo", "ts": 1}, R.UNKNOWN_TYPE, "'Foo'"),
    (C, {"type": "leaderandisr", "ts": 1}, R.UNKNOWN_TYPE, "'leaderandisr'"),
    (C, {"type": "Foo"}, R.UNKNOWN_TYPE, "'Foo'"),  # outranks the missing ts
    (C, {"type": "", "ts": 1}, R.UNKNOWN_TYPE, "''"),
    (C, _without("BrokerConfig", "type"), R.MISSING_FIELD, "type"),
    (C, _without("BrokerConfig", "ts"), R.MISSING_FIELD, "ts"),
    (C, _metadata_missing(1, "isr"), R.MISSING_FIELD, "partitions[1].isr"),
    (C, _without("ControllerChange", "controller_id"), R.MISSING_FIELD, "controller_id"),
    (C, _without("TopicChange", "deleted"), R.MISSING_FIELD, "deleted"),
    (C, _without("LeaderAndIsr", "partition_epoch"), R.MISSING_FIELD, "partition_epoch"),
    (C, _with("BrokerChange", live=[{"id": 1}]), R.MISSING_FIELD, "live[0].epoch"),
    (C, _with("IsrChangePropagation", partitions=[{"partition": 0}]), R.MISSING_FIELD, "topic"),
    (F, _without("FetchResponse", "high_watermark"), R.MISSING_FIELD, "high_watermark"),
    (C, _with("LeaderAndIsr", partition=True), R.WRONG_TYPE, "partition must be integer"),
    (C, _with("LeaderAndIsr", ts="1000"), R.WRONG_TYPE, "ts must be integer, not string"),
    (C, _with("LeaderAndIsr", partition=1.5), R.WRONG_TYPE, "partition"),
    (C, _with("LeaderAndIsr", isr=["1"]), R.WRONG_TYPE, "isr[0]"),
    (C, _with("LeaderAndIsr", isr={"1": 1}), R.WRONG_TYPE, "isr must be array"),
    (C, _with("LeaderAndIsr", leader=None), R.WRONG_TYPE, "leader must be integer, not null"),
    (C, _with("LeaderAndIsr", controller_epoch=None), R.WRONG_TYPE, "controller_epoch"),
    (C, _with("LeaderAndIsr", topic=7), R.WRONG_TYPE, "topic must be string"),
    (C, _with("BrokerConfig", type=5), R.WRONG_TYPE, "type must be string"),
    (C, _metadata_partition(1, leader_epoch=False), R.WRONG_TYPE, "partitions[1].leader_epoch"),
    (C, _with("TopicChange", created={"t": {"0": "1,2"}}), R.WRONG_TYPE, 'created.t["0"]'),
    (F, _with("FetchResponse", error=None), R.WRONG_TYPE, "error must be string"),
    (F, _with("FetchResponse", ts=float("nan")), R.WRONG_TYPE, "ts"),
    (F, _with("FetchResponse", ts=float("inf")), R.WRONG_TYPE, "ts"),
    (C, _with("LeaderAndIsr", partition=-1), R.INVALID_VALUE, "partition must be >= 0"),
    (C, _with("LeaderAndIsr", leader=-3), R.INVALID_VALUE, "leader must be >= -2"),
    # Kafka's int32 fields, and partition numbers below a million (dense slots per topic).
    (C, _with("LeaderAndIsr", leader_epoch=2**31), R.INVALID_VALUE, "must be <= 2147483647"),
    (C, _with("LeaderAndIsr", replicas=[1, 2**31]), R.INVALID_VALUE, "replicas[1]"),
    (C, _with("LeaderAndIsr", partition=1_000_000), R.INVALID_VALUE, "must be <= 999999"),
    (C, _with("TopicChange", created={"t": {"1000000": [1]}}), R.INVALID_VALUE, "created.t"),
    (C, _with("TopicChange", created={"t": {"07": [1]}}), R.INVALID_VALUE, "created.t"),
    (F, _with("FetchResponse", follower=2**31), R.INVALID_VALUE, "follower must be <="),
    (C, _with("LeaderAndIsr", isr=[1, -1]), R.INVALID_VALUE, "isr[1]"),
    (C, _with("LeaderAndIsr", topic=""), R.INVALID_VALUE, "topic must not be empty"),
    (C, _with("LeaderAndIsr", ts=-1), R.INVALID_VALUE, "ts must be >= 0"),
    (C, _with("LeaderAndIsr", ts=2**63), R.INVALID_VALUE, "ts must be <= "),
    # before 2200 UTC: later times overflow pandas' timestamps in the job (Spark's too)
    (
        C,
        _with("LeaderAndIsr", ts=7_258_118_400_000),
        R.INVALID_VALUE,
        "ts must be <= 7258118399999",
    ),
    (F, _with("FetchResponse", ts=2**62), R.INVALID_VALUE, "ts must be <= 7258118399999"),
    (C, _with("LeaderAndIsr", leader_epoch=-(2**70)), R.INVALID_VALUE, "leader_epoch"),
    (C, _with("LeaderAndIsr", ts=1e30), R.INVALID_VALUE, "ts must be <="),
    (C, _with("TopicConfig", min_insync_replicas=0), R.INVALID_VALUE, "min_insync_replicas"),
    (C, _with("LeaderAndIsr", elr=[2]), R.MISSING_FIELD, "last_known_elr"),
    (C, _with("IsrChange", last_known_elr=[2]), R.MISSING_FIELD, "elr"),
    (C, _with("LeaderAndIsr", elr=[-1], last_known_elr=[]), R.INVALID_VALUE, "elr[0]"),
    (C, _with("ClearElr", topic=""), R.INVALID_VALUE, "topic must not be empty"),
    (C, _with("BrokerConfig", replica_lag_time_max_ms=0), R.INVALID_VALUE, "replica_lag"),
    (C, _with("BrokerConfig", broker=-1), R.INVALID_VALUE, "broker must be >= 0"),
    (C, _with("BrokerChange", live=[{"id": -1, "epoch": 0}]), R.INVALID_VALUE, "live[0].id"),
    (C, _with("BrokersAnswered", brokers=[1, -1]), R.INVALID_VALUE, "brokers[1]"),
    (C, _with("BrokersAnswered", brokers=1), R.WRONG_TYPE, "brokers"),
    (C, _with("TopicChange", created={"t": {"x": [1]}}), R.INVALID_VALUE, "created.t"),
    (C, _with("TopicChange", created={"t": {"-1": [1]}}), R.INVALID_VALUE, "created.t"),
    (C, _with("TopicChange", created={"t": {"9" * 19: [1]}}), R.INVALID_VALUE, "created.t"),
    (C, _with("TopicChange", created={"": {}}), R.INVALID_VALUE, "created"),
    (C, _with("TopicChange", deleted=[""]), R.INVALID_VALUE, "deleted[0]"),
    (C, _metadata_partition(1, partition=-1), R.INVALID_VALUE, "partitions[1].partition"),
    (F, _with("FetchResponse", log_start_offset=-2), R.INVALID_VALUE, "log_start_offset"),
    (F, _with("FetchResponse", bytes=-1), R.INVALID_VALUE, "bytes must be >= 0"),
    (F, _with("FetchResponse", follower=-1), R.INVALID_VALUE, "follower"),
    (F, _with("FetchResponse", error=""), R.INVALID_VALUE, "error"),
    (F, _with("FetchResponse", leader=-1), R.INVALID_VALUE, "leader"),
    # several errors: the reason of highest rank wins
    (C, _with("LeaderAndIsr", partition=-1, leader="x"), R.WRONG_TYPE, "leader"),
    (C, _without("LeaderAndIsr", "isr") | {"leader": "x"}, R.MISSING_FIELD, "isr"),
    (C, {"type": "Foo", "ts": "x"}, R.UNKNOWN_TYPE, "Foo"),
]


@pytest.mark.parametrize(("source", "record", "reason", "detail"), BAD_RECORDS)
def test_bad_record_is_a_dead_letter(
    source: Source, record: object, reason: DeadLetterReason, detail: str
) -> None:
    letter = parse_json_line(source, record)
    assert isinstance(letter, DeadLetter), letter
    assert (letter.source, letter.reason) == (source, reason), letter.detail
    assert detail in letter.detail
    text = _dumps(record)
    if text is not None:  # the same record as text gives the same dead letter
        assert parse_record(source, text) == DeadLetter(source, text, reason, letter.detail)


def _dumps(value: object) -> str | None:
    """``value`` as strict JSON text, or None if it has no such form (NaN, huge ints)."""
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:
        return None


def test_pathological_decoded_values_never_raise() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    letter = parse_json_line(C, {"type": "Foo", "ts": 1, "extra": deep})
    assert isinstance(letter, DeadLetter)
    assert letter.reason is R.UNKNOWN_TYPE
    assert letter.raw.startswith("<unprintable")
    event = parse_json_line(C, valid("BrokerConfig") | {"extra": deep})
    assert isinstance(event, BrokerConfig)
    huge = parse_json_line(C, valid("BrokerConfig") | {"ts": 10**5000})
    assert isinstance(huge, DeadLetter)
    assert huge.reason is R.INVALID_VALUE
    odd = parse_json_line(C, {"type": "TopicChange", "ts": 1, "created": {1: {}}, "deleted": []})
    assert isinstance(odd, TopicChange | DeadLetter)
    assert isinstance(parse_json_line(F, {("a",): {1, 2}}), DeadLetter)


# --- the schema files -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["controller-events", "fetch-responses"])
def test_schema_files_are_valid_draft_2020_12(name: str) -> None:
    schema = json.loads((REPO / "conf" / "schemas" / f"{name}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert name in schema["$id"]
    assert schema["title"]
    assert schema["description"]


def test_samples_parse() -> None:
    for line in (REPO / "conf" / "samples" / "incident.jsonl").read_text().splitlines():
        envelope = json.loads(line)
        parsed = parse_json_line(Source(envelope["source"]), envelope["value"])
        assert not isinstance(parsed, DeadLetter), parsed


@pytest.fixture
def fresh_validators() -> Iterator[None]:
    reload_schemas()
    yield
    reload_schemas()


@pytest.mark.usefixtures("fresh_validators")
def test_conf_dir_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(REPO / "conf" / "schemas", tmp_path / "schemas")
    fetch_schema = tmp_path / "schemas" / "fetch-responses.schema.json"
    schema = json.loads(fetch_schema.read_text())
    schema["properties"]["bytes"]["maximum"] = 10
    fetch_schema.write_text(json.dumps(schema))
    monkeypatch.setenv("ISRWATCH_CONF_DIR", str(tmp_path))
    assert schema_dir() == tmp_path / "schemas"
    letter = parse_json_line(F, valid("FetchResponse"))
    assert isinstance(letter, DeadLetter)
    assert letter.reason is R.INVALID_VALUE
    assert "bytes" in letter.detail


# --- properties ---------------------------------------------------------------------------

INT64 = st.integers(-(2**63), INT64_MAX)
NON_NEGATIVE = st.integers(0, INT64_MAX)  # offsets, byte counts, broker epochs
TIME = st.integers(0, 7_258_118_399_999)  # ts: epoch ms before 2200-01-01 UTC
ID = st.integers(0, 2**31 - 1)  # broker ids and leader/partition/controller epochs: int32
LEADER = st.integers(-2, 2**31 - 1)
PARTITION_NUMBER = st.integers(0, 999_999)
TOPIC = st.text(min_size=1, max_size=10)
BROKERS = st.lists(ID, max_size=4)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(-(2**200), 2**200)
    | st.floats()
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
COMMON = {"controller_id": ID, "controller_epoch": ID, "x-extra": JSON_VALUES}


def _controller(
    type_name: str, required: dict[str, st.SearchStrategy[Any]], **optional: Any
) -> st.SearchStrategy[tuple[Source, dict[str, Any]]]:
    fields = {"type": st.just(type_name), "ts": TIME, **required}
    optional = {k: v for k, v in (COMMON | optional).items() if k not in fields}
    records = st.fixed_dictionaries(fields, optional=optional)
    return st.tuples(st.just(C), records)


PARTITION = st.fixed_dictionaries({"topic": TOPIC, "partition": PARTITION_NUMBER})
METADATA_STATE = st.fixed_dictionaries(
    {
        "topic": TOPIC,
        "partition": PARTITION_NUMBER,
        "leader": LEADER,
        "leader_epoch": ID,
        "isr": BROKERS,
        "replicas": BROKERS,
        "offline_replicas": BROKERS,
    }
)
FETCH = st.fixed_dictionaries(
    {
        "ts": TIME,
        "topic": TOPIC,
        "partition": PARTITION_NUMBER,
        "leader": ID,
        "follower": ID,
        "leader_epoch": ID,
        "fetch_offset": NON_NEGATIVE,
        "leader_leo": NON_NEGATIVE,
        "high_watermark": NON_NEGATIVE,
    },
    optional={
        "log_start_offset": st.integers(-1, INT64_MAX),
        "error": st.text(min_size=1, max_size=30),
        "bytes": NON_NEGATIVE,
        "x-extra": JSON_VALUES,
    },
)
VALID_RECORDS: st.SearchStrategy[tuple[Source, dict[str, Any]]] = st.one_of(
    _controller(
        "LeaderAndIsr",
        {
            "topic": TOPIC,
            "partition": PARTITION_NUMBER,
            "leader": LEADER,
            "leader_epoch": ID,
            "isr": BROKERS,
            "replicas": BROKERS,
            "partition_epoch": ID,
        },
    ),
    _controller(
        "IsrChange",
        {
            "topic": TOPIC,
            "partition": PARTITION_NUMBER,
            "leader": LEADER,
            "old_isr": BROKERS,
            "new_isr": BROKERS,
        },
        leader_epoch=ID,
        partition_epoch=ID,
    ),
    _controller(
        "IsrChangePropagation",
        {"broker": ID, "partitions": st.lists(PARTITION, max_size=3)},
    ),
    _controller(
        "UpdateMetadata",
        {"broker": ID, "partitions": st.lists(METADATA_STATE, max_size=3)},
        live_brokers=BROKERS,
    ),
    _controller(
        "BrokerChange",
        {"live": st.lists(st.fixed_dictionaries({"id": ID, "epoch": NON_NEGATIVE}), max_size=3)},
    ),
    _controller("ControllerChange", {"controller_id": ID, "controller_epoch": ID}),
    _controller(
        "TopicChange",
        {
            "created": st.dictionaries(
                TOPIC,
                st.dictionaries(PARTITION_NUMBER.map(str), BROKERS, max_size=3),
                max_size=3,
            ),
            "deleted": st.lists(TOPIC, max_size=3),
        },
    ),
    _controller("TopicConfig", {"topic": TOPIC, "min_insync_replicas": st.integers(1, 10)}),
    _controller("ClearElr", {}, topic=TOPIC),
    _controller("BrokerConfig", {"broker": ID, "replica_lag_time_max_ms": st.integers(1, 10**9)}),
    _controller("BrokersAnswered", {"brokers": st.lists(ID, max_size=4)}),
    st.tuples(st.just(F), FETCH),
)
SOURCES = st.sampled_from(Source)


def _wire(value: Any) -> Any:
    """An event's field value in its JSON form (tuples as lists, keys as strings)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _wire(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_wire(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _wire(item) for key, item in value.items()}
    return value


def _assert_never_raises(result: Event | DeadLetter) -> None:
    if isinstance(result, DeadLetter):
        assert result.reason in PARSER_REASONS
        assert isinstance(result.raw, str)
        assert isinstance(result.detail, str)
        assert result.detail
    else:
        assert isinstance(result, (*CONTROLLER_EVENT_TYPES.values(), FetchResponse))


@UNTIMED
@given(SOURCES, st.binary())
def test_arbitrary_bytes_never_raise(source: Source, value: bytes) -> None:
    _assert_never_raises(parse_record(source, value))


@UNTIMED
@given(SOURCES, st.text())
def test_arbitrary_text_never_raises(source: Source, value: str) -> None:
    _assert_never_raises(parse_record(source, value))


@UNTIMED
@given(SOURCES, JSON_VALUES)
def test_arbitrary_json_never_raises(source: Source, value: Any) -> None:
    _assert_never_raises(parse_json_line(source, value))
    _assert_never_raises(parse_record(source, _dumps(value)))
    _assert_never_raises(parse_record(source, json.dumps(value)))  # NaN and Infinity


@UNTIMED
@given(
    st.sampled_from(sorted(CONTROLLER_EVENT_TYPES)),
    st.dictionaries(
        st.sampled_from(sorted({name for _, record, _ in VALID for name in record})),
        JSON_VALUES,
    ),
)
def test_near_records_never_raise(type_name: str, fields: dict[str, Any]) -> None:
    _assert_never_raises(parse_json_line(C, fields | {"type": type_name}))
    _assert_never_raises(parse_json_line(F, fields))


def _containers(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every (path of a container, key or index inside it) of a JSON value."""
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, item in items:
        yield (*path, key)
        yield from _containers(item, (*path, key))


def _mutated(record: dict[str, Any], data: st.DataObject, values: st.SearchStrategy[Any]) -> Any:
    """A copy of ``record`` with one field, at any depth, removed or replaced."""
    mutated = copy.deepcopy(record)
    *parents, key = data.draw(st.sampled_from(list(_containers(record))))
    container: Any = mutated
    for parent in parents:
        container = container[parent]
    if data.draw(st.booleans()):
        del container[key]
    else:
        container[key] = data.draw(values)
    return mutated


@UNTIMED
@given(VALID_RECORDS, st.data())
def test_mutated_valid_records_never_raise(
    source_record: tuple[Source, dict[str, Any]], data: st.DataObject
) -> None:
    source, record = source_record
    mutated = _mutated(record, data, JSON_VALUES)
    _assert_never_raises(parse_json_line(source, mutated))
    _assert_never_raises(parse_record(source, _dumps(mutated)))


@UNTIMED
@given(VALID_RECORDS)
def test_valid_records_parse_to_equal_events(source_record: tuple[Source, dict[str, Any]]) -> None:
    source, record = source_record
    event = parse_json_line(source, record)
    assert not isinstance(event, DeadLetter), event
    assert type(event).__name__ == record.get("type", "FetchResponse")
    for field in dataclasses.fields(event):
        if field.name in record:
            assert _wire(getattr(event, field.name)) == record[field.name], field.name
        elif field.default is not dataclasses.MISSING:
            assert getattr(event, field.name) == field.default, field.name
        else:
            pytest.fail(f"required field {field.name} not in the record")
    text = _dumps(record)
    if text is not None:
        assert parse_record(source, text.encode()) == event


def _fast_accepts(source: Source, record: object) -> bool:
    try:
        fast_validator(source)(record)
    except fastjsonschema.JsonSchemaValueException:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(VALID_RECORDS, st.data())
def test_fast_and_explaining_validators_agree(
    source_record: tuple[Source, dict[str, Any]], data: st.DataObject
) -> None:
    """The parser trusts the compiled validator's yes; it must mean jsonschema's yes."""
    source, record = source_record
    mutated = record
    if data.draw(st.booleans()):
        mutated = _mutated(record, data, JSON_VALUES | st.integers(-(2**40), 2**40))
    explained_valid = not any(True for _ in schema_validator(source).iter_errors(mutated))
    assert _fast_accepts(source, mutated) == explained_valid
