"""A micro-batch's read limit counts events (``kafka_source.planner.cap_events``): a JSON
record is one, a fetch pack one record of many. The expectations are counted by hand."""

from __future__ import annotations

import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows

from state.events import MOST_ROWS_PER_PACK
from state.fetch_pack import encode_fetch_pack, events_in
from streaming.job.kafka_source.planner import cap_events
from streaming.job.kafka_source.record_times import EVENTS_SAMPLE, FetchedRecords
from tests.unit.test_event_time_alignment import ROW, FakeOffsets, Log, capped_reader, ts

CAP = 2 * MOST_ROWS_PER_PACK  # a partition planning more than 2 records is asked


@pytest.mark.parametrize(
    ("planned_records", "mean", "expected_records"),
    [
        (2, 4096.0, 2),  # 2 records hold at most 2 packs' rows, the cap: not asked
        (3, 1.0, 3),  # JSON records: the record cap is the event cap
        (3, None, 3),  # nothing fetched: as planned
        (3, 4096.0, 2),  # 8192 / 4096
        (3, 3000.0, 2),  # floor(8192 / 3000)
        (3, 2731.0, 2),  # floor(8192 / 2731) = 2 (3 * 2731 = 8193 > 8192)
        (3, 2730.5, 3),  # floor(8192 / 2730.5) = 3 (3 * 2730.5 = 8191.5)
        (1000, 10_000.0, 1),  # a pack past the cap alone is still read
        (1000, 1.5, 1000),  # 1000 records of 1.5 events: under the cap, as planned
        (10_000, 1.5, 5461),  # floor(8192 / 1.5)
    ],
)
def test_cap_events(planned_records: int, mean: float | None, expected_records: int) -> None:
    asked: list[tuple[str, int, int]] = []

    def events_per_record(key: str, start: int, end: int) -> float | None:
        asked.append((key, start, end))
        return mean

    start = {"f:0": 100}
    planned = {"f:0": 100 + planned_records}
    assert cap_events(start, planned, CAP, events_per_record) == {"f:0": 100 + expected_records}
    assert asked == ([] if planned_records <= 2 else [("f:0", 100, 100 + planned_records)])


def test_a_partition_only_registered_is_not_asked() -> None:
    def never(key: str, start: int, end: int) -> float | None:
        raise AssertionError("asked")

    assert cap_events({}, {"n:0": 0}, CAP, never) == {"n:0": 0}


def pack(rows: int) -> bytes:
    return encode_fetch_pack([{**ROW, "ts": 100 + row} for row in range(rows)])


def test_events_in_a_record() -> None:
    assert events_in(ts(5)) == 1
    assert events_in(b"not json") == 1
    assert events_in(None) == 1
    assert events_in(pack(3)) == 3
    assert events_in(pack(3)[:-8]) == 1  # a pack that cannot be read: one dead letter


def test_events_per_record_is_the_mean_over_the_first_records_of_the_range() -> None:
    values: list[bytes | None] = [pack(4), pack(2), ts(1), pack(6), *[ts(2)] * 100]

    def fetch(key: str, offset: int) -> list[tuple[int, bytes | None]]:
        return list(enumerate(values))[offset:][:500]

    records = FetchedRecords(fetch)
    assert records.events_per_record("p", 0, 3) == (4 + 2 + 1) / 3
    assert records.events_per_record("p", 1, 4) == (2 + 1 + 6) / 3
    expected = (4 + 2 + 1 + 6 + EVENTS_SAMPLE - 4) / EVENTS_SAMPLE
    assert records.events_per_record("p", 0, 104) == expected  # the first EVENTS_SAMPLE
    assert records.events_per_record("p", 104, 110) is None  # nothing there


def test_the_reader_caps_packs_in_events_then_aligns() -> None:
    # Cap 6 events: fetch-responses holds packs of two rows (100..101, 110..111, ...),
    # so it reads 3 records, and stops before the fourth (130..131); the controller
    # partition reads its events before 130.
    logs: Log = {
        "controller-events:0": [100, 125, 130, 200],
        "fetch-responses:0": [(100 + 10 * i, 101 + 10 * i) for i in range(10)],
    }
    reader = capped_reader(FakeOffsets(logs))
    start = {"controller-events:0": 0, "fetch-responses:0": 0}
    assert reader.latestOffset(start, ReadMaxRows(6)) == {
        "controller-events:0": 2,
        "fetch-responses:0": 3,
    }
    assert (reader.alignments, reader.alignment_failures) == (1, 0)
