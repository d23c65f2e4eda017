"""The producers: every ``produce_interval_ms`` each partition with a serving leader gets
a Poisson number of records at its rate, appended to the leader's log."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from streaming.feeds.simulator.partition import NO_LEADER

if TYPE_CHECKING:
    from streaming.feeds.simulator.cluster import ClusterSimulator

__all__ = ["Producers"]


class Producers:
    """Appends to the leaders' logs and wakes the fetches they hold."""

    def __init__(self, cluster: ClusterSimulator) -> None:
        self._cluster = cluster
        self._loop = cluster.loop

    def start(self) -> None:
        self._loop.schedule(
            self._loop.now + self._loop.scenario.fetch.produce_interval_ms, self._produce
        )

    def _produce(self) -> None:
        interval = self._loop.scenario.fetch.produce_interval_ms
        controller = self._cluster.controller
        active = [
            p
            for p in self._cluster.partitions.values()
            if p.leader != NO_LEADER
            and controller.serves_as_leader(p.leader)
            and p.produce_rate > 0
        ]
        if active:
            rates = np.fromiter((p.produce_rate for p in active), float, len(active))
            counts = self._loop.numpy.poisson(rates * interval / 1000.0)
            woken: set[int] = set()
            for p, n in zip(active, counts.tolist(), strict=True):
                if n:
                    p.logs[p.leader] += n
                    if p.isr == [p.leader]:  # the HW follows the leader's log at once
                        p.maybe_increment_high_watermark()
                    woken.add(p.leader)
            for leader in woken:
                self._cluster.fetchers.wake(leader)
        self._loop.schedule(self._loop.now + interval, self._produce)
