"""The caught-up rule: when the leader counts a follower as having had everything it had.

docs/domain.md#caught-up.

The leader keeps, per follower, the state of Kafka's ``Replica``: its log end offset
(the offset of its latest fetch), the time of that fetch, the leader's LEO at that time,
and ``lastCaughtUpTimeMs``. A successful fetch at ``t`` with offset ``o`` while the
leader's LEO is ``L`` does (``Replica.updateFetchState``):

* ``o >= L``: the follower asked for everything the leader had; it is caught up at ``t``;
* else ``o >= previous L``: it now has everything the leader had at its previous fetch;
  it was caught up at the previous fetch time;
* then ``previous L, previous t, LEO := L, t, o``.

A last caught-up time never goes back. When a broker becomes leader of a new epoch
(``Partition.makeLeader``, ``Replica.resetReplicaState``) every follower is reset: the
last fetch time to the election, the previous ``L`` to the leader's LEO then, the last
caught-up time to the election for an ISR member and to ``NEVER`` (Kafka's 0) for the
others; when leadership moved to another broker, the fetch offsets become unknown until
the followers fetch from it. The shrink rule (``state.shrink_rule``) judges the last
caught-up time; ``state.lag_time`` says how it is reported.
"""

from __future__ import annotations

from typing import Protocol

import numba
import numpy as np
import numpy.typing as npt

UNKNOWN_OFFSET = -1
"""``log_end_offset`` of a follower whose fetch offset has not been seen (since election)."""

NEVER = 0
"""``last_caught_up_ms`` of a follower that was never caught up (Kafka's 0), and
``isr_since_ms`` of a replica whose entry into the ISR was not seen."""

FETCH_STATE_FIELDS = (
    "log_end_offset",
    "last_fetch_time_ms",
    "last_fetch_leader_leo",
    "last_caught_up_ms",
)
"""A follower's record, in this order (``PartitionTable.fetch_state``)."""
LOG_END_OFFSET, LAST_FETCH_TIME, LAST_FETCH_LEADER_LEO, LAST_CAUGHT_UP = range(4)


@numba.njit(cache=True, nogil=True)
def update_fetch_state(
    replica: npt.NDArray[np.int64], fetch_time_ms: int, fetch_offset: int, leader_leo: int
) -> None:
    """Kafka's ``Replica.updateFetchState`` on one follower's record (module docstring).

    Compiled: the fetch pass (``state.follower_fetch_state``) calls it for every fetch.
    numba's on-disk cache of that pass is invalidated by changes to its own file only,
    not to this one: after changing this function, delete ``state/__pycache__/*.nb[ic]``.
    """
    if fetch_offset >= leader_leo:
        replica[LAST_CAUGHT_UP] = max(replica[LAST_CAUGHT_UP], fetch_time_ms)
    elif fetch_offset >= replica[LAST_FETCH_LEADER_LEO]:
        replica[LAST_CAUGHT_UP] = max(replica[LAST_CAUGHT_UP], replica[LAST_FETCH_TIME])
    replica[LAST_FETCH_LEADER_LEO] = leader_leo
    replica[LAST_FETCH_TIME] = fetch_time_ms
    replica[LOG_END_OFFSET] = fetch_offset


class FollowerColumns(Protocol):
    """The columns of the partition table (``state.partition_table``) the reset reads and
    writes: the table is built on this module's record layout, so it is named by what is
    used of it rather than imported."""

    @property
    def leader_leo(self) -> npt.NDArray[np.int64]: ...
    @property
    def epoch_start_offset(self) -> npt.NDArray[np.int64]: ...
    @property
    def in_isr(self) -> npt.NDArray[np.bool_]: ...
    @property
    def log_end_offset(self) -> npt.NDArray[np.int64]: ...
    @property
    def last_fetch_time_ms(self) -> npt.NDArray[np.int64]: ...
    @property
    def last_fetch_leader_leo(self) -> npt.NDArray[np.int64]: ...
    @property
    def last_caught_up_ms(self) -> npt.NDArray[np.int64]: ...


def reset_on_become_leader(
    table: FollowerColumns, row: int, now_ms: int, *, new_leader: bool
) -> None:
    """Kafka's Partition.makeLeader on a new leader epoch: reset every remote replica.

    ``last_fetch_time = now``, ``last_fetch_leader_leo`` = the leader's LEO at election
    (the latest ``leader_leo`` seen, 0 if none), ``last_caught_up = now`` for ISR members
    and never for the others. When leadership moved to another broker, the followers'
    fetch offsets become unknown until they fetch from it too (makeLeader's
    ``isNewLeader``: 2.x updateFetchState with UnknownOffsetMetadata, 3.x
    resetReplicaState): a silent follower is then not at the leader's LEO.
    """
    reset_rows_on_become_leader(
        table,
        np.asarray([row], dtype=np.int64),
        np.asarray([now_ms], dtype=np.int64),
        np.asarray([new_leader], dtype=np.bool_),
    )


def reset_rows_on_become_leader(
    table: FollowerColumns,
    rows: npt.NDArray[np.int64],
    now_ms: npt.NDArray[np.int64],
    new_leader: npt.NDArray[np.bool_],
) -> None:
    """:func:`reset_on_become_leader` of distinct ``rows`` at once (``now_ms`` and
    ``new_leader`` per row)."""
    leo = table.leader_leo[rows]
    now = now_ms[:, None]
    table.epoch_start_offset[rows] = leo
    table.last_fetch_time_ms[rows] = now
    table.last_fetch_leader_leo[rows] = leo[:, None]
    table.last_caught_up_ms[rows] = np.where(table.in_isr[rows], now, NEVER)
    table.log_end_offset[rows[new_leader]] = UNKNOWN_OFFSET
