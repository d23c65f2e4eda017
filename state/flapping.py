"""Followers that keep leaving and rejoining the ISR: flapping.

A follower whose lag hovers around ``replica.lag.time.max.ms`` is removed by its leader's
``isr-expiration`` task (``Partition.maybeShrinkIsr``), catches up, is added back on its
next fetch (``Partition.maybeExpandIsr``), falls behind again, and so on. Each change
makes the partition under-replicated for a while and delays metadata propagation for
every partition of that leader. One removal and one re-add (a restart, a GC pause) is
no flap; ``min_shrinks`` removals within ``window_ms``, each followed by a re-add, are.

:class:`FlapHistory` keeps the removal and re-add times of each follower of the
partitions it is given transitions for (a state shard's), within the window.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Flap:
    """A follower's removals from the ISR within the window (two or more)."""

    topic: str
    partition: int
    broker: int
    leader: int  # the leader at its last removal
    shrinks: int
    expands: int
    period_ms: int  # mean time between consecutive removals
    last_shrink_ms: int

    def flapping(self, min_shrinks: int) -> bool:
        """``min_shrinks`` removals, each but maybe the last one followed by a re-add."""
        return self.shrinks >= min_shrinks and self.expands >= self.shrinks - 1


@dataclass
class _Follower:
    shrinks: deque[int] = field(default_factory=deque)
    expands: deque[int] = field(default_factory=deque)
    leader: int = -1


class FlapHistory:
    """Removal and re-add times per follower, pruned to the window on every read."""

    def __init__(self) -> None:
        self._followers: dict[tuple[str, int, int], _Follower] = {}

    def record(
        self,
        topic: str,
        partition: int,
        leader: int,
        removed: Iterable[int],
        added: Iterable[int],
        ts: int,
    ) -> None:
        for broker in removed:
            follower = self._followers.setdefault((topic, partition, broker), _Follower())
            follower.shrinks.append(ts)
            follower.leader = leader
        for broker in added:
            seen = self._followers.get((topic, partition, broker))
            if seen is not None:  # a re-add; a first entry is no flap
                seen.expands.append(ts)

    def forget_partition(self, topic: str, partition: int) -> None:
        for key in [k for k in self._followers if k[:2] == (topic, partition)]:
            del self._followers[key]

    def recent(self, now_ms: int, window_ms: int) -> list[Flap]:
        """Followers removed twice or more within ``window_ms`` before ``now_ms``."""
        since = now_ms - window_ms
        flaps = []
        for key, follower in list(self._followers.items()):
            for times in (follower.shrinks, follower.expands):
                while times and times[0] < since:
                    times.popleft()
            if not follower.shrinks:
                del self._followers[key]
                continue
            if len(follower.shrinks) < 2:
                continue
            shrinks = list(follower.shrinks)
            period = (shrinks[-1] - shrinks[0]) // (len(shrinks) - 1)
            flaps.append(
                Flap(
                    *key, follower.leader, len(shrinks), len(follower.expands), period, shrinks[-1]
                )
            )
        return sorted(flaps, key=lambda f: (f.topic, f.partition, f.broker))
