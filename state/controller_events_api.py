"""What the controller-event rules (``state.isr_change``, ``state.controller_batch``) may
use of the model: its state and the few operations they share with it, by name.

``state.model.ReplicationModel`` has them all; the rules take this protocol instead, so
they import nothing of the model (which imports them) and use none of its private parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from state.apply_report import ApplyReport, IsrTransition
from state.cluster_state import ClusterState
from state.expiration_schedule import ExpirationSchedules
from state.metadata_cache import MetadataCaches
from state.partition_table import PartitionTable
from state.propagation_window import PropagationWindows
from state.settings import RuleSettings
from state.sharding import Shard


class ControllerEventTarget(Protocol):
    """The model as the controller-event rules see it."""

    settings: RuleSettings
    shard: Shard | None
    table: PartitionTable
    cluster: ClusterState
    caches: MetadataCaches
    windows: PropagationWindows

    @property
    def schedules(self) -> ExpirationSchedules:
        """Each leader's isr-expiration runs, as learned from its shrinks."""
        ...

    @property
    def zookeeper_mode(self) -> bool:
        """ZooKeeper mode: caches learn ISR changes by UpdateMetadata (KRaft: the log)."""
        ...

    @property
    def has_epoch_floors(self) -> bool:
        """Whether any partition has a floor from a partial leader change."""
        ...

    def owns(self, topic: str, partition: int) -> bool: ...

    def least_leader_epoch(self, topic: str, partition: int, row: int) -> int:
        """The least leader epoch an epoch-bearing event about the row may have."""
        ...

    def floor_after_partial_election(self, topic: str, partition: int) -> int | None: ...

    def clear_epoch_floor(self, topic: str, partition: int) -> None: ...

    def record_isr_transition(
        self, row: int, old: Sequence[int], new: Sequence[int], ts: int, *, by_controller: bool
    ) -> IsrTransition:
        """An applied ISR change, kept in the flapping history and the maintenance log."""
        ...

    def record_metadata_offset(self, row: int, offset: int | None, old_isr: Sequence[int]) -> None:
        """KRaft: the metadata log offset of the row's ISR change."""
        ...

    def record_eligible_leaders(
        self,
        row: int,
        elr: tuple[int, ...] | None,
        last_known_elr: tuple[int, ...] | None,
    ) -> None:
        """The row's ELR after its ISR or leader changed (``state.eligible_leaders``):
        as stated, or by the rules that need no statement (both None: not stated)."""
        ...

    def observe_propagation(self, row: int, ts: int, report: ApplyReport) -> None:
        """The row's ISR reached every live broker's cache at ``ts``."""
        ...
