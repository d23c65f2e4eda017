"""Terse constructors of events, a model and health records for the unit tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from state import ApplyReport, FollowerHealth, HealthRecord, MetadataHealth, ReplicationModel
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
from state.health_record import StatusName
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
        if record.topic == topic and record.partition == partition:
            return record
    raise AssertionError(f"no health record for {topic}:{partition}")


def heard(
    m: ReplicationModel, now: int, by: int = 3, topic: str = TOPIC, partition: int = 0
) -> ReplicationModel:
    """The leader serves follower ``by`` at its log end at ``now``: news that the leader
    runs (state.leader_news), for a test of a running leader's rules that evaluates long
    after its last fetch. Choose an in-sync ``by``: the fetch catches it up."""
    record = health(m, now, topic, partition)
    apply(
        m,
        fetch(
            now,
            follower=by,
            offset=record.leader_leo,
            leader_leo=record.leader_leo,
            hw=record.high_watermark,
            leader=record.leader,
            epoch=record.leader_epoch,
            partition=partition,
            topic=topic,
        ),
    )
    return m


def running_health(
    m: ReplicationModel, now: int, by: int = 3, topic: str = TOPIC, partition: int = 0
) -> HealthRecord:
    """The health at ``now`` of a partition whose leader is heard of at ``now`` (:func:`heard`)."""
    return health(heard(m, now, by, topic, partition), now, topic, partition)


def follower(record: HealthRecord, broker: int) -> FollowerHealth:
    for f in record.followers:
        if f.broker == broker:
            return f
    raise AssertionError(f"broker {broker} is not a follower in {record}")


# ------------------------------------------------------------ health records, by hand
#
# For the readers of records (causes, metrics, live view, restart check, timeline): a
# whole record, every field consistent with the follower statuses given, as the writer
# (HealthFrame.records) would produce it. T is the default replica.lag.time.max.ms.

T_MS = 30_000
AS_OF_MS = 1_700_000_060_000
LEADER_LEO = 5_000


def follower_health(
    broker: int, status: StatusName, *, in_isr: bool, as_of_ms: int = AS_OF_MS, lag_ms: int = 0
) -> FollowerHealth:
    """A follower in ``status``: in sync at the leader's LEO; LAGGING and SHRINK_* behind
    by ``lag_ms`` (default 20 s, 32 s and 50 s: past T / 2, T and 1.5 T); outside the ISR,
    or on a broker that is down, not caught up since the leader's election."""
    if status == "IN_SYNC":
        return FollowerHealth(
            broker=broker,
            in_isr=in_isr,
            fetch_offset=LEADER_LEO,
            last_caught_up_ms=as_of_ms,
            lag_time_ms=0,
            lag_messages=0,
            status=status,
        )
    if status in ("LAGGING", "SHRINK_ELIGIBLE", "SHRINK_OVERDUE"):
        lag = lag_ms or {"LAGGING": 20_000, "SHRINK_ELIGIBLE": 32_000}.get(status, 50_000)
        caught_up = as_of_ms - lag
        return FollowerHealth(
            broker=broker,
            in_isr=in_isr,
            fetch_offset=LEADER_LEO - 100,
            last_caught_up_ms=caught_up,
            lag_time_ms=lag,
            lag_messages=100,
            status=status,
            shrink_by_ms=msgspec.UNSET if status == "LAGGING" else caught_up + T_MS * 3 // 2,
        )
    return FollowerHealth(
        broker=broker,
        in_isr=in_isr,
        fetch_offset=None,
        last_caught_up_ms=None,
        lag_time_ms=None,
        lag_time_unknown="NEVER_CAUGHT_UP",
        lag_messages=None,
        status=status,
    )


CONSISTENT = MetadataHealth(
    stale_brokers=[], state="CONSISTENT", blackout_earliest_ms=None, blackout_latest_ms=None
)


def partition_health(
    followers: Mapping[int, StatusName] | Sequence[FollowerHealth],
    *,
    topic: str = TOPIC,
    partition: int = 0,
    as_of_ms: int = AS_OF_MS,
    leader: int = 1,
    isr: Sequence[int] | None = None,
    replicas: Sequence[int] | None = None,
    min_insync_replicas: int = 1,
    offline: bool = False,
    metadata: MetadataHealth = CONSISTENT,
    leader_silent_since_ms: int | None = None,
) -> HealthRecord:
    """A partition's record: ``followers`` by broker -> status (or whole), the ISR by
    default the leader and every follower in sync or behind inside it, the replicas the
    leader and its followers; the conditions follow from them."""
    if isinstance(followers, Mapping):
        if isr is None:
            isr = [leader, *(b for b, s in followers.items() if s not in OUTSIDE_ISR)]
        members = set(isr)
        followers = [
            follower_health(b, s, in_isr=b in members, as_of_ms=as_of_ms)
            for b, s in followers.items()
        ]
    brokers = [f.broker for f in followers]
    isr = list(isr if isr is not None else [leader, *(f.broker for f in followers if f.in_isr)])
    replicas = list(replicas if replicas is not None else [leader, *brokers])
    under = len(isr) < len(replicas)
    return HealthRecord(
        topic=topic,
        partition=partition,
        as_of_ms=as_of_ms,
        leader=-1 if offline and leader not in isr else leader,
        leader_epoch=0,
        replicas=replicas,
        isr=isr,
        min_insync_replicas=min_insync_replicas,
        high_watermark=min((f.fetch_offset or 0 for f in followers if f.in_isr), default=0),
        leader_leo=LEADER_LEO,
        under_replicated=under,
        under_min_isr=len(isr) < min_insync_replicas,
        at_min_isr=len(isr) == min_insync_replicas,
        offline=offline,
        leader_silent_since_ms=leader_silent_since_ms,
        predicted_under_replicated=not under
        and any(f.status in ("SHRINK_ELIGIBLE", "SHRINK_OVERDUE") for f in followers),
        followers=list(followers),
        metadata=metadata,
    )


OUTSIDE_ISR = ("CATCHING_UP", "OUT_OF_SYNC")
"""Statuses of followers that Kafka has removed from the ISR (OFFLINE: either)."""
