"""Decode and validate a whole batch of fetch-response record values into columns.

The streaming job receives hundreds of thousands of fetch responses per second; parsing
each with ``json.loads`` and validating it against the JSON Schema costs ~10 us a record
(``state.event_parser``). Here the values are decoded by msgspec into a typed struct
whose constraints are those of ``conf/schemas/fetch-responses.schema.json``: the loop
over the values is msgspec's (``map`` of a C method, no Python frame per record), and
the columns are taken out the same way. A value msgspec refuses is not judged by it: it
goes to ``event_parser.parse_record``, the validator that explains (jsonschema), which
either accepts it (an integral float such as ``5.0``, a field the struct does not know)
or gives the dead letter its reason. So the verdicts and reasons are those of the schema
by construction where msgspec says no, and where it says yes the property test
(tests/unit/test_fetch_decoder_property.py) shows that the schema says yes with the same
values.

When the deployment replaces the bundled schema (``$ISRWATCH_CONF_DIR/schemas``), the
struct no longer describes it: every value then goes through ``parse_record``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from operator import attrgetter
from pathlib import Path
from typing import Annotated, Any

import msgspec
import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]
from msgspec import UNSET, UnsetType

from state.event_parser import (
    SCHEMA_FILES,
    parse_json_line,
    parse_record,
    schema_dir,
    utf8_encodable,
)
from state.events import FETCH_ERROR_NONE, DeadLetter, FetchResponse, Source

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MAX = 2**31 - 1
MAX_TIMESTAMP_MS = 7_258_118_399_999
"""The last millisecond before 2200-01-01T00:00:00Z: the schemas' latest time
(``timestamp``). The job's event-time column goes to pandas in its state function, whose
nanosecond timestamps end in April 2262 (and Spark's in year 294247): a record past that
failed every micro-batch that held it."""
MAX_TOPIC_LENGTH = 249
"""Kafka's longest topic name (the schemas' ``maxLength``)."""
MAX_REPLICAS = 64
"""The most broker ids a replica list may hold (an ISR, the assigned or offline replicas:
the schema's ``replicaIds``). More than any real replication factor: the bound keeps one
record from widening a shard's partition table, whose width is the most replicas of any
of its partitions (a fuzzed LeaderAndIsr with 100,000 replicas asked for over 8 GB)."""

# The schema's $defs, as msgspec constraints.
_Offset = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
_Timestamp = Annotated[int, msgspec.Meta(ge=0, le=MAX_TIMESTAMP_MS)]
_Id = Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]
_Name = Annotated[str, msgspec.Meta(min_length=1)]
_Topic = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TOPIC_LENGTH)]


class WireFetch(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    """One fetch-responses value as the bundled schema defines it (unknown fields are
    refused here and left to the schema, which allows them)."""

    ts: _Timestamp
    topic: _Topic
    partition: Annotated[int, msgspec.Meta(ge=0, le=999_999)]
    leader: _Id
    follower: _Id
    leader_epoch: _Id
    fetch_offset: _Offset
    leader_leo: _Offset
    high_watermark: _Offset
    # UNSET, not None: the schema refuses ``null`` for these (their type is integer).
    log_start_offset: Annotated[int, msgspec.Meta(ge=-1, le=INT64_MAX)] | UnsetType = UNSET
    error: _Name = FETCH_ERROR_NONE
    bytes: _Offset | UnsetType = UNSET


INT_COLUMNS = (
    "ts",
    "partition",
    "leader",
    "follower",
    "leader_epoch",
    "fetch_offset",
    "leader_leo",
    "high_watermark",
)
"""The integer columns the replication model reads (``FetchBatch``)."""

_DECODER = msgspec.json.Decoder(WireFetch)


@dataclass(frozen=True)
class DecodedFetches:
    """The valid values of a batch as columns, and the invalid ones as dead letters.

    ``position`` is the index in the input of each valid value (ascending); ``dead``
    holds ``(index, dead letter)`` for the others, in input order. ``pack_row`` is, for
    each valid value, its row in the fetch pack it came from, -1 for a JSON record; None
    when no value came from a pack (``state.fetch_pack.decode_fetch_records``).
    """

    position: npt.NDArray[np.int64]
    ints: dict[str, npt.NDArray[np.int64]]
    topics: pa.Array
    """The topic of each, an Arrow string array: a pack's column as it was read (a
    Python string per row would cost more than the rest of its decoding)."""
    errors: pa.Array
    """The error of each (``NONE`` where the value has none), an Arrow string array."""
    dead: list[tuple[int, DeadLetter]] = field(default_factory=list)
    pack_row: npt.NDArray[np.int64] | None = None

    def __len__(self) -> int:
        return len(self.position)

    @cached_property
    def topic(self) -> list[str]:
        """``topics`` as Python strings."""
        cells: list[str] = self.topics.to_pylist()
        return cells

    @cached_property
    def error(self) -> list[str]:
        """``errors`` as Python strings."""
        cells: list[str] = self.errors.to_pylist()
        return cells


@cache
def bundled_schema_in_use(source: Source = Source.FETCH_RESPONSES) -> bool:
    """Whether the loaded schema of ``source`` is the bundled one (which the typed
    structs describe: ``WireFetch`` here, ``state.controller_decoder`` for controller
    events)."""
    bundled = Path(__file__).resolve().parent.parent / "conf" / "schemas"
    name = SCHEMA_FILES[source]
    loaded = schema_dir() / name
    if loaded.resolve() == (bundled / name).resolve():
        return True
    try:
        return bool(
            json.loads(loaded.read_text(encoding="utf-8"))
            == json.loads((bundled / name).read_text(encoding="utf-8"))
        )
    except (OSError, ValueError):
        return False


def decode_fetches(values: Sequence[bytes | None]) -> DecodedFetches:
    """Decode and validate ``values`` (Kafka record values, UTF-8 JSON) in bulk."""
    if bundled_schema_in_use():
        try:
            wires = list(map(_DECODER.decode, values))  # type: ignore[arg-type]
            texts = _texts(wires)
            # msgspec takes an escaped lone surrogate into a str (event_parser.lone_surrogate)
            if all(map(utf8_encodable, {*texts[0], *texts[1]})):
                return _columns(wires, np.arange(len(wires), dtype=np.int64), [], texts)
        # ValueError: bad UTF-8; RecursionError: nesting deeper than msgspec follows
        except (msgspec.MsgspecError, ValueError, TypeError, RecursionError):
            pass  # some value is not for the fast decoder: judge them one by one
    return _one_by_one(values)


def refused_fetch_values(values: Sequence[Mapping[str, Any]]) -> dict[int, DeadLetter]:
    """The dead letters of the fetch-responses values (JSON-ready, as a producer holds
    them) that the contract refuses, by index: a collector's check of a poll of hundreds
    of thousands. msgspec converts them to ``WireFetch`` in bulk (0.3 us a value, where
    ``parse_json_line`` takes 10); a value it refuses goes to ``parse_json_line``, which
    accepts it (``5.0``, an unknown field) or gives the reason, as in :func:`decode_fetches`."""
    fast = bundled_schema_in_use()
    if fast:
        try:
            msgspec.convert(values, list[WireFetch])
            return {}
        except msgspec.ValidationError:
            pass  # some value is not for the fast check: judge them one by one
    refused: dict[int, DeadLetter] = {}
    for index, value in enumerate(values):
        if fast:
            try:
                msgspec.convert(value, WireFetch)
                continue
            except msgspec.ValidationError:
                pass
        parsed = parse_json_line(Source.FETCH_RESPONSES, dict(value))
        if isinstance(parsed, DeadLetter):
            refused[index] = parsed
    return refused


def _one_by_one(values: Sequence[bytes | None]) -> DecodedFetches:
    """Every value on its own: msgspec where it says yes, else the schema's verdict."""
    wires: list[WireFetch] = []
    positions: list[int] = []
    dead: list[tuple[int, DeadLetter]] = []
    fast = bundled_schema_in_use()
    for index, value in enumerate(values):
        if fast and isinstance(value, bytes) and b"\\u" not in value:  # escapes: see above
            try:
                wires.append(_DECODER.decode(value))
                positions.append(index)
                continue
            except (msgspec.MsgspecError, ValueError, RecursionError):
                pass
        parsed = parse_record(Source.FETCH_RESPONSES, value)
        if isinstance(parsed, DeadLetter):
            dead.append((index, parsed))
        else:
            assert isinstance(parsed, FetchResponse)
            wires.append(_wire(parsed))
            positions.append(index)
    return _columns(wires, np.asarray(positions, dtype=np.int64), dead, _texts(wires))


def _wire(event: FetchResponse) -> WireFetch:
    return WireFetch(
        ts=event.ts,
        topic=event.topic,
        partition=event.partition,
        leader=event.leader,
        follower=event.follower,
        leader_epoch=event.leader_epoch,
        fetch_offset=event.fetch_offset,
        leader_leo=event.leader_leo,
        high_watermark=event.high_watermark,
        error=event.error,
    )


def _texts(wires: list[WireFetch]) -> tuple[list[str], list[str]]:
    """The topic and the error of each value."""
    return list(map(attrgetter("topic"), wires)), list(map(attrgetter("error"), wires))


def _columns(
    wires: list[WireFetch],
    position: npt.NDArray[np.int64],
    dead: list[tuple[int, DeadLetter]],
    texts: tuple[list[str], list[str]],
) -> DecodedFetches:
    count = len(wires)
    ints = {
        name: np.fromiter(map(attrgetter(name), wires), dtype=np.int64, count=count)
        for name in INT_COLUMNS
    }
    return DecodedFetches(
        position=position,
        ints=ints,
        topics=pa.array(texts[0], pa.string()),
        errors=pa.array(texts[1], pa.string()),
        dead=dead,
    )
