"""Kafka's DumpLogSegments text read into records (streaming/tools/lab/metadata_dump.py),
on dumps Kafka printed here (tests/unit/data/kraft_elr, its README)."""

from __future__ import annotations

from pathlib import Path

from streaming.tools.lab.metadata_dump import LEADER_CHANGE, dumped_records

DUMP = Path(__file__).resolve().parent / "data" / "kraft_elr" / "metadata-dump.txt"


def test_every_record_with_its_batch_epoch_and_the_leader_change() -> None:
    records = dumped_records(DUMP.read_text(encoding="utf-8"))
    # by hand from the dump: offset 0 is the LeaderChange of quorum epoch 3, leader 1
    first = records[0]
    assert (first.offset, first.kind, first.quorum_epoch, first.data["leaderId"]) == (
        0,
        LEADER_CHANGE,
        3,
        1,
    )
    by_offset = {r.offset: r for r in records}
    clear = by_offset[85]
    assert (clear.kind, clear.version, clear.ts_ms, clear.data) == (
        "CLEAR_ELR_RECORD",
        0,
        1795771928150,
        {"topicName": "elr"},
    )
    change = by_offset[36]
    assert (change.kind, change.version, change.quorum_epoch) == ("PARTITION_CHANGE_RECORD", 2, 3)
    assert change.data["eligibleLeaderReplicas"] == [4, 5]
    assert [r.offset for r in records] == sorted(r.offset for r in records)


def test_lines_that_are_not_records_are_skipped() -> None:
    text = "Dumping x.log\nLog starting offset: 0\n| offset: 7 CreateTime: 5 no payload here\n"
    assert dumped_records(text) == []
