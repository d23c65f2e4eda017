"""Terse constructors of events and a model for the unit tests of ``state``."""

from __future__ import annotations

from typing import Any

from state import ApplyReport, HealthRecord, ReplicationModel
from state.events import (
    BrokerChange,
    BrokerRegistration,
    Event,
    FetchResponse,
    IsrChange,
    LeaderAndIsr,
    MetadataPartitionState,
    UpdateMetadata,
)
from state.settings import RuleSettings

TOPIC = "orders"


def leader_and_isr(
    ts: int,
    leader: int = 1,
    epoch: int = 0,
    isr: tuple[int, ...] = (1, 2, 3),
    replicas: tuple[int, ...] = (1, 2, 3),
    partition: int = 0,
    topic: str = TOPIC,
    partition_epoch: int | None = None,
    controller_epoch: int | None = None,
) -> LeaderAndIsr:
    return LeaderAndIsr(
        ts=ts,
        topic=topic,
        partition=partition,
        leader=leader,
        leader_epoch=epoch,
        isr=isr,
        replicas=replicas,
        partition_epoch=epoch if partition_epoch is None else partition_epoch,
        controller_epoch=controller_epoch,
    )


def fetch(
    ts: int,
    follower: int,
    offset: int,
    leader_leo: int,
    hw: int | None = None,
    leader: int = 1,
    epoch: int = 0,
    partition: int = 0,
    topic: str = TOPIC,
    error: str = "NONE",
) -> FetchResponse:
    return FetchResponse(
        ts=ts,
        topic=topic,
        partition=partition,
        leader=leader,
        follower=follower,
        leader_epoch=epoch,
        fetch_offset=offset,
        leader_leo=leader_leo,
        high_watermark=offset if hw is None else hw,
        error=error,
    )


def isr_change(
    ts: int,
    old: tuple[int, ...],
    new: tuple[int, ...],
    leader: int = 1,
    epoch: int | None = 0,
    partition: int = 0,
    topic: str = TOPIC,
) -> IsrChange:
    return IsrChange(
        ts=ts,
        topic=topic,
        partition=partition,
        leader=leader,
        old_isr=old,
        new_isr=new,
        leader_epoch=epoch,
    )


def update_metadata(
    ts: int,
    broker: int,
    isr: tuple[int, ...],
    leader: int = 1,
    epoch: int = 0,
    partition: int = 0,
    topic: str = TOPIC,
    replicas: tuple[int, ...] = (1, 2, 3),
) -> UpdateMetadata:
    state = MetadataPartitionState(
        topic=topic,
        partition=partition,
        leader=leader,
        leader_epoch=epoch,
        isr=isr,
        replicas=replicas,
        offline_replicas=(),
    )
    return UpdateMetadata(ts=ts, broker=broker, partitions=(state,))


def brokers(ts: int, *live: tuple[int, int]) -> BrokerChange:
    return BrokerChange(ts=ts, live=tuple(BrokerRegistration(id=i, epoch=e) for i, e in live))


def model(**settings: Any) -> ReplicationModel:
    return ReplicationModel(RuleSettings(**settings))


def apply(m: ReplicationModel, *events: Event) -> ApplyReport:
    return m.apply(enumerate(events))


def health(m: ReplicationModel, now: int, topic: str = TOPIC, partition: int = 0) -> HealthRecord:
    for record in m.evaluate(now).records():
        if record["topic"] == topic and record["partition"] == partition:
            return record
    raise AssertionError(f"no health record for {topic}:{partition}")


def follower(record: HealthRecord, broker: int) -> dict[str, Any]:
    for f in record["followers"]:
        if f["broker"] == broker:
            return dict(f)
    raise AssertionError(f"broker {broker} is not a follower in {record}")
