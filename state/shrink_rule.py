"""Follower status under Kafka's ISR shrink rule (docs/domain.md#shrink-rule).

A follower in the ISR is out of sync when it is not at the leader's LEO and
``now - last_caught_up_ms > T`` (T = replica.lag.time.max.ms of the leader, strictly
greater). The leader's isr-expiration task runs every T / 2, so Kafka removes it no
later than ``last_caught_up_ms + 1.5 T``; past that it should already have.

A follower can re-enter the ISR already out of sync: Kafka's maybeExpandIsr adds it once
its fetch offset reaches the HW (which another ISR member may hold back below the
leader's LEO) and does not reset its last caught-up time. The next isr-expiration run,
at most T / 2 after the entry, removes it. So the deadline of an ISR follower is
``max(last_caught_up_ms + 1.5 T, isr_since_ms + T / 2)``, where ``isr_since_ms`` is when
the monitor saw it enter the ISR (NEVER = 0 when not seen: the first term alone).

A silent leader (``state.leader_news``: no news of it for more than T / 2, from its
followers or its broker) may not be running its check at all: its followers are not named
SHRINK_ELIGIBLE or SHRINK_OVERDUE meanwhile, only LAGGING.

A follower whose own broker is silent (its news, the quorum's report of its catch-up
with the metadata log, else the last admin poll it answered, more than T / 2 old:
``state.leader_news.broker_silent``) fetches nothing. Last seen at the leader's LEO, it
is not known to be there now: its lag counts from its last catch-up. Whether Kafka's
leader removes it depends on whether the leader has taken writes since, which only
another follower's fetch would show (the leader's LEO moving past it): until then it is
LAGGING at most. A partition that takes writes has it removed T after its last fetch; an
idle one keeps it in the ISR until the controller fences its broker (the real-Kafka
scoreboard, 4.1 paused-follower: the replication factor 2 topic's follower on the paused
broker, last read at its leader's LEO, stayed IN_SYNC until Kafka removed it)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from fractions import Fraction
from typing import get_args

import numpy as np
import numpy.typing as npt

from state.arrays import BOOL, I64
from state.health_record import StatusName


class FollowerStatus(IntEnum):
    IN_SYNC = 0
    LAGGING = 1
    SHRINK_ELIGIBLE = 2
    SHRINK_OVERDUE = 3
    CATCHING_UP = 4
    OUT_OF_SYNC = 5
    OFFLINE = 6


STATUS_NAMES: tuple[StatusName, ...] = get_args(StatusName)
"""Every status name, in FollowerStatus code order (STATUS_NAMES[code]; a test holds the
two equal)."""

STATUS_SEVERITY: dict[str, int] = {
    FollowerStatus.IN_SYNC.name: 0,
    FollowerStatus.LAGGING.name: 1,
    FollowerStatus.CATCHING_UP.name: 2,
    FollowerStatus.SHRINK_ELIGIBLE.name: 3,
    FollowerStatus.OUT_OF_SYNC.name: 4,
    FollowerStatus.OFFLINE.name: 5,
    FollowerStatus.SHRINK_OVERDUE.name: 6,
}
"""How bad each follower status is, higher worse: a follower out of the ISR is worse than
one still in it, and Kafka failing to act (SHRINK_OVERDUE) is the worst of all. The
timeline ranks episodes, and the live view its rows, by it."""

SHRINK_DEADLINE_FORMULA = "max(last caught up + 1.5 T, ISR entry + T/2)"
"""The shrink deadline that :func:`shrink_deadline_ms` computes, in words: every text that
states it (metric help, dashboard descriptions) takes it from here (docs/domain.md#shrink-rule)."""


@dataclass(frozen=True)
class FollowerFacts:
    """What the rule looks at, one element per follower (any array shape)."""

    in_isr: BOOL
    broker_live: BOOL
    leader_live: BOOL
    leader_silent: BOOL  # no news of the leader for more than T / 2 (state.leader_news)
    follower_silent: BOOL  # no news of its own broker for more than T / 2 (the same)
    log_end_offset: I64  # -1: unknown, never at the leader's LEO
    leader_leo: I64
    high_watermark: I64
    epoch_start_offset: I64
    last_caught_up_ms: I64
    lag_time_max_ms: I64  # T of the partition's leader
    isr_since_ms: I64  # when it last entered the ISR as seen; NEVER (0) if not seen


def last_seen_at_leader_leo(facts: FollowerFacts) -> BOOL:
    """Followers whose log end, as last seen, is the leader's LEO as last seen."""
    at: BOOL = facts.log_end_offset == facts.leader_leo
    return at


def at_leader_leo(facts: FollowerFacts) -> BOOL:
    """Followers known to have everything the leader has: at its LEO as last seen, while
    both the leader and the follower's broker are heard of. Under a silent leader
    (``state.leader_news``) the LEO last seen is no news of now: a leader that comes back
    takes the writes queued while it hung before its followers fetch again, and removes
    them at its first check (the real-Kafka scoreboard, 4.1 paused-twice: followers last
    seen at its LEO, removed on its return). A follower whose broker is silent fetches
    nothing: where it was is no news of where it is (module doc)."""
    known: BOOL = last_seen_at_leader_leo(facts) & ~facts.leader_silent & ~facts.follower_silent
    return known


def lag_time_ms(facts: FollowerFacts, now_ms: int) -> I64:
    """0 for a follower known to be at the leader's LEO (:func:`at_leader_leo`: it has
    everything), else now - last caught up."""
    return np.where(at_leader_leo(facts), 0, now_ms - facts.last_caught_up_ms)


def shrink_deadline_ms(last_caught_up_ms: I64, lag_time_max_ms: I64, isr_since_ms: I64) -> I64:
    """``max(last_caught_up_ms + 1.5 T, isr_since_ms + T / 2)``, each rounded down to whole ms:
    the last ms it may still be in the ISR (it is overdue from the next one on)."""
    by_lag: I64 = last_caught_up_ms + (3 * lag_time_max_ms) // 2
    by_entry: I64 = isr_since_ms + lag_time_max_ms // 2
    return np.where(by_entry > by_lag, by_entry, by_lag)


def classify(facts: FollowerFacts, now_ms: int, warn_ratio: float) -> npt.NDArray[np.int8]:
    """The FollowerStatus of every follower, as int8 codes.

    In the ISR: IN_SYNC when at the leader's LEO or ``lag <= warn_ratio T``; LAGGING up to
    ``T``; SHRINK_ELIGIBLE beyond that until :func:`shrink_deadline_ms`, SHRINK_OVERDUE after
    it: ``lag > 1.5 T`` and more than ``T / 2`` since it entered the ISR; while the leader
    is silent (``state.leader_news``), or the follower's broker is and it was last seen
    at the leader's LEO, LAGGING instead of either. Out of the ISR: OFFLINE
    when its broker is not live, CATCHING_UP when the leader would add it back on its next
    fetch (offset at least the HW and the start offset of the leader epoch: Kafka's
    isFollowerInSync), OUT_OF_SYNC otherwise. Without a live leader no isr-expiration
    task runs, so ISR followers stay IN_SYNC (the partition is reported offline).
    """
    lag = lag_time_ms(facts, now_ms)
    t = facts.lag_time_max_ms
    # Exact boundaries in integers: lag > 1.5 T as 2 lag > 3 T, in the ISR for more than T / 2
    # as 2 (now - since) > T, and lag > warn_ratio T with the ratio as a fraction (0.7 x
    # 45 000 is 31 499.999... in floating point).
    warn = Fraction(str(warn_ratio)).limit_denominator(10_000)
    judged = facts.in_isr & facts.leader_live
    # a silent leader may run no isr-expiration; a silent follower last seen at the
    # leader's LEO is removed only if the leader has taken writes since, not known here.
    # Seen past it (read after the leader in the same poll), it says the leader was
    # taking writes then: the rule applies.
    unknown_writes = facts.follower_silent & last_seen_at_leader_leo(facts)
    checked = judged & ~facts.leader_silent & ~unknown_writes
    entry_run_passed = 2 * (now_ms - facts.isr_since_ms) > t
    caught_up_offset = np.maximum(facts.high_watermark, facts.epoch_start_offset)
    status = np.select(
        [
            checked & (lag > t) & (2 * lag > 3 * t) & entry_run_passed,
            checked & (lag > t),
            judged & (lag * warn.denominator > warn.numerator * t),
            facts.in_isr,
            ~facts.broker_live,
            (facts.log_end_offset >= 0) & (facts.log_end_offset >= caught_up_offset),
        ],
        [
            FollowerStatus.SHRINK_OVERDUE,
            FollowerStatus.SHRINK_ELIGIBLE,
            FollowerStatus.LAGGING,
            FollowerStatus.IN_SYNC,
            FollowerStatus.OFFLINE,
            FollowerStatus.CATCHING_UP,
        ],
        default=FollowerStatus.OUT_OF_SYNC,
    )
    return status.astype(np.int8)
