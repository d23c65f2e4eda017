"""The principal cause of an unhealthy partition (``state.causes`` rules, last paragraph).

Its offline leader; else the highest-ranked cause of its lagging followers; else its
silent leader (``state.leader_news``); else its overdue metadata: one broker that still
caches an old ISR (UpdateMetadata did not reach it), or several (the controller is slow to
send it); else metadata still propagating within Kafka's window; else ``unexplained``
(every follower in sync, metadata consistent: fewer replicas than min.insync.replicas,
say).
"""

from __future__ import annotations

from collections.abc import Sequence

from state.arrays import I64
from state.attribution_inputs import UnhealthyPartitions
from state.cause_kinds import NO_BROKER, CauseKind
from state.health_record import Cause, cause


def partition_causes(
    unhealthy: UnhealthyPartitions, follower_kinds: I64, follower_causes: list[Cause]
) -> list[Cause]:
    """Each unhealthy partition's principal cause (module doc)."""
    best: dict[int, int] = {}  # partition position -> index of its highest-ranked follower
    positions = unhealthy.followers.partition.tolist()
    ranks = follower_kinds.tolist()
    for i, position in enumerate(positions):
        if position not in best or ranks[i] < ranks[best[position]]:
            best[position] = i
    stale_counts: dict[int, int] = {}
    for overdue, stale in zip(
        unhealthy.metadata_overdue.tolist(), unhealthy.stale_brokers, strict=True
    ):
        if overdue and len(stale) == 1:
            stale_counts[stale[0]] = stale_counts.get(stale[0], 0) + 1
    causes: list[Cause] = []
    for position in range(len(unhealthy.keys)):
        leader = int(unhealthy.leader[position])
        stale = unhealthy.stale_brokers[position]
        if unhealthy.offline[position]:
            down = leader if leader >= 0 else int(unhealthy.last_isr[position])
            causes.append(
                cause(
                    CauseKind.OFFLINE_LEADER,
                    down,
                    (
                        f"no live leader: waiting for broker {down}, the last in-sync replica"
                        if leader < 0
                        else f"leader {leader} is down (not registered)"
                    ),
                )
            )
        elif position in best:
            causes.append(follower_causes[best[position]])
        elif unhealthy.leader_silent[position]:
            causes.append(leader_silent_cause(leader))
        elif unhealthy.metadata_overdue[position] and len(stale) == 1:
            causes.append(
                cause(
                    CauseKind.METADATA_STALE_ON_BROKER,
                    stale[0],
                    (
                        f"broker {stale[0]} still caches an old ISR past the propagation window "
                        f"({stale_counts[stale[0]]:,} partitions): UpdateMetadata did not reach it"
                    ),
                )
            )
        elif unhealthy.metadata_overdue[position]:
            causes.append(
                cause(
                    CauseKind.METADATA_NOT_SENT,
                    NO_BROKER,
                    (
                        f"brokers {_names(stale)} cache an old ISR past the propagation "
                        "window: the controller is slow to send UpdateMetadata"
                    ),
                )
            )
        elif unhealthy.metadata_stale[position]:
            causes.append(
                cause(
                    CauseKind.METADATA_PROPAGATING,
                    NO_BROKER,
                    (
                        f"an ISR change is still reaching brokers {_names(stale)}, within "
                        "Kafka's propagation window"
                    ),
                )
            )
        else:
            causes.append(
                cause(
                    CauseKind.UNEXPLAINED,
                    NO_BROKER,
                    (
                        "unhealthy with every follower in sync and metadata consistent "
                        "(e.g. fewer replicas than min.insync.replicas)"
                    ),
                )
            )
    return causes


def _names(brokers: Sequence[int]) -> str:
    return ", ".join(map(str, brokers))


def leader_silent_cause(leader: int) -> Cause:
    """The cause of a follower, or a partition, whose leader is silent (``state.leader_news``)."""
    return cause(
        CauseKind.LEADER_SILENT,
        leader,
        (
            f"no news of leader {leader} for more than half its replica.lag.time.max.ms (no "
            "fetch it served to a follower of the partition, no election) while the "
            "controller counts it live: hung, or out of the collectors' reach"
        ),
    )
