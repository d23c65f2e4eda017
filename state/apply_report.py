"""What one ``ReplicationModel.apply`` did: counts, rejections, ISR transitions, delays.

The job turns it into metrics and dead letters; nothing of it is kept with the state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from state.events import DeadLetterReason


class IsrChangeKind(StrEnum):
    SHRINK = "shrink"
    EXPAND = "expand"
    OTHER = "other"  # neither a subset nor a superset (a controller reassignment, say)


@dataclass(frozen=True)
class IsrTransition:
    """An ISR change the model applied."""

    topic: str
    partition: int
    leader: int
    kind: IsrChangeKind
    by_controller: bool  # LeaderAndIsr; else the leader's own shrink/expand (IsrChange)
    ts: int
    removed: tuple[int, ...] = ()  # brokers that left the ISR
    added: tuple[int, ...] = ()  # brokers that entered it


@dataclass
class ApplyReport:
    """What one :meth:`ReplicationModel.apply` did, for metrics and dead letters."""

    # By event type: events that were applied to the state. A fetch answered with an
    # error is valid but changes nothing: it is counted in fetch_error_responses only.
    applied: Counter[str] = field(default_factory=Counter)
    rejected_ids: list[int] = field(default_factory=list)
    rejected_reasons: list[DeadLetterReason] = field(default_factory=list)
    fetch_error_responses: int = 0
    isr_transitions: list[IsrTransition] = field(default_factory=list)
    propagation_delays_ms: list[int] = field(default_factory=list)
    bounced_brokers: list[int] = field(default_factory=list)
    ignored_metadata_entries: int = 0  # UpdateMetadata states of partitions not known

    def reject(self, source_id: int, reason: DeadLetterReason) -> None:
        self.rejected_ids.append(source_id)
        self.rejected_reasons.append(reason)

    def rejections_by_reason(self) -> Counter[DeadLetterReason]:
        return Counter(self.rejected_reasons)


def isr_change_kind(old: Sequence[int], new: Sequence[int]) -> IsrChangeKind:
    before, after = set(old), set(new)
    if after < before:
        return IsrChangeKind.SHRINK
    if after > before:
        return IsrChangeKind.EXPAND
    return IsrChangeKind.OTHER
