"""The bulk fetch decoder and the explaining validator (jsonschema) agree on every record.

Hypothesis builds batches of record values (over 10,000 in all): valid ones with boundary
values, and every kind of invalid one: missing fields, wrong types, values out of range
by one, huge numbers, integral floats (valid for the schema), empty strings, unknown
fields nested thousands deep, ``null`` optional fields, values that are not objects,
broken or truncated JSON, invalid UTF-8, duplicate keys, a missing value. For each, the
verdict and the dead-letter reason and detail of ``decode_fetches`` (one batch) are
those of ``parse_record`` (one record at a time, jsonschema for the reason), a valid
record's columns are its fields, and jsonschema itself says valid exactly when the bulk
decoder accepts.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from state.event_parser import parse_json_line, parse_record, schema_validator, utf8_encodable
from state.events import DeadLetter, DeadLetterReason, FetchResponse, Source
from state.fetch_decoder import (
    INT_COLUMNS,
    DecodedFetches,
    decode_fetches,
    refused_fetch_values,
)
from state.fetch_pack import (
    PACK_MAGIC,
    decode_fetch_pack,
    decode_fetch_records,
    encode_fetch_pack,
    framed_pack,
    is_fetch_pack,
)

INT64_MAX, INT32_MAX = 2**63 - 1, 2**31 - 1
MAX_TIME = 7_258_118_399_999  # the last ms before 2200-01-01 UTC
FIELDS = (
    "ts",
    "topic",
    "partition",
    "leader",
    "follower",
    "leader_epoch",
    "fetch_offset",
    "leader_leo",
    "high_watermark",
)
LIMITS = {  # the schema's range of each integer field
    "ts": (0, MAX_TIME),
    "partition": (0, 999_999),
    "leader": (0, INT32_MAX),
    "follower": (0, INT32_MAX),
    "leader_epoch": (0, INT32_MAX),
    "fetch_offset": (0, INT64_MAX),
    "leader_leo": (0, INT64_MAX),
    "high_watermark": (0, INT64_MAX),
    "log_start_offset": (-1, INT64_MAX),
    "bytes": (0, INT64_MAX),
}
BATCHES = 25
RECORDS = 40  # per batch, each in 10 forms: 10,000 values in all

ints_in = {  # the bounds, next to them, and a few values between (sampled: cheap to draw)
    name: st.sampled_from((low, high, low + 1, high - 1, (low + high) // 2, 7, 123_456))
    for name, (low, high) in LIMITS.items()
}
# Sampled, not generated character by character: the test must stay a few seconds long.
names = st.sampled_from(("orders", "t", "ü-topic", " ", "a" * 249, "\x00", "😀", "\u2028"))
json_any = st.sampled_from(
    (None, True, 0, -1.5, 10**40, "", "x", [], {}, [[1, {"a": None}]], {"": {"ts": -1}})
)


@st.composite
def valid_record(draw: st.DrawFn) -> dict[str, Any]:
    record: dict[str, Any] = {name: draw(ints_in[name]) for name in LIMITS if name in FIELDS}
    record["topic"] = draw(names)
    for optional in ("log_start_offset", "bytes"):
        if draw(st.booleans()):
            record[optional] = draw(ints_in[optional])
    if draw(st.booleans()):
        record["error"] = draw(st.sampled_from(("NONE", "NOT_LEADER_OR_FOLLOWER", "x")))
    return record


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    """A JSON value: a valid record, or one with one thing wrong."""
    record = draw(valid_record())
    kind = draw(
        st.sampled_from(
            (
                "valid",
                "valid",
                "valid",
                "missing",
                "wrong_type",
                "out_of_range",
                "huge",
                "integral_float",
                "empty_string",
                "unknown_field",
                "deep",
                "null_optional",
                "not_object",
            )
        )
    )
    field = draw(st.sampled_from(sorted(record)))
    if kind == "missing" and field in FIELDS:
        del record[field]
    elif kind == "wrong_type":
        record[field] = draw(st.sampled_from(("5", None, True, 1.5, [], {}, "")))
    elif kind == "out_of_range" and field in LIMITS:
        low, high = LIMITS[field]
        record[field] = draw(st.sampled_from((low - 1, high + 1)))
    elif kind == "huge" and field in LIMITS:
        record[field] = draw(st.sampled_from((10**30, -(10**30), 2**64, 1e300)))
    elif kind == "integral_float" and field in LIMITS:
        record[field] = float(LIMITS[field][0] + draw(st.integers(0, 1000)))
    elif kind == "empty_string":
        record[draw(st.sampled_from(("topic", "error")))] = ""
    elif kind == "unknown_field":
        record[draw(st.sampled_from(("x", "", "Ts", "ts ", "é", "topic\u0000")))] = draw(json_any)
    elif kind == "deep":
        return ("deep", record, draw(st.sampled_from((10, 900, 5000))))
    elif kind == "null_optional":
        record[draw(st.sampled_from(("log_start_offset", "bytes", "error")))] = None
    elif kind == "not_object":
        return draw(st.sampled_from(([record], 42, "text", None, [])))
    return record


@st.composite
def record_values(draw: st.DrawFn) -> list[bytes | None]:
    """The JSON text of a value, and that text broken in each way at the byte level."""
    value = draw(mutated())
    if isinstance(value, tuple):  # an unknown field nested ``depth`` arrays deep
        _, record, depth = value
        text = json.dumps(record)[:-1] + ', "nested": ' + "[" * depth + "]" * depth + "}"
    else:
        text = json.dumps(value, ensure_ascii=draw(st.booleans()))
    data = text.encode("utf-8")
    cut = draw(st.integers(0, len(data)))
    body = data[1:] if data.startswith(b"{") and len(data) > 2 else b"}"
    return [
        data,
        data[:cut] + draw(st.sampled_from((b"\xff", b"\xc3", b"\xed\xa0\x80"))) + data[cut:],
        data[: min(cut, len(data) - 1)],  # truncated
        draw(st.sampled_from((b"", b"{}", b"[", b"\x00", b"nul", b"1 2", b'"ts"'))),
        None,
        b'{"ts": -1, ' + body,  # a duplicate key: the last one wins, as in json.loads
        b" \n\t" + data + b"\r\n ",
        b"\xef\xbb\xbf" + data,  # a byte order mark
        b'{"bytes": NaN, ' + body,
        b'{"topic": "\\ud800", ' + body,  # a lone surrogate
    ]


def not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (RFC 8259 has no NaN or Infinity)")


def schema_says_valid(value: bytes | None) -> bool | None:
    """jsonschema's own verdict on a value that is JSON at all (None when it is not), and
    False for an escaped lone surrogate ("\\ud800"): JSON, but not the UTF-8 text the
    contract asks for (no UTF-8 encoder takes it)."""
    if value is None:
        return None
    try:
        obj = json.loads(value.decode("utf-8"), parse_constant=not_json)
    except (ValueError, RecursionError):
        return None
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return bool(schema_validator(Source.FETCH_RESPONSES).is_valid(obj))


# No shrinking: a failure names the value in its message, and shrinking batches is slow.
@settings(
    max_examples=BATCHES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=(Phase.explicit, Phase.generate),
)
@given(forms=st.lists(record_values(), min_size=RECORDS, max_size=RECORDS))
def test_bulk_decoder_and_explaining_validator_agree(forms: list[list[bytes | None]]) -> None:
    values = [value for record in forms for value in record]
    decoded = decode_fetches(values)
    valid_at = {int(p): i for i, p in enumerate(decoded.position)}
    dead_at = dict(decoded.dead)
    assert sorted([*valid_at, *dead_at]) == list(range(len(values)))  # each once
    for index, value in enumerate(values):
        expected = parse_record(Source.FETCH_RESPONSES, value)
        if isinstance(expected, DeadLetter):
            assert dead_at.get(index) == expected, value
            assert schema_says_valid(value) is not True, value
            continue
        assert isinstance(expected, FetchResponse)
        assert index in valid_at, value
        assert schema_says_valid(value) is True, value
        row = valid_at[index]
        got = {name: int(decoded.ints[name][row]) for name in INT_COLUMNS}
        assert got == {name: getattr(expected, name) for name in INT_COLUMNS}, value
        assert (decoded.topic[row], decoded.error[row]) == (expected.topic, expected.error)


def test_a_clean_batch_takes_the_bulk_path_and_keeps_input_order() -> None:
    values = [
        json.dumps(
            {
                "ts": 10 + i,
                "topic": "t",
                "partition": i,
                "leader": 1,
                "follower": 2,
                "leader_epoch": 0,
                "fetch_offset": i,
                "leader_leo": 9,
                "high_watermark": 0,
            }
        ).encode()
        for i in range(3)
    ]
    decoded = decode_fetches([*values, b"{", values[0]])
    assert decoded.position.tolist() == [0, 1, 2, 4]
    assert decoded.ints["ts"].tolist() == [10, 11, 12, 10]
    assert [(i, letter.reason.value) for i, letter in decoded.dead] == [(3, "invalid_json")]


# ------------------------------------------------------------------- packed records
#
# The same rows travel packed (state.fetch_pack): a pack's row is the JSON object of its
# non-null cells, so each row must get the verdict, columns, reason and detail that the
# per-record path gives that object as one JSON value. The packs here are written with
# the Arrow types the rows' values have (a string ``ts`` column, a float one, a struct
# unknown field...), not only the shipped writer's: another producer may write them.
# A row Arrow cannot hold (not an object, an integer past uint64, a lone surrogate) is
# left out: no pack can carry it.

PACKS = 250
ROWS = 50  # per example, some left out (about one in seven): over 10,000 packed rows in all


def _kind(value: Any) -> str | None:
    """The Arrow type a cell of ``value`` gets in its column; None if none holds it."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        if -(2**63) <= value <= INT64_MAX:
            return "int64"
        return "uint64" if 0 <= value < 2**64 else None
    if isinstance(value, str):
        return "string" if utf8_encodable(value) else None
    return type(value).__name__  # float, list, dict: Arrow infers the type


def packed_rows(rows: list[Any]) -> tuple[list[bytes], list[dict[str, Any]]]:
    """``rows`` in packs whose columns each hold one kind of value (a row lacking a column
    has a null cell there), and the rows as the packs hold them, in pack order."""
    groups: list[tuple[dict[str, str], list[dict[str, Any]]]] = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        kinds = {name: _kind(value) for name, value in row.items() if value is not None}
        if None in kinds.values():
            continue
        for columns, members in groups:
            if all(columns.get(name, kind) == kind for name, kind in kinds.items()):
                columns.update(kinds)
                members.append(without_nulls(row))
                break
        else:
            groups.append((dict(kinds), [without_nulls(row)]))
    packs: list[bytes] = []
    held: list[dict[str, Any]] = []
    for columns, members in groups:
        for part in _writable(columns, members):
            packs.append(framed_pack(part))
            held += [without_nulls(row) for row in part.to_pylist()]
    return packs, held


def _writable(columns: dict[str, str], rows: list[dict[str, Any]]) -> list[pa.RecordBatch]:
    """The rows as record batches: all in one, or one a row where Arrow refuses the whole
    (a nested value it cannot type), leaving out a row it refuses alone."""
    names = list(columns)

    def batch(members: list[dict[str, Any]]) -> pa.RecordBatch:
        arrays = []
        for name in names:
            cells = [row.get(name) for row in members]
            kind = columns[name]
            arrow = {"int64": pa.int64(), "uint64": pa.uint64(), "string": pa.string()}
            arrays.append(pa.array(cells, arrow.get(kind)))
        return pa.RecordBatch.from_arrays(arrays, names=names)

    try:
        return [batch(rows)]
    except (pa.ArrowException, ValueError, TypeError, OverflowError, RecursionError):
        pass
    out = []
    for row in rows:
        try:
            out.append(batch([row]))
        except (pa.ArrowException, ValueError, TypeError, OverflowError, RecursionError):
            continue
    return out


def without_nulls(row: dict[str, Any]) -> dict[str, Any]:
    """The JSON object a pack's row stands for: a null cell is an absent field."""
    return {name: value for name, value in row.items() if value is not None}


def per_record(rows: list[dict[str, Any]]) -> list[bytes]:
    return [json.dumps(row, ensure_ascii=False).encode("utf-8") for row in rows]


def assert_same_verdicts(packed: DecodedFetches, expected: DecodedFetches, rows: Any) -> None:
    """The same applied rows (positions, columns) and the same dead letters (position,
    reason, detail)."""
    assert packed.position.tolist() == expected.position.tolist(), rows
    for name in INT_COLUMNS:
        assert packed.ints[name].tolist() == expected.ints[name].tolist(), name
    assert (packed.topic, packed.error) == (expected.topic, expected.error)
    got = [(i, letter.reason, letter.detail) for i, letter in packed.dead]
    assert got == [(i, letter.reason, letter.detail) for i, letter in expected.dead], rows


@settings(
    max_examples=PACKS,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=(Phase.explicit, Phase.generate),
)
@given(rows=st.lists(mutated(), min_size=ROWS, max_size=ROWS), data=st.data())
def test_packed_rows_get_the_verdicts_of_the_per_record_path(
    rows: list[Any], data: st.DataObject
) -> None:
    rows = [row[1] if isinstance(row, tuple) else row for row in rows]  # "deep": its record
    packs, held = packed_rows(rows)
    assert len(held) >= ROWS // 2
    values = per_record(held)
    # Row by row, the per-record path (decode_fetches: parse_record's verdicts, as the
    # test above shows) on the same rows as JSON; pack by pack, since a pack's rows share
    # its index in decode_fetch_records.
    start, valid, sizes = 0, [], []
    for pack in packs:
        alone = decode_fetch_pack(pack)
        assert isinstance(alone, DecodedFetches)
        size = len(alone) + len(alone.dead)
        expected = decode_fetches(values[start : start + size])
        assert_same_verdicts(alone, expected, pack)
        valid += [held[start + i] for i in expected.position.tolist()]
        start += size
        sizes.append(size)
    assert start == len(held)
    mixed = decode_fetch_records([values[0], *packs[:2]])  # packs beside a JSON record
    assert len(mixed) + len(mixed.dead) == 1 + sum(sizes[:2])
    # All of them in one batch, where packs of one schema are judged as one table: each
    # row gets the verdict its pack gives it alone, under its record and row.
    assert_judged_as_alone(decode_fetch_records([values[0], *packs]), [values[0], *packs])
    # The valid rows as a producer makes them (integers, no 5.0) through the shipped
    # writer: the same columns again.
    valid = [row for row in valid if not any(isinstance(cell, float) for cell in row.values())]
    shipped = decode_fetch_pack(encode_fetch_pack(valid))
    assert isinstance(shipped, DecodedFetches)
    assert_same_verdicts(shipped, decode_fetches(per_record(valid)), valid)
    # Broken packs are dead whole, with their own reason, and never stop the batch.
    pack = data.draw(st.sampled_from(packs))
    broken = broken_pack(pack, data)
    got = decode_fetch_records([values[0], broken, values[0]])
    letters = [(i, letter.reason) for i, letter in got.dead]
    if broken.startswith(PACK_MAGIC) and not isinstance(decode_fetch_pack(broken), DecodedFetches):
        assert (1, DeadLetterReason.INVALID_PACK) in letters, broken
        assert [i for i, _ in letters].count(1) == 1
    elif not broken.startswith(PACK_MAGIC):  # no longer a pack: judged as a JSON record
        assert (1, DeadLetterReason.INVALID_JSON) in letters
    else:  # a flipped data byte can leave a readable pack: its rows judged as any rows
        readable = decode_fetch_pack(broken)
        assert isinstance(readable, DecodedFetches)
        objs = pa.ipc.open_stream(broken[len(PACK_MAGIC) + 1 :]).read_all().to_pylist()
        expected = decode_fetches(per_record([without_nulls(row) for row in objs]))
        assert_same_verdicts(readable, expected, broken)


def assert_judged_as_alone(together: DecodedFetches, values: list[bytes]) -> None:
    """``together`` (``decode_fetch_records(values)``) holds what each value decoded
    alone gives (``decode_fetch_pack`` for a pack, ``decode_fetches`` for JSON), with
    the value's index and, for a pack's row, its row."""
    positions: list[tuple[int, int]] = []
    ints: dict[str, list[int]] = {name: [] for name in INT_COLUMNS}
    texts: list[tuple[str, str]] = []
    letters: list[tuple[int, int | None, str, str]] = []
    for index, value in enumerate(values):
        alone = decode_fetch_pack(value) if is_fetch_pack(value) else decode_fetches([value])
        if isinstance(alone, DeadLetter):
            letters.append((index, None, alone.reason.value, alone.detail))
            continue
        packed = is_fetch_pack(value)
        positions += [(index, row if packed else -1) for row in alone.position.tolist()]
        for name in INT_COLUMNS:
            ints[name] += alone.ints[name].tolist()
        texts += list(zip(alone.topic, alone.error, strict=True))
        letters += [
            (index, row if packed else None, letter.reason.value, letter.detail)
            for row, letter in alone.dead
        ]
    assert together.pack_row is not None
    got = list(zip(together.position.tolist(), together.pack_row.tolist(), strict=True))
    assert got == positions
    for name in INT_COLUMNS:
        assert together.ints[name].tolist() == ints[name], name
    assert list(zip(together.topic, together.error, strict=True)) == texts
    assert [
        (index, letter.pack_row, letter.reason.value, letter.detail)
        for index, letter in together.dead
    ] == letters


def test_a_row_without_json_form_makes_only_its_own_pack_dead() -> None:
    """Packs of one schema are judged as one table; a row that has no JSON form (here a
    timestamp past Python's datetime) still makes only its own pack unreadable."""
    good = dict.fromkeys(INT_COLUMNS, 1) | {"topic": "t"}

    def pack(stamps: list[int | None]) -> bytes:
        batch = pa.RecordBatch.from_pylist([good] * len(stamps))
        return framed_pack(batch.append_column("bytes", pa.array(stamps, pa.timestamp("s"))))

    values = [pack([None, 0]), pack([None, 2**62]), pack([None, None]), b'{"ts": 1}']
    together = decode_fetch_records(values)
    assert together.position.tolist() == [0, 2, 2]
    assert [(i, letter.reason.value) for i, letter in together.dead] == [
        (0, "wrong_type"),
        (1, "invalid_pack"),
        (3, "missing_field"),
    ]
    assert_judged_as_alone(together, values)


def broken_pack(pack: bytes, data: st.DataObject) -> bytes:
    """``pack`` truncated, with a byte changed, of an unknown version, with bytes after
    its end, or reduced to its head."""
    how = data.draw(st.sampled_from(("truncate", "flip", "version", "trailing", "head")))
    if how == "truncate":
        return pack[: data.draw(st.integers(len(PACK_MAGIC) + 1, len(pack) - 1))]
    if how == "flip":
        where = data.draw(st.integers(len(PACK_MAGIC) + 1, len(pack) - 1))
        return (
            pack[:where] + bytes([pack[where] ^ data.draw(st.integers(1, 255))]) + pack[where + 1 :]
        )
    if how == "version":
        return PACK_MAGIC + bytes([data.draw(st.integers(2, 255))]) + pack[len(PACK_MAGIC) + 1 :]
    if how == "trailing":
        return pack + data.draw(st.sampled_from((b"\x00", b"{}", b"\xff" * 8)))
    return pack[: data.draw(st.integers(0, len(PACK_MAGIC) + 1))]


def test_a_pack_cannot_be_taken_for_a_json_record_nor_one_for_a_pack() -> None:
    record = json.dumps(
        dict.fromkeys(INT_COLUMNS, 1) | {"topic": "t"}, separators=(",", ":")
    ).encode()
    pack = encode_fetch_pack([json.loads(record)])
    assert not is_fetch_pack(record)
    assert not is_fetch_pack(b"\xef\xbb\xbf" + record)  # a byte order mark is not the magic
    assert is_fetch_pack(pack)
    with pytest.raises(UnicodeDecodeError):
        pack.decode("utf-8")  # so never a valid JSON record
    decoded = decode_fetch_records([record, pack, None])
    assert decoded.position.tolist() == [0, 1]
    assert [(i, letter.reason.value) for i, letter in decoded.dead] == [(2, "invalid_json")]


def test_json_records_and_packs_mixed_keep_input_order() -> None:
    def fetch(partition: int, **changes: Any) -> dict[str, Any]:
        value = dict.fromkeys(INT_COLUMNS, 1) | {"topic": "t", "partition": partition}
        return value | changes

    good_pack = encode_fetch_pack([fetch(1), fetch(2, ts=-1), fetch(3)])
    values = [
        json.dumps(fetch(0)).encode(),
        good_pack,
        b'{"ts": 1}',
        good_pack[:-1],
        json.dumps(fetch(4)).encode(),
    ]
    decoded = decode_fetch_records(values)
    assert decoded.position.tolist() == [0, 1, 1, 4]
    assert decoded.ints["partition"].tolist() == [0, 1, 3, 4]
    letters = [(i, letter.reason.value, letter.detail) for i, letter in decoded.dead]
    assert letters == [
        (1, "invalid_value", "ts must be >= 0"),
        (2, "missing_field", "missing required field topic"),
        (
            3,
            "invalid_pack",
            "truncated fetch pack (or bytes after its end): no end-of-stream marker last",
        ),
    ]


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=(Phase.explicit, Phase.generate),
)
@given(
    rows=st.lists(mutated(), min_size=40, max_size=40),
    valid=st.lists(valid_record(), min_size=1, max_size=40),
)
def test_the_bulk_check_of_values_refuses_what_the_parser_refuses(
    rows: list[Any], valid: list[dict[str, Any]]
) -> None:
    """A collector checks a poll's values in bulk (``refused_fetch_values``): the values
    ``parse_json_line`` refuses, each with its dead letter, and no other."""
    values = [row for row in rows if isinstance(row, dict)]
    parsed = [parse_json_line(Source.FETCH_RESPONSES, dict(value)) for value in values]
    expected = {i: result for i, result in enumerate(parsed) if isinstance(result, DeadLetter)}
    assert refused_fetch_values(values) == expected, values
    assert refused_fetch_values(valid) == {}


def test_a_pack_whose_text_is_not_utf8_is_dead_whole() -> None:
    """Arrow's writers never make one: it is corruption (a row of text is UTF-8 by the
    contract, and a JSON record that is not is ``invalid_json``)."""
    good = dict.fromkeys(INT_COLUMNS, 1) | {"topic": "t"}
    batch = pa.RecordBatch.from_pylist([good, good])
    offsets = pa.py_buffer(np.array([0, 1, 3], np.int32).tobytes())
    topic = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(b"t\xed\xa0")])
    broken = batch.set_column(batch.schema.get_field_index("topic"), "topic", topic)
    decoded = decode_fetch_pack(framed_pack(broken))
    assert isinstance(decoded, DeadLetter)
    assert decoded.reason is DeadLetterReason.INVALID_PACK
    assert decoded.detail.startswith("corrupt fetch pack: ")
