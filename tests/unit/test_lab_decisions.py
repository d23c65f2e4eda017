"""Kafka's own records of one lab run, read back (streaming/tools/lab/decisions.py).

The input is what Apache Kafka 4.1.1 wrote here (tests/unit/data/lab_run/README.md); the
expectations were read off those lines by hand.
"""

from __future__ import annotations

from pathlib import Path

from streaming.tools.lab.decisions import (
    Fence,
    MetadataTruth,
    leader_shrink_lines,
    parse_metadata_dump,
    read_metadata_log,
)

DATA = Path(__file__).parent / "data" / "lab_run"


def truth_of_run() -> MetadataTruth:
    return read_metadata_log(parse_metadata_dump((DATA / "metadata-dump.txt").read_text()))


def test_every_record_line_of_the_dump_is_read() -> None:
    records = parse_metadata_dump((DATA / "metadata-dump.txt").read_text())
    assert len(records) == 20
    assert records[0] == (
        14,
        1795760645690,
        {
            "type": "BROKER_REGISTRATION_CHANGE_RECORD",
            "version": 0,
            "data": {"brokerId": 2, "brokerEpoch": 8, "fenced": -1},
        },
    )


# (ts, partition, leader, isr, removed, added, leader changed), in log order, for orders
CHANGES = [
    (1795760646928, 0, 1, (1, 2, 3), (), (), False),
    (1795760646928, 1, 2, (2, 3, 1), (), (), False),
    (1795760646928, 2, 3, (3, 1, 2), (), (), False),
    (1795760710497, 1, 2, (2, 1), (3,), (), False),
    (1795760711619, 0, 1, (1, 2), (3,), (), False),
    (1795760720157, 2, 1, (1, 2), (3,), (), True),
    (1795760729719, 2, 1, (1, 2, 3), (), (3,), False),
    (1795760730358, 0, 1, (1, 2, 3), (), (3,), False),
    (1795760730358, 1, 2, (2, 1, 3), (), (3,), False),
    (1795760754086, 0, 2, (2, 3), (1,), (), True),
    (1795760754086, 1, 2, (2, 3), (1,), (), False),
    (1795760754086, 2, 3, (2, 3), (1,), (), True),
]


def test_partition_changes_carry_the_state_after_them() -> None:
    truth = truth_of_run()
    got = [
        (c.ts_ms, c.partition, c.leader, c.isr, c.removed, c.added, c.leader_changed)
        for c in truth.changes
    ]
    assert got == CHANGES
    assert all(change.topic == "orders" for change in truth.changes)
    assert [c.created for c in truth.changes] == [True] * 3 + [False] * 9
    # a change record leaves out what it does not change: the replicas stay
    assert truth.changes[-1].replicas == (3, 1, 2)


def test_fences_and_unfences() -> None:
    assert truth_of_run().fences == [
        Fence(1795760645690, 2, False),
        Fence(1795760645851, 3, False),
        Fence(1795760646669, 1, False),
        Fence(1795760720157, 3, True),
        Fence(1795760729200, 3, False),
        Fence(1795760756215, 1, True),
    ]


def test_the_state_as_of_a_time() -> None:
    final = truth_of_run().until(1795760740000).final_state()
    assert {key: (c.leader, c.isr) for key, c in final.items()} == {
        ("orders", 0): (1, (1, 2, 3)),
        ("orders", 1): (2, (2, 1, 3)),
        ("orders", 2): (1, (1, 2, 3)),
    }


def test_elr_fields_and_clear_elr() -> None:
    # ELR and ClearElrRecord as PartitionChangeRecord v2 and ClearElrRecord v0 (4.1.1) name
    # their fields; no run here has produced a ClearElrRecord yet, so these records are
    # written by hand from the schemas (metadata/src/main/resources/common/metadata/)
    topic = {"type": "TOPIC_RECORD", "data": {"name": "t", "topicId": "X"}}
    created = {
        "type": "PARTITION_RECORD",
        "data": {"partitionId": 0, "topicId": "X", "replicas": [1, 2, 3], "isr": [1, 2, 3]}
        | {"leader": 1},
    }
    shrunk = {
        "type": "PARTITION_CHANGE_RECORD",
        "data": {"partitionId": 0, "topicId": "X", "isr": [1], "eligibleLeaderReplicas": [2, 3]},
    }
    cleared = {"type": "CLEAR_ELR_RECORD", "data": {"topicName": "t"}}
    truth = read_metadata_log([(1, 10, topic), (2, 10, created), (3, 20, shrunk), (4, 30, cleared)])
    assert [(c.ts_ms, c.isr, c.elr) for c in truth.changes] == [
        (10, (1, 2, 3), ()),
        (20, (1,), (2, 3)),
        (30, (1,), ()),
    ]


def test_leader_shrink_lines() -> None:
    lines = leader_shrink_lines([DATA / "broker-1-server.log"])
    # [2026-11-27 06:25:11,565] ... clicks-2 broker=1 ...
    # (brokerId: 3, endOffset: 1042, lastCaughtUpTimeMs: 1795760699089)
    assert [(line.ts_ms, line.topic, line.partition, line.leader) for line in lines] == [
        (1795760711565, "clicks", 2, 1),
        (1795760711571, "orders", 0, 1),
    ]
    assert [line.out_of_sync for line in lines] == [(3,), (3,)]
    assert lines[1].last_caught_up_ms == {3: 1795760699089}


def test_a_missing_log_reads_as_no_line(tmp_path: Path) -> None:
    assert leader_shrink_lines([tmp_path / "server.log"]) == []
