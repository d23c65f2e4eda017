"""A run of consecutive LeaderAndIsr events applied as one columnar batch.

At a cold start the controller sends one LeaderAndIsr per partition (Kafka's
``ControllerChannelManager`` batches them per broker); applied one at a time
(``ReplicationModel._leader_and_isr``, the explaining reference) each costs a handful
of small numpy calls. Here the fencing of the whole run is computed over columns and
the partition table is written in bulk, with exactly the outcome of one at a time:

* the run is cut into segments in which no partition appears twice, so that within a
  segment every event is judged against the state its partition had before the
  segment, as it would be one at a time;
* a broker fences requests of an older controller (``KafkaController`` /
  ``ReplicaManager`` controller epoch checks) and adopts the epoch of any newer one,
  even of a request whose partition states it then ignores: the epoch an event is
  judged by is the running maximum of the epochs before it;
* a partition state of an older leader epoch, or of the same leader epoch and an older
  partition epoch, is stale (Kafka's ``Partition.makeLeader`` / ``makeFollower`` fence
  requests by leader epoch, KIP-380's partition epoch orders the rest);
* what stays per event (a replica set that changes, KRaft's metadata offsets, the ISR
  transitions and their flaps, a cache that holds the partition) calls the reference's
  own per-row code, in event order.

Only events with every field present go here (:func:`takes_in_bulk`); a deletion
(leader -2) or a partial event goes one at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import numpy.typing as npt

from state.arrays import BOOL, I64
from state.caught_up import reset_rows_on_become_leader
from state.events import (
    LEADER_DURING_DELETE,
    NO_LEADER,
    DeadLetterReason,
    LeaderAndIsr,
    UpdateMetadata,
)
from state.partition_table import PartitionTable, is_member, padded
from state.propagation_window import controller_change_origin
from state.sharding import shard_lookup

if TYPE_CHECKING:
    from state.apply_report import ApplyReport
    from state.controller_events_api import ControllerEventTarget

NO_EPOCH = -1
"""The controller epoch column of an event that carries none (epochs are >= 0)."""

# Verdicts of the partition state, in the order the reference checks them.
_ACCEPTED, _STALE_CONTROLLER, _STALE_LEADER, _STALE_PARTITION = range(4)
_REASONS = {
    _STALE_CONTROLLER: DeadLetterReason.STALE_CONTROLLER_EPOCH,
    _STALE_LEADER: DeadLetterReason.STALE_LEADER_EPOCH,
    _STALE_PARTITION: DeadLetterReason.STALE_PARTITION_EPOCH,
}


def takes_in_bulk(event: object) -> bool:
    """A LeaderAndIsr with every field the bulk path reads, and no deletion."""
    return (
        isinstance(event, LeaderAndIsr)
        and event.leader != LEADER_DURING_DELETE
        and event.leader_epoch is not None
        and event.partition_epoch is not None
        and event.isr is not None
        and event.replicas is not None
    )


class StatedState(NamedTuple):
    """The four state fields of a full LeaderAndIsr, none of them None."""

    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]


def stated_state(event: LeaderAndIsr) -> StatedState:
    """The state a full LeaderAndIsr states (the bulk path takes no partial one)."""
    leader_epoch, partition_epoch = event.leader_epoch, event.partition_epoch
    isr, replicas = event.isr, event.replicas
    if leader_epoch is None or partition_epoch is None or isr is None or replicas is None:
        raise ValueError(f"a partial LeaderAndIsr cannot take the bulk path: {event}")
    return StatedState(leader_epoch, partition_epoch, isr, replicas)


def segments(run: Sequence[tuple[int, LeaderAndIsr]]) -> list[Sequence[tuple[int, LeaderAndIsr]]]:
    """``run`` cut before every event whose partition an earlier event of its piece names."""
    pieces: list[Sequence[tuple[int, LeaderAndIsr]]] = []
    seen: set[tuple[str, int]] = set()
    start = 0
    for i, (_, event) in enumerate(run):
        key = (event.topic, event.partition)
        if key in seen:
            pieces.append(run[start:i])
            seen.clear()
            start = i
        seen.add(key)
    pieces.append(run[start:])
    return [piece for piece in pieces if piece]


def apply_leader_and_isr_run(
    model: ControllerEventTarget, run: Sequence[tuple[int, LeaderAndIsr]], report: ApplyReport
) -> None:
    """Apply ``(source_id, event)`` pairs, all :func:`takes_in_bulk`, in order."""
    for piece in segments(run):
        _apply_segment(model, piece, report)


def _int_column(values: Sequence[int]) -> I64:
    return np.fromiter(values, dtype=np.int64, count=len(values))


class Topics:
    """A column of topic names as codes into the distinct names (a dict, not pandas:
    a shard's part of an UpdateMetadata holds a few dozen states)."""

    def __init__(self, topics: Sequence[str]) -> None:
        index: dict[str, int] = {}
        codes = [index.setdefault(topic, len(index)) for topic in topics]
        self.codes = np.asarray(codes, dtype=np.intp)
        self.names = list(index)


def live_rows_of(table: PartitionTable, topics: Topics, partitions: I64) -> I64:
    """:meth:`PartitionTable.live_row_of` of each ``(topic, partitions[i])``."""
    slots = np.asarray([table.topic_slots(name) for name in topics.names], dtype=np.int64)
    slots = slots.reshape(-1, 2)
    base, capacity = slots[topics.codes, 0], slots[topics.codes, 1]
    inside = (partitions >= 0) & (partitions < capacity)
    where = np.where(inside, base + partitions, 0)
    rows: I64 = np.where(inside, table.slot_to_row[where] if len(table.slot_to_row) else -1, -1)
    return rows


def _owned(model: ControllerEventTarget, topics: Topics, partitions: I64) -> BOOL:
    if model.shard is None:
        return np.ones(len(partitions), dtype=np.bool_)
    lookup = shard_lookup(model.shard.count)
    owned: BOOL = lookup.shards(topics.codes, topics.names, partitions) == model.shard.index
    return owned


def _admitted_by_controller(
    model: ControllerEventTarget, events: Sequence[LeaderAndIsr]
) -> tuple[BOOL, npt.NDArray[np.intp]]:
    """Which events a broker takes by their controller epoch, and which raise it."""
    epochs = _int_column(
        [NO_EPOCH if e.controller_epoch is None else e.controller_epoch for e in events]
    )
    known = model.cluster.controller_epoch
    start = NO_EPOCH if known is None else known
    before = np.maximum.accumulate(np.concatenate(([start], epochs)))[:-1]
    carries = epochs != NO_EPOCH
    admitted: BOOL = ~carries | (epochs >= before)
    return admitted, np.flatnonzero(carries & (epochs > before))


def _apply_segment(
    model: ControllerEventTarget, segment: Sequence[tuple[int, LeaderAndIsr]], report: ApplyReport
) -> None:
    """Events of distinct partitions (see the module docstring)."""
    table = model.table
    events = [event for _, event in segment]
    topics = Topics([e.topic for e in events])
    partitions = _int_column([e.partition for e in events])
    states = [stated_state(e) for e in events]
    leader_epoch = _int_column([state.leader_epoch for state in states])
    partition_epoch = _int_column([state.partition_epoch for state in states])

    admitted, raises = _admitted_by_controller(model, events)
    for i in raises.tolist():
        model.cluster.observe_controller(events[i].controller_id, events[i].controller_epoch)
    owned = _owned(model, topics, partitions)
    rows = live_rows_of(table, topics, partitions)
    known = rows >= 0
    held_leader_epoch = np.where(known, table.leader_epoch[np.maximum(rows, 0)], -1)
    held_partition_epoch = np.where(known, table.partition_epoch[np.maximum(rows, 0)], -1)
    # A partial leader change (a log line with no epoch) raised the least epoch a later
    # election may carry above the one held (ReplicationModel._leader_elected).
    least_leader_epoch = held_leader_epoch
    if model.has_epoch_floors:
        floor_of = model.floor_after_partial_election
        floors = _int_column(
            [NO_EPOCH if (f := floor_of(e.topic, e.partition)) is None else f for e in events]
        )
        least_leader_epoch = np.where(known, np.maximum(held_leader_epoch, floors), -1)
    stale_leader = known & (leader_epoch < least_leader_epoch)
    stale_partition = (
        known & (leader_epoch == held_leader_epoch) & (partition_epoch < held_partition_epoch)
    )
    verdict = np.select(
        [~admitted, stale_leader, stale_partition],
        [_STALE_CONTROLLER, _STALE_LEADER, _STALE_PARTITION],
        _ACCEPTED,
    )
    for i in np.flatnonzero(owned & (verdict != _ACCEPTED)).tolist():
        report.reject(segment[i][0], _REASONS[int(verdict[i])])
    accepted = np.flatnonzero(owned & (verdict == _ACCEPTED))
    if len(accepted):
        report.applied["LeaderAndIsr"] += len(accepted)
        taken = accepted.tolist()
        _write(
            model, [events[i] for i in taken], [states[i] for i in taken], rows[accepted], report
        )


def _write(
    model: ControllerEventTarget,
    events: list[LeaderAndIsr],
    states: list[StatedState],
    rows: I64,
    report: ApplyReport,
) -> None:
    """The reference's writes of accepted events of distinct partitions (-1: a new row)."""
    table = model.table
    capacity = np.empty(len(events), dtype=np.int64)  # replica slots when each is applied
    for i, state in enumerate(states):  # in order: each growth is to max(rf, 2 x capacity)
        table.ensure_replica_capacity(len(state.replicas))
        capacity[i] = table.replica_capacity
    new = np.flatnonzero(rows < 0)
    if len(new):
        fresh = new.tolist()
        rows[new] = table.create_rows(
            [events[i].topic for i in fresh],
            [events[i].partition for i in fresh],
            [states[i].replicas for i in fresh],
        )
    row_list = rows.tolist()
    if model.has_epoch_floors:  # an epoch is known again for each of them
        for event in events:
            model.clear_epoch_floor(event.topic, event.partition)
    old_isr = [table.isr[row] for row in row_list]
    for row, state in zip(row_list, states, strict=True):
        if state.replicas != table.replicas[row]:
            table.set_replicas(row, state.replicas)
    leader = _int_column([e.leader for e in events])
    leader_epoch = _int_column([state.leader_epoch for state in states])
    ts = _int_column([e.ts for e in events])
    new_epoch = leader_epoch > table.leader_epoch[rows]
    new_leader = leader != table.leader[rows]

    isrs = [state.isr for state in states]
    table.set_isr_rows(rows, isrs)
    # A follower that stays in the ISR keeps its entry time (docs/domain.md#shrink-rule).
    before, before_counts = padded(old_isr)
    entered = table.in_isr[rows] & ~is_member(table.replica_broker[rows], before, before_counts)
    which, slot = np.nonzero(entered)
    table.isr_since_ms[rows[which], slot] = ts[which]
    table.leader[rows] = leader
    table.leader_epoch[rows] = leader_epoch
    table.partition_epoch[rows] = _int_column([state.partition_epoch for state in states])
    for row, event in zip(row_list, events, strict=True):
        model.record_eligible_leaders(row, event.elr, event.last_known_elr)

    after, after_counts = padded(isrs)
    changed = ~(
        _contained(after, after_counts, before, before_counts)
        & _contained(before, before_counts, after, after_counts)
    )
    moved = rows[changed]
    table.isr_changed_ms[moved] = ts[changed]
    table.change_broker[moved] = leader[changed]
    table.change_origin[moved] = controller_change_origin(model.windows)
    for i in np.flatnonzero(changed).tolist():
        row, event = row_list[i], events[i]
        if not model.zookeeper_mode and (
            event.metadata_offset is not None or table.isr_change_offset[row] >= 0
        ):
            model.record_metadata_offset(row, event.metadata_offset, old_isr[i])
        if old_isr[i]:
            report.isr_transitions.append(
                model.record_isr_transition(row, old_isr[i], isrs[i], event.ts, by_controller=True)
            )
    elected = new_epoch & (leader != NO_LEADER)
    reset_rows_on_become_leader(table, rows[elected], ts[elected], new_leader[elected])
    # One at a time, the reset covered the slots the table had then; slots added by a
    # later event's growth started fresh.
    slots = np.arange(table.replica_capacity)
    for i in np.flatnonzero(elected & (capacity < table.replica_capacity)).tolist():
        table.reset_replica_state(row_list[i], slots >= capacity[i])
    for row in row_list:
        if table.cached_isr[row]:
            model.caches.refresh(row)
        else:
            model.caches.mismatched.discard(row)


def _contained(
    inner: npt.NDArray[np.int32],
    inner_counts: npt.NDArray[np.int32],
    outer: npt.NDArray[np.int32],
    outer_counts: npt.NDArray[np.int32],
) -> BOOL:
    """Per row: whether every entry of ``inner`` is an entry of ``outer`` (as sets)."""
    found = is_member(inner, outer, outer_counts)
    valid = np.arange(inner.shape[1]) < inner_counts[:, None]
    contained: BOOL = np.all(found | ~valid, axis=1)
    return contained


def apply_metadata_states(
    model: ControllerEventTarget, event: UpdateMetadata, report: ApplyReport
) -> bool:
    """The partition states of ``event`` as ``ReplicationModel._update_metadata`` applies
    them, with the lookups over columns; False (nothing done) when the event names one of
    the model's partitions twice, which the reference then applies.

    A partition whose caches all held the controller's ISR stays consistent unless this
    broker now holds another; only partitions that differed before need their caches
    compared again, and only those can have just caught up (an observed propagation).
    """
    table, caches = model.table, model.caches
    states = event.partitions
    topics = Topics([state.topic for state in states])
    partitions = _int_column([state.partition for state in states])
    owned = _owned(model, topics, partitions)
    rows = live_rows_of(table, topics, partitions)
    known = owned & (rows >= 0)
    row_list = rows[known].tolist()
    if len(set(row_list)) != len(row_list):
        return False
    report.ignored_metadata_entries += int(np.count_nonzero(owned & (rows < 0)))
    differed = caches.mismatched
    stale_before = {
        row for row in row_list if row in differed and caches.stale_brokers(row, model.cluster)
    }
    broker = event.broker
    as_set: dict[tuple[int, ...], frozenset[int]] = {}  # one frozenset per distinct ISR
    stored: list[int] = []
    for row, i in zip(row_list, np.flatnonzero(known).tolist(), strict=True):
        state = states[i]
        if state.leader == LEADER_DURING_DELETE:
            caches.evict(row, broker)
            if row in differed:
                caches.refresh(row)
            continue
        isr = as_set.get(state.isr)
        if isr is None:
            isr = as_set[state.isr] = frozenset(state.isr)
        caches.store(row, broker, isr)
        stored.append(row)
        if row in differed:
            caches.refresh(row)
        elif isr != frozenset(table.isr[row]):
            differed.add(row)
    for row in stored:
        # The change reached every cache only if this broker took it (an eviction for a
        # topic deletion is no propagation).
        if row in stale_before and not caches.stale_brokers(row, model.cluster):
            model.observe_propagation(row, event.ts, report)
    return True
