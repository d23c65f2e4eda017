"""The scoreboard's verdicts on hand-made runs (streaming/tools/lab/scoreboard.py).

T = 10 s. Kafka's side is built as decisions gives it; isrwatch's side is the records
the lab saw, with their wall times. Every expectation is worked out by hand.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from streaming.tools.lab.decisions import Fence, IsrChange, LeaderShrinkLine, MetadataTruth
from streaming.tools.lab.scoreboard import PROGRESS_FILE, SeenRecord, read_batch_times, score

T = 10_000
COMMIT = 100_000  # Kafka removes follower 3 from orders-0 here


def change(
    ts: int, isr: tuple[int, ...], removed: tuple[int, ...] = (), leader: int = 1
) -> IsrChange:
    return IsrChange(
        ts_ms=ts,
        offset=0,
        topic="orders",
        partition=0,
        leader=leader,
        isr=isr,
        elr=(),
        last_known_elr=(),
        replicas=(1, 2, 3),
        removed=removed,
        added=(),
        leader_changed=False,
        created=not removed and isr == (1, 2, 3),
    )


def seen(at: int, status_3: str, isr: tuple[int, ...] = (1, 2, 3), leader: int = 1) -> SeenRecord:
    record: dict[str, Any] = {
        "topic": "orders",
        "partition": 0,
        "leader": leader,
        "isr": list(isr),
        "followers": [{"broker": 2, "status": "IN_SYNC"}, {"broker": 3, "status": status_3}],
    }
    return SeenRecord(at, record)


CREATED = change(10_000, (1, 2, 3))
SHRUNK = change(COMMIT, (1, 2), removed=(3,))
# the leader's line 20 ms before the commit; follower 3 last caught up at 88,000: its lag
# passed T at 98,000, so Kafka allowed 2,000 ms for SHRINK_ELIGIBLE to come first
LINE = LeaderShrinkLine(COMMIT - 20, 1, "orders", 0, (3,), {3: 88_000})


@pytest.mark.parametrize(
    ("statuses", "flagged_ms", "named_ms"),
    [
        # (seen at, status of follower 3) before the commit
        ([(50_000, "IN_SYNC")], None, None),
        ([(95_000, "LAGGING")], 95_000, None),
        ([(95_000, "LAGGING"), (99_000, "SHRINK_ELIGIBLE")], 95_000, 99_000),
        # seen at the commit's very millisecond: not before it
        ([(COMMIT, "SHRINK_ELIGIBLE")], None, None),
        # flagged in an earlier episode, before it last caught up: not this shrink's flag
        ([(80_000, "LAGGING"), (90_000, "IN_SYNC")], None, None),
    ],
)
def test_a_leader_shrink_is_flagged_and_named_only_by_records_seen_before_the_commit(
    statuses: list[tuple[int, str]], flagged_ms: int | None, named_ms: int | None
) -> None:
    records = [seen(at, status) for at, status in statuses]
    result = score(MetadataTruth([CREATED, SHRUNK]), [LINE], records, T, ["orders"])
    (shrink,) = result.shrinks
    assert shrink.by_leader
    assert (shrink.flagged_ms, shrink.named_ms) == (flagged_ms, named_ms)
    assert shrink.eligible_window_ms == 2_000
    assert shrink.lead_ms == (None if flagged_ms is None else COMMIT - flagged_ms)


def test_a_shrink_without_the_leaders_line_is_the_controllers() -> None:
    result = score(MetadataTruth([CREATED, SHRUNK]), [], [], T, ["orders"])
    assert [s.by_leader for s in result.shrinks] == [False]
    assert result.leader_shrinks == []


def test_a_leader_line_too_long_before_the_commit_is_another_shrinks() -> None:
    early = LeaderShrinkLine(COMMIT - 6_000, 1, "orders", 0, (3,), {3: 88_000})
    result = score(MetadataTruth([CREATED, SHRUNK]), [early], [], T, ["orders"])
    assert [s.by_leader for s in result.shrinks] == [False]


def leader_line(at: int, out_of_sync: tuple[int, ...] = (3,)) -> LeaderShrinkLine:
    return LeaderShrinkLine(at, 1, "orders", 0, out_of_sync, dict.fromkeys(out_of_sync, 88_000))


@pytest.mark.parametrize(
    ("kafka", "fences", "later", "lines", "outcome"),
    [
        # named at 99,000: Kafka removes it within T/2 + 5 s (by 109,000)
        ([SHRUNK], [], [], [], "removed"),
        ([change(109_001, (1, 2), removed=(3,))], [], [], [], "false"),
        ([], [], [(101_000, "IN_SYNC")], [], "caught up"),
        ([], [Fence(104_000, 3, True)], [], [], "fenced"),
        ([], [Fence(104_000, 1, True)], [], [], "leader fenced"),
        ([], [Fence(104_000, 1, False)], [], [], "false"),  # an unfence is no reason
        ([], [], [(110_000, "IN_SYNC")], [], "false"),  # caught up, but too late
        # the leader's check removed it, and no controller committed it in time (3.9,
        # controller-failover: the controller was the killed broker)
        ([], [], [], [leader_line(104_000)], "leader decided"),
        ([], [], [], [leader_line(109_001)], "false"),  # too late
        ([], [], [], [leader_line(104_000, out_of_sync=(2,))], "false"),  # another one
    ],
)
def test_what_kafka_did_after_a_follower_was_named(
    kafka: list[IsrChange],
    fences: list[Fence],
    later: list[tuple[int, str]],
    lines: list[LeaderShrinkLine],
    outcome: str,
) -> None:
    records = [seen(99_000, "SHRINK_ELIGIBLE")] + [seen(at, s) for at, s in later]
    result = score(MetadataTruth([CREATED, *kafka], fences), lines, records, T, ["orders"])
    assert [p.outcome for p in result.predictions] == [outcome]
    assert len(result.false_predictions) == (outcome == "false")


def test_final_state_latency_and_unseen_changes() -> None:
    records = [
        seen(20_000, "IN_SYNC"),
        seen(101_500, "OUT_OF_SYNC", isr=(1, 2)),  # 1,500 ms after the commit
    ]
    result = score(MetadataTruth([CREATED, SHRUNK]), [], records, T, ["orders"])
    assert result.latencies_ms == [1_500]  # the creation came before the first record
    assert result.unseen_changes == []
    assert result.final_equal == [("orders", 0)]
    assert result.row()["commit to record p99 ms"] == 1_500


def test_a_change_no_record_shows_is_unseen_and_the_final_state_differs() -> None:
    records = [seen(20_000, "IN_SYNC")]
    result = score(MetadataTruth([CREATED, SHRUNK]), [], records, T, ["orders"])
    assert result.unseen_changes == [SHRUNK]
    assert result.final_differs == [(("orders", 0), "isr [1, 2, 3] (Kafka: [1, 2])")]


EXPANDED = replace(change(COMMIT + 300, (1, 2, 3)), added=(3,), created=False)


def test_a_shrink_undone_between_two_batches_is_not_unseen() -> None:
    """Kafka removed follower 3 and added it back 300 ms later (a short bounce); the job
    read both in one micro-batch, where the partition's health was what its last record
    already said, so it wrote none: neither change is missed."""
    records = [seen(20_000, "IN_SYNC")]
    result = score(MetadataTruth([CREATED, SHRUNK, EXPANDED]), [], records, T, ["orders"])
    assert result.unseen_changes == []
    assert result.restored_changes == [EXPANDED]
    assert result.final_equal == [("orders", 0)]


def test_an_expansion_after_a_shown_shrink_must_be_shown() -> None:
    """A record showed the shrink: the expansion changes the job's view, and no record
    showing it is a change missed."""
    records = [seen(20_000, "IN_SYNC"), seen(COMMIT + 100, "OUT_OF_SYNC", isr=(1, 2))]
    result = score(MetadataTruth([CREATED, SHRUNK, EXPANDED]), [], records, T, ["orders"])
    assert result.unseen_changes == [EXPANDED]
    assert result.restored_changes == []


@pytest.mark.parametrize(
    ("deleted_ms", "unseen"),
    [
        (COMMIT + 91, False),  # ZooKeeper mode: the partition written offline, then deleted
        (COMMIT + 5_000, False),
        (COMMIT + 5_001, True),  # a state Kafka kept: a record should have shown it
        (COMMIT - 1, True),  # a deletion before it does not replace it
    ],
)
def test_a_change_its_topics_deletion_replaces_at_once_is_not_unseen(
    deleted_ms: int, unseen: bool
) -> None:
    offline = change(COMMIT, (3,), removed=(1, 2), leader=-1)
    records = [seen(20_000, "IN_SYNC")]
    kafka = MetadataTruth([CREATED, offline], deleted_topics={"orders": deleted_ms})
    result = score(kafka, [], records, T, ["orders"])
    assert result.unseen_changes == ([offline] if unseen else [])


@pytest.mark.parametrize(
    ("elr", "last_known_elr", "differs"),
    [
        (None, None, "elr None (Kafka: [3]), last_known_elr None (Kafka: [2])"),
        ([3], [2], None),
        ([3], [], "last_known_elr [] (Kafka: [2])"),
        ([], [2], "elr [] (Kafka: [3])"),
    ],
)
def test_the_final_elr_is_kafkas(
    elr: list[int] | None, last_known_elr: list[int] | None, differs: str | None
) -> None:
    """ISR [1] under min ISR 2 on 4.1: Kafka moved 3 to the ELR, and 2 to the last known
    ELR; a record's null ELR (never stated) is Kafka's empty one."""
    under = replace(change(COMMIT, (1,), removed=(2, 3)), elr=(3,), last_known_elr=(2,))
    record = seen(COMMIT + 1_000, "OUT_OF_SYNC", isr=(1,))
    record.record.update(elr=elr, last_known_elr=last_known_elr)
    result = score(MetadataTruth([CREATED, under]), [], [record], T, ["orders"])
    assert result.final_differs == ([] if differs is None else [(("orders", 0), differs)])


def test_the_error_of_each_prediction_comes_from_the_last_record_before_the_commit() -> None:
    """Follower 3 last caught up at 88,000 (LINE): the bound says 88,000 + 1.5 T = 103,000,
    3,000 ms after the commit; the learned run said 100,005, 5 ms after it. An earlier
    record's figures do not count, nor does one without a learned run."""
    early = seen(98_500, "SHRINK_ELIGIBLE")
    early.record["followers"][1].update(shrink_by_ms=101_000, shrink_at_ms=None)
    last = seen(99_500, "SHRINK_ELIGIBLE")
    last.record["followers"][1].update(shrink_by_ms=103_000, shrink_at_ms=100_005)
    result = score(MetadataTruth([CREATED, SHRUNK]), [LINE], [early, last], T, ["orders"])
    (shrink,) = result.shrinks
    assert (shrink.shrink_by_ms, shrink.shrink_at_ms) == (103_000, 100_005)
    row = result.row()
    assert row["shrink_by median error ms (n)"] == "3000 (1)"
    assert row["shrink_at median error ms (n)"] == "5 (1)"
    unknown = seen(99_500, "SHRINK_ELIGIBLE")
    unknown.record["followers"][1].update(shrink_by_ms=103_000, shrink_at_ms=None)
    result = score(MetadataTruth([CREATED, SHRUNK]), [LINE], [unknown], T, ["orders"])
    assert result.row()["shrink_at median error ms (n)"] is None


def test_topics_outside_the_watch_are_not_scored() -> None:
    result = score(MetadataTruth([CREATED, SHRUNK]), [], [], T, ["clicks"])
    assert result.shrinks == []
    assert result.final_differs == []


def test_a_stop_called_safe_that_left_a_partition_under_min_isr_is_counted() -> None:
    from streaming.tools.lab.scoreboard import judge_gated_stops

    # broker 3 stopped at 100,000 (safe by the check) and the shutdown left orders-0 with
    # ISR [1]: under min ISR 2; broker 2's stop at 200,000 left [1, 3]: fine
    kafka = MetadataTruth(
        [
            CREATED,
            change(99_000, (1, 3), removed=(2,)),
            change(100_000, (1,), removed=(3,)),
            change(150_000, (1, 2, 3)),
            change(200_000, (1, 3), removed=(2,)),
        ]
    )
    gates = [
        {"broker": 3, "safe": True, "stopped_ms": 100_000},
        {"broker": 2, "safe": True, "stopped_ms": 200_000},
        {"broker": 1, "safe": False},  # the check never said yes: no stop
    ]
    result = score(kafka, [], [], T, ["orders"])
    judge_gated_stops(result, kafka, gates, {"orders": 2})
    assert result.gated_stops == 2
    assert result.unsafe_stops == [(3, [("orders", 0)])]
    assert result.row()["gated stops (under min ISR)"] == "2 (1)"


def test_batch_times_are_those_of_batches_that_read_input(tmp_path: Path) -> None:
    """The lab's progress.jsonl, lines as ProgressLog writes Spark's reports (durations by
    hand): the first batch is Spark's start, and a batch with no input rows is Spark's
    idle trigger, not a batch of the job's."""
    progress = tmp_path / PROGRESS_FILE
    entries = [
        {
            "batch": 0,
            "start_ms": 1_000,
            "input_rows": 120,
            "duration_ms": {"triggerExecution": 8_602},
        },
        {"batch": 1, "start_ms": 9_700, "input_rows": 0, "duration_ms": {"triggerExecution": 12}},
        {"batch": 2, "start_ms": 10_000, "input_rows": 7, "duration_ms": {"triggerExecution": 640}},
        {"batch": 3, "start_ms": 11_000, "input_rows": 9, "duration_ms": {"addBatch": 500}},
    ]
    progress.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    assert read_batch_times(progress) == [640]
    assert read_batch_times(tmp_path / "absent.jsonl") == []
    result = score(MetadataTruth([CREATED]), [], [seen(20_000, "IN_SYNC")], T, ["orders"])
    result.batch_ms = [640, 8_602]
    assert result.row()["batch p99 ms"] == 8_602
