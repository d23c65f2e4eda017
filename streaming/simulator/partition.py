"""A simulated partition: its replicas' logs, the controller's decision, and the leader's
view of each follower (Kafka's Partition and Replica)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from state.events import LEADER_DURING_DELETE, NO_LEADER

__all__ = [
    "LEADER_DURING_DELETE",
    "NEVER",
    "NO_LEADER",
    "UNKNOWN_OFFSET",
    "Partition",
    "RemoteReplica",
]

UNKNOWN_OFFSET = -1  # a follower whose fetch offset the (new) leader has not seen yet
NEVER = 0  # last_caught_up_ms of a follower never caught up


@dataclass
class RemoteReplica:
    """A leader's view of one follower (Kafka's Replica on the leader)."""

    log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_fetch_leader_leo: int = 0
    last_caught_up_ms: int = NEVER

    def update_fetch_state(self, fetch_offset: int, leader_leo: int, now: int) -> None:
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now)
        elif fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_time_ms)
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_time_ms = now
        self.log_end_offset = fetch_offset


@dataclass
class Partition:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    min_insync_replicas: int
    produce_rate: float
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    logs: dict[int, int] = field(default_factory=dict)  # each replica's true log end offset
    remote: dict[int, RemoteReplica] = field(default_factory=dict)  # on the leader
    high_watermark: int = 0
    epoch_start_offset: int = 0
    # The controller's cached ISR: in zk mode it learns a leader's ISR change only from
    # the change notification, so UpdateMetadata sent before that carries the old ISR.
    controller_isr: list[int] = field(default_factory=list)
    isr_since: dict[int, int] = field(default_factory=dict)  # when each member (re)entered

    def set_isr(self, isr: list[int], now: int) -> None:
        for replica in isr:
            if replica not in self.isr or replica not in self.isr_since:
                self.isr_since[replica] = now
        self.isr = isr

    @property
    def key(self) -> str:
        return f"{self.topic}:{self.partition}"

    @property
    def leader_leo(self) -> int:
        return self.logs[self.leader]

    def metadata_state(self, offline: set[int]) -> dict[str, Any]:
        return {
            "topic": self.topic, "partition": self.partition, "leader": self.leader,
            "leader_epoch": self.leader_epoch, "isr": list(self.controller_isr),
            "replicas": list(self.replicas),
            "offline_replicas": [r for r in self.replicas if r in offline],
        }  # fmt: skip

    def maybe_increment_high_watermark(self) -> None:
        """HW = the smallest LEO among the ISR as the leader knows it; it never goes back."""
        ends = [
            self.logs[r] if r == self.leader else self.remote[r].log_end_offset for r in self.isr
        ]
        candidate = min(ends) if ends else self.high_watermark
        self.high_watermark = max(self.high_watermark, candidate)
