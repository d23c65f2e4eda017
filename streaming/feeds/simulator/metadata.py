"""How the controller's decisions reach the brokers' metadata caches.

ZK mode: the controller sends ``UpdateMetadata`` to every live broker, one request at a
time in the order of its event queue, each arriving after a jitter on that broker's one
connection. KRaft mode has no UpdateMetadata: every decision is the next record of the
metadata log (it carries its ``metadata_offset``), each live broker fetches it a little
later, and ``MetadataLogProgress`` (what DescribeQuorum reports, as ``collect admin``
publishes it at each of its polls, ``admin_polls``) gives every broker's log end offset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from state.events import (
    MetadataLogProgress,
    MetadataPartitionState,
    ReplicaProgress,
    UpdateMetadata,
)
from streaming.feeds.simulator.broker import Broker
from streaming.feeds.simulator.partition import Partition
from streaming.feeds.wire import MAX_PARTITIONS_PER_EVENT, chunks

if TYPE_CHECKING:
    from streaming.feeds.simulator.cluster import ClusterSimulator

__all__ = ["MetadataChannel"]


class MetadataChannel:
    """UpdateMetadata requests (zk) and the metadata log (KRaft)."""

    def __init__(self, cluster: ClusterSimulator) -> None:
        self._cluster = cluster
        self._loop = cluster.loop
        self._last_send_ms = 0  # the controller's last UpdateMetadata send
        self._last_arrival_ms: dict[int, int] = {}  # per broker, its last one's arrival
        self._log_end = 0  # KRaft: the next offset of __cluster_metadata
        self._fetched: dict[int, int] = dict.fromkeys(cluster.brokers, 0)  # brokers' log ends
        self._caught_up_ms: dict[int, int] = {}  # per broker, when it last reached the end

    # ------------------------------------------------------------------ KRaft

    def record(self) -> int | None:
        """KRaft: the decision is the next record of the metadata log (its offset); every
        live broker fetches it a little later. ZK: nothing (None)."""
        if not self._loop.kraft:
            return None
        offset = self._log_end
        self._log_end += 1
        for broker in self._cluster.brokers.values():
            if broker.alive:
                self._schedule_fetch(broker, offset + 1)
        return offset

    def catch_up(self, broker: Broker) -> None:
        """KRaft: a restarted broker reads the metadata log to its end before it serves."""
        if self._loop.kraft:
            self._schedule_fetch(broker, self._log_end)

    def _schedule_fetch(self, broker: Broker, log_end: int) -> None:
        apply_ms = self._loop.between(self._loop.scenario.cluster.kraft_apply_ms)
        self._loop.schedule(
            self._loop.now + apply_ms, self._fetched_to, broker.id, broker.generation, log_end
        )

    def _fetched_to(self, broker_id: int, generation: int, log_end: int) -> None:
        broker = self._cluster.brokers[broker_id]
        if broker.alive and broker.generation == generation:
            self._fetched[broker_id] = max(self._fetched[broker_id], log_end)
            if self._fetched[broker_id] == self._log_end:
                self._caught_up_ms[broker_id] = self._loop.now

    def quorum_report(self, interval_ms: int) -> MetadataLogProgress:
        """KRaft: what DescribeQuorum reports now, as ``collect admin`` publishes it, the
        next report due in ``interval_ms``. A running broker at the log's end is caught up
        now: Kafka's brokers fetch the metadata log continuously, and the controller
        appends a ``NoOpRecord`` every ``metadata.max.idle.interval.ms`` (500 ms), so one
        at the end stays there; a dead one's time stays where it stopped (KIP-836's
        ``LastCaughtUpTimestamp``, docs/domain.md#silent-leader)."""
        controller = self._cluster.controller
        for broker_id, broker in self._cluster.brokers.items():
            if broker.alive and self._fetched[broker_id] == self._log_end:
                self._caught_up_ms[broker_id] = self._loop.now
        return MetadataLogProgress(
            ts=self._loop.now,
            controller_id=controller.id,
            controller_epoch=controller.epoch,
            high_watermark=self._log_end,
            interval_ms=interval_ms,
            replicas=tuple(
                ReplicaProgress(
                    broker=b, log_end_offset=end, last_caught_up_ms=self._caught_up_ms.get(b)
                )
                for b, end in sorted(self._fetched.items())
            ),
        )

    # ------------------------------------------------------------------ ZK

    def send_update_metadata(
        self,
        partitions: list[Partition],
        states: list[MetadataPartitionState] | None = None,
        refresh: bool = False,
    ) -> None:
        """The controller sends these partitions' states to every live broker; with
        ``refresh`` it first reads their ISR (a change notification, a committed change).
        KRaft has no UpdateMetadata: brokers replay the metadata log."""
        if not partitions or self._loop.kraft:
            return
        controller = self._cluster.controller
        if controller.delay_ms is not None:
            send_at = self._loop.now + controller.delay_ms
        else:
            send_at = self._loop.now + self._loop.between(
                self._loop.scenario.cluster.controller_delay_ms
            )
        # the controller handles its events one at a time, in order (its event queue)
        send_at = self._last_send_ms = max(send_at, self._last_send_ms)
        self._loop.schedule(
            send_at,
            self._sent,
            tuple(partitions),
            tuple(states) if states else None,
            refresh,
            controller.epoch,
        )

    def _sent(
        self,
        partitions: tuple[Partition, ...],
        states: tuple[MetadataPartitionState, ...] | None,
        refresh: bool,
        controller_epoch: int,
    ) -> None:
        controller = self._cluster.controller
        if controller_epoch != controller.epoch or not controller.is_up():
            return  # a deposed or dead controller sends nothing; its successor resends all
        if refresh:
            for p in partitions:
                p.controller_isr = list(p.isr)
        offline = set(self._cluster.brokers) - set(controller.live)
        current = self._cluster.partitions
        snapshot = (
            list(states)
            if states
            else [
                p.metadata_state(offline)
                for p in partitions
                if current.get((p.topic, p.partition)) is p  # not a deleted, re-created one
            ]
        )
        if not snapshot:
            return
        live = tuple(sorted(controller.live))
        # one tuple per part, sent to every broker: the encoder writes each part once
        parts = [tuple(part) for part in chunks(snapshot, MAX_PARTITIONS_PER_EVENT)]
        jitter = self._loop.scenario.cluster.update_metadata_jitter_ms
        for broker_id in live:
            # one connection per broker: its requests arrive in the order they were sent
            arrival = max(
                self._loop.now + self._loop.random.randint(0, jitter),
                self._last_arrival_ms.get(broker_id, 0),
            )
            self._last_arrival_ms[broker_id] = arrival
            for part in parts:
                self._loop.schedule(
                    arrival, self._arrives, broker_id, part, live, controller.id, controller.epoch
                )

    def _arrives(
        self,
        broker_id: int,
        snapshot: tuple[MetadataPartitionState, ...],
        live: tuple[int, ...],
        controller_id: int,
        controller_epoch: int,
    ) -> None:
        if not self._cluster.brokers[broker_id].alive:
            return  # the request fails; the controller resends on the broker's return
        self._loop.emit(
            UpdateMetadata(
                ts=self._loop.now,
                controller_id=controller_id,
                controller_epoch=controller_epoch,
                broker=broker_id,
                partitions=snapshot,
                live_brokers=live,
            )
        )
        self._loop.truth.add(
            self._loop.now,
            "update_metadata",
            broker=broker_id,
            partitions=[
                {"topic": s.topic, "partition": s.partition, "isr": list(s.isr), "leader": s.leader}
                for s in snapshot
            ],
        )
