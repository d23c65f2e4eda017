"""The vocabulary of causes: what the health record's ``cause`` fields say."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from state.attribution_inputs import NO_BROKER

Cause = dict[str, Any]
"""``{"kind": str, "broker": int | None, "text": str}`` as in the health record."""


class CauseKind(StrEnum):
    """The vocabulary of causes, in order of precedence (docs/causes.md)."""

    OFFLINE_LEADER = "offline_leader"
    LEADER_NOT_SHRINKING = "leader_not_shrinking"
    CLUSTER_NOT_SHRINKING = "cluster_not_shrinking"
    BROKER_DOWN = "broker_down"
    LEADER_SLOW = "leader_slow"
    FOLLOWER_BROKER_BEHIND = "follower_broker_behind"
    FETCHER_FROM_LEADER = "fetcher_from_leader"
    PARTITION_ALONE = "partition_alone"
    # A follower's own cause before any other but an overdue shrink; as a partition's
    # principal cause it yields to any unplanned one (the partition's problem is that).
    PLANNED_MAINTENANCE = "planned_maintenance"
    METADATA_STALE_ON_BROKER = "metadata_stale_on_broker"
    METADATA_NOT_SENT = "metadata_not_sent"
    METADATA_PROPAGATING = "metadata_propagating"
    UNEXPLAINED = "unexplained"


KINDS: tuple[CauseKind, ...] = tuple(CauseKind)
RANK = {kind: rank for rank, kind in enumerate(KINDS)}
"""Each kind's precedence: lower ranks first."""


def cause(kind: CauseKind, broker: int, text: str) -> Cause:
    return {"kind": kind.value, "broker": None if broker == NO_BROKER else broker, "text": text}
