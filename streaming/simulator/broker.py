"""A simulated broker: its epoch, its configuration, the faults it suffers, and the state
of its zk-mode isr-change-propagation task."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Broker:
    id: int
    epoch: int
    lag_time_max_ms: int
    alive: bool = True
    generation: int = 0  # tasks scheduled before a crash or restart see a newer one and stop
    stuck: bool = False  # its ISR updates fail: it never shrinks
    slowness: dict[int | None, tuple[int, int | None]] = field(default_factory=dict)
    # ^ leader (None: any) -> (extra delay before each fetch, most records per partition)
    isr_change_set: dict[tuple[str, int], int] = field(default_factory=dict)  # tp -> first
    last_isr_change_ms: int = 0
    last_isr_propagation_ms: int = 0

    def delay_to(self, leader: int) -> int:
        return self.slowness.get(leader, self.slowness.get(None, (0, None)))[0]

    def max_records_from(self, leader: int, default: int) -> int:
        cap = self.slowness.get(leader, self.slowness.get(None, (0, None)))[1]
        return default if cap is None else min(cap, default)
