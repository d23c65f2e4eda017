"""Planned maintenance: brokers whose replicas are expected to be out of the ISR.

Two signs that a broker's absence from ISRs is planned:

* **Controlled shutdown.** A broker stopped cleanly asks the controller to move its
  leaderships away and take it out of every ISR before it exits
  (``KafkaController.doControlledShutdown``; in KRaft, a heartbeat with
  ``wantShutDown``). The monitor sees the controller remove a broker that is still
  registered from an ISR (a crash is the other way round: the broker's registration
  vanishes first, then ``onBrokerFailure`` removes it). The broker counts as shutting down
  until it registers again or rejoins an ISR, for at most ``max_shutdown_ms``.
* **Re-registered within the grace period.** A broker that registered (new, or bounced:
  same id, larger epoch) less than ``grace_ms`` ago is still catching up on what it
  missed; its followers rejoin the ISRs as they reach the high watermark.

An unplanned crash is neither until the broker comes back: its partitions' under-
replication is not expected, and the alerts page at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum


class MaintenanceState(StrEnum):
    SHUTTING_DOWN = "shutting_down"  # controlled shutdown seen, not registered again yet
    RESTARTED = "restarted"  # registered within the grace period


@dataclass(frozen=True)
class Maintenance:
    state: MaintenanceState
    since_ms: int


class MaintenanceLog:
    """What the monitor saw of each broker's registrations and controlled shutdowns."""

    def __init__(self) -> None:
        self.registered_ms: dict[int, int] = {}  # broker -> its latest (re-)registration
        self.shutdown_ms: dict[int, int] = {}  # broker -> controlled shutdown seen since

    def registered(self, brokers: Iterable[int], ts: int) -> None:
        """New or bounced brokers (BrokerChange): a registration ends a shutdown."""
        for broker in brokers:
            self.registered_ms[broker] = ts
            self.shutdown_ms.pop(broker, None)

    def isr_changed(
        self,
        removed: Iterable[int],
        added: Iterable[int],
        *,
        by_controller: bool,
        registered: Mapping[int, int] | None,
        ts: int,
    ) -> None:
        """An ISR change; ``registered``: the live brokers then (None: not known yet)."""
        if by_controller and registered is not None:
            for broker in removed:
                if broker in registered:
                    self.shutdown_ms.setdefault(broker, ts)
        for broker in added:
            self.shutdown_ms.pop(broker, None)  # back in an ISR: not shutting down

    def at(self, now_ms: int, grace_ms: int, max_shutdown_ms: int) -> dict[int, Maintenance]:
        """The brokers in planned maintenance at ``now_ms``."""
        found: dict[int, Maintenance] = {}
        for broker, since in self.shutdown_ms.items():
            if now_ms - since <= max_shutdown_ms:
                found[broker] = Maintenance(MaintenanceState.SHUTTING_DOWN, since)
        for broker, since in self.registered_ms.items():
            if 0 <= now_ms - since <= grace_ms:
                found[broker] = Maintenance(MaintenanceState.RESTARTED, since)
        return found
