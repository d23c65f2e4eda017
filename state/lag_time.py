"""Lag time as the monitor reports it, and when it has none.

docs/domain.md#lag-time.

Kafka keeps, per follower of a leader, ``lastCaughtUpTimeMs``: the last time the follower
had everything the leader had (Kafka's ``Replica.updateFetchState``). When a broker
becomes leader of a new epoch, ``Partition.makeLeader`` calls
``Replica.resetReplicaState`` on every follower: a follower in the ISR gets the election
time, a follower outside the ISR gets 0. A newly assigned replica starts at 0 too. The
0 is not a time: it means "not caught up since this leader reset it". Kafka only ever
compares it against ``now - replica.lag.time.max.ms`` (``Partition.isFollowerOutOfSync``
via ``Replica.isCaughtUp``), where it makes a follower that is in the ISR out of sync at
once; it never shows it as a duration.

So the monitor reports, per follower (the model keeps the same 0 as ``NEVER``):

* ``last_caught_up_ms``: the time, or null when it has not caught up since the reset;
* ``lag_time_ms``: 0 at the leader's LEO, else ``now - last_caught_up_ms``; null when it
  has not caught up since the reset, with ``lag_time_unknown`` saying why (null when
  there is a lag time). "Time since the election" would be a number Kafka does not hold
  for these followers, and would understate how far behind they are: a follower left
  out of the ISR by an election was behind before it.
* ``shrink_by_ms``: the shrink deadline (``state.shrink_rule.shrink_deadline_ms``), null
  when neither of its terms is a time (no catch-up and no ISR entry seen).

The shrink rule itself (``state.shrink_rule.classify``) keeps Kafka's arithmetic with the
0: it only decides a status, and never shows the difference.
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np

from state.arrays import BOOL, I64
from state.caught_up import NEVER


class LagTimeUnknown(StrEnum):
    """Why a follower's ``lag_time_ms`` is null."""

    NEVER_CAUGHT_UP = "NEVER_CAUGHT_UP"
    """Not caught up since the monitor has known it under the current leader: the
    leader's election reset it (it was outside the ISR), or it was newly assigned, and no
    fetch seen since took it to the leader's LEO."""


def caught_up_known(last_caught_up_ms: I64) -> BOOL:
    """Where ``last_caught_up_ms`` is a time rather than Kafka's 0 for "not since the reset"."""
    known: BOOL = last_caught_up_ms != NEVER
    return known


def lag_time_known(last_caught_up_ms: I64, at_leader_leo: BOOL) -> BOOL:
    """Where a follower has a lag time: caught up once since the reset, or known to be at
    the leader's LEO now (lag 0: ``state.shrink_rule.at_leader_leo``)."""
    known: BOOL = caught_up_known(last_caught_up_ms) | at_leader_leo
    return known


def shrink_deadline_known(last_caught_up_ms: I64, isr_since_ms: I64) -> BOOL:
    """Where the shrink deadline has a time to count from: a catch-up or an ISR entry."""
    known: BOOL = caught_up_known(last_caught_up_ms) | (isr_since_ms != NEVER)
    return known


def time_or_none(ms: int | np.integer, known: bool | np.bool_) -> int | None:
    """One value of the record: the time (or duration) where known, else None."""
    return int(ms) if known else None
