"""When a leader's isr-expiration task runs, learned from the shrinks it made
(docs/domain.md#shrink-at).

Kafka's ``ReplicaManager.startup`` schedules ``maybeShrinkIsr`` at a fixed rate of
``replica.lag.time.max.ms / 2`` (integer division) from the moment it starts
(``scheduler.schedule("isr-expiration", ..., 0L, config.replicaLagTimeMaxMs / 2)``,
4.1.1; the same since 0.9). So a leader's runs fall at ``s + k x T/2`` for one start
``s`` that holds until the broker restarts, and a run removes each follower whose lag
passed ``T`` (``now - lastCaughtUpTimeMs > T``, strictly). The shrink deadline
(``state.shrink_rule``) is the latest such run, ``last caught up + 1.5 T``; knowing
``s`` gives the very run.

A leader shrinks an ISR only in those runs (``Partition.maybeShrinkIsr``; expansions
come with fetches), so the model learns ``s`` modulo ``T/2`` from any ``IsrChange`` that
removes replicas of brokers that are live, with the ISR before it and the committed
partition epoch stated: the record of the leader's own commit (the metadata log's, a
2.4+ broker's ``ISR updated`` line). ``collect admin``'s change seen between two polls
carries the poll's time and no epoch: not a run. The controller's removals are not
(``LeaderAndIsr``: a fence of a dead broker, a controlled shutdown; ``collect
metadata-log`` tells them apart), nor is a removal of a broker already gone. Every state
shard sees every ``IsrChange`` (``state.controller_routing``) and learns the same, so the
prediction does not depend on the sharding. The time an event carries is the commit
(ZooKeeper: the leader's write; KRaft: the controller's append after the
``AlterPartition`` round trip), a few milliseconds after the run: predictions are of
the commit, too.

A broker that registers again (a restart) starts a new schedule: what was learned of it
is forgotten.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from state.arrays import BOOL, I64, values_of

NO_ANCHOR = -1
"""No run of the leader is known (``anchors_of``)."""


class ExpirationSchedules:
    """Per leader broker, the time of one isr-expiration run (the latest shrink that the
    rule explains); the others are that time plus or minus multiples of ``T/2``."""

    def __init__(self) -> None:
        self.anchor_ms: dict[int, int] = {}  # leader broker -> the time of one of its runs
        self.started_ms: dict[int, int] = {}  # broker -> when it last (re-)registered

    def observe_shrink(self, leader: int, ts: int, lag_time_max_ms: int) -> None:
        """The leader removed followers at ``ts``: one of its runs. A shrink from before
        the broker's last registration (a late event) belongs to its previous schedule,
        and an older one than the anchor teaches nothing new. One run commits each
        partition's shrink on its own (one ``AlterPartition`` each, a few ms apart on
        4.1.1): within a quarter period of the anchor it is the anchor's run, whose first
        commit is the nearest to it and stays the anchor."""
        anchor = self.anchor_ms.get(leader)
        if ts < self.started_ms.get(leader, ts) or (anchor is not None and ts < anchor):
            return
        if anchor is not None and 4 * (ts - anchor) < lag_time_max_ms // 2:
            return
        self.anchor_ms[leader] = ts

    def restarted(self, brokers: set[int] | frozenset[int], ts: int) -> None:
        """These brokers (re-)registered at ``ts``: their schedules started anew."""
        for broker in brokers:
            self.anchor_ms.pop(broker, None)
            self.started_ms[broker] = ts

    def anchors_of(self, leaders: npt.NDArray[np.integer]) -> I64:
        """The anchor of each leader, :data:`NO_ANCHOR` where none is known."""
        return values_of(leaders, self.anchor_ms, NO_ANCHOR)


def shrink_at_ms(
    anchor_ms: I64, lag_time_max_ms: I64, last_caught_up_ms: I64, isr_since_ms: I64
) -> tuple[I64, BOOL]:
    """The run at which the leader removes each follower that does not catch up again:
    the first run strictly after ``last caught up + T`` (its lag then passes ``T``) and
    after it entered the ISR (a run before its entry cannot remove it). Runs are at
    ``anchor + k x (T // 2)``. Returns the times and whether each is known (an anchor and
    a period of at least 1 ms)."""
    period = lag_time_max_ms // 2
    known: BOOL = (anchor_ms != NO_ANCHOR) & (period > 0)
    safe_period = np.where(known, period, 1)
    after = np.maximum(last_caught_up_ms + lag_time_max_ms, isr_since_ms)
    # the smallest anchor + k x period that is > after, k any integer
    runs = (after - anchor_ms) // safe_period + 1
    at: I64 = np.where(known, anchor_ms + runs * safe_period, 0)
    return at, known
