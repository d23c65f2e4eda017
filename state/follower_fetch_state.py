"""Fetch responses applied to the leader's view of each follower, fenced as the leader would.

A batch of fetch responses arrives as columns and is applied by one compiled pass
(numba) over them in order: each fetch that the leader would serve updates its
follower's record by the caught-up rule (``state.caught_up.update_fetch_state``), which
compares it with the previous fetch of the same follower, so order matters, and a
compiled loop over the columns beats sorting them by follower with numpy
(bench/state_bench.py measured both).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
import numpy.typing as npt
import pandas as pd

from state.arrays import I64
from state.caught_up import update_fetch_state
from state.events import FETCH_ERROR_NONE, DeadLetterReason, FetchResponse
from state.partition_table import PartitionTable

Column = npt.NDArray[Any]
"""Any numpy column handed to the compiled kernel (numba types them at the call)."""

ACCEPTED = 0
"""Reason code of an accepted fetch in :class:`FetchOutcome` (others index REJECT_REASONS)."""

REJECT_REASONS: tuple[DeadLetterReason, ...] = (
    DeadLetterReason.UNKNOWN_PARTITION,
    DeadLetterReason.STALE_LEADER_EPOCH,
    DeadLetterReason.UNKNOWN_LEADER_EPOCH,
    DeadLetterReason.NOT_LEADER,
    DeadLetterReason.NOT_ASSIGNED_REPLICA,
)


WIRE_COLUMNS = (
    "ts",
    "topic",
    "partition",
    "leader",
    "follower",
    "leader_epoch",
    "fetch_offset",
    "leader_leo",
    "high_watermark",
    "error",
)
"""The fetch-responses fields the rule reads."""


@dataclass(frozen=True)
class FetchBatch:
    """Fetch responses as columns, in the order they are to be applied."""

    source_id: I64
    ts: I64
    topic_code: npt.NDArray[np.intp]  # index into topic_names
    topic_names: npt.NDArray[np.object_]
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
        columns = {name: [getattr(e, name) for e in events] for name in WIRE_COLUMNS}
        return FetchBatch.from_frame(pd.DataFrame(columns), np.asarray(source_ids, np.int64))

    @staticmethod
    def from_frame(frame: pd.DataFrame, source_id: I64 | None = None) -> FetchBatch:
        """From a frame with the wire columns (``error`` may be absent or null: NONE).

        ``source_id`` identifies each row in rejections; by default its position.
        """

        def ints(name: str) -> I64:
            return frame[name].to_numpy(dtype=np.int64)

        if "error" in frame:
            error = frame["error"]
            error_free = (error.isna() | (error == FETCH_ERROR_NONE)).to_numpy(dtype=np.bool_)
        else:
            error_free = np.ones(len(frame), dtype=np.bool_)
        codes, names = pd.factorize(frame["topic"])
        return FetchBatch(
            source_id=np.arange(len(frame), dtype=np.int64) if source_id is None else source_id,
            ts=ints("ts"),
            topic_code=codes,
            topic_names=np.asarray(names, dtype=object),
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


def apply_fetches(table: PartitionTable, batch: FetchBatch) -> FetchOutcome:
    """Apply a batch of fetch responses, in batch order, to the follower state.

    Per follower, a successful fetch updates its record by the caught-up rule
    (``state.caught_up.update_fetch_state``). The partition's leader LEO and HW become
    those of its latest applied fetch. Fetches answered with an error change
    nothing. Stale fetches are fenced, as the leader would (see ``_fetch_kernel``).
    """
    topic_base = np.full(len(batch.topic_names), -1, dtype=np.int64)
    topic_capacity = np.zeros(len(batch.topic_names), dtype=np.int64)
    for i, name in enumerate(batch.topic_names):
        topic_base[i], topic_capacity[i] = table.topic_slots(str(name))
    code = np.zeros(len(batch), dtype=np.int8)
    error_responses = _fetch_kernel(
        topic_base,
        topic_capacity,
        table.slot_to_row,
        table.leadership,
        table.replica_broker,
        table.fetch_state,
        table.progress,
        batch.topic_code,
        batch.partition,
        batch.leader,
        batch.follower,
        batch.leader_epoch,
        batch.ts,
        batch.fetch_offset,
        batch.leader_leo,
        batch.high_watermark,
        batch.error_free,
        code,
    )
    return FetchOutcome(code, int(error_responses))


@numba.njit(cache=True, nogil=True)
def _fetch_kernel(
    topic_base: Column,
    topic_capacity: Column,
    slot_to_row: Column,
    leadership: Column,
    replica_broker: Column,
    fetch_state: Column,
    progress: Column,
    topic_code: Column,
    partition: Column,
    fetch_leader: Column,
    follower: Column,
    fetch_epoch: Column,
    ts: Column,
    fetch_offset: Column,
    fetch_leader_leo: Column,
    fetch_high_watermark: Column,
    error_free: Column,
    code: Column,
) -> int:
    """One pass over the batch in order; compiled, so a loop per event is the fast way.

    Fencing (docs/domain.md#controller-state): a fetch of an unknown partition, of an older
    leader epoch, of a newer epoch than the monitor knows (it came before its
    LeaderAndIsr: Kafka's UNKNOWN_LEADER_EPOCH), served by a broker that is not the
    leader, or from a replica outside the assignment (or the leader itself) is not
    applied; ``code`` gets 1 + its index in REJECT_REASONS.
    """
    error_responses = 0
    for i in range(len(ts)):
        tc = topic_code[i]
        p = partition[i]
        if tc < 0 or topic_base[tc] < 0 or p < 0 or p >= topic_capacity[tc]:
            code[i] = 1
            continue
        row = slot_to_row[topic_base[tc] + p]
        if row < 0:
            code[i] = 1
            continue
        leader, leader_epoch = leadership[row, 0], leadership[row, 1]
        if fetch_epoch[i] < leader_epoch:
            code[i] = 2
            continue
        if fetch_epoch[i] > leader_epoch:
            code[i] = 3
            continue
        if fetch_leader[i] != leader:
            code[i] = 4
            continue
        k = -1
        for slot in range(replica_broker.shape[1]):
            if replica_broker[row, slot] == follower[i]:
                k = slot
                break
        if k < 0 or follower[i] == leader:
            code[i] = 5
            continue
        if not error_free[i]:
            error_responses += 1
            continue
        leo = fetch_leader_leo[i]
        update_fetch_state(fetch_state[row, k], ts[i], fetch_offset[i], leo)
        progress[row, 0] = leo
        progress[row, 1] = fetch_high_watermark[i]
    return error_responses
