"""The simulation's clock: a queue of tasks in simulated time, the seeded randomness every
timing draws from, and the records and facts the tasks produce.

Tasks at the same time run in the order they were scheduled, so a seed gives one run.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from state.events import Event
from streaming.feeds.simulator.ground_truth import GroundTruth
from streaming.feeds.simulator.scenario import PropagationMode, Scenario
from streaming.feeds.wire import InputRecord
from streaming.feeds.wire_encoding import input_record

__all__ = ["EventLoop"]


class EventLoop:
    """Runs scheduled tasks in time order; ``now`` is the running task's time (epoch ms)."""

    def __init__(self, scenario: Scenario, seed: int, start_ms: int) -> None:
        self.scenario = scenario
        self.now = start_ms
        self.truth = GroundTruth()
        self.random = random.Random(seed)
        self.numpy = np.random.default_rng(seed)
        self._queue: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._sequence = 0
        self._out: list[InputRecord] = []

    @property
    def kraft(self) -> bool:
        return self.scenario.cluster.propagation is PropagationMode.KRAFT

    def schedule(self, when: int, task: Callable[..., None], *args: Any) -> None:
        self._sequence += 1
        heapq.heappush(self._queue, (when, self._sequence, task, args))

    def between(self, bounds: tuple[int, int]) -> int:
        low, high = bounds
        return self.random.randint(low, max(low, high))

    def emit(self, event: Event, key: str | None = None) -> None:
        """A record of ``event`` (its ``ts`` is ``now``), keyed by the contract's rule
        unless ``key`` is given."""
        self._out.append(input_record(event, key))

    def run(self, end: int) -> Iterator[InputRecord]:
        """Run the tasks due up to ``end``, yielding each one's records as it finishes."""
        while self._queue and self._queue[0][0] <= end:
            when, _, task, args = heapq.heappop(self._queue)
            self.now = when
            task(*args)
            if self._out:
                out, self._out = self._out, []
                yield from out
        self.now = max(self.now, end)
