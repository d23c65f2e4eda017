"""The simulated cluster's active controller (Kafka's KafkaController): its epoch and its
view of the live brokers, topic creation and deletion, leader elections, and what it does
when a broker dies, registers, shuts down in a controlled way or a new controller takes
over. Each decision is a ``LeaderAndIsr`` record; the brokers learn it through
``MetadataChannel``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from state.events import (
    BrokerChange,
    BrokerRegistration,
    ControllerChange,
    ControllerEvent,
    LeaderAndIsr,
    TopicChange,
    TopicConfig,
)
from streaming.feeds.simulator.partition import LEADER_DURING_DELETE, NO_LEADER, Partition
from streaming.feeds.simulator.scenario import TopicSpec
from streaming.feeds.wire import split_created

if TYPE_CHECKING:
    from streaming.feeds.simulator.cluster import ClusterSimulator

__all__ = ["Controller"]

ZOMBIE_DELAY_MS = 200  # how late a deposed controller's decision arrives


class Controller:
    """The controller's state and decisions; ``live`` maps each broker it knows registered
    to that registration's epoch."""

    def __init__(self, cluster: ClusterSimulator) -> None:
        self._cluster = cluster
        self._loop = cluster.loop
        spec = cluster.scenario.cluster
        self.id = spec.controller
        self.epoch = spec.controller_epoch
        self.live: dict[int, int] = {b.id: b.epoch for b in cluster.brokers.values()}
        self.delay_ms: int | None = None  # a slow controller's fixed delay

    # ------------------------------------------------------------------ records

    def event(self, kind: type[ControllerEvent], **fields: Any) -> None:
        """A controller record; in KRaft it is also the next record of the metadata log."""
        self._loop.emit(
            kind(
                ts=self._loop.now,
                controller_id=self.id,
                controller_epoch=self.epoch,
                **fields,
                metadata_offset=self._cluster.metadata.record(),
            )
        )

    def leader_and_isr(self, p: Partition, reason: str) -> None:
        p.controller_isr = list(p.isr)
        self.event(
            LeaderAndIsr,
            topic=p.topic,
            partition=p.partition,
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            isr=tuple(p.isr),
            replicas=tuple(p.replicas),
            partition_epoch=p.partition_epoch,
        )
        self._loop.truth.add(
            self._loop.now,
            "leader_and_isr",
            topic=p.topic,
            partition=p.partition,
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            isr=list(p.isr),
            reason=reason,
        )

    def broker_change(self) -> None:
        live = tuple(BrokerRegistration(id=b, epoch=e) for b, e in sorted(self.live.items()))
        self.event(BrokerChange, live=live)

    def is_up(self) -> bool:
        return self._cluster.brokers[self.id].alive

    def serves_as_leader(self, broker_id: int) -> bool:
        """Alive and known to the controller with its current epoch: a restarted broker
        leads nothing until the controller has seen it (and re-elected)."""
        broker = self._cluster.brokers[broker_id]
        return broker.alive and self.live.get(broker_id) == broker.epoch

    # ------------------------------------------------------------------ topics

    def _assign(self, partitions: int, replication_factor: int) -> list[tuple[int, ...]]:
        """Kafka's rack-unaware assignment: a random start, round-robin, a shifting gap."""
        ids = sorted(self._cluster.brokers)
        n = len(ids)
        start = self._loop.random.randrange(n)
        shift = self._loop.random.randrange(n)
        assignment = []
        for p in range(partitions):
            if p > 0 and p % n == 0:
                shift += 1
            first = (start + p) % n
            replicas = [ids[first]]
            for j in range(replication_factor - 1):
                gap = 1 + (shift + j) % (n - 1)
                replicas.append(ids[(first + gap) % n])
            assignment.append(tuple(replicas))
        return assignment

    def create_topics(self, specs: list[TopicSpec]) -> None:
        partitions = self._cluster.partitions
        created: dict[str, dict[int, tuple[int, ...]]] = {}
        new: list[Partition] = []
        for spec in specs:
            for name in spec.names():
                if any(t == name for t, _ in partitions):
                    continue
                # no controller fields, yet keyed by the controller (as since the start)
                self._loop.emit(
                    TopicConfig(
                        ts=self._loop.now,
                        topic=name,
                        min_insync_replicas=spec.min_insync_replicas,
                    ),
                    key=str(self.id),
                )
                assignment = (
                    [tuple(replicas) for replicas in spec.replica_assignment]
                    if spec.replica_assignment
                    else self._assign(spec.partitions, spec.replication_factor)
                )
                created[name] = dict(enumerate(assignment))
                for i, replicas in enumerate(assignment):
                    p = Partition(name, i, replicas, spec.min_insync_replicas, spec.produce_rate)
                    p.logs = dict.fromkeys(replicas, spec.initial_offset)
                    p.high_watermark = spec.initial_offset
                    new.append(p)
        if not created:
            return
        for part in split_created(created):
            self.event(TopicChange, created=part, deleted=())
        for p in new:
            partitions[(p.topic, p.partition)] = p
            live = [r for r in p.replicas if r in self.live]
            p.set_isr(live or [p.replicas[0]], self._loop.now)
            self.become_leader(p, live[0] if live else NO_LEADER)
            self.leader_and_isr(p, "topic created")
        for name in created:
            self._loop.truth.add(
                self._loop.now, "topic_created", topic=name, partitions=len(created[name])
            )
        self._cluster.metadata.send_update_metadata(new)

    def delete_topic(self, topic: str) -> None:
        partitions = self._cluster.partitions
        doomed = [p for (t, _), p in partitions.items() if t == topic]
        if not doomed:
            return
        states = [replace(p.metadata_state(set()), leader=LEADER_DURING_DELETE) for p in doomed]
        self._cluster.metadata.send_update_metadata(doomed, states=states)
        for p in doomed:
            del partitions[(p.topic, p.partition)]
            for broker in self._cluster.brokers.values():
                broker.isr_change_set.pop((p.topic, p.partition), None)
        self._cluster.fetchers.forget_pairs()
        self.event(TopicChange, created={}, deleted=(topic,))
        self._loop.truth.add(self._loop.now, "topic_deleted", topic=topic)

    # ------------------------------------------------------------------ leaders

    def become_leader(self, p: Partition, leader: int) -> None:
        """The brokers act on a new leader (for a leader epoch the caller has set): its
        followers start fetching from it."""
        self._cluster.fetchers.forget_pairs()
        for follower in p.make_leader(leader, self._loop.now):
            self._cluster.fetchers.ensure_fetcher(follower, leader)

    def _elect(self, p: Partition, candidates: list[int], reason: str) -> None:
        """Offline partition election: the first live ISR replica in assignment order."""
        live_isr = [r for r in p.isr if r in self.live]
        eligible = [r for r in p.replicas if r in live_isr and r in candidates]
        # an offline partition keeps its last member
        p.set_isr(live_isr or p.isr[-1:], self._loop.now)
        p.partition_epoch += 1
        p.leader_epoch += 1
        self.become_leader(p, eligible[0] if eligible else NO_LEADER)
        self.leader_and_isr(p, reason)

    def preferred_election(self) -> None:
        moved = []
        for p in self._cluster.partitions.values():
            preferred = p.replicas[0]
            if (
                p.leader != preferred
                and preferred in p.isr
                and self._cluster.brokers[preferred].alive
            ):
                p.partition_epoch += 1
                p.leader_epoch += 1
                self.become_leader(p, preferred)
                self.leader_and_isr(p, "preferred leader election")
                moved.append(p)
        self._cluster.metadata.send_update_metadata(moved)

    # ------------------------------------------------------------------ brokers

    def session_expired(self, broker_id: int, epoch: int) -> None:
        """The controller sees the broker's registration vanish (unless it came back)."""
        broker = self._cluster.brokers[broker_id]
        if self.live.get(broker_id) != epoch or broker.epoch != epoch:
            return
        if broker.alive:
            return
        del self.live[broker_id]
        failover = broker_id == self.id and bool(self.live)
        if failover:
            self.fail_over(min(self.live))
        self.broker_change()
        self._loop.truth.add(self._loop.now, "broker_change", dead=[broker_id], new=[], bounced=[])
        self._on_broker_failure(broker_id)
        if failover:  # the new controller reads every partition and tells every broker
            self._cluster.metadata.send_update_metadata(
                list(self._cluster.partitions.values()), refresh=True
            )

    def registered(self, broker_id: int, epoch: int) -> None:
        broker = self._cluster.brokers[broker_id]
        if not broker.alive or broker.epoch != epoch:
            return
        bounced = broker_id in self.live
        self.live[broker_id] = epoch
        self.broker_change()
        self._loop.truth.add(
            self._loop.now,
            "broker_change",
            dead=[],
            new=[] if bounced else [broker_id],
            bounced=[broker_id] if bounced else [],
        )
        if bounced:  # KafkaController.onBrokerFailure then onBrokerStartup
            self._on_broker_failure(broker_id)
        self._on_broker_startup(broker_id)

    def controlled_shutdown(self, broker_id: int, exit_after_ms: int) -> None:
        """KafkaController.doControlledShutdown: every partition the broker is in the ISR
        of gets it removed (and a new leader if it led), unless it is the last member."""
        if not self._cluster.brokers[broker_id].alive or broker_id not in self.live:
            return
        # the controller's StopReplica: the broker stops fetching, so no leader adds it back
        self._cluster.fetchers.stop_fetching(broker_id)
        changed = []
        for p in list(self._cluster.partitions.values()):
            others = [r for r in p.isr if r != broker_id and r in self.live]
            if broker_id not in p.isr or not others:
                continue
            p.set_isr(others, self._loop.now)
            p.partition_epoch += 1
            p.leader_epoch += 1
            leader = p.leader
            if leader == broker_id:
                leader = next(r for r in p.replicas if r in others)
            if leader != NO_LEADER:
                self.become_leader(p, leader)
            self.leader_and_isr(p, f"controlled shutdown of broker {broker_id}")
            changed.append(p)
        self._cluster.metadata.send_update_metadata(changed)
        self._loop.schedule(
            self._loop.now + exit_after_ms, self._cluster.broker_tasks.clean_exit, broker_id
        )

    def _on_broker_failure(self, broker_id: int) -> None:
        """KafkaController.onBrokerFailure: elect new leaders, drop the broker from ISRs."""
        changed: list[Partition] = []
        now = self._loop.now
        for p in list(self._cluster.partitions.values()):
            if broker_id not in p.replicas:
                continue
            if p.leader == broker_id:
                candidates = [r for r in p.replicas if r != broker_id]
                p.set_isr([r for r in p.isr if r != broker_id] or p.isr, now)
                self._elect(p, candidates, f"broker {broker_id} failed")
                changed.append(p)
            elif broker_id in p.isr and len(p.isr) > 1:
                p.set_isr([r for r in p.isr if r != broker_id], now)
                p.partition_epoch += 1
                p.leader_epoch += 1
                if p.leader != NO_LEADER:
                    self.become_leader(p, p.leader)
                self.leader_and_isr(p, f"replica on broker {broker_id} offline")
                changed.append(p)
        self._cluster.metadata.send_update_metadata(changed)

    def _on_broker_startup(self, broker_id: int) -> None:
        everything = list(self._cluster.partitions.values())
        offline = [p for p in everything if p.leader == NO_LEADER and broker_id in p.isr]
        for p in offline:
            self._elect(p, [broker_id], f"broker {broker_id} back")
        self._cluster.metadata.send_update_metadata(everything)
        for p in everything:
            if broker_id in p.replicas and p.leader not in (NO_LEADER, broker_id):
                self._cluster.fetchers.ensure_fetcher(broker_id, p.leader)

    # ------------------------------------------------------------------ controller

    def fail_over(self, new_controller: int) -> None:
        self.id = new_controller
        self.epoch += 1
        self.event(ControllerChange)
        self._loop.truth.add(
            self._loop.now,
            "controller_change",
            controller_id=new_controller,
            controller_epoch=self.epoch,
        )

    def move_to(self, new_controller: int, zombie_events: bool) -> None:
        """A controller failover on request: the new controller reads every partition and
        tells every broker; the deposed one may still send a decision of its old epoch."""
        old = (self.id, self.epoch)
        if not self._cluster.brokers[new_controller].alive:
            return
        self.fail_over(new_controller)
        self.broker_change()
        self._cluster.metadata.send_update_metadata(
            list(self._cluster.partitions.values()), refresh=True
        )
        if zombie_events:
            self._loop.schedule(self._loop.now + ZOMBIE_DELAY_MS, self._zombie_decision, *old)

    def _zombie_decision(self, old_controller: int, old_epoch: int) -> None:
        """A deposed controller's late LeaderAndIsr: Kafka fences it by controller epoch."""
        partitions = self._cluster.partitions
        if not partitions:
            return
        p = partitions[min(partitions)]
        self._loop.emit(
            LeaderAndIsr(
                ts=self._loop.now,
                controller_id=old_controller,
                controller_epoch=old_epoch,
                topic=p.topic,
                partition=p.partition,
                leader=p.leader,
                leader_epoch=p.leader_epoch + 1,
                isr=tuple(p.isr),
                replicas=tuple(p.replicas),
                partition_epoch=p.partition_epoch + 1,
            )
        )
        self._loop.truth.add(
            self._loop.now,
            "zombie_event",
            controller_id=old_controller,
            controller_epoch=old_epoch,
            topic=p.topic,
            partition=p.partition,
        )
