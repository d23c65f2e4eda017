"""A shard's events of one micro-batch, in the order it applies them, with its fetches
kept as columns.

The state function gets its routed rows from Spark as one pandas frame: a few rows per
shard, a fetch pack (kind ``fetches``) holding up to hundreds of thousands of fetches in
its ``event`` column, the controller parts and dead letters as rows of their own. The
shard applies the events in event-time order (ties: Kafka topic, partition, offset, row
of the pack, then the order the rows came in). Unpacked into a pandas row per fetch,
the fetches cost more in pandas (a Python string per cell, a sort of object columns, a
frame per run) than in the model, so here they stay Arrow columns from the packs to the
model's ``FetchBatch``: the order is one ``numpy.lexsort`` over the keys of every event,
and a pandas row is made only for a fetch that becomes a dead letter.

The order is the one a stable ``DataFrame.sort_values`` on the keys (nulls last) gives
the rows ``unpack_fetches`` makes: ``tests/unit/test_shard_events.py`` checks that.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import cast

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]

from state import FetchBatch, RoutedControllerEvent
from state.events import FETCH_ERROR_NONE
from state.fetch_decoder import INT_COLUMNS
from streaming.job.routing import (
    DEAD,
    FETCH,
    FETCH_PACK_COLUMNS,
    FETCH_PACK_SCHEMA,
    FETCHES,
    pandas_type,
    plain_fetch_rows,
    read_packs,
)

I64 = npt.NDArray[np.int64]
BOOL = npt.NDArray[np.bool_]

SORT_KEYS = ("ts", "src_topic", "src_partition", "src_offset", "src_row")
"""The order a shard applies its events in; then the order the rows came in."""


@dataclass(frozen=True)
class ShardEvents:
    """The events of a shard's micro-batch (controller parts and fetches; routing's dead
    letters are apart, in ``dead``) in the order the shard applies them: ``order`` holds
    indexes into the controller rows (``< len(controller)``) and, after them, into the
    fetches. :meth:`kept` narrows it, keeping the order."""

    dead: pd.DataFrame
    controller: pd.DataFrame
    fetches: pa.Table
    columns: _Columns
    """What the shard reads of every event, made once (the narrowed events share it)."""
    order: I64

    @staticmethod
    def of(rows: pd.DataFrame) -> ShardEvents:
        rows = rows.reset_index(drop=True)
        packed = (rows["kind"] == FETCHES).to_numpy(dtype=np.bool_)
        others = rows[~packed].reset_index(drop=True)
        kinds = others["kind"].to_numpy(dtype=object)
        is_dead, is_fetch = kinds == DEAD, kinds == FETCH
        is_controller = ~is_dead & ~is_fetch
        controller = others[is_controller].reset_index(drop=True)
        loose = others[is_fetch]  # rows of one fetch each, where routing did not pack
        unpacked = read_packs(rows["event"][packed])
        tables = [unpacked]
        if len(loose):
            single = loose[list(FETCH_PACK_COLUMNS)]
            tables.insert(
                0, pa.Table.from_pandas(single, schema=FETCH_PACK_SCHEMA, preserve_index=False)
            )
        fetches = pa.concat_tables(tables).combine_chunks()
        # Each event's place among the rows as they came, the packs' fetches after the
        # other rows (as ``unpack_fetches`` puts them): the last key, so ties keep it.
        came = np.concatenate(
            [
                np.flatnonzero(is_controller),
                np.flatnonzero(is_fetch),
                len(others) + np.arange(unpacked.num_rows),
            ]
        ).astype(np.int64)
        keys = {name: _sort_key(controller[name], fetches.column(name)) for name in SORT_KEYS}
        order = _order_by_record(keys, came)
        if order is None:
            order = _order_by_every_key(keys, came)
        columns = _Columns.of(controller, fetches)
        return ShardEvents(others[is_dead], controller, fetches, columns, order)

    def __len__(self) -> int:
        return len(self.order)

    def kept(self, keep: BOOL) -> ShardEvents:
        """These events but those where ``keep`` is false."""
        return replace(self, order=self.order[keep])

    @property
    def ts(self) -> I64:
        return self.columns.ts[self.order]

    @property
    def is_fetch(self) -> BOOL:
        return self.order >= len(self.controller)

    @property
    def counts(self) -> BOOL:
        """Whether each event counts: every fetch; of a controller event, the one part
        routing marked (``counted``)."""
        return self.columns.counted[self.order]

    @property
    def digests(self) -> tuple[I64, BOOL]:
        """Each event's digest (controller parts: ``routing.stable_hash`` of the record),
        and whether it has one (a fetch, an epoch carrier: no)."""
        columns = self.columns
        return columns.digest[self.order], columns.has_digest[self.order]

    def rows_at(self, positions: list[int]) -> list[pd.Series]:
        """The routed rows of the events at ``positions``, as the state function's frame
        holds them (a fetch's with the columns a fetch fills), for dead letters."""
        if not positions:
            return []
        picked = self.order[positions]
        ours = len(self.controller)
        wanted = picked[picked >= ours] - ours
        picked_fetches = plain_fetch_rows(self.fetches.take(pa.array(wanted)))
        frame = picked_fetches.to_pandas(types_mapper=pandas_type)
        frame.insert(0, "kind", FETCH)
        rows: list[pd.Series] = []
        fetched = 0
        for index in picked.tolist():
            if index < ours:
                rows.append(self.controller.iloc[index])
            else:
                rows.append(frame.iloc[fetched])
                fetched += 1
        return rows

    def model_input(self) -> Iterator[tuple[int, RoutedControllerEvent | FetchBatch]]:
        """Runs of fetches as one ``FetchBatch`` each, controller parts as their events;
        each with its position here (a rejection's ``source_id``)."""
        fetch = self.is_fetch
        edges = np.flatnonzero(np.diff(fetch.astype(np.int8), prepend=0, append=0))
        run_end = dict(zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True))
        ours = len(self.controller)
        columns = self.columns
        start, count = 0, len(self.order)
        while start < count:
            if start in run_end:
                end = run_end[start]
                rows = self.order[start:end] - ours
                yield start, columns.batch(rows, np.arange(start, end, dtype=np.int64))
            else:
                end = start + 1
                part = cast("bytes", self.controller["event"].iat[int(self.order[start])])
                yield start, pickle.loads(part)  # parsed once, by routing
            start = end


@dataclass(frozen=True)
class _Columns:
    """The columns of every event (controller rows, then fetches) the shard reads."""

    ts: I64
    counted: BOOL
    digest: I64
    has_digest: BOOL
    fetch: dict[str, I64]
    topic_code: npt.NDArray[np.intp]
    topic_names: npt.NDArray[np.object_]
    error_free: BOOL

    @staticmethod
    def of(controller: pd.DataFrame, fetches: pa.Table) -> _Columns:
        count = fetches.num_rows
        digests = controller["digest"]
        has_digest = digests.notna().to_numpy(dtype=np.bool_)
        digest = np.zeros(len(controller), np.int64)
        digest[has_digest] = [int(value) for value in digests[has_digest]]
        ints = {name: _ints(fetches.column(name)) for name in INT_COLUMNS}
        topics = _encoded(fetches.column("topic"))
        errors = _encoded(fetches.column("error"))
        # a fetch without an error names none, or NONE
        free_of_code = [name == FETCH_ERROR_NONE for name in errors.dictionary.to_pylist()]
        error_free = np.asarray([*free_of_code, True], np.bool_)[_codes(errors)]
        return _Columns(
            ts=np.concatenate([controller["ts"].to_numpy(dtype=np.int64), ints["ts"]]),
            counted=np.concatenate(
                [
                    controller["counted"].eq(True).to_numpy(dtype=np.bool_, na_value=False),
                    np.ones(count, np.bool_),
                ]
            ),
            digest=np.concatenate([digest, np.zeros(count, np.int64)]),
            has_digest=np.concatenate([has_digest, np.zeros(count, np.bool_)]),
            fetch=ints,
            topic_code=topics.indices.fill_null(-1).to_numpy().astype(np.intp),
            topic_names=np.asarray(topics.dictionary.to_pylist(), dtype=object),
            error_free=error_free,
        )

    def batch(self, rows: I64, source_id: I64) -> FetchBatch:
        """The fetches at ``rows`` (indexes among the fetches), in that order."""
        ints = {name: column[rows] for name, column in self.fetch.items()}
        return FetchBatch(
            source_id=source_id,
            topic_code=self.topic_code[rows],
            topic_names=self.topic_names,
            error_free=self.error_free[rows],
            **ints,
        )


def _ints(column: pa.ChunkedArray) -> I64:
    """An integer column of the fetches as int64. Routing lets no fetch without one
    through; a null here is refused, as the pandas path's ``to_numpy`` refused it."""
    if column.null_count:
        raise ValueError("a routed fetch row without an integer field")
    return np.asarray(column.combine_chunks().to_numpy(zero_copy_only=False), np.int64)


SortKey = tuple[I64, BOOL]
"""One of :data:`SORT_KEYS` over every event: the values (0 where null) and the nulls."""


def _order_by_every_key(keys: dict[str, SortKey], came: I64) -> I64:
    """The order of :data:`SORT_KEYS` then ``came``: one ``np.lexsort`` over them all."""
    if not len(came):
        return np.zeros(0, np.int64)
    columns: list[npt.NDArray[np.generic]] = [came]
    for name in reversed(SORT_KEYS):  # np.lexsort: the last key is the first
        values, nulls = keys[name]
        # a key of one value orders nothing (most null flags; the one input topic)
        columns += [key for key in (values, nulls) if (key != key[0]).any()]
    return np.lexsort(columns).astype(np.int64)


_NO_ROW = (1 << 32) - 1
"""``src_row``'s place for a null (a JSON record's fetch): after every row of a pack."""


def _order_by_record(keys: dict[str, SortKey], came: I64) -> I64 | None:
    """The order of :func:`_order_by_every_key`, sorting two keys where it sorts up to
    eleven: the event time, then the Kafka record (topic, partition, offset) by its rank
    among the batch's records and the row within it as one integer, then ``came`` if
    the rows did not come in that order. A record's rows are consecutive (a pack's
    fetches, a controller event's parts), so its rank comes from sorting the records,
    a few hundred a shard, not the rows (sorting every key over the rows was the largest
    part of the shard step outside the model: ``bench/pipeline_bench.py --py-spy``).
    None where a key falls outside what the two keys hold (a null time, a row number
    that is negative): the caller sorts every key then."""
    count = len(came)
    times, no_time = keys["ts"]
    rows, no_row = keys["src_row"]
    if not count or no_time.any() or (rows < 0).any() or (rows >= _NO_ROW).any():
        return None
    # a record's identity, most significant first; a null after every value, per key
    identity = [part for name in SORT_KEYS[1:4] for part in reversed(keys[name])]
    as_before = np.zeros(count, np.bool_)  # the row's record is the previous row's
    as_before[1:] = True
    for column in identity:
        as_before[1:] &= column[1:] == column[:-1]
    starts = ~as_before
    record_of_row = np.cumsum(starts) - 1
    firsts = [column[starts] for column in identity]
    by_record = np.lexsort(firsts[::-1])
    in_order = [column[by_record] for column in firsts]
    new_record = np.zeros(len(by_record), np.bool_)
    for column in in_order:
        new_record[1:] |= column[1:] != column[:-1]
    rank = np.empty(len(by_record), np.int64)
    rank[by_record] = np.cumsum(new_record)  # the same record twice: the same rank
    within = np.where(no_row, _NO_ROW, rows)
    record_and_row = (rank[record_of_row] << 32) | within
    columns: list[npt.NDArray[np.generic]] = [record_and_row, times]
    if (np.diff(came) <= 0).any():  # np.lexsort is stable: index order breaks ties
        columns.insert(0, came)
    return np.lexsort(columns).astype(np.int64)


def _encoded(column: pa.ChunkedArray | pa.Array) -> pa.DictionaryArray:
    """A string column of the fetches as one dictionary array (a pack's strings are
    dictionary-encoded already: ``routing.FETCH_PACK_SCHEMA``)."""
    combined = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(combined.type):
        return combined
    return combined.dictionary_encode()


def _codes(encoded: pa.DictionaryArray) -> npt.NDArray[np.intp]:
    """The dictionary code of each cell, ``len(dictionary)`` for a null."""
    codes = encoded.indices.fill_null(len(encoded.dictionary))
    return np.asarray(codes.to_numpy(zero_copy_only=False), np.intp)


def _sort_key(mine: pd.Series, theirs: pa.ChunkedArray) -> SortKey:
    """One key over the controller rows (``mine``) then the fetches (``theirs``): the
    values (a string by its rank among the names present, 0 for a null) and whether
    each is null (a null sorts after every value, as pandas sorts)."""
    column = theirs.combine_chunks()
    nulls = np.concatenate(
        [
            mine.isna().to_numpy(dtype=np.bool_),
            column.is_null().to_numpy(zero_copy_only=False).astype(np.bool_),
        ]
    )
    if pa.types.is_string(column.type) or pa.types.is_dictionary(column.type):
        encoded = _encoded(column)
        names = {str(name) for name in mine.dropna()}
        names.update(encoded.dictionary.to_pylist())
        ranks = {name: rank for rank, name in enumerate(sorted(names))}
        of_code = np.array([ranks[name] for name in encoded.dictionary.to_pylist()] + [0], np.int64)
        mine_ranks = [ranks[str(name)] if not pd.isna(name) else 0 for name in mine]
        values = np.concatenate([np.asarray(mine_ranks, np.int64), of_code[_codes(encoded)]])
    else:
        values = np.concatenate(
            [
                mine.to_numpy(dtype=np.int64, na_value=0),
                column.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64),
            ]
        )
    return np.asarray(values, np.int64), nulls
