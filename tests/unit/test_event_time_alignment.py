"""streaming.job.kafka_source.event_time and record_times: a micro-batch that a read limit
cuts stops every partition at the earliest event time it leaves unread.

The logs below are written out by hand; an offset is a record's index in its list, an
integer a JSON record's ``ts``, a pair a fetch pack's earliest and latest ``ts``, a
``None`` a record with no event time (a future dead letter)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from state.fetch_pack import encode_fetch_pack
from streaming.job.kafka_source.event_time import (
    FIRST_LOOK_BACK,
    Span,
    align,
    event_times_of,
    fill,
    first_at_or_after,
    frontier,
)
from streaming.job.kafka_source.offset_reader import OffsetSnapshot
from streaming.job.kafka_source.options import SourceSettings
from streaming.job.kafka_source.record_times import MAX_FETCHES_PER_LOOK, FetchedRecords
from streaming.job.kafka_source.stream_reader import KafkaStreamReader

Log = Mapping[str, Sequence[int | tuple[int, int] | None]]


def span(record: int | tuple[int, int]) -> Span:
    return Span(record, record) if isinstance(record, int) else Span(*record)


class Logs:
    """``RecordTimes`` straight from written-out logs (no fetch sizes)."""

    def __init__(self, logs: Log) -> None:
        self.logs = logs

    def span_at(self, key: str, offset: int, end: int) -> Span | None:
        for found in self.logs[key][offset:end]:
            if found is not None:
                return span(found)
        return None


def ends_of(logs: Log) -> dict[str, int]:
    return {key: len(records) for key, records in logs.items()}


# An election at 200 and one at 300; the fetches come every 10 ms from 100 to 390.
ELECTIONS: Log = {
    "controller-events:0": [100, 200, 300, 400],
    "fetch-responses:0": [100 + 10 * i for i in range(30)],
}


def test_a_plan_that_cuts_nothing_is_kept() -> None:
    start = {"controller-events:0": 0, "fetch-responses:0": 0}
    planned = ends_of(ELECTIONS)  # everything: nothing left unread
    alignment = align(start, planned, ends_of(ELECTIONS), Logs(ELECTIONS))
    assert alignment.ends == {"controller-events:0": 4, "fetch-responses:0": 30}
    assert alignment.frontier is None


def test_the_controller_partition_stops_where_the_capped_fetches_stop() -> None:
    # Cap 10: the fetches stop at offset 10 (ts 200, unread), so the batch holds ts < 200:
    # the controller event at 100 only, not the elections at 200, 300 and 400.
    start = {"controller-events:0": 0, "fetch-responses:0": 0}
    planned = {"controller-events:0": 4, "fetch-responses:0": 10}
    available = ends_of(ELECTIONS)
    times = Logs(ELECTIONS)
    assert frontier(start, planned, available, times) == 200
    first = align(start, planned, available, times)
    assert first.ends == {"controller-events:0": 1, "fetch-responses:0": 10}
    assert first.frontier == 200
    # The next batch: fetches 200..290 (offsets 10..19), unread from 300: the election at
    # 200 (offset 1) joins them, the one at 300 waits.
    second = align(
        first.ends, {"controller-events:0": 4, "fetch-responses:0": 20}, available, times
    )
    assert second.ends == {"controller-events:0": 2, "fetch-responses:0": 20}
    assert second.frontier == 300


def test_the_earliest_time_left_unread_over_all_cut_partitions_is_the_frontier() -> None:
    logs: Log = {
        "f:0": [10, 20, 30, 40, 50, 60],
        "f:1": [5, 15, 25, 35, 45, 55],
        "c:0": [1, 22, 44],
    }
    start = {"f:0": 0, "f:1": 0, "c:0": 0}
    planned = {"f:0": 4, "f:1": 2, "c:0": 3}  # f:0 leaves 50 unread, f:1 leaves 25
    alignment = align(start, planned, ends_of(logs), Logs(logs))
    assert alignment.frontier == 25
    # f:0 reads 10, 20 (30 >= 25 stops it); f:1 reads 5, 15; c:0 reads 1, 22.
    assert alignment.ends == {"f:0": 2, "f:1": 2, "c:0": 2}


def test_records_at_the_frontier_itself_wait_for_the_next_batch() -> None:
    # Cap 3 cuts f:0 before its fourth record (200); the third shares that millisecond,
    # so it waits too (the batch holds ts < 200), as does the controller event at 200.
    logs: Log = {"f:0": [100, 100, 200, 200, 200, 300], "c:0": [150, 200]}
    start = {"f:0": 0, "c:0": 0}
    alignment = align(start, {"f:0": 3, "c:0": 2}, ends_of(logs), Logs(logs))
    assert alignment.frontier == 200
    assert alignment.ends == {"f:0": 2, "c:0": 1}


def test_a_partition_with_nothing_before_the_frontier_reads_nothing() -> None:
    logs: Log = {"f:0": [10, 20, 30, 40], "c:0": [35, 36]}
    alignment = align({"f:0": 0, "c:0": 0}, {"f:0": 2, "c:0": 2}, ends_of(logs), Logs(logs))
    assert alignment.frontier == 30
    assert alignment.ends == {"f:0": 2, "c:0": 0}


def test_a_run_of_one_millisecond_longer_than_the_cap_is_read_past_the_frontier() -> None:
    # Cap 3: f:0 holds five records at 500. Stopping at 500 moves nothing (f:0 and c:0
    # both start at 500), so the frontier becomes 501: f:0 reads its 3 planned records,
    # c:0 its one at 500.
    logs: Log = {"f:0": [500, 500, 500, 500, 500, 600], "c:0": [500, 700]}
    start = {"f:0": 0, "c:0": 0}
    alignment = align(start, {"f:0": 3, "c:0": 2}, ends_of(logs), Logs(logs))
    assert alignment.frontier == 501
    assert alignment.widened
    assert alignment.ends == {"f:0": 3, "c:0": 1}


def records_between(start: Mapping[str, int]) -> Callable[[Mapping[str, int]], float]:
    """``fill``'s count of events: one a record, as JSON records are."""

    def count(ends: Mapping[str, int]) -> float:
        return sum(max(0, end - start[key]) for key, end in ends.items() if key in start)

    return count


# Two busy partitions (a record every 5 ms) and two quiet ones (every 10 ms), as a
# collector's packs keyed by leader make them; the controller partition holds elections.
UNEVEN: Log = {
    "f:0": [100 + 5 * i for i in range(40)],
    "f:1": [100 + 5 * i for i in range(40)],
    "f:2": [100 + 10 * i for i in range(20)],
    "f:3": [100 + 10 * i for i in range(20)],
    "c:0": [150, 250],
}


def test_uneven_partitions_fill_the_batch_the_cap_allows_in_all() -> None:
    # Cap 10 a partition: 10 + 10 + 10 + 10 + 2 = 42 records. The busy partitions leave
    # 150 unread, so aligned the quiet ones read 100..140 (5 each) and the election at
    # 150 waits: 10 + 10 + 5 + 5 = 30.
    start = dict.fromkeys(UNEVEN, 0)
    planned = {"f:0": 10, "f:1": 10, "f:2": 10, "f:3": 10, "c:0": 2}
    available, times = ends_of(UNEVEN), Logs(UNEVEN)
    assert align(start, planned, available, times).ends == {
        "f:0": 10,
        "f:1": 10,
        "f:2": 5,
        "f:3": 5,
        "c:0": 0,
    }
    # Filled towards 97.5 % of 42: scaled by 40.95 / 30 (14 records each), the busy
    # ones stop at 170: 14 + 14 + 7 + 7 + 1 (the election at 150) = 43, one too many.
    # Read off the line between (1, 30) and (1.365, 43), 1.31 is 14 records again, 43;
    # then 1.26, 13 records, stops them at 165: 13 + 13 + 7 + 7 + 1 = 41, kept (97 %).
    filled = fill(start, planned, available, times, records_between(start))
    assert filled.frontier == 165
    assert filled.ends == {"f:0": 13, "f:1": 13, "f:2": 7, "f:3": 7, "c:0": 1}


def test_a_batch_already_full_is_not_widened() -> None:
    # Even partitions: aligned, the batch reads all the cap allows.
    logs: Log = {"f:0": [10 * i for i in range(30)], "f:1": [10 * i + 5 for i in range(30)]}
    start = {"f:0": 0, "f:1": 0}
    planned = {"f:0": 10, "f:1": 10}
    aligned = align(start, planned, ends_of(logs), Logs(logs))
    assert aligned.ends == {"f:0": 10, "f:1": 10}
    assert fill(start, planned, ends_of(logs), Logs(logs), records_between(start)) == aligned


@pytest.mark.parametrize(
    ("logs", "aligned_ends"),
    [
        # More records: f:0 holds JSON records four a millisecond (100..109), f:1 packs at
        # 100, 120, 130, 140. Aligned, f:0 leaves 102 unread, so it reads 8 records and f:1
        # one pack: 18 events in 9 records. Widened by the events alone, f:0 would read 20
        # records (ts < 105) and f:1 its pack: 30 events, but 21 records. Every widening
        # that adds an event adds records past the 12 of the plan.
        ({"f:0": [100 + i // 4 for i in range(40)], "f:1": [100, 120, 130, 140]}, (8, 1)),
        # More events: f:0 holds JSON records every 10 ms, f:1 packs every 2 ms. Aligned
        # at 104 (f:1's third pack), f:0 reads 100 and f:1 two packs: 21 events in 3
        # records. Any widening brings f:1's third pack (10 events more) before anything of
        # f:0's: 31 events, in 4 records.
        (
            {"f:0": [100 + 10 * i for i in range(40)], "f:1": [100 + 2 * i for i in range(40)]},
            (1, 2),
        ),
    ],
    ids=["records", "events"],
)
def test_no_widening_reads_more_than_the_capped_plan(
    logs: Log, aligned_ends: tuple[int, int]
) -> None:
    # Capped at 10 JSON records of f:0 and 2 packs of 10 events of f:1: 30 events in 12
    # records. Where every widening reads more of either, the alignment is kept.
    start = {"f:0": 0, "f:1": 0}
    planned = {"f:0": 10, "f:1": 2}

    def events(ends: Mapping[str, int]) -> float:
        return ends["f:0"] + 10 * ends["f:1"]

    aligned = align(start, planned, ends_of(logs), Logs(logs))
    assert (aligned.ends["f:0"], aligned.ends["f:1"]) == aligned_ends
    assert fill(start, planned, ends_of(logs), Logs(logs), events) == aligned


def test_records_without_an_event_time_take_the_next_ones() -> None:
    # f:0 is cut at offset 2 (no time): the next timed record (300) sets the frontier.
    # c:0's record with no time (offset 1) goes with 350, after the frontier.
    logs: Log = {"f:0": [100, None, None, 300, 400], "c:0": [250, None, 350]}
    start = {"f:0": 0, "c:0": 0}
    alignment = align(start, {"f:0": 2, "c:0": 3}, ends_of(logs), Logs(logs))
    assert alignment.frontier == 300
    # f:0's None at offset 1 has no timed record before its planned end: read now.
    assert alignment.ends == {"f:0": 2, "c:0": 1}


def test_a_cut_with_no_event_time_after_it_keeps_the_plan() -> None:
    logs: Log = {"raw:0": [None] * 10, "raw:1": [None] * 4}
    planned = {"raw:0": 7, "raw:1": 4}
    alignment = align({"raw:0": 0, "raw:1": 0}, planned, ends_of(logs), Logs(logs))
    assert alignment == type(alignment)(planned, None)


def test_a_partition_only_registered_in_this_batch_cuts_nothing() -> None:
    # n:0 is new: registered at its beginning (0), read from the next batch.
    logs: Log = {"f:0": [10, 20, 30], "n:0": [1, 2, 3]}
    alignment = align({"f:0": 0}, {"f:0": 3, "n:0": 0}, ends_of(logs), Logs(logs))
    assert alignment.frontier is None
    assert alignment.ends == {"f:0": 3, "n:0": 0}


def test_a_pack_straddling_the_frontier_waits_and_brings_the_frontier_down() -> None:
    # f:0 is cut before 300. f:1's second record is a pack of 250..320: read, it would
    # apply fetches at 300..320 before the election at 300; left unread, its fetches at
    # 250..299 would come after the controller event at 260. So the frontier comes down
    # to 250: f:1 reads its first record, f:0 its records before 250, c:0 its event at 100.
    logs: Log = {"f:0": [100, 200, 300, 400], "f:1": [(100, 240), (250, 320)], "c:0": [100, 260]}
    start = {"f:0": 0, "f:1": 0, "c:0": 0}
    alignment = align(start, {"f:0": 2, "f:1": 2, "c:0": 2}, ends_of(logs), Logs(logs))
    assert alignment.frontier == 250
    assert alignment.ends == {"f:0": 2, "f:1": 1, "c:0": 1}


def test_straddling_packs_bring_the_frontier_down_in_rounds() -> None:
    # The cut leaves 500 unread; p:1's pack (400..600) straddles it, so 400; then p:2's
    # pack (300..450) straddles 400, so 300, which nothing straddles.
    logs: Log = {"p:0": [100, 500], "p:1": [(100, 200), (400, 600)], "p:2": [(300, 450)]}
    start = dict.fromkeys(logs, 0)
    alignment = align(start, {"p:0": 1, "p:1": 2, "p:2": 1}, ends_of(logs), Logs(logs))
    assert alignment.frontier == 300
    assert alignment.ends == {"p:0": 1, "p:1": 1, "p:2": 0}


def test_a_cut_before_a_pack_leaves_it_whole() -> None:
    # The first unread record is a pack of 200..300: the frontier is its earliest time.
    logs: Log = {"f:0": [(100, 150), (200, 300)], "c:0": [120, 200]}
    alignment = align({"f:0": 0, "c:0": 0}, {"f:0": 1, "c:0": 2}, ends_of(logs), Logs(logs))
    assert alignment.frontier == 200
    assert alignment.ends == {"f:0": 1, "c:0": 1}


@pytest.mark.parametrize(
    ("time", "expected"),
    [
        (9, 0),  # before everything
        (10, 0),  # the first record is at it
        (11, 1),
        (30, 2),  # the first of a run of equal times
        (31, 4),
        (50, 5),  # the last record
        (51, 6),  # after everything: the end
    ],
)
def test_first_at_or_after(time: int, expected: int) -> None:
    logs = Logs({"p": [10, 20, 30, 30, 40, 50]})
    assert first_at_or_after(logs, "p", 0, 6, time) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b'{"type":"IsrChange","ts":1700000000000}', 1_700_000_000_000),
        (b'{"ts": -5}', -5),
        (b'{"ts": 2e3}', None),  # a float is not an event time
        (b'{"ts": "1700000000000"}', None),
        (b'{"ts": true}', None),  # JSON true is not 1
        (b'{"time": 5}', None),
        (b"[1, 2]", None),
        (b"\xff\xfe{", None),  # not UTF-8
        (b'{"ts": 1', None),  # cut short
        (b"", None),
        (None, None),  # a tombstone
        (b"[" * 100_000 + b"]" * 100_000, None),  # past the parser's depth
    ],
)
def test_event_times_of_a_json_record(value: bytes | None, expected: int | None) -> None:
    assert event_times_of(value) == (None if expected is None else Span(expected, expected))


ROW = {
    "topic": "t",
    "partition": 0,
    "leader": 1,
    "follower": 2,
    "leader_epoch": 0,
    "fetch_offset": 0,
    "leader_leo": 0,
    "high_watermark": 0,
}


def value_of(record: int | tuple[int, int]) -> bytes:
    """A log's record as Kafka holds it: a JSON record, or a pack of two rows."""
    if isinstance(record, int):
        return ts(record)
    return encode_fetch_pack([{**ROW, "ts": time} for time in record])


def test_event_times_of_a_fetch_pack_span_its_rows() -> None:
    pack = encode_fetch_pack([{**ROW, "ts": 30}, {**ROW, "ts": 10}, {**ROW, "ts": 20}])
    assert event_times_of(pack) == Span(10, 30)
    assert event_times_of(pack[:-8]) is None  # truncated: no time to read


# --------------------------------------------------------------------------- fetching


def chunked(
    records: Sequence[tuple[int, bytes | None]], size: int, look_back: int = 0
) -> FetchedRecords:
    """``FetchedRecords`` over a log of (offset, value) whose fetches return ``size`` records
    from the first at or after the offset asked for."""

    def fetch(key: str, offset: int) -> list[tuple[int, bytes | None]]:
        return [record for record in records if record[0] >= offset][:size]

    return FetchedRecords(fetch, look_back)


def ts(value: int) -> bytes:
    return b'{"ts":%d}' % value


def test_a_search_narrows_into_what_one_fetch_brought() -> None:
    times = chunked([(i, ts(10 * i)) for i in range(10)], size=4)
    # First look at max(0, 10 - 256) = 0: fetch 0..3, 0 < 55. No time at or after 55
    # known yet: the middle of [1, 10), 5: fetch 5..8, 50 < 55; the middle of [6, 10), 8
    # (80), in it; on the line from 50 (at 5) to 80 (at 8), 55 falls at 5, so the lowest
    # of [6, 8): 6 (60), in it -> 6
    assert first_at_or_after(times, "p", 0, 10, 55) == 6
    assert times.fetches == 2


def test_a_cut_partition_costs_one_fetch() -> None:
    assert FIRST_LOOK_BACK == 256
    # Two records per millisecond (ts = offset // 2); cut at 2001, whose time (1000) is
    # shared by offset 2000. The look at 2001 fetches 1745..2244; the search's first look
    # (2001 - 256 = 1745, ts 872 < 1000) and its narrowing of [1746, 2001) stay in it.
    times = chunked([(i, ts(i // 2)) for i in range(3000)], size=500, look_back=256)
    alignment = align({"p": 0}, {"p": 2001}, {"p": 3000}, times)
    assert alignment.frontier == 1000
    assert alignment.ends == {"p": 2000}
    assert times.fetches == 1


def test_a_boundary_far_from_the_end_is_reached_by_galloping_back() -> None:
    times = chunked([(i, ts(i)) for i in range(2000)], size=500, look_back=256)
    # Looks at 1744 (fetch 1488..1987), 1488 (in it), 976 (fetch 720..1219), each >= 100,
    # then at max(0, 2000 - 2048) = 0 (fetch 0..499), 0 < 100; the narrowing of [1, 976)
    # stays in that last fetch.
    assert first_at_or_after(times, "p", 0, 2000, 100) == 100
    assert times.fetches == 3


def test_a_look_back_that_falls_short_fetches_again_from_the_offset() -> None:
    times = chunked([(i, ts(i)) for i in range(10)], size=3, look_back=256)
    assert times.span_at("p", 5, 10) == (5, 5)  # fetched 0..2, then 5..7
    assert times.fetches == 2
    # A fetch brings 3 records here (a fetch of packs, a handful): from now on this
    # partition looks back 3 // 2 = 1 record, so the look at 9 fetches 8..9 once.
    assert times.span_at("p", 9, 10) == (9, 9)
    assert times.fetches == 3


class CountedLogs(Logs):
    """``Logs`` that count the looks a search makes."""

    looks = 0

    def span_at(self, key: str, offset: int, end: int) -> Span | None:
        self.looks += 1
        return super().span_at(key, offset, end)


def test_evenly_spread_times_are_found_on_the_line_between_two_looks() -> None:
    times = CountedLogs({"p": list(range(10_000))})  # ts = offset
    # Galloping back: 9744, 9488, 8976, 7952 are at or after 6543, 5904 is before it. On
    # the line from 5904 to 7952, 6543 falls at 6543 (at or after: the bracket is
    # [5905, 6543)); on the line from 5904 to 6543, at 6543 again, so the last offset of
    # the bracket, 6542 (before) -> 6543. A halving search would take 11 looks, not 2.
    assert first_at_or_after(times, "p", 0, 10_000, 6543) == 6543
    assert times.looks == 5 + 2


def test_bunched_times_still_narrow_by_halving() -> None:
    # 1,000 records at 0 then one at 1000: on the line, 1 always falls at the first
    # offset of the bracket, one record at a time. Every two steps that do not halve the
    # bracket are followed by a halving: the first look (745, before 1) then [746, 1000]
    # in at most 3 steps per halving of its 255 records, 8 halvings.
    times = CountedLogs({"p": [0] * 1000 + [1000]})
    assert first_at_or_after(times, "p", 0, 1001, 1) == 1000
    assert times.looks <= 1 + 3 * 8


@given(
    times=st.lists(st.integers(0, 40), max_size=60).map(sorted),
    holes=st.lists(st.integers(0, 60), max_size=10),
    time=st.integers(-1, 42),
    bounds=st.tuples(st.integers(0, 70), st.integers(0, 70)).map(sorted),
)
@settings(max_examples=500, deadline=None)
def test_first_at_or_after_is_the_first_record_at_or_after_the_time(
    times: list[int], holes: list[int], time: int, bounds: list[int]
) -> None:
    records: list[int | None] = list(times)
    for hole in holes:  # records with no event time, anywhere
        records.insert(min(hole, len(records)), None)
    logs = Logs({"p": records})
    start, end = min(bounds[0], len(records)), min(bounds[1], len(records))
    expected = next(
        (
            offset
            for offset in range(start, end)
            if (found := logs.span_at("p", offset, end)) is not None and found.latest >= time
        ),
        end,
    )
    assert first_at_or_after(logs, "p", start, end, time) == expected


def test_offsets_missing_from_the_log_take_the_next_record() -> None:
    # Offsets 3 and 4 were compacted away.
    times = chunked([(0, ts(0)), (1, ts(1)), (2, ts(2)), (5, ts(5)), (6, ts(6))], size=3)
    assert times.span_at("p", 3, 7) == (5, 5)
    assert times.span_at("p", 4, 7) == (5, 5)  # within the chunk fetched from 3: no new fetch
    assert times.fetches == 1
    assert times.span_at("p", 3, 5) is None  # the next record is past the end asked


def test_a_look_past_records_without_an_event_time_gives_up_after_its_fetches() -> None:
    bad: list[tuple[int, bytes | None]] = [(i, b"not json") for i in range(20)]
    times = chunked([*bad, (20, ts(7))], size=3)
    assert times.span_at("p", 0, 21) is None
    assert times.fetches == MAX_FETCHES_PER_LOOK
    wider = chunked([*bad, (20, ts(7))], size=6)  # 4 fetches of 6 reach offset 20
    assert wider.span_at("p", 0, 21) == (7, 7)


def test_a_fetch_that_returns_nothing_gives_no_time() -> None:
    assert chunked([], size=3).span_at("p", 0, 5) is None


# --------------------------------------------------------------------------- properties

# Up to 4 partitions of up to 40 records each, times in event-time order with many ties.
logs_strategy = st.lists(
    st.lists(st.integers(0, 30), max_size=40).map(sorted), min_size=1, max_size=4
).map(lambda lists: {f"t:{i}": list(times) for i, times in enumerate(lists)})


def read_in_capped_batches(logs: Log, cap: int, packs_overlap: bool, filled: bool) -> None:
    """Reads ``logs`` in batches of at most ``cap`` records a partition, each aligned
    (``filled``: aligned and filled, at most the capped plan's records in all), and
    checks that every batch reads something until all is read, once, and that what
    a batch reads, every event of every pack, comes before what it leaves: strictly,
    unless a run of one millisecond longer than the cap made it read past the frontier.
    Packs of different partitions that overlap in time (``packs_overlap``: the property's
    logs allow it, a collector's packs of one poll each do not) may leave no cut that
    keeps the order: then the plan is read as capped (frontier None)."""
    available = {key: len(records) for key, records in logs.items()}
    start = dict.fromkeys(logs, 0)
    for _ in range(sum(available.values()) + 1):
        if start == available:
            break
        planned = {key: min(available[key], first + cap) for key, first in start.items()}
        if filled:
            alignment = fill(start, planned, available, Logs(logs), records_between(start))
            ends = alignment.ends
            assert all(start[key] <= ends[key] <= available[key] for key in logs)
            assert sum(ends.values()) <= sum(planned.values())
        else:
            alignment = align(start, planned, available, Logs(logs))
            ends = alignment.ends
            assert all(start[key] <= ends[key] <= planned[key] for key in logs)
        assert ends != start
        read = [
            t
            for key in logs
            for r in logs[key][start[key] : ends[key]]
            if r is not None
            for t in span(r)
        ]
        unread = [
            t for key in logs for r in logs[key][ends[key] :] if r is not None for t in span(r)
        ]
        if read and unread:
            if alignment.frontier is None:
                assert packs_overlap
            elif alignment.widened:
                assert max(read) <= min(unread)
            else:
                assert max(read) < alignment.frontier <= min(unread)
        start = ends
    assert start == available


@given(logs=logs_strategy, cap=st.integers(1, 8), filled=st.booleans())
@settings(max_examples=400, deadline=None)
def test_capped_batches_read_everything_once_in_event_time_order(
    logs: dict[str, list[int]], cap: int, filled: bool
) -> None:
    read_in_capped_batches(logs, cap, packs_overlap=False, filled=filled)


def packed(times: list[int], joins: list[bool]) -> list[int | tuple[int, int]]:
    """``times`` in order, each joined to the record before it where ``joins`` says: a
    run of joined times is a pack spanning its first and last."""
    records: list[list[int]] = []
    for time, join in zip(times, joins, strict=False):
        if join and records:
            records[-1].append(time)
        else:
            records.append([time])
    return [run[0] if len(run) == 1 else (run[0], run[-1]) for run in records]


packed_logs_strategy = st.lists(
    st.tuples(
        st.lists(st.integers(0, 30), max_size=40).map(sorted),
        st.lists(st.booleans(), min_size=40, max_size=40),
    ),
    min_size=1,
    max_size=4,
).map(lambda parts: {f"t:{i}": packed(times, joins) for i, (times, joins) in enumerate(parts)})


@given(logs=packed_logs_strategy, cap=st.integers(1, 8), filled=st.booleans())
@settings(max_examples=400, deadline=None)
def test_capped_batches_of_packs_never_split_an_event_time_across_batches(
    logs: dict[str, list[int | tuple[int, int]]], cap: int, filled: bool
) -> None:
    read_in_capped_batches(logs, cap, packs_overlap=True, filled=filled)


@given(
    times=st.lists(st.integers(0, 1000), max_size=60).map(sorted),
    size=st.integers(1, 20),
    look_back=st.integers(0, 30),
    offset=st.integers(0, 70),
    end=st.integers(0, 70),
)
@settings(max_examples=300, deadline=None)
def test_fetched_times_are_the_logs_times(
    times: list[int], size: int, look_back: int, offset: int, end: int
) -> None:
    # Every record has a time: a look never has to go past records without one.
    fetched = chunked([(i, ts(t)) for i, t in enumerate(times)], size, look_back)
    end = min(end, len(times))
    assert fetched.span_at("p", offset, end) == Logs({"p": times}).span_at("p", offset, end)


# --------------------------------------------------------------------------- the reader


class FakeOffsets:
    """The stream reader's ``OffsetReader``: ``ends`` as Kafka's answer, and the records'
    times from ``logs`` (or a look that fails with ``failure``)."""

    def __init__(self, logs: Log, failure: Exception | None = None) -> None:
        self.logs, self.failure = logs, failure

    def snapshot(self, wants_beginning: Callable[[str], bool]) -> OffsetSnapshot:
        ends = ends_of(self.logs)
        return OffsetSnapshot(ends, {key: 0 for key in ends if wants_beginning(key)}, set(ends))

    @contextlib.contextmanager
    def records(self) -> Iterator[FetchedRecords]:
        if self.failure is not None:
            raise self.failure
        records = {
            key: [(i, None if t is None else value_of(t)) for i, t in enumerate(times)]
            for key, times in self.logs.items()
        }
        yield FetchedRecords(lambda key, offset: records[key][offset : offset + 500])

    def close(self) -> None:
        pass


def capped_reader(offsets: FakeOffsets) -> KafkaStreamReader:
    reader = KafkaStreamReader(
        SourceSettings(("b:9092",), ("controller-events", "fetch-responses"))
    )
    reader._offsets = offsets  # type: ignore[assignment]
    reader._sleep = lambda seconds: None
    return reader


def test_the_reader_aligns_a_capped_plan() -> None:
    reader = capped_reader(FakeOffsets(ELECTIONS))
    start = {"controller-events:0": 0, "fetch-responses:0": 0}
    # Capped at 10 a partition: the 4 controller events and fetches 100..190, 14 events.
    # Aligned at 200 that is 1 + 10 = 11. Filled towards 97.5 % of 14: fetches scaled by
    # 13.65 / 11 (13 records) stop at 230: 2 + 13 = 15, too many; read off the line
    # between (1, 11) and (1.24, 15), 1.16 (12 records) stops at 220: the election at
    # 200 and fetches up to 210, 2 + 12 = 14.
    assert reader.latestOffset(start, ReadMaxRows(10)) == {
        "controller-events:0": 2,
        "fetch-responses:0": 12,
    }
    assert (reader.alignments, reader.alignment_failures) == (1, 0)
    # Uncapped, nothing is cut: no alignment.
    assert reader.latestOffset(start, ReadAllAvailable()) == ends_of(ELECTIONS)
    assert reader.alignments == 1


def test_a_look_that_fails_leaves_the_plan_as_capped_and_the_source_up() -> None:
    reader = capped_reader(FakeOffsets(ELECTIONS, TimeoutError("no record")))
    start = {"controller-events:0": 0, "fetch-responses:0": 0}
    assert reader.latestOffset(start, ReadMaxRows(10)) == {
        "controller-events:0": 4,
        "fetch-responses:0": 10,
    }
    assert (reader.alignments, reader.alignment_failures) == (0, 1)
    assert reader.consecutive_failures == 0
