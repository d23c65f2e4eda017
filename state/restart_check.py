"""Would stopping a broker now put partitions under min ISR, or offline?

Stopping a broker removes it from the ISR of every partition it is in (the controller's
``onBrokerFailure``; a controlled shutdown does the same, and moves its leaderships
first). A partition whose ISR then has fewer members than ``min.insync.replicas`` refuses
``acks=all`` writes; one whose ISR is then empty has no replica Kafka may elect
(``unclean.leader.election.enable`` is false by default) and goes offline.

Followers that are SHRINK_ELIGIBLE or SHRINK_OVERDUE count as already gone: Kafka is
about to remove them (or should have), so they cannot be relied on to keep the ISR up.
Stopping a broker that is not in a partition's (remaining) ISR changes nothing for it.

A silent leader (``state.leader_news``: every follower silent for more than T / 2) counts
as gone, with its followers that are not at its log end: a hung leader is fenced once its
session lapses, which takes it out of the ISR, and one that comes back first removes
those followers at its first check. Either way the ISR is smaller than it shows, and its
followers are only LAGGING, so the rule above does not catch them.

With Eligible Leader Replicas (Kafka 4.0+, KIP-966) an ISR may be empty and the
controller then elects a live member of the ELR (``PartitionChangeBuilder.isValidNewLeader``):
stopping the last ISR member of such a partition elects the first live ELR member, in
replica order, which becomes the whole ISR. The partition then stays under min ISR, but
not offline. An ELR member on a broker that is down cannot be elected.

Only *fragile* partitions can break when one broker stops: those whose remaining ISR is
no larger than ``min.insync.replicas``. The streaming job's shards report only those,
so the driver answers for the whole cluster from a small list (:func:`fragile`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import msgspec
import numpy as np

from state.arrays import BOOL
from state.health_record import HealthRecord
from state.partition_health import HealthFrame
from state.shrink_rule import FollowerStatus

GOING = frozenset({FollowerStatus.SHRINK_ELIGIBLE.name, FollowerStatus.SHRINK_OVERDUE.name})
OFFLINE_STATUS = FollowerStatus.OFFLINE.name  # a follower on a broker that is down
OFFLINE = "offline"
UNDER_MIN_ISR = "under_min_isr"


class IsrAtRisk(msgspec.Struct, frozen=True, kw_only=True):
    """What the check reads of a partition: its ISR without the followers Kafka is about
    to remove (or should have), and its ``min.insync.replicas``. The job's shards report
    these for the fragile partitions only (:func:`fragile_entries`); the tool makes them
    from health records (:meth:`of`)."""

    topic: str
    partition: int
    as_of_ms: int
    leader: int
    remaining_isr: list[int]
    min_insync_replicas: int
    # Kafka 4.0+: the live ELR members, in replica order (records before it lack it).
    electable_elr: list[int] = []

    @staticmethod
    def of(record: HealthRecord) -> IsrAtRisk:
        going = {f.broker for f in record.followers if f.status in GOING}
        if record.leader_silent_since_ms is not None:
            going |= {record.leader}
            going |= {f.broker for f in record.followers if f.in_isr and f.lag_messages != 0}
        down = {f.broker for f in record.followers if f.status == OFFLINE_STATUS}
        elr = set(record.elr or ())
        return IsrAtRisk(
            topic=record.topic,
            partition=record.partition,
            as_of_ms=record.as_of_ms,
            leader=record.leader,
            remaining_isr=[b for b in record.isr if b not in going],
            min_insync_replicas=record.min_insync_replicas,
            electable_elr=[b for b in record.replicas if b in elr and b not in going | down],
        )


@dataclass(frozen=True)
class Breakage:
    """A partition that stopping the broker would break, and how."""

    topic: str
    partition: int
    leader: int
    isr: list[int]  # the remaining ISR now
    isr_after: list[int]
    min_insync_replicas: int
    becomes: str  # OFFLINE or UNDER_MIN_ISR


def breakage(partition: IsrAtRisk, broker: int) -> Breakage | None:
    """What stopping ``broker`` does to this partition, or None if nothing breaks."""
    isr = partition.remaining_isr
    if broker not in isr:
        return None
    after = [b for b in isr if b != broker]
    if not after:  # the controller elects from the ELR, if a member is up
        after = [b for b in partition.electable_elr if b != broker][:1]
    minimum = partition.min_insync_replicas
    if after and len(after) >= minimum:
        return None
    return Breakage(
        partition.topic,
        partition.partition,
        partition.leader,
        list(isr),
        after,
        minimum,
        UNDER_MIN_ISR if after else OFFLINE,
    )


@dataclass(frozen=True)
class RestartCheck:
    broker: int
    as_of_ms: int | None  # the newest health record considered
    partitions: int  # health records considered
    would_break: list[Breakage] = field(default_factory=list)

    @property
    def safe(self) -> bool:
        return not self.would_break

    def to_json(self) -> dict[str, Any]:
        return {
            "safe": self.safe,
            "broker": self.broker,
            "as_of_ms": self.as_of_ms,
            "partitions_considered": self.partitions,
            "would_break": [asdict(b) for b in self.would_break],
        }


def check_restart(partitions: Iterable[IsrAtRisk], broker: int) -> RestartCheck:
    """The answer for ``broker`` over the latest health of each partition."""
    considered = 0
    newest: int | None = None
    broken: list[Breakage] = []
    for partition in partitions:
        considered += 1
        newest = partition.as_of_ms if newest is None else max(newest, partition.as_of_ms)
        found = breakage(partition, broker)
        if found is not None:
            broken.append(found)
    broken.sort(key=lambda b: (b.topic, b.partition))
    return RestartCheck(broker, newest, considered, broken)


def _going(frame: HealthFrame) -> BOOL:
    """ISR followers Kafka is about to remove, or should have, and those of a silent leader
    not at its log end (one column per slot; module doc)."""
    status = frame.follower_status
    behind_silent_leader = frame.leader_silent[:, None] & (
        frame.follower_fetch_offset < frame.leader_leo[:, None]
    )
    going: BOOL = frame.follower_in_isr & (
        (status == FollowerStatus.SHRINK_ELIGIBLE)
        | (status == FollowerStatus.SHRINK_OVERDUE)
        | behind_silent_leader
    )
    return going


def _leader_going(frame: HealthFrame) -> BOOL:
    """Partitions whose leader is silent and in the ISR: it is fenced, or comes back."""
    in_isr = np.fromiter(
        (leader in isr for leader, isr in zip(frame.leader.tolist(), frame.isr, strict=True)),
        np.bool_,
        len(frame),
    )
    going: BOOL = frame.leader_silent & in_isr
    return going


def fragile(frame: HealthFrame) -> BOOL:
    """Partitions some single broker's stop would break: remaining ISR <= min ISR."""
    going = _going(frame)
    isr_size = np.fromiter((len(isr) for isr in frame.isr), np.int64, len(frame))
    remaining = isr_size - going.sum(axis=1) - _leader_going(frame)
    result: BOOL = remaining <= frame.min_insync_replicas
    return result


def fragile_entries(frame: HealthFrame) -> list[IsrAtRisk]:
    """The fragile partitions, what :func:`breakage` reads of them."""
    entries = []
    going = _going(frame)
    leader_going = _leader_going(frame)
    down = frame.follower_status == FollowerStatus.OFFLINE
    for i in np.flatnonzero(fragile(frame)).tolist():
        gone = set(frame.follower_broker[i][going[i]].tolist())
        if leader_going[i]:
            gone.add(int(frame.leader[i]))
        unavailable = gone | set(frame.follower_broker[i][down[i]].tolist())
        held = frame.eligible_leaders[i]
        elr = set(held.elr) if held is not None else set()
        entries.append(
            IsrAtRisk(
                topic=frame.topic[i],
                partition=int(frame.partition[i]),
                as_of_ms=frame.as_of_ms,
                leader=int(frame.leader[i]),
                remaining_isr=[b for b in frame.isr[i] if b not in gone],
                min_insync_replicas=int(frame.min_insync_replicas[i]),
                electable_elr=[b for b in frame.replicas[i] if b in elr and b not in unavailable],
            )
        )
    return entries
