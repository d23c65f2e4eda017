"""Feeding the same events in batches of any size gives the result of one at a time."""

from __future__ import annotations

from collections import Counter
from typing import Any, cast

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from state import HealthRecord, ReplicationModel, Shard, route_controller_events, shard_of
from state.events import (
    BrokerChange,
    BrokerConfig,
    BrokerRegistration,
    ControllerChange,
    Event,
    FetchResponse,
    IsrChange,
    IsrChangePropagation,
    LeaderAndIsr,
    MetadataPartitionState,
    TopicChange,
    TopicConfig,
    TopicPartition,
    UpdateMetadata,
)
from state.settings import PropagationMode, PropagationSettings, RuleSettings
from tests.unit.builders import CONSISTENT

TOPICS = ("a", "b")
BROKERS = (1, 2, 3)
ts = st.integers(0, 200_000)
topic = st.sampled_from(TOPICS)
partition = st.integers(0, 1)
broker = st.sampled_from(BROKERS)
epoch = st.integers(0, 3)
broker_set = st.lists(broker, unique=True, max_size=3).map(tuple)
replica_set = st.permutations(BROKERS).map(tuple)
offset = st.integers(0, 120)

controller_epoch = st.none() | st.integers(0, 3)


def leader_and_isr() -> st.SearchStrategy[LeaderAndIsr]:
    return st.builds(
        LeaderAndIsr,
        ts=ts,
        topic=topic,
        partition=partition,
        leader=st.sampled_from((-2, -1, *BROKERS)),
        leader_epoch=epoch,
        isr=broker_set,
        replicas=replica_set,
        partition_epoch=epoch,
        controller_epoch=controller_epoch,
    )


def fetches() -> st.SearchStrategy[FetchResponse]:
    return st.builds(
        FetchResponse,
        ts=ts,
        topic=topic,
        partition=partition,
        leader=broker,
        follower=broker,
        leader_epoch=epoch,
        fetch_offset=offset,
        leader_leo=offset,
        high_watermark=offset,
        error=st.sampled_from(("NONE", "NONE", "NONE", "NOT_LEADER")),
    )


def metadata_state() -> st.SearchStrategy[MetadataPartitionState]:
    return st.builds(
        MetadataPartitionState,
        topic=topic,
        partition=partition,
        leader=st.sampled_from((-2, 1, 2, 3)),
        leader_epoch=epoch,
        isr=broker_set,
        replicas=replica_set,
        offline_replicas=st.just(()),
    )


controller_events = st.one_of(
    leader_and_isr(),
    # the partial LeaderAndIsr: a leader and nothing else (docs/event-contract.md)
    st.builds(
        LeaderAndIsr,
        ts=ts,
        topic=topic,
        partition=partition,
        leader=st.sampled_from((-1, *BROKERS)),
        controller_epoch=controller_epoch,
    ),
    st.builds(
        IsrChange,
        ts=ts,
        topic=topic,
        partition=partition,
        leader=broker,
        old_isr=st.none() | broker_set,
        new_isr=broker_set,
        leader_epoch=st.none() | epoch,
        partition_epoch=st.none() | epoch,
    ),
    st.builds(
        IsrChangePropagation,
        ts=ts,
        broker=broker,
        partitions=st.lists(st.builds(TopicPartition, topic, partition), max_size=3).map(tuple),
    ),
    st.builds(
        UpdateMetadata,
        ts=ts,
        broker=broker,
        partitions=st.lists(metadata_state(), max_size=3).map(tuple),
        controller_epoch=controller_epoch,
    ),
    st.builds(
        BrokerChange,
        ts=ts,
        live=st.lists(
            st.builds(BrokerRegistration, id=broker, epoch=epoch),
            unique_by=lambda r: r.id,
            max_size=3,
        ).map(tuple),
    ),
    st.builds(ControllerChange, ts=ts, controller_id=broker, controller_epoch=st.none() | epoch),
    st.builds(
        TopicChange,
        ts=ts,
        created=st.dictionaries(topic, st.dictionaries(partition, replica_set)),
        deleted=st.lists(topic, max_size=1).map(tuple),
    ),
    st.builds(TopicConfig, ts=ts, topic=topic, min_insync_replicas=st.integers(1, 3)),
    st.builds(
        BrokerConfig,
        ts=ts,
        broker=broker,
        replica_lag_time_max_ms=st.sampled_from((1_000, 10_000, 30_000)),
    ),
)


@st.composite
def events(draw: st.DrawFn) -> list[Event]:
    """Mostly fetches that Kafka would accept (current leader and epoch, an assigned
    follower, offsets that grow), mixed with the current leader's ISR shrinks and
    expansions (so followers leave and re-enter the ISR, often out of sync), any
    controller event and stray fetches."""
    sequence: list[Event] = []
    current: dict[tuple[str, int], LeaderAndIsr] = {}
    isr: dict[tuple[str, int], tuple[int, ...]] = {}
    leo: Counter[tuple[str, int]] = Counter()
    clock = 0
    for _ in range(draw(st.integers(0, 80))):
        clock += draw(st.integers(0, 4_000))
        kind = draw(st.sampled_from(("fetch",) * 6 + ("elect", "isr", "any", "stray")))
        event: Event
        if kind == "elect":
            election = draw(leader_and_isr())
            assert election.isr is not None  # the strategy draws the full form
            current[(election.topic, election.partition)] = election
            isr[(election.topic, election.partition)] = election.isr
            event = election
        elif kind == "isr" and current:
            key = draw(st.sampled_from(sorted(current)))
            decision = current[key]
            new_isr = draw(broker_set)
            event = IsrChange(
                ts=clock,
                topic=key[0],
                partition=key[1],
                leader=decision.leader,
                old_isr=isr[key],
                new_isr=new_isr,
                leader_epoch=draw(st.sampled_from((None, decision.leader_epoch))),
            )
            isr[key] = new_isr
        elif kind == "any":
            event = draw(controller_events)
        elif kind in ("stray", "isr") or not current:
            event = draw(fetches())
        else:
            key = draw(st.sampled_from(sorted(current)))
            decision = current[key]
            assert decision.replicas is not None
            assert decision.leader_epoch is not None
            leo[key] += draw(st.integers(0, 30))
            followers = [b for b in decision.replicas if b != decision.leader] or [1]
            event = FetchResponse(
                ts=clock,
                topic=key[0],
                partition=key[1],
                leader=decision.leader,
                follower=draw(st.sampled_from(followers)),
                leader_epoch=decision.leader_epoch,
                fetch_offset=leo[key] - draw(st.integers(0, 40)),
                leader_leo=leo[key],
                high_watermark=max(0, leo[key] - 40),
            )
        sequence.append(event)
    return sequence


modes = st.sampled_from(list(PropagationMode))


def outcome(
    sequence: list[Event], chunk_sizes: list[int], mode: PropagationMode, now: int
) -> tuple[object, ...]:
    model = ReplicationModel(RuleSettings(propagation=PropagationSettings(mode=mode)))
    numbered = list(enumerate(sequence))
    rejected: list[tuple[int, str]] = []
    applied: Counter[str] = Counter()
    delays: list[int] = []
    transitions = []
    start, sizes = 0, iter(chunk_sizes)
    while start < len(numbered):
        size = next(sizes, len(numbered))
        report = model.apply(numbered[start : start + size])
        rejected += zip(report.rejected_ids, report.rejected_reasons, strict=True)
        applied += report.applied
        delays += report.propagation_delays_ms
        transitions += report.isr_transitions
        start += size
    records = list(model.evaluate(now).records())
    return records, sorted(rejected), applied, delays, transitions


@settings(max_examples=200, deadline=None)
@given(
    sequence=events(),
    chunk_sizes=st.lists(st.integers(1, 20), max_size=60),
    mode=modes,
    now=st.integers(0, 300_000),
)
def test_any_batching_equals_one_event_at_a_time(
    sequence: list[Event], chunk_sizes: list[int], mode: PropagationMode, now: int
) -> None:
    one_at_a_time = outcome(sequence, [1] * len(sequence), mode, now)
    assert outcome(sequence, chunk_sizes, mode, now) == one_at_a_time
    assert outcome(sequence, [len(sequence) or 1], mode, now) == one_at_a_time


def sharded_outcome(
    sequence: list[Event],
    shards: int,
    mode: PropagationMode,
    now: int,
    batch_sizes: list[int] | None = None,
) -> tuple[list[HealthRecord], list[tuple[int, str]], Counter[str], list[int], list[Any]]:
    """The streaming job's routing: fetches to their owner, each controller event's parts
    to the shards that need them (``route_controller_events``, once per micro-batch of
    ``batch_sizes``; one batch by default)."""
    settings = RuleSettings(propagation=PropagationSettings(mode=mode))
    models = [ReplicationModel(settings, Shard(i, shards)) for i in range(shards)]
    inputs: list[list[tuple[int, Any]]] = [[] for _ in range(shards)]
    start = 0
    for size in [*(batch_sizes or []), len(sequence)]:
        batch = list(enumerate(sequence))[start : start + size]
        start += size
        controller = [(n, e) for n, e in batch if not isinstance(e, FetchResponse)]
        parts = iter(route_controller_events([e for _, e in controller], shards))
        for n, event in batch:
            if isinstance(event, FetchResponse):
                inputs[shard_of(event.topic, event.partition, shards)].append((n, event))
            else:
                for part in next(parts):
                    inputs[part.shard].append((n, part.event))
    rejected: list[tuple[int, str]] = []
    applied: Counter[str] = Counter()
    delays: list[int] = []
    transitions: list[Any] = []
    for model, mine in zip(models, inputs, strict=True):
        report = model.apply(mine)
        rejected += zip(report.rejected_ids, report.rejected_reasons, strict=True)
        applied += report.applied
        delays += report.propagation_delays_ms
        transitions += report.isr_transitions
    records = sorted(
        (r for m in models for r in m.evaluate(now).records()),
        key=lambda r: (r.topic, r.partition),
    )
    return records, sorted(rejected), applied, sorted(delays), transitions


@settings(max_examples=150, deadline=None)
@given(
    sequence=events(),
    mode=modes,
    now=st.integers(0, 300_000),
    batch_sizes=st.lists(st.integers(1, 20), max_size=10),
)
def test_shards_fed_by_routing_equal_one_model(
    sequence: list[Event], mode: PropagationMode, now: int, batch_sizes: list[int]
) -> None:
    whole = outcome(sequence, [len(sequence) or 1], mode, now)
    whole_records = cast("list[HealthRecord]", whole[0])
    whole_rejected = cast("list[tuple[int, str]]", whole[1])
    records, rejected, applied, delays, transitions = sharded_outcome(
        sequence, 3, mode, now, batch_sizes
    )
    assert rejected == whole_rejected
    assert applied == whole[2]
    # every observed propagation delay and ISR transition is reported, by one shard
    assert delays == sorted(cast("list[int]", whole[3]))
    assert sorted(transitions, key=repr) == sorted(cast("list[Any]", whole[4]), key=repr)
    if any(isinstance(sequence[n], IsrChange) for n, _ in whole_rejected):
        # A shard cannot fence another shard's IsrChange by leader epoch, so the
        # leader's window may differ; everything else must not (docs/architecture.md).
        records = [msgspec.structs.replace(r, metadata=CONSISTENT) for r in records]
        whole_records = [msgspec.structs.replace(r, metadata=CONSISTENT) for r in whole_records]
    assert records == whole_records


def test_batching_and_sharding_keep_the_entry_time_of_a_re_added_follower() -> None:
    """A follower shrunk out, re-added behind the leader's LEO (its last caught-up time far
    past), on two partitions of different shards, interleaved so that batches split the
    events: eligible until entry + T / 2 = 95 000, overdue after, however they are fed."""
    partitions = (("a", 0), ("b", 1))
    assert len({shard_of(t, p, 3) for t, p in partitions}) == 2
    sequence: list[Event] = []
    for name, number in partitions:
        common: dict[str, Any] = {"topic": name, "partition": number, "leader": 1}
        sequence += [
            LeaderAndIsr(
                ts=0, **common, leader_epoch=0, isr=(1, 2, 3), replicas=(1, 2, 3), partition_epoch=0
            ),
            FetchResponse(
                ts=10_000,
                **common,
                follower=2,
                leader_epoch=0,
                fetch_offset=500,
                leader_leo=500,
                high_watermark=500,
            ),
            FetchResponse(
                ts=10_000,
                **common,
                follower=3,
                leader_epoch=0,
                fetch_offset=600,
                leader_leo=600,
                high_watermark=500,
            ),
            IsrChange(ts=55_000, **common, old_isr=(1, 2, 3), new_isr=(1, 3), leader_epoch=0),
            FetchResponse(
                ts=79_000,
                **common,
                follower=2,
                leader_epoch=0,
                fetch_offset=600,
                leader_leo=700,
                high_watermark=600,
            ),
            IsrChange(ts=80_000, **common, old_isr=(1, 3), new_isr=(1, 2, 3), leader_epoch=None),
            # the leader keeps serving follower 3: news that it runs (state.leader_news)
            FetchResponse(
                ts=90_000,
                **common,
                follower=3,
                leader_epoch=0,
                fetch_offset=700,
                leader_leo=700,
                high_watermark=600,
            ),
        ]
    sequence.sort(key=lambda e: e.ts)  # interleave the partitions
    for now, status in ((95_000, "SHRINK_ELIGIBLE"), (95_001, "SHRINK_OVERDUE")):
        for mode in PropagationMode:
            whole = outcome(sequence, [len(sequence)], mode, now)
            records = cast("list[HealthRecord]", whole[0])
            assert [
                (f.status, f.shrink_by_ms) for r in records for f in r.followers if f.broker == 2
            ] == [(status, 95_000)] * len(partitions)
            assert outcome(sequence, [1] * len(sequence), mode, now) == whole
            assert outcome(sequence, [3, 2, 5], mode, now) == whole
            assert sharded_outcome(sequence, 3, mode, now)[0] == records
