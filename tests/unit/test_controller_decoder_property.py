"""The bulk controller-event decoder and the explaining validator agree on every record.

Hypothesis builds LeaderAndIsr and UpdateMetadata values (the kinds msgspec checks) with
boundary values, and every kind of invalid one: missing fields, wrong types, values out
of range by one, huge numbers, integral floats (valid for the schema), an empty topic,
unknown fields, ``null`` optional fields, a bad partition state inside an UpdateMetadata,
other event types, values that are not objects, and byte-level damage (truncation,
invalid UTF-8, duplicate keys, NaN). For each, ``decode_controller_events`` (one batch)
gives exactly the event or the dead letter (reason and detail) of ``parse_record``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import state.controller_decoder
from state import decode_controller_events, parse_record
from state.events import DeadLetter, LeaderAndIsr, Source, UpdateMetadata

INT64_MAX, INT32_MAX = 2**63 - 1, 2**31 - 1
MAX_TIME = 7_258_118_399_999  # the last ms before 2200-01-01 UTC
LIMITS = {  # the schema's range of each integer field
    "ts": (0, MAX_TIME),
    "partition": (0, 999_999),
    "leader": (-2, INT32_MAX),
    "leader_epoch": (0, INT32_MAX),
    "partition_epoch": (0, INT32_MAX),
    "controller_id": (0, INT32_MAX),
    "controller_epoch": (0, INT32_MAX),
    "metadata_offset": (0, INT64_MAX),
    "broker": (0, INT32_MAX),
}
LISTS = ("isr", "replicas", "offline_replicas", "live_brokers")
ints_in = {
    name: st.sampled_from((low, high, low + 1, high - 1, 7)) for name, (low, high) in LIMITS.items()
}
broker_ids = st.lists(st.sampled_from((0, 1, INT32_MAX)), max_size=3)
topics = st.sampled_from(("t", "ü-topic", " ", "\x00", "😀"))


@st.composite
def partition_state(draw: st.DrawFn) -> dict[str, Any]:
    state = {name: draw(ints_in[name]) for name in ("partition", "leader", "leader_epoch")}
    return {
        **state,
        "topic": draw(topics),
        "isr": draw(broker_ids),
        "replicas": draw(broker_ids),
        "offline_replicas": draw(broker_ids),
    }


@st.composite
def valid_event(draw: st.DrawFn) -> dict[str, Any]:
    event: dict[str, Any] = {"ts": draw(ints_in["ts"])}
    for optional in ("controller_id", "controller_epoch"):
        if draw(st.booleans()):
            event[optional] = draw(ints_in[optional])
    if draw(st.booleans()):
        event |= draw(partition_state())
        del event["offline_replicas"]
        event |= {"type": "LeaderAndIsr", "partition_epoch": draw(ints_in["partition_epoch"])}
        if draw(st.booleans()):
            event["metadata_offset"] = draw(ints_in["metadata_offset"])
        return event
    event |= {
        "type": "UpdateMetadata",
        "broker": draw(ints_in["broker"]),
        "partitions": draw(st.lists(partition_state(), max_size=3)),
    }
    if draw(st.booleans()):
        event["live_brokers"] = draw(broker_ids)
    return event


def damage(draw: st.DrawFn, record: dict[str, Any]) -> Any:
    """``record`` with one thing wrong (or none)."""
    kind = draw(
        st.sampled_from(
            (
                "valid",
                "valid",
                "missing",
                "wrong_type",
                "out_of_range",
                "huge",
                "integral_float",
                "empty_topic",
                "unknown_field",
                "null_optional",
                "list_item",
                "other_type",
                "not_object",
                "inside",
            )
        )
    )
    field = draw(st.sampled_from(sorted(record)))
    if kind == "missing":
        del record[field]
    elif kind == "wrong_type":
        record[field] = draw(st.sampled_from(("5", None, True, 1.5, [], {}, "")))
    elif kind == "out_of_range" and field in LIMITS:
        low, high = LIMITS[field]
        record[field] = draw(st.sampled_from((low - 1, high + 1)))
    elif kind == "huge" and field in LIMITS:
        record[field] = draw(st.sampled_from((10**30, 2**64, 1e300)))
    elif kind == "integral_float" and field in LIMITS:
        record[field] = float(LIMITS[field][0] + draw(st.integers(0, 9)))
    elif kind == "empty_topic" and "topic" in record:
        record["topic"] = ""
    elif kind == "unknown_field":
        record[draw(st.sampled_from(("x", "", "Ts", "type ")))] = draw(st.sampled_from((1, None)))
    elif kind == "null_optional":
        record[draw(st.sampled_from(("controller_id", "metadata_offset", "live_brokers")))] = None
    elif kind == "list_item" and field in LISTS:
        record[field] = [*record[field], draw(st.sampled_from((-1, "1", 1.0, None, 2**31)))]
    elif kind == "other_type":
        record["type"] = draw(st.sampled_from(("IsrChange", "BrokerConfig", "leaderandisr", 3)))
    elif kind == "not_object":
        return draw(st.sampled_from(([record], 42, "text", None)))
    elif kind == "inside" and record.get("partitions"):
        record["partitions"][0] = damage(draw, record["partitions"][0])
    return record


@st.composite
def record_values(draw: st.DrawFn) -> list[bytes | None]:
    """The JSON text of a value, and that text broken at the byte level."""
    text = json.dumps(damage(draw, draw(valid_event())), ensure_ascii=draw(st.booleans()))
    data = text.encode("utf-8")
    cut = draw(st.integers(0, len(data)))
    body = data[1:] if data.startswith(b"{") and len(data) > 2 else b"}"
    return [
        data,
        data[:cut] + draw(st.sampled_from((b"\xff", b"\xed\xa0\x80"))) + data[cut:],
        data[: min(cut, len(data) - 1)],  # truncated
        None,
        b'{"ts": -1, ' + body,  # a duplicate key: the last one wins, as in json.loads
        b'{"controller_epoch": NaN, ' + body,
    ]


# No shrinking: a failure names the value in its message, and shrinking batches is slow.
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=(Phase.explicit, Phase.generate),
)
@given(forms=st.lists(record_values(), min_size=40, max_size=40))
def test_bulk_decoder_and_explaining_validator_agree(forms: list[list[bytes | None]]) -> None:
    values = [value for record in forms for value in record]
    events, dead = decode_controller_events(values)
    valid_at, dead_at = dict(events), dict(dead)
    assert sorted([*valid_at, *dead_at]) == list(range(len(values)))  # each once, in order
    assert [i for i, _ in events] == sorted(valid_at)
    for index, value in enumerate(values):
        expected = parse_record(Source.CONTROLLER_EVENTS, value)
        if isinstance(expected, DeadLetter):
            assert dead_at.get(index) == expected, value
        else:
            assert valid_at.get(index) == expected, value


def test_valid_leader_and_isr_and_update_metadata_never_reach_the_schema(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The C path decides them: with the explaining parser broken, they still decode."""

    def broken(*_: Any) -> Any:
        raise AssertionError("parse_record called")

    election = {
        "type": "LeaderAndIsr",
        "ts": 5,
        "topic": "t",
        "partition": 2,
        "leader": 1,
        "leader_epoch": 3,
        "isr": [1, 2],
        "replicas": [1, 2, 3],
        "partition_epoch": 4,
        "controller_id": 9,
        "controller_epoch": 7,
    }
    update = {
        "type": "UpdateMetadata",
        "ts": 6,
        "broker": 2,
        "partitions": [
            {
                "topic": "t",
                "partition": 2,
                "leader": -2,
                "leader_epoch": 3,
                "isr": [],
                "replicas": [1],
                "offline_replicas": [1],
            }
        ],
    }
    monkeypatch.setattr(state.controller_decoder, "parse_record", broken)
    events, dead = decode_controller_events([json.dumps(v).encode() for v in (election, update)])
    assert dead == []
    first, second = events[0][1], events[1][1]
    assert isinstance(first, LeaderAndIsr)
    assert isinstance(second, UpdateMetadata)
    assert (first.isr, first.replicas, first.controller_epoch, first.metadata_offset) == (
        (1, 2),
        (1, 2, 3),
        7,
        None,
    )
    assert (second.broker, second.partitions[0].leader, second.live_brokers) == (2, -2, None)


ELECTION = {
    "type": "LeaderAndIsr",
    "ts": 5,
    "topic": "t",
    "partition": 2,
    "leader": 1,
    "leader_epoch": 3,
    "isr": [1],
    "replicas": [1],
    "partition_epoch": 4,
}
STATE = {
    "topic": "t",
    "partition": 2,
    "leader": 1,
    "leader_epoch": 3,
    "isr": [1],
    "replicas": [1],
    "offline_replicas": [],
}
UPDATE = {"type": "UpdateMetadata", "ts": 6, "broker": 2, "partitions": [STATE]}


def bounds(template: dict[str, Any], fields: tuple[str, ...]) -> list[tuple[str, int, bool]]:
    """Each integer field at its bounds (valid) and one past them (invalid)."""
    return [
        (name, value, valid)
        for name in fields
        for value, valid in (
            (LIMITS[name][0], True),
            (LIMITS[name][1], True),
            (LIMITS[name][0] - 1, False),
            (LIMITS[name][1] + 1, False),
        )
    ]


@pytest.mark.parametrize(
    ("where", "name", "value", "valid"),
    [
        ("election", *case)
        for case in bounds(
            ELECTION,
            (
                "ts",
                "partition",
                "leader",
                "leader_epoch",
                "partition_epoch",
                "controller_id",
                "controller_epoch",
                "metadata_offset",
            ),
        )
    ]
    + [("update", *case) for case in bounds(UPDATE, ("ts", "broker", "controller_epoch"))]
    + [("state", *case) for case in bounds(STATE, ("partition", "leader", "leader_epoch"))]
    + [
        ("isr", "isr", value, valid)
        for value, valid in ((0, True), (INT32_MAX, True), (-1, False), (INT32_MAX + 1, False))
    ],
)
def test_every_bound_is_the_schemas(where: str, name: str, value: int, valid: bool) -> None:
    """Hand-read from the schema's $defs: the bounds are valid, one past them is not, and
    the bulk decoder says the same thing as parse_record (same event or dead letter)."""
    if where == "election":
        record: dict[str, Any] = {**ELECTION, name: value}
    elif where == "update":
        record = {**UPDATE, name: value}
    elif where == "state":
        record = {**UPDATE, "partitions": [{**STATE, name: value}]}
    else:
        record = {**ELECTION, "isr": [1, value]}
    raw = json.dumps(record).encode()
    events, dead = decode_controller_events([raw])
    expected = parse_record(Source.CONTROLLER_EVENTS, raw)
    assert isinstance(expected, DeadLetter) is (not valid)
    assert (dead[0][1] if dead else events[0][1]) == expected
