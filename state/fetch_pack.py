"""The packed form of fetch-responses: one Kafka record carrying many fetch responses as
columns (docs/event-contract.md#fetch-packs). Its one definition: the writer
(:func:`encode_fetch_pack`, :class:`FetchRows`, a producer's fetch responses as the pack's
columns), the reader (:func:`decode_fetch_pack`) and how a reader tells a pack from a JSON
record (:func:`is_fetch_pack`).

Version 1 is ``PACK_MAGIC``, the version byte, then an Arrow IPC stream whose columns are
the fields of ``conf/schemas/fetch-responses.schema.json`` by their wire names. A row is
the JSON object of its non-null cells: a null cell is an absent field. So the rows have
the JSON Schema of a per-record value, and each row gets the verdict, reason and detail
the per-record path gives that object: a row the typed check refuses goes to
``event_parser.parse_json_line``, the validator that explains, as the JSON path's
refusals go to ``parse_record`` (``state.fetch_decoder``). The typed check takes its
ranges from ``WireFetch``, the schema as msgspec constraints: one definition of each
rule. A pack that cannot be read (truncated, corrupt, of an unknown version) is one dead
letter, ``invalid_pack``.

Why Arrow IPC and not msgpack arrays or JSON: ``bench/packed_wire_bench.py`` and
docs/event-contract.md#fetch-packs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from state.event_parser import clip_detail, parse_json_line
from state.events import FETCH_ERROR_NONE, DeadLetter, DeadLetterReason, FetchResponse, Source
from state.fetch_decoder import (
    INT_COLUMNS,
    DecodedFetches,
    WireFetch,
    bundled_schema_in_use,
    decode_fetches,
)

PACK_MAGIC = b"\xffIWFP"
"""The first bytes of every pack. 0xFF never occurs in UTF-8, so no record of the
contract's JSON form (UTF-8 text) starts with it: a JSON record is never taken for a
pack, and a pack, which is not UTF-8, was never a valid JSON record."""
PACK_VERSION = 1
"""The version byte after ``PACK_MAGIC`` that this release writes and reads."""
READ_VERSIONS = frozenset({PACK_VERSION})


@cache
def field_rules() -> dict[str, tuple[Any, bool]]:
    """Each field of ``WireFetch``: its msgspec type (constraints included) and whether
    it is required."""
    info = msgspec.inspect.type_info(WireFetch)
    assert isinstance(info, msgspec.inspect.StructType)
    return {field.name: (field.type, field.required) for field in info.fields}


_RULES = field_rules()
PACK_SCHEMA = pa.schema(
    [
        pa.field(name, pa.string() if isinstance(kind, msgspec.inspect.StrType) else pa.int64())
        for name, (kind, _) in _RULES.items()
    ]
)
"""The columns the writer writes, those of ``WireFetch`` (an optional one only when some
row holds it)."""
_OPTIONAL = frozenset(name for name, (_, required) in _RULES.items() if not required)
_REQUIRED_SCHEMA = pa.schema([field for field in PACK_SCHEMA if field.name not in _OPTIONAL])
"""The columns of a poll's fetch responses (``FetchRows.of_columns``): every field a row
must hold."""
IntColumn = Sequence[int] | npt.NDArray[np.int64]
"""A column of ``FetchRows.of_columns``: a list, or numpy's (``collect admin``'s joins)."""
_READING = pa.ipc.IpcReadOptions(use_threads=False)
_EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"
"""Arrow's end-of-stream marker: a stream cut at a message boundary still reads, so
the reader asks for the marker to tell a whole pack from a truncated one."""


def is_fetch_pack(value: bytes | None) -> bool:
    """Whether ``value`` is a pack (of any version), not a per-record JSON value."""
    return value is not None and value[: len(PACK_MAGIC)] == PACK_MAGIC


def encode_fetch_pack(values: Sequence[Mapping[str, Any]]) -> bytes:
    """Fetch-responses values (the contract's JSON-ready form: ``wire_value``) as one
    pack, rows in the order of ``values``; fields the contract does not name are left
    out. Raises what Arrow raises on a value no column type holds without loss (text
    and numbers in one field, an integer past int64)."""
    return FetchRows.of_values(values).pack()


def framed_pack(batch: pa.RecordBatch) -> bytes:
    """``batch`` as a pack: the magic, the version, the Arrow IPC stream. Its columns are
    taken as they are (a producer other than ``encode_fetch_pack`` may write other Arrow
    types: the reader judges each row by its JSON form)."""
    sink = pa.BufferOutputStream()
    sink.write(PACK_MAGIC + bytes([PACK_VERSION]))
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


@dataclass(frozen=True)
class FetchRows:
    """Fetch responses as the pack's columns, rows in order: a producer's batch (a poll of
    ``collect admin``) as it is checked (:meth:`checked`), then written as packs
    (:meth:`packs`) or as one JSON value a row (:meth:`values`), without a Python object
    per row on the packed way. A null cell is an absent field, as in a pack."""

    table: pa.Table

    @staticmethod
    def of_columns(
        *,
        ts: IntColumn,
        topic: Sequence[str] | npt.NDArray[np.object_],
        partition: IntColumn,
        leader: IntColumn,
        follower: IntColumn,
        leader_epoch: IntColumn,
        fetch_offset: IntColumn,
        leader_leo: IntColumn,
        high_watermark: IntColumn,
    ) -> FetchRows:
        """Rows of the contract's required fields, a column each (of equal lengths): fetch
        responses without error, log start offset or bytes, as a poll observes them."""
        given = {
            "ts": ts,
            "topic": topic,
            "partition": partition,
            "leader": leader,
            "follower": follower,
            "leader_epoch": leader_epoch,
            "fetch_offset": fetch_offset,
            "leader_leo": leader_leo,
            "high_watermark": high_watermark,
        }
        arrays = [pa.array(given[field.name], field.type) for field in _REQUIRED_SCHEMA]
        return FetchRows(pa.Table.from_arrays(arrays, schema=_REQUIRED_SCHEMA))

    @staticmethod
    def empty() -> FetchRows:
        """No rows."""
        return FetchRows(_REQUIRED_SCHEMA.empty_table())

    @staticmethod
    def of_values(values: Sequence[Mapping[str, Any]]) -> FetchRows:
        """Fetch-responses values (JSON-ready) as rows, as :func:`encode_fetch_pack` packs
        them: fields the contract does not name left out, a value no column type holds
        without loss raising what Arrow raises."""
        try:  # the values a producer makes: every one typed and valid (WireFetch)
            msgspec.convert(values, list[WireFetch])
            batch = pa.RecordBatch.from_pylist(values, schema=PACK_SCHEMA)  # Arrow's loop
        except msgspec.ValidationError:
            # Given the schema, Arrow would write 1.5 as 1: each column takes the type of
            # its values instead, and the reader judges them (docs/event-contract.md).
            batch = pa.RecordBatch.from_arrays(
                [pa.array([value.get(name) for value in values]) for name in PACK_SCHEMA.names],
                names=PACK_SCHEMA.names,
            )
        return FetchRows(pa.Table.from_batches([batch]))

    def __len__(self) -> int:
        return int(self.table.num_rows)

    def values(self) -> list[dict[str, Any]]:
        """Each row as its fetch-responses value (JSON-ready: the per-record form), the
        fields in the contract's order, a null cell left out."""
        names = self.table.column_names
        columns = [column.to_pylist() for column in self.table.columns]
        if not any(column.null_count for column in self.table.columns):
            return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]
        return [
            {name: cell for name, cell in zip(names, row, strict=True) if cell is not None}
            for row in zip(*columns, strict=True)
        ]

    def pack(self) -> bytes:
        """The rows as one pack. An optional column no row holds is left out: absent, it
        costs nothing; all null, 8 bytes a row. (A required one stays: its rows are then
        missing the field.)"""
        table = self.table
        keep = [
            name
            for name, column in zip(table.column_names, table.columns, strict=True)
            if name not in _OPTIONAL or column.null_count < table.num_rows or not table.num_rows
        ]
        table = table.select(keep).combine_chunks()
        batches = table.to_batches()
        if not batches:  # no rows: still one (empty) batch, as a reader expects one
            batches = [pa.RecordBatch.from_pylist([], schema=table.schema)]
        return framed_pack(batches[0])

    def packs(self, most_rows: int, most_bytes: int) -> list[tuple[int, bytes]]:
        """The rows as packs of one leader's fetches each, with that leader's id (a
        pack's key: docs/event-contract.md#fetch-packs): leaders in the order of their
        first row, each one's rows in order, ``most_rows`` at the most in a pack, and a
        pack longer than ``most_bytes`` halved until it is not (or is one row)."""
        leaders = self._leaders()
        order = np.argsort(leaders, kind="stable")
        ranked = leaders[order]
        starts = np.flatnonzero(ranked[1:] != ranked[:-1]) + 1
        groups = sorted(np.split(order, starts) if len(order) else [], key=lambda rows: rows[0])
        out: list[tuple[int, bytes]] = []
        for rows in groups:
            leader = int(leaders[rows[0]])
            for start in range(0, len(rows), most_rows):
                part = FetchRows(self.table.take(rows[start : start + most_rows]))
                out += [(leader, pack) for pack in part._halved(most_bytes)]
        return out

    def checked(self) -> tuple[FetchRows, list[tuple[int, DeadLetter]]]:
        """The rows the contract accepts, and a dead letter for each other, by row: the
        verdicts and reasons a pack of these rows gets (:func:`decode_fetch_pack`), which
        are those of the per-record path. Raises ValueError on a row with no JSON form
        (a column of a type JSON has not: no producer's values make one)."""
        verdicts = _judged(self.table)
        if isinstance(verdicts, str):
            raise ValueError(verdicts)
        if not verdicts.dead:
            return self, []
        return FetchRows(self.table.filter(pa.array(verdicts.ok))), verdicts.dead

    def _leaders(self) -> npt.NDArray[np.int64]:
        """Each row's leader, the key of its pack."""
        column = self.table.column("leader")
        if column.type == pa.int64() and not column.null_count:
            return np.asarray(column.to_numpy(), np.int64)
        # the type of its values (1.0: a valid integer): as the JSON form reads it
        return np.array([int(cell) for cell in column.to_pylist()], np.int64)

    def _halved(self, most_bytes: int) -> list[bytes]:
        """The rows as one pack, or halved until each is at most ``most_bytes``."""
        pack = self.pack()
        if len(pack) <= most_bytes or len(self) <= 1:
            return [pack]
        half = len(self) // 2
        first, second = FetchRows(self.table.slice(0, half)), FetchRows(self.table.slice(half))
        return first._halved(most_bytes) + second._halved(most_bytes)


def decode_fetch_pack(value: bytes) -> DecodedFetches | DeadLetter:
    """The rows of one pack, validated: ``position`` and the dead letters' indexes are
    rows of the pack. A pack that cannot be read is one ``invalid_pack`` dead letter."""
    table = _read(value)
    decoded = table if isinstance(table, str) else _decoded(table)
    if isinstance(decoded, str):
        return DeadLetter(
            Source.FETCH_RESPONSES, _raw(value), DeadLetterReason.INVALID_PACK, decoded
        )
    return decoded


def _decoded(table: pa.Table) -> DecodedFetches | str:
    """The rows of a pack's table (or of packs' tables joined), validated; a string: why
    a row has no JSON form, which makes its pack unreadable."""
    table = table.combine_chunks()  # packs joined: each column read once, in place
    verdicts = _judged(table)
    if isinstance(verdicts, str):
        return verdicts
    count = table.num_rows
    ints = {name: _int_cells(table, name, count) for name in INT_COLUMNS}
    topic = _string_cells(table, "topic", count, "")
    error = _string_cells(table, "error", count, FETCH_ERROR_NONE)
    if verdicts.explained:  # as the validator read them (5.0: 5)
        rows = sorted(verdicts.explained)
        parsed = [verdicts.explained[row] for row in rows]
        for name in INT_COLUMNS:
            ints[name] = np.array(ints[name])  # the column read in place is read-only
            ints[name][rows] = [getattr(fetch, name) for fetch in parsed]
        mask = np.zeros(count, np.bool_)
        mask[rows] = True
        topic = pc.replace_with_mask(topic, mask, pa.array([f.topic for f in parsed], pa.string()))
        error = pc.replace_with_mask(error, mask, pa.array([f.error for f in parsed], pa.string()))
    ok = verdicts.ok
    if ok.all():
        valid = ints, topic, error
    else:
        kept = pa.array(ok)
        valid = (
            {name: column[ok] for name, column in ints.items()},
            topic.filter(kept),
            error.filter(kept),
        )
    return DecodedFetches(
        position=np.flatnonzero(ok).astype(np.int64),
        ints=valid[0],
        topics=valid[1],
        errors=valid[2],
        dead=verdicts.dead,
    )


def pack_time_range(value: bytes) -> tuple[int, int] | None:
    """The earliest and latest ``ts`` of a pack's rows, among the cells of an ``int64``
    ``ts`` column within the schema's range; None for a pack that cannot be read or
    has no such cell. For the job's event-time alignment, which reads a JSON record's
    ``ts`` (``kafka_source.event_time``): a pack spans a range of times."""
    table = _read(value)
    if isinstance(table, str) or "ts" not in table.column_names:
        return None
    column = table.column("ts")
    ok = _cells_ok(column, _RULES["ts"][0])
    if ok is None:
        return None
    if column.null_count:
        ok &= ~column.is_null().to_numpy()
    times = column.fill_null(0).to_numpy()[ok]
    return (int(times.min()), int(times.max())) if times.size else None


def events_in(value: bytes | None) -> int:
    """How many events a fetch-responses record holds: a pack's rows, one for any other
    record (a JSON record is one event, a record that breaks the contract one dead
    letter, and so is a pack that cannot be read)."""
    if value is None or not is_fetch_pack(value):
        return 1
    table = _read(value)
    return 1 if isinstance(table, str) else max(1, table.num_rows)


def decode_fetch_records(values: Sequence[bytes | None]) -> DecodedFetches:
    """A batch of fetch-responses record values, JSON and packs mixed, in input order:
    ``position`` and the dead letters' indexes are those of the records (a pack's rows
    share its index), ``pack_row`` and the letters' ``pack_row`` the row within a pack,
    so that each row keeps an identity of its own (a dead letter's key). Without a pack,
    ``decode_fetches`` itself.

    Consecutive packs of one schema are judged as one table: the checks cost a few
    microseconds a column whatever its length, which on packs of a few thousand rows
    was most of their decoding. Each row's verdict is the one its pack alone gives it."""
    if not any(is_fetch_pack(value) for value in values):
        return decode_fetches(values)
    decoded = _Decoding()
    run = _PackRun()
    start = 0
    for index, value in enumerate(values):
        if value is None or not is_fetch_pack(value):
            continue
        table = _read(value)
        if index > start or isinstance(table, str) or not run.takes(table):
            decoded.add_run(run)
            run = _PackRun()
        if index > start:  # the JSON records since the last pack
            decoded.add_json(decode_fetches(values[start:index]), start)
        start = index + 1
        if isinstance(table, str):
            decoded.add_dead_pack(index, value, table)
        else:
            run.add(index, value, table)
    decoded.add_run(run)
    if start < len(values):
        decoded.add_json(decode_fetches(values[start:]), start)
    return decoded.result()


@dataclass
class _PackRun:
    """Consecutive readable packs of one schema: their record indexes, values and
    tables."""

    indexes: list[int] = field(default_factory=list)
    values: list[bytes] = field(default_factory=list)
    tables: list[pa.Table] = field(default_factory=list)

    def takes(self, table: pa.Table) -> bool:
        return not self.tables or table.schema.equals(self.tables[0].schema)

    def add(self, index: int, value: bytes, table: pa.Table) -> None:
        self.indexes.append(index)
        self.values.append(value)
        self.tables.append(table)


@dataclass
class _Decoding:
    """The parts of :func:`decode_fetch_records`' result, in input order."""

    positions: list[npt.NDArray[np.int64]] = field(default_factory=list)
    rows: list[npt.NDArray[np.int64]] = field(default_factory=list)
    parts: list[DecodedFetches] = field(default_factory=list)
    dead: list[tuple[int, DeadLetter]] = field(default_factory=list)

    def add_json(self, decoded: DecodedFetches, start: int) -> None:
        """The JSON records from index ``start`` on, decoded."""
        self.positions.append(decoded.position + start)
        self.rows.append(np.full(len(decoded), -1, np.int64))
        self.parts.append(decoded)
        self.dead += [(start + i, letter) for i, letter in decoded.dead]

    def add_dead_pack(self, index: int, value: bytes, why: str) -> None:
        reason = DeadLetterReason.INVALID_PACK
        self.dead.append((index, DeadLetter(Source.FETCH_RESPONSES, _raw(value), reason, why)))

    def add_run(self, run: _PackRun) -> None:
        """A run's packs, judged as one table. A row with no JSON form makes its own pack
        unreadable, and only it: then each pack of the run is judged alone."""
        if not run.tables:
            return
        joined = _decoded(pa.concat_tables(run.tables))
        if isinstance(joined, str):
            if len(run.tables) == 1:
                self.add_dead_pack(run.indexes[0], run.values[0], joined)
                return
            for index, value, table in zip(run.indexes, run.values, run.tables, strict=True):
                self.add_run(_PackRun([index], [value], [table]))
            return
        counts = np.array([table.num_rows for table in run.tables], np.int64)
        first_row = np.cumsum(counts) - counts
        pack_of_row = np.repeat(np.arange(len(counts)), counts)
        pack = pack_of_row[joined.position]
        self.positions.append(np.asarray(run.indexes, np.int64)[pack])
        self.rows.append(joined.position - first_row[pack])
        self.parts.append(joined)
        for row, letter in joined.dead:
            number = int(pack_of_row[row])
            in_pack = row - int(first_row[number])
            self.dead.append((run.indexes[number], replace(letter, pack_row=in_pack)))

    def result(self) -> DecodedFetches:
        return DecodedFetches(
            position=_joined(self.positions),
            ints={name: _joined([part.ints[name] for part in self.parts]) for name in INT_COLUMNS},
            topics=_concat_texts([part.topics for part in self.parts]),
            errors=_concat_texts([part.errors for part in self.parts]),
            dead=self.dead,
            pack_row=_joined(self.rows),
        )


def _joined(arrays: list[npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
    if len(arrays) == 1:
        return arrays[0]
    return np.concatenate(arrays) if arrays else np.zeros(0, np.int64)


# ------------------------------------------------------------------------ reading


def _read(value: bytes) -> pa.Table | str:
    """The pack's table, or why it cannot be read."""
    head = len(PACK_MAGIC)
    if not is_fetch_pack(value) or len(value) <= head:
        return "not a fetch pack, or one without its version byte"
    version = value[head]
    if version not in READ_VERSIONS:
        known = ", ".join(map(str, sorted(READ_VERSIONS)))
        return f"fetch pack version {version}; this release reads version {known}"
    body = pa.py_buffer(value)[head + 1 :]
    if not value.endswith(_EOS):
        return "truncated fetch pack (or bytes after its end): no end-of-stream marker last"
    try:
        stream = pa.BufferReader(body)
        # one thread: a Spark task has one core (``streaming.job.routing._PACK_READING``)
        table = pa.ipc.open_stream(stream, options=_READING).read_all()
        table.validate(full=True)  # offsets within buffers, strings UTF-8
        rest = body.size - stream.tell()
    # ArrowException: what Arrow raises on bad bytes; OSError and ValueError its bases
    except (pa.ArrowException, OSError, ValueError) as error:
        return clip_detail(f"corrupt fetch pack: {error}")
    if rest:
        return f"corrupt fetch pack: {rest} bytes after its end-of-stream marker"
    names = table.column_names
    if len(set(names)) != len(names):
        return "corrupt fetch pack: a column name appears twice"
    return table


@dataclass(frozen=True)
class _Verdicts:
    """The contract's verdict on each row of a table of fetch responses."""

    ok: npt.NDArray[np.bool_]
    """The rows it accepts."""
    dead: list[tuple[int, DeadLetter]]
    """The others, by row, in row order."""
    explained: dict[int, FetchResponse]
    """The rows the typed check left to the explaining validator and it accepted, as it
    reads them (``5.0`` is ``5``)."""


def _judged(table: pa.Table) -> _Verdicts | str:
    """Every row judged: the typed check in bulk, and ``parse_json_line`` on the JSON
    object of each row it refuses (the validator that explains, the per-record path's).
    A string: why a row has no JSON form (a column of a type JSON has not)."""
    count = table.num_rows
    ok = _typed_rows(table) if bundled_schema_in_use() else np.zeros(count, np.bool_)
    slow = np.flatnonzero(~ok).tolist()
    try:  # the rows the typed check refused, as Python values
        objs = table.take(slow).to_pylist() if slow else []
    except (pa.ArrowException, ValueError, OverflowError) as refusal:  # no JSON form
        return clip_detail(f"corrupt fetch pack: a row has no JSON form: {refusal}")
    dead: list[tuple[int, DeadLetter]] = []
    explained: dict[int, FetchResponse] = {}
    for row, obj in zip(slow, objs, strict=True):
        parsed = parse_json_line(Source.FETCH_RESPONSES, _present(obj))
        if isinstance(parsed, DeadLetter):
            dead.append((row, parsed))
            continue
        assert isinstance(parsed, FetchResponse)
        ok[row] = True
        explained[row] = parsed
    return _Verdicts(ok, dead, explained)


def _typed_rows(table: pa.Table) -> npt.NDArray[np.bool_]:
    """The rows the typed check accepts: every field of the type and in the range
    ``WireFetch`` gives it. The others go to the explaining validator."""
    ok = np.ones(table.num_rows, np.bool_)
    for name, (kind, required) in _RULES.items():
        if name not in table.column_names:
            if required:
                ok[:] = False
            continue
        column = table.column(name)
        cells_ok = _cells_ok(column, kind)
        if cells_ok is None:  # a type the check does not read: a null cell only
            cells_ok = np.zeros(table.num_rows, np.bool_)
        if column.null_count == 0:
            ok &= cells_ok
            continue
        absent = column.is_null().to_numpy()
        ok &= (cells_ok & ~absent) | (absent & (not required))
    return ok


def _cells_ok(column: pa.ChunkedArray, kind: Any) -> npt.NDArray[np.bool_] | None:
    """Per cell, whether it holds a value of ``kind`` (msgspec's ``IntType`` or
    ``StrType``, with its bounds); None if the column's Arrow type is not the check's."""
    if isinstance(kind, msgspec.inspect.IntType) and column.type == pa.int64():
        values = (column.fill_null(0) if column.null_count else column).to_numpy()
        ok = np.ones(len(values), np.bool_)
        if kind.ge is not None:
            ok &= values >= kind.ge
        if kind.le is not None:
            ok &= values <= kind.le
        return ok
    if isinstance(kind, msgspec.inspect.StrType) and column.type == pa.string():
        lengths = pc.utf8_length(column.fill_null("") if column.null_count else column).to_numpy()
        ok = np.asarray(lengths >= (kind.min_length or 0), np.bool_)
        if kind.max_length is not None:
            ok &= lengths <= kind.max_length
        return ok
    return None


def _int_cells(table: pa.Table, name: str, count: int) -> npt.NDArray[np.int64]:
    """An integer column (zeros where it has no int64 value), read in place where it
    can be: read-only."""
    if name in table.column_names and table.column(name).type == pa.int64():
        column = table.column(name)
        values: npt.NDArray[np.int64] = (
            column.fill_null(0) if column.null_count else column
        ).to_numpy()
        return values
    return np.zeros(count, np.int64)


def _string_cells(table: pa.Table, name: str, count: int, default: str) -> pa.Array:
    """A string column as one Arrow array (``default`` where it has no string value)."""
    if name in table.column_names and table.column(name).type == pa.string():
        column = table.column(name)
        return (column.fill_null(default) if column.null_count else column).combine_chunks()
    return pa.repeat(pa.scalar(default, pa.string()), count)


def _concat_texts(arrays: list[pa.Array]) -> pa.Array:
    if len(arrays) == 1:
        return arrays[0]
    return pa.concat_arrays(arrays) if arrays else pa.array([], pa.string())


def _present(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as the JSON object it stands for: a null cell is an absent field."""
    return {name: cell for name, cell in row.items() if cell is not None}


def _raw(value: bytes) -> str:
    """A dead pack's ``raw``: its bytes as text (a pack is binary; the dead-letter sink
    clips it)."""
    return value.decode("utf-8", errors="replace")
