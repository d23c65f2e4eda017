"""A simulated broker: its epoch, its configuration, the faults it suffers and the state
of its zk-mode isr-change-propagation task (``Broker``); the tasks that run on the brokers,
and their crashes and restarts (``BrokerTasks``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from state.events import IsrChange, IsrChangePropagation, TopicPartition
from streaming.feeds.simulator.partition import Partition

if TYPE_CHECKING:
    from streaming.feeds.simulator.cluster import ClusterSimulator

__all__ = ["BROKER_EPOCH_BASE", "Broker", "BrokerTasks"]

BROKER_EPOCH_BASE = 4_096  # broker epochs look like ZooKeeper czxids: large and increasing


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


class BrokerTasks:
    """What runs on the brokers: a leader's ``isr-expiration`` task (every T/2, with a
    random phase per broker), its ISR writes (shrink, and expansion on fetch), zk mode's
    ``isr-change-propagation`` task, and the brokers' crashes, restarts and clean exits.
    A crash or restart moves the broker to a new generation, which ends its old tasks."""

    def __init__(self, cluster: ClusterSimulator) -> None:
        self._cluster = cluster
        self._loop = cluster.loop
        self._next_epoch = BROKER_EPOCH_BASE + len(cluster.brokers) + 1

    def start(self, broker: Broker) -> None:
        expiration = max(1, broker.lag_time_max_ms // 2)
        self._loop.schedule(
            self._loop.now + self._loop.random.randint(1, expiration),
            self._isr_expiration,
            broker.id,
            broker.generation,
        )
        if not self._loop.kraft:
            tick = self._loop.scenario.cluster.propagation_tick_ms
            self._loop.schedule(
                self._loop.now + self._loop.random.randint(1, tick),
                self._isr_propagation,
                broker.id,
                broker.generation,
            )

    # ------------------------------------------------------------------ ISR

    def maybe_expand_isr(self, p: Partition, follower: int, offset: int) -> None:
        """Partition.maybeExpandIsr, on the leader as it reads a follower's fetch."""
        if not p.needs_expand_isr(follower, offset):
            return
        if self._cluster.brokers[p.leader].stuck:
            return
        old = list(p.isr)
        p.set_isr([*p.isr, follower], self._loop.now)
        self._leader_changed_isr(p, old, "isr_expand", follower=follower, fetch_offset=offset)

    def _isr_expiration(self, broker_id: int, generation: int) -> None:
        """The leader's ``isr-expiration`` task (every T/2): drop out-of-sync followers."""
        broker = self._cluster.brokers[broker_id]
        if not broker.alive or broker.generation != generation:
            return
        # a restarted broker leads nothing before the controller's LeaderAndIsr
        if self._cluster.controller.serves_as_leader(broker_id):
            for p in list(self._cluster.partitions.values()):
                if p.leader == broker_id:
                    self._maybe_shrink_isr(p, broker)
        self._loop.schedule(
            self._loop.now + max(1, broker.lag_time_max_ms // 2),
            self._isr_expiration,
            broker_id,
            generation,
        )

    def _maybe_shrink_isr(self, p: Partition, leader: Broker) -> None:
        """Partition.maybeShrinkIsr: remove the out-of-sync replicas, unless the leader's
        ISR updates fail (the ground truth records the attempt either way)."""
        now = self._loop.now
        lag_max = leader.lag_time_max_ms
        out = p.out_of_sync_replicas(now, lag_max)
        for f in out:
            lcu = p.remote[f].last_caught_up_ms
            # at the latest at the first run after lcu + T, or after it (re)entered the
            # ISR already out of sync (runs are T/2 apart)
            deadline = max(lcu + lag_max * 3 // 2, p.isr_since.get(f, 0) + lag_max // 2)
            self._loop.truth.add(
                now,
                "shrink_failed" if leader.stuck else "isr_shrink",
                topic=p.topic,
                partition=p.partition,
                leader=leader.id,
                follower=f,
                last_caught_up_ms=lcu,
                lag_time_max_ms=lag_max,
                deadline_ms=deadline,
                isr_since_ms=p.isr_since.get(f, 0),
            )
        if not out or leader.stuck:
            return
        old = list(p.isr)
        p.set_isr([r for r in p.isr if r not in out], now)
        self._leader_changed_isr(p, old, None)
        p.maybe_increment_high_watermark()

    def _leader_changed_isr(
        self, p: Partition, old: list[int], truth_kind: str | None, **facts: Any
    ) -> None:
        """The leader's ISR write (ZooKeeper / AlterPartition) and its propagation."""
        p.partition_epoch += 1
        self._loop.emit(
            IsrChange(
                ts=self._loop.now,
                topic=p.topic,
                partition=p.partition,
                leader=p.leader,
                old_isr=tuple(old),
                new_isr=tuple(p.isr),
                leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch,
                metadata_offset=self._cluster.metadata.record(),
            )
        )
        if truth_kind:
            self._loop.truth.add(
                self._loop.now,
                truth_kind,
                topic=p.topic,
                partition=p.partition,
                leader=p.leader,
                **facts,
            )
        broker = self._cluster.brokers[p.leader]
        if not self._loop.kraft:
            broker.isr_change_set.setdefault((p.topic, p.partition), self._loop.now)
            broker.last_isr_change_ms = self._loop.now
        # KRaft: brokers replay the committed change from the metadata log (its record)

    def _isr_propagation(self, broker_id: int, generation: int) -> None:
        """ZK mode's ``isr-change-propagation`` task: the 5 s / 60 s rule
        (docs/domain.md#propagation-zk)."""
        broker = self._cluster.brokers[broker_id]
        if not broker.alive or broker.generation != generation:
            return
        now = self._loop.now
        spec = self._loop.scenario.cluster
        quiet = broker.last_isr_change_ms + spec.propagation_blackout_ms < now
        overdue = broker.last_isr_propagation_ms + spec.propagation_max_delay_ms < now
        if broker.isr_change_set and (quiet or overdue):
            changes = sorted(broker.isr_change_set.items())
            broker.isr_change_set.clear()
            broker.last_isr_propagation_ms = now
            self._loop.emit(
                IsrChangePropagation(
                    ts=now,
                    broker=broker_id,
                    partitions=tuple(TopicPartition(t, n) for (t, n), _ in changes),
                )
            )
            self._loop.truth.add(
                now,
                "propagation",
                broker=broker_id,
                changes=[
                    {"topic": t, "partition": n, "first_change_ms": first}
                    for (t, n), first in changes
                ],
            )
            partitions = self._cluster.partitions
            still = [partitions[tp] for tp, _ in changes if tp in partitions]
            self._cluster.metadata.send_update_metadata(still, refresh=True)
        self._loop.schedule(
            now + spec.propagation_tick_ms, self._isr_propagation, broker_id, generation
        )

    # ------------------------------------------------------------------ lifecycle

    def crash(self, broker_id: int, truth_kind: str = "broker_crash") -> None:
        """The broker dies; the controller notices when its session times out."""
        broker = self._cluster.brokers[broker_id]
        if not broker.alive:
            return
        broker.alive = False
        broker.generation += 1
        broker.isr_change_set.clear()
        self._cluster.fetchers.broker_down(broker_id)
        self._loop.truth.add(self._loop.now, truth_kind, broker=broker_id, epoch=broker.epoch)
        self._loop.schedule(
            self._loop.now + self._loop.scenario.cluster.session_timeout_ms,
            self._cluster.controller.session_expired,
            broker_id,
            broker.epoch,
        )

    def restart(self, broker_id: int) -> None:
        """The broker comes back with a new epoch and registers after a while."""
        broker = self._cluster.brokers[broker_id]
        if broker.alive:
            return
        broker.alive = True
        self._cluster.fetchers.resume_fetching(broker_id)
        broker.generation += 1
        broker.epoch = self._next_epoch
        self._next_epoch += 1
        broker.last_isr_propagation_ms = self._loop.now
        self._loop.truth.add(self._loop.now, "broker_restart", broker=broker_id, epoch=broker.epoch)
        self.start(broker)
        self._cluster.metadata.catch_up(broker)  # before it serves
        self._loop.schedule(
            self._loop.now + self._loop.scenario.cluster.registration_ms,
            self._cluster.controller.registered,
            broker_id,
            broker.epoch,
        )

    def clean_exit(self, broker_id: int) -> None:
        """The broker exits; its session closes cleanly: the controller sees it at once."""
        epoch = self._cluster.brokers[broker_id].epoch
        self.crash(broker_id, "broker_stop")
        self._cluster.controller.session_expired(broker_id, epoch)
