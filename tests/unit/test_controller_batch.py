"""Consecutive LeaderAndIsr applied in bulk (state.controller_batch) == one at a time.

The property test feeds the same generated sequence to a model one event per call (the
per-event path, the explaining reference) and to a model in chunks (runs of LeaderAndIsr
go in bulk), and compares everything: the partition table column by column, the
metadata caches, the cluster state, flaps, maintenance, windows, the reports (applied,
rejections in order with their reasons, ISR transitions, propagation delays) and the
health records. The boundary table checks the fencing with hand-computed verdicts.
"""

from __future__ import annotations

from collections import Counter
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import state.model
from state import ApplyReport, ReplicationModel, Shard
from state.controller_batch import segments, stated_state, takes_in_bulk
from state.events import (
    BrokerChange,
    BrokerRegistration,
    ControllerChange,
    DeadLetterReason,
    Event,
    FetchResponse,
    IsrChange,
    LeaderAndIsr,
    MetadataLogProgress,
    MetadataPartitionState,
    ReplicaProgress,
    UpdateMetadata,
)
from state.settings import PropagationMode, PropagationSettings, RuleSettings

TOPICS = ("a", "b", "c")
BROKERS = tuple(range(1, 10))
ts = st.integers(0, 100_000)
topic = st.sampled_from(TOPICS)
# Mostly a few partitions, so that events meet the same ones (repeats in a run, caches
# filled by UpdateMetadata, then changed); up to 20 make the slot ranges grow mid-run.
partition = st.integers(0, 1) | st.integers(0, 20)
epoch = st.integers(0, 3)
brokers = st.lists(st.sampled_from(BROKERS), max_size=3)  # duplicates allowed by the schema
# Mostly 3 replicas; sometimes 5 or 9, which grows the replica slots mid-run.
replicas = st.one_of(
    st.permutations((1, 2, 3)).map(tuple),
    st.lists(st.sampled_from(BROKERS), min_size=0, max_size=9).map(tuple),
)
controller_epoch = st.none() | epoch
offset = st.none() | st.integers(0, 50)


def leader_and_isr() -> st.SearchStrategy[LeaderAndIsr]:
    return st.builds(
        LeaderAndIsr,
        ts=ts,
        topic=topic,
        partition=partition,
        leader=st.sampled_from((-2, -1, 1, 2, 3, 4)),
        leader_epoch=epoch,
        isr=brokers.map(tuple),
        replicas=replicas,
        partition_epoch=epoch,
        controller_epoch=controller_epoch,
        controller_id=st.none() | st.sampled_from(BROKERS),
        metadata_offset=offset,
    )


def metadata_state() -> st.SearchStrategy[MetadataPartitionState]:
    return st.builds(
        MetadataPartitionState,
        topic=topic,
        partition=partition,
        leader=st.sampled_from((-2, 1, 2, 3)),
        leader_epoch=epoch,
        isr=brokers.map(tuple),
        replicas=replicas,
        offline_replicas=st.just(()),
    )


others = st.one_of(
    st.builds(
        UpdateMetadata,
        ts=ts,
        broker=st.sampled_from((1, 2, 3)),
        partitions=st.lists(metadata_state(), max_size=4).map(tuple),
        controller_epoch=controller_epoch,
    ),
    st.builds(
        IsrChange,
        ts=ts,
        topic=topic,
        partition=partition,
        leader=st.sampled_from((1, 2)),
        old_isr=brokers.map(tuple),
        new_isr=brokers.map(tuple),
        leader_epoch=st.none() | epoch,
        partition_epoch=st.none() | epoch,
    ),
    st.builds(
        BrokerChange,
        ts=ts,
        live=st.lists(
            st.builds(BrokerRegistration, id=st.sampled_from((1, 2, 3)), epoch=epoch),
            unique_by=lambda r: r.id,
            max_size=3,
        ).map(tuple),
    ),
    st.builds(
        ControllerChange, ts=ts, controller_id=st.sampled_from(BROKERS), controller_epoch=epoch
    ),
    # the partial form (a preferred-election log line): it raises the partition's epoch
    # floor, which the bulk path must honour as the per-event one does
    st.builds(
        LeaderAndIsr,
        ts=ts,
        topic=topic,
        partition=partition,
        leader=st.sampled_from((-1, 1, 2, 3, 4)),
    ),
    st.builds(
        MetadataLogProgress,
        ts=ts,
        high_watermark=st.integers(0, 60),
        replicas=st.lists(
            st.builds(
                ReplicaProgress,
                broker=st.sampled_from((1, 2, 3)),
                log_end_offset=st.integers(0, 60),
            ),
            unique_by=lambda r: r.broker,
            max_size=3,
        ).map(tuple),
    ),
    st.builds(
        FetchResponse,
        ts=ts,
        topic=topic,
        partition=partition,
        leader=st.sampled_from((1, 2, 3)),
        follower=st.sampled_from((1, 2, 3)),
        leader_epoch=epoch,
        fetch_offset=st.integers(0, 50),
        leader_leo=st.integers(0, 50),
        high_watermark=st.integers(0, 50),
    ),
)


@st.composite
def sequences(draw: st.DrawFn) -> list[Event]:
    """Bursts of LeaderAndIsr (repeats of a partition, stale and fenced epochs, deletions)
    between other events that fill caches, change brokers and raise the controller epoch."""
    sequence: list[Event] = []
    for _ in range(draw(st.integers(1, 6))):
        burst = draw(st.lists(leader_and_isr(), max_size=25))
        sequence += burst
        cached: bool = draw(st.booleans())
        if burst and cached:  # brokers cache some of these partitions
            named = draw(st.lists(st.sampled_from(burst), max_size=4))
            states = tuple(
                MetadataPartitionState(
                    topic=e.topic,
                    partition=e.partition,
                    leader=e.leader,
                    leader_epoch=stated_state(e).leader_epoch,
                    isr=draw(brokers.map(tuple)),
                    replicas=stated_state(e).replicas,
                    offline_replicas=(),
                )
                for e in named
            )
            sequence.append(
                UpdateMetadata(
                    ts=draw(ts), broker=draw(st.sampled_from((1, 2, 3))), partitions=states
                )
            )
        sequence += draw(st.lists(others, max_size=3))
    return sequence


def comparable(value: Any, depth: int = 0) -> Any:
    """A form of any model object that ``==`` compares by content (numpy arrays too)."""
    assert depth < 20
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tolist())
    if isinstance(value, dict):
        return {k: comparable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [comparable(v, depth + 1) for v in value]
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return (type(value).__name__, comparable(vars(value), depth + 1))
    return value


def report_of(report: ApplyReport) -> tuple[Any, ...]:
    return (
        +report.applied,
        list(zip(report.rejected_ids, report.rejected_reasons, strict=True)),
        report.isr_transitions,
        report.propagation_delays_ms,
        report.bounced_brokers,
        report.ignored_metadata_entries,
        report.fetch_error_responses,
    )


def run(
    sequence: list[Event], chunks: list[int], mode: PropagationMode, shard: Shard | None
) -> tuple[Any, ...]:
    model = ReplicationModel(RuleSettings(propagation=PropagationSettings(mode=mode)), shard)
    numbered = list(enumerate(sequence))
    report = ApplyReport()
    start, sizes = 0, iter(chunks)
    while start < len(numbered):
        size = next(sizes, len(numbered))
        part = model.apply(numbered[start : start + size])
        report.applied += part.applied
        report.rejected_ids += part.rejected_ids
        report.rejected_reasons += part.rejected_reasons
        report.isr_transitions += part.isr_transitions
        report.propagation_delays_ms += part.propagation_delays_ms
        report.bounced_brokers += part.bounced_brokers
        report.ignored_metadata_entries += part.ignored_metadata_entries
        report.fetch_error_responses += part.fetch_error_responses
        start += size
    state = comparable({name: value for name, value in vars(model).items() if name != "settings"})
    flaps, maintenance = comparable(model.flaps), comparable(model.maintenance)
    return state, flaps, maintenance, report_of(report), list(model.evaluate(100_000).records())


@settings(max_examples=100, deadline=None)
@given(
    sequence=sequences(),
    chunks=st.lists(st.integers(1, 40), max_size=10),
    mode=st.sampled_from(list(PropagationMode)),
    shard=st.sampled_from((None, Shard(0, 3), Shard(2, 3))),
)
def test_bulk_equals_one_at_a_time(
    sequence: list[Event], chunks: list[int], mode: PropagationMode, shard: Shard | None
) -> None:
    one_at_a_time = run(sequence, [1] * len(sequence), mode, shard)
    assert run(sequence, [len(sequence) or 1], mode, shard) == one_at_a_time
    assert run(sequence, chunks, mode, shard) == one_at_a_time


@settings(max_examples=60, deadline=None)
@given(
    sequence=sequences(),
    mode=st.sampled_from(list(PropagationMode)),
    shard=st.sampled_from((None, Shard(1, 3))),
)
def test_update_metadata_states_in_bulk_equal_one_at_a_time(
    sequence: list[Event], mode: PropagationMode, shard: Shard | None
) -> None:
    """The same events one per call, with every UpdateMetadata applied by the reference
    (``BULK_MIN_STATES`` out of reach), and in bulk."""
    with patch.object(state.model, "BULK_MIN_STATES", 10**9):
        reference = run(sequence, [1] * len(sequence), mode, shard)
    assert run(sequence, [1] * len(sequence), mode, shard) == reference


def test_the_generated_runs_reach_the_bulk_path() -> None:
    """The property above is about the bulk path only if runs of two or more take it."""
    election = LeaderAndIsr(
        ts=1,
        topic="a",
        partition=0,
        leader=1,
        leader_epoch=0,
        isr=(1,),
        replicas=(1,),
        partition_epoch=0,
    )
    assert takes_in_bulk(election)
    assert not takes_in_bulk(LeaderAndIsr(**{**_fields(election), "leader": -2}))
    assert not takes_in_bulk(UpdateMetadata(ts=1, broker=1, partitions=()))


def _fields(event: LeaderAndIsr) -> dict[str, Any]:
    return {name: getattr(event, name) for name in LeaderAndIsr.__dataclass_fields__}


def election(
    partition: int,
    leader_epoch: int,
    partition_epoch: int,
    controller_epoch: int | None = None,
    topic: str = "t",
) -> LeaderAndIsr:
    return LeaderAndIsr(
        ts=10,
        topic=topic,
        partition=partition,
        leader=1,
        leader_epoch=leader_epoch,
        isr=(1, 2),
        replicas=(1, 2, 3),
        partition_epoch=partition_epoch,
        controller_epoch=controller_epoch,
    )


def test_segments_cut_before_a_partition_named_again() -> None:
    run_ = [(i, election(p, 0, 0)) for i, p in enumerate((0, 1, 0, 2, 1, 1))]
    assert [[i for i, _ in piece] for piece in segments(run_)] == [[0, 1], [2, 3, 4], [5]]


# A partition held at leader epoch 5, partition epoch 5; the controller epoch seen is 3.
# Each case: (leader epoch, partition epoch, controller epoch) -> verdict, by hand.
BOUNDARIES = [
    ((4, 9, None), DeadLetterReason.STALE_LEADER_EPOCH),  # one less: stale, whatever pe
    ((5, 4, None), DeadLetterReason.STALE_PARTITION_EPOCH),  # equal le, pe one less
    ((5, 5, None), None),  # equal both: taken (a controller resends the same state)
    ((5, 6, None), None),  # pe one more
    ((6, 0, None), None),  # le one more: taken though pe is lower
    ((6, 6, 2), DeadLetterReason.STALE_CONTROLLER_EPOCH),  # controller epoch one less
    ((6, 6, 3), None),  # controller epoch equal
    ((6, 6, 4), None),  # one more: taken, and raises the epoch to 4
]


@pytest.mark.parametrize("bulk", [True, False])
@pytest.mark.parametrize(("epochs", "verdict"), BOUNDARIES)
def test_fencing_boundaries(
    epochs: tuple[int, int, int | None], verdict: DeadLetterReason | None, bulk: bool
) -> None:
    model = ReplicationModel(RuleSettings())
    model.apply(
        [(0, ControllerChange(ts=1, controller_id=7, controller_epoch=3)), (1, election(0, 5, 5))]
    )
    # a second partition makes the case a run of two (the bulk path); alone it is per event
    case = [(2, election(0, *epochs))] + ([(3, election(1, 0, 0))] if bulk else [])
    report = model.apply(case)
    expected = [(2, verdict)] if verdict else []
    assert list(zip(report.rejected_ids, report.rejected_reasons, strict=True)) == expected
    row = model.table.live_row_of("t", 0)
    held = (5, 5) if verdict else epochs[:2]
    assert (int(model.table.leader_epoch[row]), int(model.table.partition_epoch[row])) == held
    assert model.cluster.controller_epoch == (4 if epochs[2] == 4 else 3)
    assert report.applied == Counter({"LeaderAndIsr": (verdict is None) + bulk})


# A partition held at leader epoch 5 whose leader a partial LeaderAndIsr (a log line
# with no epoch) then moved to broker 2: the election raised the epoch, so the least a
# later election may carry is 6 (ReplicationModel._leader_elected). By hand:
FLOOR_BOUNDARIES = [
    (5, DeadLetterReason.STALE_LEADER_EPOCH),  # the epoch held: below the floor
    (6, None),  # at the floor: taken, and the floor is gone
    (7, None),  # above it
]


@pytest.mark.parametrize("bulk", [True, False])
@pytest.mark.parametrize(("leader_epoch", "verdict"), FLOOR_BOUNDARIES)
def test_the_floor_of_a_partial_election_fences_both_paths(
    leader_epoch: int, verdict: DeadLetterReason | None, bulk: bool
) -> None:
    model = ReplicationModel(RuleSettings())
    model.apply(
        [(0, election(0, 5, 5)), (1, LeaderAndIsr(ts=11, topic="t", partition=0, leader=2))]
    )
    assert model.floor_after_partial_election("t", 0) == 6
    case = [(2, election(0, leader_epoch, 9))] + ([(3, election(1, 0, 0))] if bulk else [])
    report = model.apply(case)
    expected = [(2, verdict)] if verdict else []
    assert list(zip(report.rejected_ids, report.rejected_reasons, strict=True)) == expected
    row = model.table.live_row_of("t", 0)
    assert int(model.table.leader_epoch[row]) == (5 if verdict else leader_epoch)
    assert int(model.table.leader[row]) == (2 if verdict else 1)
    assert model.floor_after_partial_election("t", 0) == (6 if verdict else None)


def test_an_epoch_raised_earlier_in_the_run_fences_the_rest_of_it() -> None:
    """Controller epoch None seen so far; the run's first event brings 4: the second
    (epoch 3) is stale, the third (no epoch) is taken, as one at a time."""
    sequence = [(0, election(0, 0, 0, 4)), (1, election(1, 0, 0, 3)), (2, election(2, 0, 0))]
    model = ReplicationModel(RuleSettings())
    report = model.apply(sequence)
    assert report.rejected_ids == [1]
    assert report.rejected_reasons == [DeadLetterReason.STALE_CONTROLLER_EPOCH]
    assert model.partition_count() == 2
    assert model.cluster.controller_epoch == 4


def test_a_new_partition_gets_its_isr_entry_times_and_a_reset_fetch_state() -> None:
    """Two new partitions at ts 10, replicas (1, 2, 3), ISR (1, 2): slots 0 and 1 entered
    the ISR at 10 and are caught up at 10; slot 2 never; every slot fetched at 10."""
    model = ReplicationModel(RuleSettings())
    model.apply([(0, election(0, 0, 0)), (1, election(1, 0, 0))])
    for partition in (0, 1):
        row = model.table.live_row_of("t", partition)
        assert model.table.isr_since_ms[row, :3].tolist() == [10, 10, 0]
        assert model.table.last_caught_up_ms[row, :3].tolist() == [10, 10, 0]
        assert model.table.last_fetch_time_ms[row, :3].tolist() == [10, 10, 10]
        assert model.table.log_end_offset[row, :3].tolist() == [-1, -1, -1]
        assert model.table.in_isr[row, :3].tolist() == [True, True, False]
