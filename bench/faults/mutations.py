"""Fuzzed input records for the fault campaign: structure-aware mutations of valid events.

The seeds are valid records as the simulator writes them (``streaming.feeds.simulator``: every
kind of controller event and fetch responses, with their keys). Each mutation kind breaks
one thing the contract (docs/event-contract.md) says about a record; some of its results
are still valid records (a field type changed to an integral float, a duplicate key whose
last value is valid, an in-range number), which :func:`contract_verdict` tells apart.

:func:`contract_verdict` is the campaign's own judge, independent of the job's decoders
(msgspec structs, fastjsonschema, the job's explaining validator): strict UTF-8, the
standard library's JSON parser without the NaN/Infinity extensions, every string
representable in UTF-8, then ``jsonschema`` against the bundled schemas of
``conf/schemas``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from state.events import Source
from state.fetch_decoder import MAX_REPLICAS
from streaming.feeds.simulator.cluster import ClusterSimulator
from streaming.feeds.simulator.scenario import load_scenario
from streaming.feeds.wire import InputRecord

SCHEMAS = Path(__file__).resolve().parents[2] / "conf" / "schemas"
SCHEMA_FILES = {
    Source.CONTROLLER_EVENTS: "controller-events.schema.json",
    Source.FETCH_RESPONSES: "fetch-responses.schema.json",
}
TEN_MB = 10 * 1024 * 1024
DEEP = 100_000  # nested arrays: far past every JSON parser's recursion limit
HUGE_ARRAY = 100_000
START_MS = 1_700_000_000_000
OTHER = {
    Source.CONTROLLER_EVENTS: Source.FETCH_RESPONSES,
    Source.FETCH_RESPONSES: Source.CONTROLLER_EVENTS,
}


@dataclass(frozen=True)
class Fuzzed:
    """One record to send: ``source`` names the input topic it goes to (which may not be
    the one its content belongs to); ``key`` and ``value`` are the Kafka record's bytes."""

    kind: str
    source: Source
    key: bytes | None
    value: bytes | None


def seeds(scenario: str = "demo", seconds: int = 30, seed: int = 7) -> list[InputRecord]:
    """Valid records of a simulated cluster, as the simulator writes them."""
    simulator = ClusterSimulator(load_scenario(scenario), seed=seed, start_ms=START_MS)
    return list(simulator.events(simulator.start_ms + seconds * 1000))


def encode(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# ------------------------------------------------------------------- the judge


@cache
def _validator(source: Source) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / SCHEMA_FILES[source]).read_text(encoding="utf-8"))
    return Draft202012Validator(schema)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _utf8_strings(value: object) -> bool:
    """Every string (and key) of ``value`` is Unicode text UTF-8 can hold: a JSON escape
    of a lone surrogate (``"\\ud800"``) parses into one that it cannot."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def _shrunk(value: Any) -> Any:
    """``value`` with every array of identical items cut to ``MAX_REPLICAS + 1`` items.
    The schemas' only keyword about an array's length is the replica lists' ``maxItems``
    (``MAX_REPLICAS``), and none is about uniqueness (uniqueItems, contains): such an
    array of more items is valid exactly when the cut one is, and the verdict comes
    without validating 100,000 items one by one (seconds each with jsonschema)."""
    if isinstance(value, dict):
        return {name: _shrunk(item) for name, item in value.items()}
    if isinstance(value, list):
        if len(value) > MAX_REPLICAS + 1 and all(item == value[0] for item in value):
            return [_shrunk(value[0])] * (MAX_REPLICAS + 1)
        return [_shrunk(item) for item in value]
    return value


def contract_verdict(source: Source, value: bytes | None) -> bool:
    """Whether ``value`` is a valid record of ``source``'s topic per the contract."""
    if value is None:
        return False
    try:
        obj = json.loads(value.decode("utf-8"), parse_constant=_no_constants)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    if not isinstance(obj, dict) or not _utf8_strings(obj):
        return False
    try:
        shrunk = _shrunk(obj)
    except RecursionError:  # deep nesting: no huge array to cut in it
        shrunk = obj
    try:
        return bool(_validator(source).is_valid(shrunk))
    except RecursionError:  # a deeply nested field the schema reads
        return False


# ------------------------------------------------------------------- mutations

Mutation = Callable[[random.Random, InputRecord], Fuzzed]
_OTHER_VALUES: tuple[object, ...] = (
    None,
    True,
    False,
    "7",
    "",
    1.5,
    7.0,
    -0.0,
    [],
    {},
    [1],
    {"a": 1},
    0,
)
_NUMBERS = (
    -1,
    -2,
    -3,
    0,
    2**31 - 1,
    2**31,
    999_999,
    1_000_000,
    2**53 + 1,
    2**63 - 1,
    2**63,
    -(2**63),
)
_PAST_INT64 = (
    "18446744073709551616",
    "9223372036854775808",
    "-9223372036854775809",
    "1" + "0" * 40,
    "1e400",
    "-1e400",
    "1e19",
    "123456789012345678901234567890.0",
)
_NAN = ("NaN", "Infinity", "-Infinity", "nan", "inf", "+1", "0x10", "01", "1.", ".5", "1e")
_ENUMS = (
    "leaderandisr",
    "LeaderAndIsr ",
    "",
    "Unknown",
    "FetchResponse",
    "LEADER_AND_ISR",
    "IsrChanges",
    "\u2028",
    "LeaderAnd\u0130sr",
)
_BAD_UTF8 = (
    b"\xff",
    b"\xc3\x28",
    b"\xed\xa0\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\xc0\xaf",
    b"\xe2\x82",
    b"\x80",
)
_NOT_OBJECTS = (b"[]", b'"text"', b"42", b"true", b"null", b"[{}]", b'[{"type":"BrokerConfig"}]')
_EMPTY = (b"", b" ", b"\n", b"{}", b"\x00", b"{ }")


def _record(
    kind: str,
    seed: InputRecord,
    value: object,
    *,
    raw: bytes | None = None,
    source: Source | None = None,
    key: bytes | str | None = "keep",
) -> Fuzzed:
    key_bytes = seed.key.encode() if key == "keep" else key
    assert not isinstance(key_bytes, str)
    body = raw if raw is not None else encode(value)
    return Fuzzed(kind, source or seed.source, key_bytes, body)


def _fields(value: dict[str, Any]) -> list[str]:
    return [name for name in value if name != "type"] or list(value)


def _paths(value: object, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path into ``value`` (object keys, array indexes), the record itself excluded."""
    if isinstance(value, dict):
        for name, item in value.items():
            yield (*prefix, name)
            yield from _paths(item, (*prefix, name))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):
            yield (*prefix, index)
            yield from _paths(item, (*prefix, index))


def _set(value: Any, path: tuple[Any, ...], new: object) -> Any:
    copy = json.loads(json.dumps(value))
    target = copy
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = new
    return copy


def _numeric_paths(value: object) -> list[tuple[Any, ...]]:
    paths = []
    for path in _paths(value):
        target: Any = value
        for part in path:
            target = target[part]
        if isinstance(target, int) and not isinstance(target, bool):
            paths.append(path)
    return paths


def field_type(rng: random.Random, seed: InputRecord) -> Fuzzed:
    value = dict(seed.value)
    path = rng.choice(list(_paths(value)))
    return _record("field_type", seed, _set(value, path, rng.choice(_OTHER_VALUES)))


def drop_field(rng: random.Random, seed: InputRecord) -> Fuzzed:
    value = json.loads(json.dumps(seed.value))
    paths = [p for p in _paths(value) if isinstance(p[-1], str)]
    path = rng.choice(paths)
    target = value
    for part in path[:-1]:
        target = target[part]
    del target[path[-1]]
    return _record("drop_field", seed, value)


def duplicate_field(rng: random.Random, seed: InputRecord) -> Fuzzed:
    """A key twice in the object (RFC 8259 leaves it to the parser: the last one wins in
    Python's, msgspec's and most others), the copy before or after the original."""
    value = dict(seed.value)
    name = rng.choice(list(value))
    other = rng.choice((value[name], *_OTHER_VALUES))
    extra = encode({name: other})[1:-1]
    body = encode(value)
    raw = (
        (b"{" + extra + b"," + body[1:])
        if rng.random() < 0.5
        else (body[:-1] + b"," + extra + b"}")
    )
    return _record("duplicate_field", seed, None, raw=raw)


def out_of_range(rng: random.Random, seed: InputRecord) -> Fuzzed:
    value = dict(seed.value)
    path = rng.choice(_numeric_paths(value) or [("ts",)])
    return _record("out_of_range", seed, _set(value, path, rng.choice(_NUMBERS)))


def _replace_number(
    rng: random.Random, seed: InputRecord, kind: str, texts: Sequence[str]
) -> Fuzzed:
    """A numeric field's JSON text replaced (texts json.dumps would not write)."""
    value = dict(seed.value)
    path = rng.choice(_numeric_paths(value) or [("ts",)])
    marker = "\u0000fuzz\u0000"
    body = encode(_set(value, path, marker))
    raw = body.replace(encode(marker), rng.choice(texts).encode())
    return _record(kind, seed, None, raw=raw)


def past_int64(rng: random.Random, seed: InputRecord) -> Fuzzed:
    return _replace_number(rng, seed, "past_int64", _PAST_INT64)


def nan_infinity(rng: random.Random, seed: InputRecord) -> Fuzzed:
    return _replace_number(rng, seed, "nan_infinity", _NAN)


def extreme_ts(rng: random.Random, seed: InputRecord) -> Fuzzed:
    """Event times the contract allows (0 to int64's largest) but no cluster writes."""
    value = dict(seed.value)
    value["ts"] = rng.choice(
        (
            0,
            1,
            2**31,
            2**53,
            2**62,
            2**63 - 1,
            253_402_300_799_999,
            7_258_118_399_999,
            7_258_118_400_000,
        )
    )
    return _record("extreme_ts", seed, value)


def wrong_enum(rng: random.Random, seed: InputRecord) -> Fuzzed:
    value = dict(seed.value)
    if seed.source is Source.CONTROLLER_EVENTS:
        value["type"] = rng.choice((*_ENUMS, 5, None))
    else:  # the fetch's only enumeration-like field: a Kafka error name
        value["error"] = rng.choice(("", "none", "NOT_LEADER_OR_FOLLOWER", "\u0000", 3, None))
    return _record("wrong_enum", seed, value)


def huge_array(rng: random.Random, seed: InputRecord) -> Fuzzed:
    value = dict(seed.value)
    lists = [p for p in _paths(value) if isinstance(_get(value, p), list)]
    item = rng.choice((1, 2, 3, "x", {"id": 1, "epoch": 1}))
    path = rng.choice(lists) if lists and rng.random() < 0.8 else ("extra",)
    return _record("huge_array", seed, _set(value, path, [item] * HUGE_ARRAY))


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


def swapped_topic(rng: random.Random, seed: InputRecord) -> Fuzzed:
    """A valid record of one input topic written to the other."""
    return _record("swapped_topic", seed, seed.value, source=OTHER[seed.source])


def invalid_utf8(rng: random.Random, seed: InputRecord) -> Fuzzed:
    body = encode(seed.value)
    quotes = [i for i, byte in enumerate(body) if byte == ord('"')]
    at = rng.choice(quotes) + 1 if quotes else len(body)
    return _record("invalid_utf8", seed, None, raw=body[:at] + rng.choice(_BAD_UTF8) + body[at:])


def lone_surrogate(rng: random.Random, seed: InputRecord) -> Fuzzed:
    """A string with an escaped lone surrogate: valid JSON text, but not Unicode text
    UTF-8 can hold (the contract's records are UTF-8)."""
    value = dict(seed.value)
    strings = [p for p in _paths(value) if isinstance(_get(value, p), str) and p != ("type",)]
    path = rng.choice(strings) if strings else ("topic",)
    marker = "fuzz-surrogate-marker"
    body = encode(_set(value, path, marker))
    escape = rng.choice(("\\ud800", "\\udfff", "\\uDBFF", "x\\ud834"))
    return _record("lone_surrogate", seed, None, raw=body.replace(marker.encode(), escape.encode()))


def ten_mb(rng: random.Random, seed: InputRecord) -> Fuzzed:
    """A 10 MB value: a padding field (valid), a 10 MB topic name, or 10 MB of garbage."""
    value = dict(seed.value)
    choice = rng.randrange(3)
    if choice == 0:
        return _record("10mb_value", seed, {**value, "padding": "p" * TEN_MB})
    if choice == 1 and "topic" in value:
        return _record("10mb_value", seed, {**value, "topic": "t" * TEN_MB})
    return _record("10mb_value", seed, None, raw=b"{" + b"x" * TEN_MB)


def deep_nesting(rng: random.Random, seed: InputRecord) -> Fuzzed:
    depth = rng.choice((DEEP, 1_000, 990, 50))
    nested = b"[" * depth + b"]" * depth
    choice = rng.randrange(3)
    if choice == 0:
        return _record("deep_nesting", seed, None, raw=nested)
    body = encode(seed.value)
    name = b'"extra"' if choice == 1 else b'"' + rng.choice(list(seed.value)).encode() + b'"'
    return _record("deep_nesting", seed, None, raw=body[:-1] + b"," + name + b":" + nested + b"}")


def empty_value(rng: random.Random, seed: InputRecord) -> Fuzzed:
    return _record("empty_value", seed, None, raw=rng.choice(_EMPTY))


def null_value(rng: random.Random, seed: InputRecord) -> Fuzzed:
    """A record with no value at all (Kafka's null, a tombstone)."""
    return Fuzzed("null_value", seed.source, seed.key.encode(), None)


def null_key(rng: random.Random, seed: InputRecord) -> Fuzzed:
    """A valid value without a key (the contract asks for one; the job never needs it)."""
    return _record("null_key", seed, seed.value, key=None)


def not_an_object(rng: random.Random, seed: InputRecord) -> Fuzzed:
    return _record("not_an_object", seed, None, raw=rng.choice(_NOT_OBJECTS))


def truncated(rng: random.Random, seed: InputRecord) -> Fuzzed:
    body = encode(seed.value)
    return _record("truncated", seed, None, raw=body[: rng.randrange(1, len(body))])


MUTATIONS: dict[str, Mutation] = {
    "field_type": field_type,
    "drop_field": drop_field,
    "duplicate_field": duplicate_field,
    "out_of_range": out_of_range,
    "past_int64": past_int64,
    "nan_infinity": nan_infinity,
    "extreme_ts": extreme_ts,
    "wrong_enum": wrong_enum,
    "huge_array": huge_array,
    "swapped_topic": swapped_topic,
    "invalid_utf8": invalid_utf8,
    "lone_surrogate": lone_surrogate,
    "10mb_value": ten_mb,
    "deep_nesting": deep_nesting,
    "empty_value": empty_value,
    "null_value": null_value,
    "null_key": null_key,
    "not_an_object": not_an_object,
    "truncated": truncated,
}
EXPENSIVE = {"10mb_value": 10, "huge_array": 200, "deep_nesting": 400}
"""Most records of these kinds in a campaign of 10,000 (each is 0.2 to 10 MB on the wire);
in proportion for another size, at least one of each."""


def fuzz(seed_records: Sequence[InputRecord], count: int, seed: int = 1) -> list[Fuzzed]:
    """``count`` fuzzed records, the kinds in turn (the expensive ones capped)."""
    rng = random.Random(seed)
    # half from each input topic: a simulated cluster writes ~100 fetches per controller event
    pools = [[r for r in seed_records if r.source is source] for source in Source]
    pools = [pool for pool in pools if pool]
    quota = {
        kind: max(1, EXPENSIVE[kind] * count // 10_000) if kind in EXPENSIVE else count
        for kind in MUTATIONS
    }
    out: list[Fuzzed] = []
    kinds = list(MUTATIONS)
    while len(out) < count:
        for kind in kinds:
            if quota[kind] > 0 and len(out) < count:
                quota[kind] -= 1
                out.append(MUTATIONS[kind](rng, rng.choice(rng.choice(pools))))
    return out
