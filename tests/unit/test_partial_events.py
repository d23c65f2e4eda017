"""Partial controller events (docs/event-contract.md): the contract, the model, routing,
the streaming step and replay.

A partial event leaves out the fields a log line does not state: an IsrChange without
``old_isr``, a ControllerChange without ``controller_epoch``, a LeaderAndIsr with only
its ``leader``. Every number below is worked out by hand from the events of each test.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from state import (
    NEVER,
    UNKNOWN_OFFSET,
    IsrChangeKind,
    ReplicationModel,
    parse_json_line,
    parse_record,
    shard_of,
)
from state.controller_routing import split_for_shards
from state.events import (
    ControllerChange,
    DeadLetter,
    DeadLetterReason,
    IsrChange,
    LeaderAndIsr,
    Source,
    TopicChange,
)
from state.settings import RuleSettings
from streaming.job.routing import DEAD
from streaming.tools.replay import replay
from tests.unit.builders import TOPIC, apply, fetch, health, leader_and_isr, model
from tests.unit.test_shard_state import Job, kafka_records
from tests.unit.test_shard_state import health as job_health

C = Source.CONTROLLER_EVENTS
R = DeadLetterReason
TP = {"topic": "t", "partition": 2}


def partial_leader(ts: int, leader: int, partition: int = 0, topic: str = TOPIC) -> LeaderAndIsr:
    return LeaderAndIsr(ts=ts, topic=topic, partition=partition, leader=leader)


def committed(
    ts: int,
    new: tuple[int, ...],
    partition_epoch: int | None = None,
    leader: int = 1,
    partition: int = 0,
) -> IsrChange:
    """A Kafka 2.8+ ``ISR updated to ...`` line with nothing before it: no old_isr."""
    return IsrChange(
        ts=ts,
        topic=TOPIC,
        partition=partition,
        leader=leader,
        new_isr=new,
        partition_epoch=partition_epoch,
    )


def parsed(record: dict[str, Any]) -> object:
    """The record parsed decoded and as text (the compiled validator's path): the same."""
    decoded = parse_json_line(C, record)
    text = json.dumps(record)
    as_text = parse_record(C, text)
    if isinstance(decoded, DeadLetter):
        assert as_text == DeadLetter(C, text, decoded.reason, decoded.detail)
    else:
        assert as_text == decoded
    return decoded


# --------------------------------------------------------------------------- contract


def test_the_schema_accepts_the_partial_forms() -> None:
    assert parsed({"type": "LeaderAndIsr", "ts": 5, **TP, "leader": 3}) == LeaderAndIsr(
        ts=5, topic="t", partition=2, leader=3
    )
    leaderless = parsed({"type": "LeaderAndIsr", "ts": 5, **TP, "leader": -1})
    assert isinstance(leaderless, LeaderAndIsr)
    assert leaderless.is_partial
    assert leaderless.leader == -1
    change = parsed(
        {
            "type": "IsrChange",
            "ts": 6,
            **TP,
            "leader": 1,
            "new_isr": [2, 1, 3],
            "partition_epoch": 18,
        }
    )
    assert change == IsrChange(
        ts=6, topic="t", partition=2, leader=1, new_isr=(2, 1, 3), partition_epoch=18
    )
    assert isinstance(change, IsrChange)
    assert change.old_isr is None
    assert parsed({"type": "ControllerChange", "ts": 7, "controller_id": 0}) == ControllerChange(
        ts=7, controller_id=0
    )


FULL = {"leader_epoch": 4, "isr": [3, 1], "replicas": [3, 1], "partition_epoch": 9}


def _some(*names: str) -> dict[str, Any]:
    return {"type": "LeaderAndIsr", "ts": 5, **TP, "leader": 3, **{n: FULL[n] for n in names}}


@pytest.mark.parametrize(
    ("record", "reason", "detail"),
    [
        # the four state fields of a LeaderAndIsr come together or not at all
        (_some("leader_epoch"), R.MISSING_FIELD, "missing required field isr"),
        (_some("partition_epoch"), R.MISSING_FIELD, "missing required field leader_epoch"),
        (_some("leader_epoch", "isr", "partition_epoch"), R.MISSING_FIELD, "field replicas"),
        (_some("isr", "replicas"), R.MISSING_FIELD, "missing required field leader_epoch"),
        ({"type": "LeaderAndIsr", "ts": 5, **TP}, R.MISSING_FIELD, "missing required field leader"),
        ({"type": "LeaderAndIsr", "ts": 5, "partition": 2, "leader": 3}, R.MISSING_FIELD, "topic"),
        # a deletion (-2) is fenced by its epochs: never partial
        (_some() | {"leader": -2}, R.INVALID_VALUE, "leader must be >= -1"),
        ({"type": "IsrChange", "ts": 6, **TP, "leader": 1}, R.MISSING_FIELD, "field new_isr"),
        ({"type": "IsrChange", "ts": 6, **TP, "new_isr": [1]}, R.MISSING_FIELD, "field leader"),
        (
            {"type": "IsrChange", "ts": 6, **TP, "leader": 1, "new_isr": [1], "old_isr": None},
            R.WRONG_TYPE,
            "old_isr must be array, not null",
        ),  # absent, not null
        ({"type": "ControllerChange", "ts": 7}, R.MISSING_FIELD, "field controller_id"),
        (
            {"type": "ControllerChange", "ts": 7, "controller_id": 0, "controller_epoch": None},
            R.WRONG_TYPE,
            "controller_epoch must be integer, not null",
        ),
    ],
)
def test_a_partial_event_missing_a_required_field_is_a_dead_letter(
    record: dict[str, Any], reason: DeadLetterReason, detail: str
) -> None:
    letter = parsed(record)
    assert isinstance(letter, DeadLetter), letter
    assert letter.reason is reason
    assert detail in letter.detail


def test_the_full_leader_and_isr_with_leader_minus_two_is_still_a_deletion() -> None:
    event = parsed(_some(*FULL) | {"leader": -2})
    assert isinstance(event, LeaderAndIsr)
    assert not event.is_partial


# --------------------------------------------------------------------------- IsrChange


def elected(m: ReplicationModel, epoch: int = 3, partition_epoch: int = 10) -> None:
    """Leader 1, replicas and ISR 1,2,3, at ts 0."""
    assert apply(m, leader_and_isr(0, epoch=epoch, partition_epoch=partition_epoch)).applied


def pending_since(m: ReplicationModel, leader: int = 1) -> dict[str, int]:
    """The leader's isrChangeSet as the model holds it: partition -> oldest change."""
    state = m.windows.leaders.get(leader)
    return {} if state is None else {tp.key(): ts for tp, ts in state.pending.items()}


def test_an_isr_change_without_the_old_isr_changes_the_isr_the_model_holds() -> None:
    m = model()
    elected(m)
    shrink = apply(m, committed(1_000, (1, 3), partition_epoch=11))
    assert shrink.rejected_reasons == []
    assert shrink.applied["IsrChange"] == 1
    [t] = shrink.isr_transitions
    assert (t.kind, t.by_controller, t.removed, t.added, t.ts) == (
        IsrChangeKind.SHRINK,
        False,
        (2,),
        (),
        1_000,
    )
    row = m.table.live_row_of(TOPIC, 0)
    assert (m.table.isr[row], int(m.table.partition_epoch[row])) == ((1, 3), 11)
    assert int(m.table.isr_changed_ms[row]) == 1_000
    assert pending_since(m) == {"orders:0": 1_000}  # zk: the leader's propagation is due
    expand = apply(m, committed(2_000, (1, 3, 2), partition_epoch=12))
    [t] = expand.isr_transitions
    assert (t.kind, t.removed, t.added) == (IsrChangeKind.EXPAND, (), (2,))
    assert health(m, 2_000).isr == [1, 3, 2]
    (slot,) = np.flatnonzero(m.table.replica_broker[row] == 2)
    assert int(m.table.isr_since_ms[row, slot]) == 2_000


def test_an_isr_change_without_the_old_isr_is_fenced_as_the_full_form() -> None:
    m = model()
    elected(m, epoch=3, partition_epoch=10)
    report = apply(
        m,
        committed(1_000, (1, 3), partition_epoch=9),  # an older commit
        committed(1_000, (1, 3), leader=2),  # broker 2 does not lead orders-0
        committed(1_000, (1, 3), partition=5),  # a partition the model does not know
        IsrChange(ts=1_000, topic=TOPIC, partition=0, leader=1, new_isr=(1,), leader_epoch=2),
        IsrChange(ts=1_000, topic=TOPIC, partition=0, leader=1, new_isr=(1,), leader_epoch=4),
    )
    assert report.rejected_reasons == [
        R.STALE_PARTITION_EPOCH,
        R.NOT_LEADER,
        R.UNKNOWN_PARTITION,
        R.STALE_LEADER_EPOCH,
        R.UNKNOWN_LEADER_EPOCH,
    ]
    assert health(m, 1_000).isr == [1, 2, 3]
    # the boundary: the partition epoch held (10) is not older, so it applies
    report = apply(m, committed(1_500, (1, 2), partition_epoch=10))
    assert (report.rejected_reasons, health(m, 1_500).isr) == ([], [1, 2])


def test_an_isr_change_to_the_isr_held_changes_only_the_partition_epoch() -> None:
    m = model()
    elected(m)
    report = apply(m, committed(1_000, (3, 2, 1), partition_epoch=11))
    assert (report.applied["IsrChange"], report.isr_transitions) == (1, [])
    row = m.table.live_row_of(TOPIC, 0)
    assert (m.table.isr[row], int(m.table.partition_epoch[row])) == ((1, 2, 3), 11)
    assert int(m.table.isr_changed_ms[row]) == 0  # the election's, unchanged
    # Kafka queued the commit for propagation all the same, as every shard records it
    assert pending_since(m) == {"orders:0": 1_000}


def test_an_isr_change_without_the_old_isr_when_the_model_holds_no_isr() -> None:
    """A partition known from its assignment only: the ISR is set, not classified."""
    m = model()
    created = TopicChange(ts=0, created={TOPIC: {0: (1, 2, 3)}})
    report = apply(m, created, partial_leader(100, 1), committed(200, (1, 2), partition_epoch=4))
    assert report.rejected_reasons == []
    assert report.isr_transitions == []  # neither a shrink nor an expansion
    row = m.table.live_row_of(TOPIC, 0)
    assert (m.table.isr[row], int(m.table.partition_epoch[row])) == ((1, 2), 4)
    # When 1 and 2 entered the ISR is not known; the commit's time is.
    assert m.table.isr_since_ms[row, :3].tolist() == [NEVER, NEVER, NEVER]
    assert int(m.table.isr_changed_ms[row]) == 200
    assert health(m, 200).isr == [1, 2]


# --------------------------------------------------------------------------- LeaderAndIsr


def test_a_leader_change_without_epochs_changes_only_the_leader() -> None:
    m = model()
    elected(m, epoch=5, partition_epoch=7)
    apply(m, fetch(500, 2, offset=40, leader_leo=50), fetch(600, 3, offset=50, leader_leo=50))
    report = apply(m, partial_leader(1_000, 3))
    assert (report.rejected_reasons, report.applied["LeaderAndIsr"]) == ([], 1)
    row = m.table.live_row_of(TOPIC, 0)
    assert int(m.table.leader[row]) == 3
    # the epochs held stay (the new ones are not stated), so do the replicas and the ISR
    assert (int(m.table.leader_epoch[row]), int(m.table.partition_epoch[row])) == (5, 7)
    assert (m.table.replicas[row], m.table.isr[row]) == ((1, 2, 3), (1, 2, 3))
    assert m.epoch_floors == {(TOPIC, 0): 6}
    # Partition.makeLeader on the new leader: every replica reset at the election's time
    assert m.table.last_fetch_time_ms[row, :3].tolist() == [1_000] * 3
    assert m.table.log_end_offset[row, :3].tolist() == [UNKNOWN_OFFSET] * 3
    assert report.isr_transitions == []
    # Fetches of the new epoch wait for an event that states it; the old leader's are over.
    fetches = apply(m, fetch(1_100, 1, 60, 60, leader=3, epoch=6), fetch(1_100, 2, 60, 60, epoch=5))
    assert fetches.rejected_reasons == [R.UNKNOWN_LEADER_EPOCH, R.NOT_LEADER]


def test_a_leader_change_without_epochs_never_rolls_back_a_newer_epoch() -> None:
    m = model()
    elected(m, epoch=5, partition_epoch=7)
    apply(m, partial_leader(1_000, 3))
    report = apply(
        m,
        # epoch 5 was accepted before the partial change (same leader epoch, same partition
        # epoch); now the election is known to have raised it: stale
        leader_and_isr(2_000, leader=1, epoch=5, partition_epoch=7),
        IsrChange(ts=2_000, topic=TOPIC, partition=0, leader=3, new_isr=(3, 1), leader_epoch=5),
    )
    assert report.rejected_reasons == [R.STALE_LEADER_EPOCH, R.STALE_LEADER_EPOCH]
    row = m.table.live_row_of(TOPIC, 0)
    assert (int(m.table.leader[row]), int(m.table.leader_epoch[row])) == (3, 5)
    # the boundary: epoch 6, the least the election can have made, is applied
    report = apply(m, leader_and_isr(3_000, leader=3, epoch=6, isr=(3, 1, 2)))
    assert report.rejected_reasons == []
    assert (int(m.table.leader[row]), int(m.table.leader_epoch[row])) == (3, 6)
    assert m.epoch_floors == {}  # an epoch is known again
    # a partial change never lowers an epoch either: the held ones stay
    apply(m, leader_and_isr(4_000, leader=1, epoch=9, partition_epoch=12))
    apply(m, partial_leader(5_000, 2))
    assert (int(m.table.leader_epoch[row]), int(m.table.partition_epoch[row])) == (9, 12)
    assert m.epoch_floors == {(TOPIC, 0): 10}
    # two partial changes in a row: each raises the floor once more
    apply(m, partial_leader(6_000, 3))
    assert m.epoch_floors == {(TOPIC, 0): 11}
    assert apply(m, leader_and_isr(7_000, leader=3, epoch=10)).rejected_reasons == [
        R.STALE_LEADER_EPOCH
    ]


def test_a_leader_change_without_epochs_that_cannot_apply() -> None:
    m = model()
    elected(m, epoch=5)
    report = apply(
        m,
        partial_leader(1_000, 2, partition=4),  # no such partition: no replicas to lead
        partial_leader(1_000, 7),  # broker 7 is no replica of orders-0
        partial_leader(1_000, 1),  # the leader held: nothing new
    )
    assert report.rejected_reasons == [R.UNKNOWN_PARTITION, R.NOT_ASSIGNED_REPLICA]
    assert report.applied["LeaderAndIsr"] == 1
    assert m.epoch_floors == {}
    # so the same epoch is still accepted afterwards
    same = leader_and_isr(2_000, leader=1, epoch=5, partition_epoch=10, isr=(1, 2))
    assert apply(m, same).rejected_reasons == []


def test_a_partial_leader_change_is_forgotten_with_its_partition() -> None:
    m = model()
    elected(m, epoch=5)
    apply(m, partial_leader(1_000, 2), TopicChange(ts=2_000, deleted=(TOPIC,)))
    assert m.epoch_floors == {}
    # recreated: it starts afresh at any epoch
    assert apply(m, leader_and_isr(3_000, epoch=0)).rejected_reasons == []


# --------------------------------------------------------------------------- controller


def controller(m: ReplicationModel) -> tuple[int | None, int | None]:
    return m.cluster.controller_id, m.cluster.controller_epoch


def test_a_controller_change_without_epoch_fences_nothing() -> None:
    m = model()
    report = apply(m, ControllerChange(ts=0, controller_id=2))
    assert report.applied["ControllerChange"] == 1
    assert controller(m) == (2, None)  # named, with no epoch to fence with
    apply(m, ControllerChange(ts=1, controller_id=1, controller_epoch=7))
    report = apply(m, ControllerChange(ts=2, controller_id=0))  # when, next to epoch 7?
    assert report.rejected_reasons == []
    assert controller(m) == (1, 7)
    # the epoch still fences the older controller
    stale = apply(m, leader_and_isr(3, controller_epoch=6))
    assert stale.rejected_reasons == [R.STALE_CONTROLLER_EPOCH]


# --------------------------------------------------------------------------- routing, job


@pytest.mark.parametrize("partition", range(6))
def test_a_partial_event_is_routed_like_its_full_form(partition: int) -> None:
    full = leader_and_isr(1, partition=partition)
    partial = partial_leader(1, 2, partition=partition)
    assert [(p.shard, p.counted) for p in split_for_shards(partial, 4)] == [
        (shard_of(TOPIC, partition, 4), True)
    ]
    assert [(p.shard, p.counted) for p in split_for_shards(full, 4)] == [
        (shard_of(TOPIC, partition, 4), True)
    ]
    change = committed(1, (1, 2), partition=partition)
    owner = shard_of(TOPIC, partition, 4)
    assert [(p.shard, p.counted) for p in split_for_shards(change, 4)] == [
        (owner, True),
        *((s, False) for s in range(4) if s != owner),
    ]


def _envelope(value: dict[str, Any]) -> dict[str, Any]:
    return {"source": "controller-events", "value": value}


def partial_story() -> list[dict[str, Any]]:
    """t-0..t-5 elected (leader 1, epoch 2); t-1 and t-4 change leader with no epoch; t-0
    commits ISR 1,2 with no ISR before it; a stale LeaderAndIsr of t-1; a LeaderAndIsr of
    t-5 with a leader epoch and nothing else."""
    base = {
        "type": "LeaderAndIsr",
        "topic": "t",
        "leader": 1,
        "leader_epoch": 2,
        "isr": [1, 2, 3],
        "replicas": [1, 2, 3],
        "partition_epoch": 2,
    }
    return [
        *(_envelope({**base, "ts": 100, "partition": p}) for p in range(6)),
        _envelope({"type": "LeaderAndIsr", "ts": 200, "topic": "t", "partition": 1, "leader": 2}),
        _envelope({"type": "LeaderAndIsr", "ts": 210, "topic": "t", "partition": 4, "leader": 3}),
        _envelope(
            {
                "type": "IsrChange",
                "ts": 300,
                "topic": "t",
                "partition": 0,
                "leader": 1,
                "new_isr": [1, 2],
                "partition_epoch": 3,
            }
        ),
        _envelope({**base, "ts": 400, "partition": 1}),  # epoch 2 again: stale now
        _envelope(
            {
                "type": "LeaderAndIsr",
                "ts": 500,
                "topic": "t",
                "partition": 5,
                "leader": 2,
                "leader_epoch": 3,
            }
        ),
        _envelope({"type": "ControllerChange", "ts": 600, "controller_id": 1}),
    ]


STORY_LEADERS = {"t:0": 1, "t:1": 2, "t:2": 1, "t:3": 1, "t:4": 3, "t:5": 1}


@pytest.mark.parametrize("shards", [1, 3])
def test_the_streaming_step_applies_partial_events_for_any_sharding(shards: int) -> None:
    job = Job(shards, snapshot_when_idle=False)
    out = job.batch(kafka_records(partial_story()))
    records = job_health(out)
    assert {key: r.leader for key, r in records.items()} == STORY_LEADERS
    assert {key: r.leader_epoch for key, r in records.items()} == dict.fromkeys(records, 2)
    assert records["t:0"].isr == [1, 2]
    assert records["t:1"].isr == [1, 2, 3]
    letters = sorted(
        (json.loads(v)["reason"], json.loads(v)["offset"])
        for v in out[out["kind"] == DEAD]["value"]
    )
    assert letters == [("missing_field", 10), ("stale_leader_epoch", 9)]


def test_replay_applies_partial_events() -> None:
    lines = [json.dumps(envelope) for envelope in partial_story()]
    result = replay(lines, RuleSettings(), None)
    assert result.events == 11  # 12 lines, one of them no valid event
    assert {r.key: r.leader for r in result.records} == (STORY_LEADERS)
    assert [(line, letter.reason) for line, letter in result.dead_letters] == [
        (10, R.STALE_LEADER_EPOCH),
        (11, R.MISSING_FIELD),
    ]
    assert result.report.applied["LeaderAndIsr"] == 8  # 6 elections, 2 partial changes
    assert result.report.applied["IsrChange"] == 1
    assert result.report.applied["ControllerChange"] == 1
