"""What the controller knows about the cluster as a whole: its epoch, live brokers, configs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from state.arrays import BOOL, I64, values_of
from state.events import BrokerChange, BrokersAnswered


@dataclass(frozen=True)
class MembershipChange:
    """The controller's diff of the live broker set (KafkaController.processBrokerChange)."""

    new: frozenset[int]
    dead: frozenset[int]
    bounced: frozenset[int]  # same id, larger broker epoch: died and came back

    @property
    def restarted_caches(self) -> frozenset[int]:
        """Brokers whose MetadataCache starts empty (or is gone)."""
        return self.new | self.dead | self.bounced


@dataclass
class ClusterState:
    controller_id: int | None = None
    controller_epoch: int | None = None
    live_brokers: dict[int, int] | None = None  # id -> broker epoch; None: not yet known
    lag_time_max_ms: dict[int, int] = field(default_factory=dict)  # per broker
    min_insync_replicas: dict[str, int] = field(default_factory=dict)  # per topic
    # per live broker: the time of the last admin poll it answered (BrokersAnswered)
    answered_ms: dict[int, int] = field(default_factory=dict)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickle (the group state of the releases that pickled it, read once): the
        answered polls, which those releases did not keep, start unknown."""
        self.__dict__.update({"answered_ms": {}, **state})

    def admits_controller_epoch(self, epoch: int | None) -> bool:
        """A broker ignores requests of a controller older than the newest it has seen."""
        return epoch is None or self.controller_epoch is None or epoch >= self.controller_epoch

    def observe_controller(self, controller_id: int | None, epoch: int | None) -> None:
        if epoch is not None and (self.controller_epoch is None or epoch > self.controller_epoch):
            self.controller_epoch = epoch
            if controller_id is not None:
                self.controller_id = controller_id

    def apply_broker_change(self, event: BrokerChange) -> MembershipChange:
        """The new live set; the first one seen is a baseline, not a set of new brokers."""
        now = {b.id: b.epoch for b in event.live}
        before = now if self.live_brokers is None else self.live_brokers
        change = MembershipChange(
            new=frozenset(now.keys() - before.keys()),
            dead=frozenset(before.keys() - now.keys()),
            bounced=frozenset(b for b in now.keys() & before.keys() if now[b] > before[b]),
        )
        self.live_brokers = now
        for broker in change.dead:
            self.answered_ms.pop(broker, None)
        return change

    def observe_answers(self, event: BrokersAnswered) -> None:
        """Each listed broker the cluster counts live answered the poll taken at
        ``event.ts``; an older poll's event does not take a newer answer back. A broker
        that dies is dropped (``apply_broker_change``), so the map holds live brokers."""
        for broker in event.brokers:
            if self.is_live(broker):
                self.answered_ms[broker] = max(event.ts, self.answered_ms.get(broker, event.ts))

    def is_live(self, broker: int) -> bool:
        return self.live_brokers is None or broker in self.live_brokers

    def live_mask(self, brokers: npt.NDArray[np.integer]) -> BOOL:
        """Liveness of each id; every broker counts as live until a BrokerChange is seen."""
        if self.live_brokers is None:
            return np.asarray(brokers) >= 0
        live = np.fromiter(self.live_brokers, dtype=np.int64, count=len(self.live_brokers))
        return np.isin(brokers, live)

    def lag_time_max_of(self, leaders: npt.NDArray[np.integer], default_ms: int) -> I64:
        """replica.lag.time.max.ms of each leader broker."""
        return values_of(leaders, self.lag_time_max_ms, default_ms)

    def min_isr_of(
        self, topic_ids: npt.NDArray[np.integer], topic_names: list[str], default: int
    ) -> I64:
        per_id = {
            i: self.min_insync_replicas[n]
            for i, n in enumerate(topic_names)
            if n in self.min_insync_replicas
        }
        return values_of(topic_ids, per_id, default)
