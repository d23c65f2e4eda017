"""The vocabulary of causes: what the health record's ``cause`` fields say."""

from __future__ import annotations

from enum import StrEnum

NO_BROKER = -1
"""The responsible broker of a cause that blames none (``"broker": null``)."""


class CauseKind(StrEnum):
    """The vocabulary of causes, in order of precedence (docs/causes.md)."""

    OFFLINE_LEADER = "offline_leader"
    LEADER_NOT_SHRINKING = "leader_not_shrinking"
    CLUSTER_NOT_SHRINKING = "cluster_not_shrinking"
    BROKER_DOWN = "broker_down"
    LEADER_SILENT = "leader_silent"
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
