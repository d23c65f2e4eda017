"""The leader's own ISR changes (IsrChange): Kafka's Partition.maybeShrinkIsr and
maybeExpandIsr, committed through ZooKeeper or the controller's AlterPartition.

A change is fenced as the controller would take it (an older leader epoch or partition
epoch, a broker that is not the leader), then updates the ISR, the entry times of the
followers that entered it, the partition's propagation window (``state.propagation_window``)
and, in KRaft mode, the metadata-log offset the brokers' caches are judged by
(``state.metadata_cache``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from state.events import NO_LEADER, DeadLetterReason, IsrChange, TopicPartition
from state.propagation_window import record_isr_change, record_pending_change

if TYPE_CHECKING:
    from state.apply_report import ApplyReport
    from state.controller_events_api import ControllerEventTarget


def apply_isr_change(
    model: ControllerEventTarget, event: IsrChange, report: ApplyReport
) -> DeadLetterReason | None:
    """Apply the leader's own ISR change, fenced as its controller would take it."""
    _learn_the_leaders_schedule(model, event)
    if not model.owns(event.topic, event.partition):
        # Another shard holds the partition; its leader's window still moves. This
        # shard cannot fence the change by leader epoch: a stale IsrChange that the
        # owner rejects still widens the leader's window here (README).
        if model.zookeeper_mode and event.leader != NO_LEADER:
            tp = TopicPartition(event.topic, event.partition)
            record_pending_change(model.table, model.windows, event.leader, tp, event.ts)
        return None
    table = model.table
    row = table.live_row_of(event.topic, event.partition)
    if row < 0:
        return DeadLetterReason.UNKNOWN_PARTITION
    if event.leader_epoch is not None:
        if event.leader_epoch < model.least_leader_epoch(event.topic, event.partition, row):
            return DeadLetterReason.STALE_LEADER_EPOCH
        if event.leader_epoch > table.leader_epoch[row]:
            return DeadLetterReason.UNKNOWN_LEADER_EPOCH
    if event.partition_epoch is not None and event.partition_epoch < table.partition_epoch[row]:
        return DeadLetterReason.STALE_PARTITION_EPOCH
    if event.leader != table.leader[row] or event.leader == NO_LEADER:
        return DeadLetterReason.NOT_LEADER
    old_isr = table.isr[row]
    if event.old_isr is None:
        _isr_committed(model, row, event, report)
        return None
    # Entered at ts: added by the change, or new to the ISR the monitor held.
    stayed = set(old_isr) & set(event.old_isr)
    table.set_isr(row, event.new_isr)
    table.mark_isr_entries(row, set(event.new_isr) - stayed, event.ts)
    if event.partition_epoch is not None:
        table.partition_epoch[row] = event.partition_epoch
    model.record_eligible_leaders(row, event.elr, event.last_known_elr)
    record_isr_change(table, model.windows, row, event.ts, by_leader=True, leader=event.leader)
    model.record_metadata_offset(row, event.metadata_offset, old_isr)
    report.isr_transitions.append(
        model.record_isr_transition(
            row, event.old_isr, event.new_isr, event.ts, by_controller=False
        )
    )
    model.caches.refresh(row)
    return None


def _learn_the_leaders_schedule(model: ControllerEventTarget, event: IsrChange) -> None:
    """A shrink by the leader is one of its isr-expiration runs (state.expiration_schedule):
    in every shard alike, before any fencing, so that no shard's prediction differs. Only
    a commit's record teaches it, one that states the partition epoch Kafka committed
    (the metadata log, a 2.4+ broker's ``ISR updated`` line): an ISR change ``collect
    admin`` saw between two polls carries the poll's time, not the run's."""
    if event.old_isr is None or event.partition_epoch is None or event.leader == NO_LEADER:
        return
    removed = set(event.old_isr) - set(event.new_isr)
    if removed and all(model.cluster.is_live(broker) for broker in removed):
        lag_time_max_ms = model.cluster.lag_time_max_ms.get(
            event.leader, model.settings.replica_lag_time_max_ms
        )
        model.schedules.observe_shrink(event.leader, event.ts, lag_time_max_ms)


def _isr_committed(
    model: ControllerEventTarget, row: int, event: IsrChange, report: ApplyReport
) -> None:
    """The partial IsrChange: the new ISR, the one before it not stated.

    Kafka's leader changes the ISR it holds (Partition.maybeShrinkIsr /
    maybeExpandIsr, then handleAlterPartitionUpdate on commit), so the ISR before is
    the one the model holds for the partition. When the model holds none (a
    partition known only from its assignment) the change cannot be classified: the
    ISR is set with no shrink/expand and no entry times for its members (when they
    entered is not known). The commit time itself is stated: it is when Kafka queued
    the change for propagation (ZooKeeper: ReplicaManager.recordIsrChange after the
    write; KRaft: the AlterPartition commit), so the propagation window starts then.
    An ISR equal to the one held changes nothing but the partition epoch; its
    leader's pending propagation is still recorded, as the shards that do not own
    the partition record it (the leader's window must not depend on the sharding).
    """
    table = model.table
    old_isr = table.isr[row]
    if event.partition_epoch is not None:
        table.partition_epoch[row] = event.partition_epoch
    if set(old_isr) == set(event.new_isr):
        if event.elr is not None:  # a statement of the ELR, with the ISR unchanged
            model.record_eligible_leaders(row, event.elr, event.last_known_elr)
        if model.zookeeper_mode:
            tp = TopicPartition(event.topic, event.partition)
            record_pending_change(model.table, model.windows, event.leader, tp, event.ts)
        return
    table.set_isr(row, event.new_isr)
    model.record_eligible_leaders(row, event.elr, event.last_known_elr)
    if old_isr:
        table.mark_isr_entries(row, set(event.new_isr) - set(old_isr), event.ts)
    record_isr_change(table, model.windows, row, event.ts, by_leader=True, leader=event.leader)
    model.record_metadata_offset(row, event.metadata_offset, old_isr)
    if old_isr:
        report.isr_transitions.append(
            model.record_isr_transition(row, old_isr, event.new_isr, event.ts, by_controller=False)
        )
    model.caches.refresh(row)
