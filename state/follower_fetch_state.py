"""The leader's view of each follower: fetch offset, last fetch, last caught-up time.

semantics.md section 2. A batch of fetch responses is applied with numpy, exactly as if
they were applied one at a time in batch order: the only sequential dependency (a fetch
compares itself with the previous fetch of the same follower) is resolved by sorting the
batch by follower, stably, and shifting within each follower's run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from state.events import FETCH_ERROR_NONE, DeadLetterReason, FetchResponse
from state.partition_table import I64, NEVER, UNKNOWN_OFFSET, PartitionTable

ACCEPTED = 0
"""Reason code of an accepted fetch in :class:`FetchOutcome` (others index REJECT_REASONS)."""

REJECT_REASONS: tuple[DeadLetterReason, ...] = (
    DeadLetterReason.UNKNOWN_PARTITION,
    DeadLetterReason.STALE_LEADER_EPOCH,
    DeadLetterReason.UNKNOWN_LEADER_EPOCH,
    DeadLetterReason.NOT_LEADER,
    DeadLetterReason.NOT_ASSIGNED_REPLICA,
)


@dataclass(frozen=True)
class FetchBatch:
    """Fetch responses as columns, in the order they are to be applied."""

    source_id: I64
    ts: I64
    topic: npt.NDArray[np.object_]
    partition: I64
    leader: I64
    follower: I64
    leader_epoch: I64
    fetch_offset: I64
    leader_leo: I64
    high_watermark: I64
    error_free: npt.NDArray[np.bool_]

    def __len__(self) -> int:
        return len(self.ts)

    @staticmethod
    def from_events(events: Sequence[FetchResponse], source_ids: Sequence[int]) -> FetchBatch:
        def ints(name: str) -> I64:
            return np.fromiter((getattr(e, name) for e in events), np.int64, len(events))

        return FetchBatch(
            source_id=np.asarray(source_ids, dtype=np.int64),
            ts=ints("ts"),
            topic=np.array([e.topic for e in events], dtype=object),
            partition=ints("partition"),
            leader=ints("leader"),
            follower=ints("follower"),
            leader_epoch=ints("leader_epoch"),
            fetch_offset=ints("fetch_offset"),
            leader_leo=ints("leader_leo"),
            high_watermark=ints("high_watermark"),
            error_free=np.fromiter(
                (e.error == FETCH_ERROR_NONE for e in events), np.bool_, len(events)
            ),
        )

    @staticmethod
    def from_frame(frame: pd.DataFrame, source_id_column: str | None = None) -> FetchBatch:
        """From a frame with the wire columns (``error`` may be absent or null: NONE)."""

        def ints(name: str) -> I64:
            return frame[name].to_numpy(dtype=np.int64)

        if "error" in frame:
            error = frame["error"]
            error_free = (error.isna() | (error == FETCH_ERROR_NONE)).to_numpy(dtype=np.bool_)
        else:
            error_free = np.ones(len(frame), dtype=np.bool_)
        source_id = (
            ints(source_id_column) if source_id_column else np.arange(len(frame), dtype=np.int64)
        )
        return FetchBatch(
            source_id=source_id,
            ts=ints("ts"),
            topic=frame["topic"].to_numpy(dtype=object),
            partition=ints("partition"),
            leader=ints("leader"),
            follower=ints("follower"),
            leader_epoch=ints("leader_epoch"),
            fetch_offset=ints("fetch_offset"),
            leader_leo=ints("leader_leo"),
            high_watermark=ints("high_watermark"),
            error_free=error_free,
        )


@dataclass(frozen=True)
class FetchOutcome:
    """Per fetch: ACCEPTED, or 1 + the index of its reason in REJECT_REASONS."""

    code: npt.NDArray[np.int8]
    error_responses: int

    def rejected(self) -> npt.NDArray[np.intp]:
        return np.flatnonzero(self.code != ACCEPTED)


def classify_fetches(table: PartitionTable, batch: FetchBatch) -> tuple[I64, I64, FetchOutcome]:
    """Find each fetch's partition row and replica slot, and fence stale fetches.

    A fetch that names an older leader epoch, or that a broker served while it was not
    the leader, is stale and ignored (semantics.md section 2). A fetch that names a
    newer leader epoch than the monitor knows came before its LeaderAndIsr: Kafka's
    UNKNOWN_LEADER_EPOCH, kept as a dead letter rather than applied to the wrong epoch.
    A replica outside the assignment is not recorded by the leader either.
    """
    rows = table.live_rows_of(batch.topic, batch.partition)
    known = rows >= 0
    r = np.where(known, rows, 0)
    epoch = table.leader_epoch[r]
    stale = known & (batch.leader_epoch < epoch)
    ahead = known & (batch.leader_epoch > epoch)
    not_leader = known & ~stale & ~ahead & (batch.leader != table.leader[r])
    match = table.replica_broker[r] == batch.follower[:, None]
    slot = match.argmax(axis=1).astype(np.int64)
    not_replica = known & (~match.any(axis=1) | (batch.follower == table.leader[r]))
    code = np.zeros(len(batch), dtype=np.int8)
    # Later assignments win: the first matching reason in REJECT_REASONS order.
    for reason_code, mask in reversed(
        list(enumerate((~known, stale, ahead, not_leader, not_replica), start=1))
    ):
        code[mask] = reason_code
    error_responses = int(np.count_nonzero((code == ACCEPTED) & ~batch.error_free))
    return rows, slot, FetchOutcome(code, error_responses)


def apply_fetches(table: PartitionTable, batch: FetchBatch) -> FetchOutcome:
    """Apply a batch of fetch responses to the follower state and the partitions' LEO/HW.

    Per follower, in batch order, a successful fetch at ``t`` with offset ``o`` while the
    leader's LEO is ``L`` does (Kafka's Replica.updateFetchState):
    ``o >= L`` -> caught up at ``t``; else ``o >= previous L`` -> caught up at the previous
    fetch time; then ``previous L, previous t, LEO := L, t, o``. Fetches answered with an
    error change nothing.
    """
    rows, slot, outcome = classify_fetches(table, batch)
    applied = np.flatnonzero((outcome.code == ACCEPTED) & batch.error_free)
    if len(applied) == 0:
        return outcome
    r_cap = table.replica_capacity
    follower_key = rows[applied] * r_cap + slot[applied]
    order = np.argsort(follower_key, kind="stable")
    key = follower_key[order]
    event = applied[order]
    t, o, leo = batch.ts[event], batch.fetch_offset[event], batch.leader_leo[event]

    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    ends = np.r_[starts[1:], len(key)] - 1
    followers = key[starts]
    last_fetch_time = table.last_fetch_time_ms.reshape(-1)
    last_fetch_leader_leo = table.last_fetch_leader_leo.reshape(-1)
    last_caught_up = table.last_caught_up_ms.reshape(-1)
    log_end_offset = table.log_end_offset.reshape(-1)

    prev_leo = np.empty_like(leo)
    prev_time = np.empty_like(t)
    prev_leo[1:], prev_time[1:] = leo[:-1], t[:-1]
    prev_leo[starts] = last_fetch_leader_leo[followers]
    prev_time[starts] = last_fetch_time[followers]
    caught_up_at = np.where(o >= leo, t, np.where(o >= prev_leo, prev_time, NEVER))
    last_caught_up[followers] = np.maximum(
        last_caught_up[followers], np.maximum.reduceat(caught_up_at, starts)
    )
    last_fetch_leader_leo[followers] = leo[ends]
    last_fetch_time[followers] = t[ends]
    log_end_offset[followers] = o[ends]

    # The partition's leader LEO and HW are those of its latest applied fetch response.
    partition_of = key // r_cap
    partition_starts = np.flatnonzero(np.r_[True, partition_of[1:] != partition_of[:-1]])
    latest = np.maximum.reduceat(event, partition_starts)
    touched = partition_of[partition_starts]
    table.leader_leo[touched] = batch.leader_leo[latest]
    table.high_watermark[touched] = batch.high_watermark[latest]
    return outcome


def reset_on_become_leader(table: PartitionTable, row: int, now_ms: int) -> None:
    """Kafka's Partition.makeLeader on a new leader epoch: reset every remote replica.

    ``last_fetch_time = now``, ``last_fetch_leader_leo`` = the leader's LEO at election
    (the latest ``leader_leo`` seen, 0 if none), ``last_caught_up = now`` for ISR members
    and never for the others (semantics.md section 2). The fetch offset becomes unknown
    until the follower fetches from the new leader, as Kafka 3.x's resetReplicaState does
    for a new leader (isNewLeader): a silent follower is then not at the leader's LEO.
    """
    leo = int(table.leader_leo[row])
    table.epoch_start_offset[row] = leo
    table.last_fetch_time_ms[row] = now_ms
    table.last_fetch_leader_leo[row] = leo
    table.last_caught_up_ms[row] = np.where(table.in_isr[row], now_ms, NEVER)
    table.log_end_offset[row] = UNKNOWN_OFFSET
