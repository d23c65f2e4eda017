"""A simulated partition: its replicas' logs, the controller's decision, and the leader's
view of each follower (Kafka's Partition and Replica)."""

from __future__ import annotations

from dataclasses import dataclass, field

from state.events import LEADER_DURING_DELETE, NO_LEADER, MetadataPartitionState

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

    def metadata_state(self, offline: set[int]) -> MetadataPartitionState:
        return MetadataPartitionState(
            topic=self.topic,
            partition=self.partition,
            leader=self.leader,
            leader_epoch=self.leader_epoch,
            isr=tuple(self.controller_isr),
            replicas=tuple(self.replicas),
            offline_replicas=tuple(r for r in self.replicas if r in offline),
        )

    def make_leader(self, leader: int, now: int) -> tuple[int, ...]:
        """Partition.makeLeader on the brokers, for a leader epoch the caller has set: the
        followers truncate to the new leader's log and it starts its view of each of them
        afresh. Returns the followers, which then fetch from it (none without a leader)."""
        previous = self.leader
        self.leader = leader
        if leader == NO_LEADER:
            return ()
        leo = self.logs[leader]
        for replica in self.replicas:
            self.logs[replica] = min(self.logs[replica], leo)
        self.high_watermark = min(self.high_watermark, leo)
        self.epoch_start_offset = leo
        followers = tuple(replica for replica in self.replicas if replica != leader)
        for replica in followers:
            old = self.remote.get(replica)
            self.remote[replica] = RemoteReplica(
                log_end_offset=old.log_end_offset if old and previous == leader else UNKNOWN_OFFSET,
                last_fetch_time_ms=now,
                last_fetch_leader_leo=leo,
                last_caught_up_ms=now if replica in self.isr else NEVER,
            )
        return followers

    def out_of_sync_replicas(self, now: int, lag_time_max_ms: int) -> list[int]:
        """Partition.getOutOfSyncReplicas: the followers in the ISR that are not at the
        leader's log end offset and have not been caught up for ``replica.lag.time.max.ms``
        (the leader's isr-expiration task removes them)."""
        return [
            follower
            for follower in self.isr
            if follower != self.leader
            and self.remote[follower].log_end_offset != self.leader_leo
            and now - self.remote[follower].last_caught_up_ms > lag_time_max_ms
        ]

    def needs_expand_isr(self, follower: int, fetch_offset: int) -> bool:
        """Partition.needsExpandIsr: a replica outside the ISR whose fetch reached the high
        watermark and the start offset of the leader's epoch may join it."""
        if follower in self.isr or follower not in self.replicas:
            return False
        return fetch_offset >= self.high_watermark and fetch_offset >= self.epoch_start_offset

    def maybe_increment_high_watermark(self) -> None:
        """HW = the smallest LEO among the ISR as the leader knows it; it never goes back."""
        ends = [
            self.logs[r] if r == self.leader else self.remote[r].log_end_offset for r in self.isr
        ]
        candidate = min(ends) if ends else self.high_watermark
        self.high_watermark = max(self.high_watermark, candidate)
