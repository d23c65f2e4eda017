"""A discrete-event model of a Kafka cluster that emits what isrwatch consumes.

The simulator does what Kafka does (docs/domain.md), not what the monitor expects: brokers
with epochs and their scheduled tasks, a controller with an epoch, producers appending to
leaders, followers fetching in a loop from each leader (a leader holds an empty fetch up to
``replica.fetch.wait.max.ms``), the leader's ``last_caught_up_ms`` bookkeeping, the
``isr-expiration`` task every T/2 with a random phase per broker, ISR expansion on fetch,
the zk ``isr-change-propagation`` task every 2.5 s with the 5 s / 60 s rule, UpdateMetadata
to every live broker after a change (zk), elections on broker death, bounces, topic creation
and deletion. It records the ground truth (``GroundTruth``) as it goes.

In KRaft mode it emits what ``collect metadata-log`` and ``collect admin`` give for a KRaft
cluster instead of UpdateMetadata: every controller decision is a record of the metadata
log and carries its ``metadata_offset``; each live broker fetches a record
``kraft_apply_ms`` after it is appended, and a ``MetadataLogProgress`` (DescribeQuorum)
reports every broker's log end offset each ``kraft_progress_interval_ms``.

Time is simulated (epoch ms) and the simulation is deterministic for a seed; pacing it
to the wall clock is the publisher's business.
"""

from __future__ import annotations

import heapq
import random
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from state.events import Source
from streaming.input_records import MAX_PARTITIONS_PER_EVENT, InputRecord, chunks, split_created
from streaming.simulator.broker import Broker
from streaming.simulator.ground_truth import GroundTruth
from streaming.simulator.partition import (
    LEADER_DURING_DELETE,
    NEVER,
    NO_LEADER,
    UNKNOWN_OFFSET,
    Partition,
    RemoteReplica,
)
from streaming.simulator.scenario import (
    Action,
    BounceBroker,
    ControlledShutdown,
    ControllerFailover,
    CrashBroker,
    CreateTopic,
    DeleteTopic,
    PreferredElection,
    ProduceRate,
    PropagationMode,
    RestartBroker,
    Scenario,
    SlowController,
    SlowFollower,
    StuckLeader,
    TopicSpec,
)

FETCH_RETRY_BACKOFF_MS = 1_000  # replica.fetch.backoff.ms
BROKER_EPOCH_BASE = 4_096  # broker epochs look like ZooKeeper czxids: large and increasing


class ClusterSimulator:
    """Run a scenario: ``events()`` yields records in time order; ``truth`` records facts."""

    def __init__(self, scenario: Scenario, seed: int = 0, start_ms: int | None = None) -> None:
        self.scenario = scenario
        self.seed = seed
        self.start_ms = start_ms if start_ms is not None else (scenario.start_ms or 0)
        if self.start_ms <= 0:
            raise ValueError("start_ms must be a positive epoch time")
        self.now = self.start_ms
        self.truth = GroundTruth()
        self._random = random.Random(seed)
        self._numpy = np.random.default_rng(seed)
        self._queue: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._sequence = 0
        self._out: list[InputRecord] = []
        spec = scenario.cluster
        self.brokers = {
            b: Broker(b, BROKER_EPOCH_BASE + b, scenario.lag_time_max_ms(b))
            for b in range(1, spec.brokers + 1)
        }
        self._next_broker_epoch = BROKER_EPOCH_BASE + spec.brokers + 1
        self.controller_id = spec.controller
        self.controller_epoch = spec.controller_epoch
        self.controller_live: dict[int, int] = {b.id: b.epoch for b in self.brokers.values()}
        self.controller_delay_ms: int | None = None  # a slow controller's fixed delay
        self._last_send_ms = 0  # the controller's last UpdateMetadata send
        self._last_arrival_ms: dict[int, int] = {}  # per broker, its last one's arrival
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._metadata_log_end = 0  # KRaft: the next offset of __cluster_metadata
        self._fetched_metadata: dict[int, int] = dict.fromkeys(self.brokers, 0)  # log ends
        self._topic_specs: dict[str, TopicSpec] = {}
        self._sessions: dict[tuple[int, int], int] = {}  # (follower, leader) -> token
        # leader -> follower -> (session token, hold): the fetches a leader is holding
        self._held: dict[int, dict[int, tuple[int, int]]] = defaultdict(dict)
        self._holds = 0
        self._pairs: dict[tuple[int, int], list[Partition]] | None = None
        self._tokens = 0
        self._stopping: set[int] = set()  # in controlled shutdown: fetches nothing
        self._schedule(self.start_ms, self._start)

    # ------------------------------------------------------------------ driving

    @property
    def end_ms(self) -> int:
        return self.start_ms + self.scenario.duration_s * 1000

    def events(self, until_ms: int | None = None) -> Iterator[InputRecord]:
        """Advance simulated time to ``until_ms`` (default: the scenario's end)."""
        end = self.end_ms if until_ms is None else until_ms
        while self._queue and self._queue[0][0] <= end:
            when, _, task, args = heapq.heappop(self._queue)
            self.now = when
            task(*args)
            if self._out:
                out, self._out = self._out, []
                yield from out
        self.now = max(self.now, end)

    def _schedule(self, when: int, task: Callable[..., None], *args: Any) -> None:
        self._sequence += 1
        heapq.heappush(self._queue, (when, self._sequence, task, args))

    def _between(self, bounds: tuple[int, int]) -> int:
        low, high = bounds
        return self._random.randint(low, max(low, high))

    # ------------------------------------------------------------------ output

    def _emit(self, source: Source, key: str, value: dict[str, Any]) -> None:
        self._out.append(InputRecord(source, key, {"ts": self.now, **value}))

    def _controller_event(self, key: str, event_type: str, **fields: Any) -> None:
        self._emit(Source.CONTROLLER_EVENTS, key, {
            "type": event_type, "controller_id": self.controller_id,
            "controller_epoch": self.controller_epoch, **fields, **self._metadata_record(),
        })  # fmt: skip

    @property
    def _kraft(self) -> bool:
        return self.scenario.cluster.propagation is PropagationMode.KRAFT

    def _metadata_record(self) -> dict[str, int]:
        """KRaft: the decision is the next record of the metadata log; every live broker
        fetches it a little later. ZK: nothing."""
        if not self._kraft:
            return {}
        offset = self._metadata_log_end
        self._metadata_log_end += 1
        for broker in self.brokers.values():
            if broker.alive:
                self._schedule(self.now + self._between(self.scenario.cluster.kraft_apply_ms),
                               self._metadata_fetched, broker.id, broker.generation,
                               offset + 1)  # fmt: skip
        return {"metadata_offset": offset}

    def _metadata_fetched(self, broker_id: int, generation: int, log_end: int) -> None:
        broker = self.brokers[broker_id]
        if broker.alive and broker.generation == generation:
            self._fetched_metadata[broker_id] = max(self._fetched_metadata[broker_id], log_end)

    def _metadata_log_progress(self) -> None:
        """KRaft: what DescribeQuorum reports, as ``collect admin`` publishes it."""
        self._emit(Source.CONTROLLER_EVENTS, str(self.controller_id), {
            "type": "MetadataLogProgress", "controller_id": self.controller_id,
            "controller_epoch": self.controller_epoch, "high_watermark": self._metadata_log_end,
            "interval_ms": self.scenario.cluster.kraft_progress_interval_ms,
            "replicas": [{"broker": b, "log_end_offset": end}
                         for b, end in sorted(self._fetched_metadata.items())],
        })  # fmt: skip
        self._schedule(self.now + self.scenario.cluster.kraft_progress_interval_ms,
                       self._metadata_log_progress)  # fmt: skip

    def _leader_and_isr(self, p: Partition, reason: str) -> None:
        p.controller_isr = list(p.isr)
        self._controller_event(
            p.key, "LeaderAndIsr", topic=p.topic, partition=p.partition, leader=p.leader,
            leader_epoch=p.leader_epoch, isr=list(p.isr), replicas=list(p.replicas),
            partition_epoch=p.partition_epoch,
        )  # fmt: skip
        self.truth.add(self.now, "leader_and_isr", topic=p.topic, partition=p.partition,
                       leader=p.leader, leader_epoch=p.leader_epoch, isr=list(p.isr),
                       reason=reason)  # fmt: skip

    def _broker_change(self) -> None:
        live = [{"id": b, "epoch": e} for b, e in sorted(self.controller_live.items())]
        self._controller_event(str(self.controller_id), "BrokerChange", live=live)

    # ------------------------------------------------------------------ start

    def _start(self) -> None:
        self._controller_event(
            str(self.controller_id), "ControllerChange",
        )  # fmt: skip
        self._broker_change()
        for broker in self.brokers.values():
            self._emit(Source.CONTROLLER_EVENTS, str(broker.id), {
                "type": "BrokerConfig", "broker": broker.id,
                "replica_lag_time_max_ms": broker.lag_time_max_ms,
            })  # fmt: skip
            broker.last_isr_propagation_ms = self.now
            self._start_broker_tasks(broker)
        self._create_topics(self.scenario.topics)
        self._schedule(self.now + self.scenario.fetch.produce_interval_ms, self._produce)
        if self._kraft:
            self._schedule(self.now + self.scenario.cluster.kraft_progress_interval_ms,
                           self._metadata_log_progress)  # fmt: skip
        for action in self.scenario.timeline:
            for k in range(action.repeat_count):
                offset_s = action.at_s + k * (action.repeat_every_s or 0)
                self._schedule(self.start_ms + round(offset_s * 1000), self._act, action)

    def _start_broker_tasks(self, broker: Broker) -> None:
        expiration = max(1, broker.lag_time_max_ms // 2)
        self._schedule(self.now + self._random.randint(1, expiration), self._isr_expiration,
                       broker.id, broker.generation)  # fmt: skip
        if self.scenario.cluster.propagation is PropagationMode.ZK:
            tick = self.scenario.cluster.propagation_tick_ms
            self._schedule(self.now + self._random.randint(1, tick), self._isr_propagation,
                           broker.id, broker.generation)  # fmt: skip

    # ------------------------------------------------------------------ topics

    def _assign(self, partitions: int, replication_factor: int) -> list[tuple[int, ...]]:
        """Kafka's rack-unaware assignment: a random start, round-robin, a shifting gap."""
        ids = sorted(self.brokers)
        n = len(ids)
        start = self._random.randrange(n)
        shift = self._random.randrange(n)
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

    def _create_topics(self, specs: list[TopicSpec]) -> None:
        created: dict[str, dict[str, list[int]]] = {}
        new: list[Partition] = []
        for spec in specs:
            for name in spec.names():
                if any(t == name for t, _ in self.partitions):
                    continue
                self._topic_specs[name] = spec
                self._emit(Source.CONTROLLER_EVENTS, str(self.controller_id), {
                    "type": "TopicConfig", "topic": name,
                    "min_insync_replicas": spec.min_insync_replicas,
                })  # fmt: skip
                assignment = (
                    [tuple(replicas) for replicas in spec.replica_assignment]
                    if spec.replica_assignment
                    else self._assign(spec.partitions, spec.replication_factor)
                )
                created[name] = {str(i): list(r) for i, r in enumerate(assignment)}
                for i, replicas in enumerate(assignment):
                    p = Partition(name, i, replicas, spec.min_insync_replicas, spec.produce_rate)
                    p.logs = dict.fromkeys(replicas, spec.initial_offset)
                    p.high_watermark = spec.initial_offset
                    new.append(p)
        if not created:
            return
        for part in split_created(created):
            self._controller_event(str(self.controller_id), "TopicChange", created=part,
                                   deleted=[])  # fmt: skip
        for p in new:
            self.partitions[(p.topic, p.partition)] = p
            live = [r for r in p.replicas if r in self.controller_live]
            p.set_isr(live or [p.replicas[0]], self.now)
            self._become_leader(p, live[0] if live else NO_LEADER)
            self._leader_and_isr(p, "topic created")
        for name in created:
            self.truth.add(self.now, "topic_created", topic=name,
                           partitions=len(created[name]))  # fmt: skip
        self._send_update_metadata(new)

    def _delete_topic(self, topic: str) -> None:
        doomed = [p for (t, _), p in self.partitions.items() if t == topic]
        if not doomed:
            return
        states = [{**p.metadata_state(set()), "leader": LEADER_DURING_DELETE} for p in doomed]
        self._send_update_metadata(doomed, states=states)
        for p in doomed:
            del self.partitions[(p.topic, p.partition)]
            for broker in self.brokers.values():
                broker.isr_change_set.pop((p.topic, p.partition), None)
        self._topic_specs.pop(topic, None)
        self._pairs = None
        self._controller_event(str(self.controller_id), "TopicChange", created={},
                               deleted=[topic])  # fmt: skip
        self.truth.add(self.now, "topic_deleted", topic=topic)

    # ------------------------------------------------------------------ leaders

    def _become_leader(self, p: Partition, leader: int) -> None:
        """Partition.makeLeader on the brokers, for a leader epoch the caller has set."""
        previous = p.leader
        p.leader = leader
        self._pairs = None
        if leader == NO_LEADER:
            return
        leo = p.logs[leader]
        for replica in p.replicas:  # followers truncate to the new leader's log
            p.logs[replica] = min(p.logs[replica], leo)
        p.high_watermark = min(p.high_watermark, leo)
        p.epoch_start_offset = leo
        for replica in p.replicas:
            if replica == leader:
                continue
            old = p.remote.get(replica)
            p.remote[replica] = RemoteReplica(
                log_end_offset=old.log_end_offset if old and previous == leader else UNKNOWN_OFFSET,
                last_fetch_time_ms=self.now, last_fetch_leader_leo=leo,
                last_caught_up_ms=self.now if replica in p.isr else NEVER,
            )  # fmt: skip
            self._ensure_fetcher(replica, leader)

    def _elect(self, p: Partition, candidates: list[int], reason: str) -> None:
        """Offline partition election: the first live ISR replica in assignment order."""
        live_isr = [r for r in p.isr if r in self.controller_live]
        eligible = [r for r in p.replicas if r in live_isr and r in candidates]
        p.set_isr(live_isr or p.isr[-1:], self.now)  # an offline partition keeps its last member
        p.partition_epoch += 1
        p.leader_epoch += 1
        self._become_leader(p, eligible[0] if eligible else NO_LEADER)
        self._leader_and_isr(p, reason)

    # ------------------------------------------------------------------ produce

    def _produce(self) -> None:
        interval = self.scenario.fetch.produce_interval_ms
        active = [
            p for p in self.partitions.values()
            if p.leader != NO_LEADER and self._serves_as_leader(p.leader) and p.produce_rate > 0
        ]  # fmt: skip
        if active:
            rates = np.fromiter((p.produce_rate for p in active), float, len(active))
            counts = self._numpy.poisson(rates * interval / 1000.0)
            woken: set[int] = set()
            for p, n in zip(active, counts.tolist(), strict=True):
                if n:
                    p.logs[p.leader] += n
                    if p.isr == [p.leader]:
                        p.maybe_increment_high_watermark()
                    woken.add(p.leader)
            for leader in woken:
                for follower, (token, _) in list(self._held[leader].items()):
                    if self._has_data(follower, leader):
                        self._respond(follower, leader, token)
        self._schedule(self.now + interval, self._produce)

    # ------------------------------------------------------------------ fetching

    def _pair_partitions(self, follower: int, leader: int) -> list[Partition]:
        if self._pairs is None:
            pairs: dict[tuple[int, int], list[Partition]] = defaultdict(list)
            for p in self.partitions.values():
                if p.leader != NO_LEADER:
                    for replica in p.replicas:
                        if replica != p.leader:
                            pairs[(replica, p.leader)].append(p)
            self._pairs = pairs
        return self._pairs.get((follower, leader), [])

    def _ensure_fetcher(self, follower: int, leader: int) -> None:
        if (follower, leader) in self._sessions or not self.brokers[follower].alive:
            return
        if follower in self._stopping:
            return
        self._tokens += 1
        self._sessions[(follower, leader)] = self._tokens
        rtt = self._between(self.scenario.fetch.round_trip_ms)
        delay = self.brokers[follower].delay_to(leader)
        self._schedule(self.now + rtt + delay, self._fetch_request, follower, leader, self._tokens)

    def _end_session(self, follower: int, leader: int) -> None:
        self._sessions.pop((follower, leader), None)
        self._held[leader].pop(follower, None)

    def _has_data(self, follower: int, leader: int) -> bool:
        return any(p.logs[leader] > p.logs[follower]
                   for p in self._pair_partitions(follower, leader))  # fmt: skip

    def _fetch_request(self, follower: int, leader: int, token: int) -> None:
        if self._sessions.get((follower, leader)) != token:
            return
        if not self.brokers[follower].alive or not self._pair_partitions(follower, leader):
            self._end_session(follower, leader)
            return
        if not self.brokers[leader].alive:  # connection refused: back off and retry
            self._schedule(self.now + FETCH_RETRY_BACKOFF_MS, self._fetch_request, follower,
                           leader, token)  # fmt: skip
            return
        has_data = self._read_follower_positions(follower, leader)
        if has_data:
            self._respond(follower, leader, token)
        else:  # the leader holds an empty fetch until data arrives or wait_max passes
            self._holds += 1
            self._held[leader][follower] = (token, self._holds)
            self._schedule(self.now + self.scenario.fetch.wait_max_ms, self._fetch_timeout,
                           follower, leader, (token, self._holds))  # fmt: skip

    def _fetch_timeout(self, follower: int, leader: int, hold: tuple[int, int]) -> None:
        if self._held[leader].get(follower) == hold:  # not answered since, nor held anew
            self._respond(follower, leader, hold[0])

    def _read_follower_positions(self, follower: int, leader: int) -> bool:
        """The leader reads a fetch as it arrives (ReplicaManager.fetchMessages): it updates
        each follower's fetch state from the fetch offsets, may expand the ISR and move the
        HW, one fetch-responses record per partition; True if there is data to return."""
        fetch = self.scenario.fetch
        max_records = self.brokers[follower].max_records_from(leader, fetch.max_records)
        has_data = False
        for p in self._pair_partitions(follower, leader):
            offset = p.logs[follower]
            leader_leo = p.logs[leader]
            returned = max(0, min(leader_leo - offset, max_records))
            has_data = has_data or returned > 0
            p.remote[follower].update_fetch_state(offset, leader_leo, self.now)
            self._maybe_expand_isr(p, follower, offset)
            p.maybe_increment_high_watermark()
            self._emit(Source.FETCH_RESPONSES, p.key, {
                "topic": p.topic, "partition": p.partition, "leader": leader,
                "follower": follower, "leader_epoch": p.leader_epoch, "fetch_offset": offset,
                "leader_leo": leader_leo, "high_watermark": p.high_watermark,
                "log_start_offset": 0, "error": "NONE", "bytes": returned * fetch.record_bytes,
            })  # fmt: skip
        return has_data

    def _respond(self, follower: int, leader: int, token: int) -> None:
        """The response reaches the follower: it appends what the leader has now."""
        self._held[leader].pop(follower, None)
        if self._sessions.get((follower, leader)) != token:
            return
        fetch = self.scenario.fetch
        max_records = self.brokers[follower].max_records_from(leader, fetch.max_records)
        for p in self._pair_partitions(follower, leader):
            p.logs[follower] += max(0, min(p.logs[leader] - p.logs[follower], max_records))
        rtt = self._between(fetch.round_trip_ms)
        delay = self.brokers[follower].delay_to(leader)
        self._schedule(self.now + rtt + delay, self._fetch_request, follower, leader, token)

    # ------------------------------------------------------------------ ISR

    def _maybe_expand_isr(self, p: Partition, follower: int, offset: int) -> None:
        """Partition.maybeExpandIsr: at or past the HW and the leader epoch's start offset."""
        if follower in p.isr or follower not in p.replicas:
            return
        if offset < p.high_watermark or offset < p.epoch_start_offset:
            return
        if self.brokers[p.leader].stuck:
            return
        old = list(p.isr)
        p.set_isr([*p.isr, follower], self.now)
        self._leader_changed_isr(p, old, "isr_expand", follower=follower, fetch_offset=offset)

    def _isr_expiration(self, broker_id: int, generation: int) -> None:
        """The leader's ``isr-expiration`` task (every T/2): drop out-of-sync followers."""
        broker = self.brokers[broker_id]
        if not broker.alive or broker.generation != generation:
            return
        if self._serves_as_leader(broker_id):  # not before a restart's LeaderAndIsr
            for p in list(self.partitions.values()):
                if p.leader == broker_id:
                    self._maybe_shrink_isr(p, broker)
        self._schedule(self.now + max(1, broker.lag_time_max_ms // 2), self._isr_expiration,
                       broker_id, generation)  # fmt: skip

    def _maybe_shrink_isr(self, p: Partition, leader: Broker) -> None:
        """Partition.maybeShrinkIsr: followers not at the LEO and not caught up for T."""
        lag_max = leader.lag_time_max_ms
        out = [
            f for f in p.isr if f != leader.id
            and p.remote[f].log_end_offset != p.leader_leo
            and self.now - p.remote[f].last_caught_up_ms > lag_max
        ]  # fmt: skip
        for f in out:
            lcu = p.remote[f].last_caught_up_ms
            # at the latest at the first run after lcu + T, or after it (re)entered the
            # ISR already out of sync (runs are T/2 apart)
            deadline = max(lcu + lag_max * 3 // 2, p.isr_since.get(f, 0) + lag_max // 2)
            self.truth.add(
                self.now, "shrink_failed" if leader.stuck else "isr_shrink",
                topic=p.topic, partition=p.partition, leader=leader.id, follower=f,
                last_caught_up_ms=lcu, lag_time_max_ms=lag_max, deadline_ms=deadline,
                isr_since_ms=p.isr_since.get(f, 0),
            )  # fmt: skip
        if not out or leader.stuck:
            return
        old = list(p.isr)
        p.set_isr([r for r in p.isr if r not in out], self.now)
        self._leader_changed_isr(p, old, None)
        p.maybe_increment_high_watermark()

    def _leader_changed_isr(
        self, p: Partition, old: list[int], truth_kind: str | None, **facts: Any
    ) -> None:
        """The leader's ISR write (ZooKeeper / AlterPartition) and its propagation."""
        p.partition_epoch += 1
        self._emit(Source.CONTROLLER_EVENTS, p.key, {
            "type": "IsrChange", "topic": p.topic, "partition": p.partition,
            "leader": p.leader, "old_isr": old, "new_isr": list(p.isr),
            "leader_epoch": p.leader_epoch, "partition_epoch": p.partition_epoch,
            **self._metadata_record(),
        })  # fmt: skip
        if truth_kind:
            self.truth.add(self.now, truth_kind, topic=p.topic, partition=p.partition,
                           leader=p.leader, **facts)  # fmt: skip
        broker = self.brokers[p.leader]
        if self.scenario.cluster.propagation is PropagationMode.ZK:
            broker.isr_change_set.setdefault((p.topic, p.partition), self.now)
            broker.last_isr_change_ms = self.now
        # KRaft: brokers replay the committed change from the metadata log (its record)

    def _isr_propagation(self, broker_id: int, generation: int) -> None:
        """ZK mode's ``isr-change-propagation`` task (docs/domain.md#propagation-zk)."""
        broker = self.brokers[broker_id]
        if not broker.alive or broker.generation != generation:
            return
        spec = self.scenario.cluster
        quiet = broker.last_isr_change_ms + spec.propagation_blackout_ms < self.now
        overdue = broker.last_isr_propagation_ms + spec.propagation_max_delay_ms < self.now
        if broker.isr_change_set and (quiet or overdue):
            changes = sorted(broker.isr_change_set.items())
            broker.isr_change_set.clear()
            broker.last_isr_propagation_ms = self.now
            self._emit(Source.CONTROLLER_EVENTS, str(broker_id), {
                "type": "IsrChangePropagation", "broker": broker_id,
                "partitions": [{"topic": t, "partition": n} for (t, n), _ in changes],
            })  # fmt: skip
            self.truth.add(self.now, "propagation", broker=broker_id, changes=[
                {"topic": t, "partition": n, "first_change_ms": first}
                for (t, n), first in changes
            ])  # fmt: skip
            still = [self.partitions[tp] for tp, _ in changes if tp in self.partitions]
            self._send_update_metadata(still, refresh=True)
        self._schedule(self.now + spec.propagation_tick_ms, self._isr_propagation, broker_id,
                       generation)  # fmt: skip

    # ------------------------------------------------------------------ metadata

    def _send_update_metadata(
        self,
        partitions: list[Partition],
        states: list[dict[str, Any]] | None = None,
        delay: tuple[int, int] | None = None,
        refresh: bool = False,
    ) -> None:
        """The controller sends these partitions' states to every live broker; with
        ``refresh`` it first reads their ISR (a change notification, a committed change).
        KRaft has no UpdateMetadata: brokers replay the metadata log."""
        if not partitions or self._kraft:
            return
        spec = self.scenario.cluster
        if delay is None and self.controller_delay_ms is not None:
            send_at = self.now + self.controller_delay_ms
        else:
            send_at = self.now + self._between(delay or spec.controller_delay_ms)
        # the controller handles its events one at a time, in order (its event queue)
        send_at = self._last_send_ms = max(send_at, self._last_send_ms)
        self._schedule(send_at, self._update_metadata_sent, tuple(partitions),
                       tuple(states) if states else None, refresh,
                       self.controller_epoch)  # fmt: skip

    def _update_metadata_sent(
        self,
        partitions: tuple[Partition, ...],
        states: tuple[dict[str, Any], ...] | None,
        refresh: bool,
        controller_epoch: int,
    ) -> None:
        if controller_epoch != self.controller_epoch or not self._controller_up():
            return  # a deposed or dead controller sends nothing; its successor resends all
        if refresh:
            for p in partitions:
                p.controller_isr = list(p.isr)
        offline = set(self.brokers) - set(self.controller_live)
        snapshot = list(states) if states else [
            p.metadata_state(offline) for p in partitions
            if self.partitions.get((p.topic, p.partition)) is p  # not a deleted, re-created one
        ]  # fmt: skip
        if not snapshot:
            return
        live = sorted(self.controller_live)
        for broker_id in live:
            # one connection per broker: its requests arrive in the order they were sent
            arrival = max(
                self.now + self._random.randint(0, self.scenario.cluster.update_metadata_jitter_ms),
                self._last_arrival_ms.get(broker_id, 0),
            )
            self._last_arrival_ms[broker_id] = arrival
            for chunk in chunks(snapshot, MAX_PARTITIONS_PER_EVENT):
                self._schedule(arrival, self._update_metadata_arrives, broker_id, chunk, live,
                               self.controller_id, self.controller_epoch)  # fmt: skip

    def _update_metadata_arrives(
        self,
        broker_id: int,
        snapshot: list[dict[str, Any]],
        live: list[int],
        controller_id: int,
        controller_epoch: int,
    ) -> None:
        if not self.brokers[broker_id].alive:
            return  # the request fails; the controller resends on the broker's return
        self._emit(Source.CONTROLLER_EVENTS, str(broker_id), {
            "type": "UpdateMetadata", "controller_id": controller_id,
            "controller_epoch": controller_epoch, "broker": broker_id,
            "live_brokers": live, "partitions": snapshot,
        })  # fmt: skip
        self.truth.add(self.now, "update_metadata", broker=broker_id, partitions=[
            {"topic": s["topic"], "partition": s["partition"], "isr": s["isr"],
             "leader": s["leader"]} for s in snapshot
        ])  # fmt: skip

    def _serves_as_leader(self, broker_id: int) -> bool:
        """Alive and known to the controller with its current epoch: a restarted broker
        leads nothing until the controller has seen it (and re-elected)."""
        broker = self.brokers[broker_id]
        return broker.alive and self.controller_live.get(broker_id) == broker.epoch

    def _controller_up(self) -> bool:
        return self.brokers[self.controller_id].alive

    # ------------------------------------------------------------------ brokers

    def _crash(self, broker_id: int, truth_kind: str = "broker_crash") -> None:
        broker = self.brokers[broker_id]
        if not broker.alive:
            return
        broker.alive = False
        broker.generation += 1
        broker.isr_change_set.clear()
        for key in [k for k in self._sessions if broker_id in k]:
            self._end_session(*key)
        self.truth.add(self.now, truth_kind, broker=broker_id, epoch=broker.epoch)
        self._schedule(self.now + self.scenario.cluster.session_timeout_ms,
                       self._session_expired, broker_id, broker.epoch)  # fmt: skip

    def _restart(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        if broker.alive:
            return
        broker.alive = True
        self._stopping.discard(broker_id)
        broker.generation += 1
        broker.epoch = self._next_broker_epoch
        self._next_broker_epoch += 1
        broker.last_isr_propagation_ms = self.now
        self.truth.add(self.now, "broker_restart", broker=broker_id, epoch=broker.epoch)
        self._start_broker_tasks(broker)
        if self._kraft:  # it catches up with the metadata log before it serves
            self._schedule(self.now + self._between(self.scenario.cluster.kraft_apply_ms),
                           self._metadata_fetched, broker_id, broker.generation,
                           self._metadata_log_end)  # fmt: skip
        self._schedule(self.now + self.scenario.cluster.registration_ms, self._registered,
                       broker_id, broker.epoch)  # fmt: skip

    def _session_expired(self, broker_id: int, epoch: int) -> None:
        """The controller sees the broker's registration vanish (unless it came back)."""
        if self.controller_live.get(broker_id) != epoch or self.brokers[broker_id].epoch != epoch:
            return
        if self.brokers[broker_id].alive:
            return
        del self.controller_live[broker_id]
        failover = broker_id == self.controller_id and bool(self.controller_live)
        if failover:
            self._fail_over(min(self.controller_live))
        self._broker_change()
        self.truth.add(self.now, "broker_change", dead=[broker_id], new=[], bounced=[])
        self._on_broker_failure(broker_id)
        if failover:  # the new controller reads every partition and tells every broker
            self._send_update_metadata(list(self.partitions.values()), refresh=True)

    def _controlled_shutdown(self, broker_id: int, exit_after_ms: int) -> None:
        """KafkaController.doControlledShutdown: every partition the broker is in the ISR
        of gets it removed (and a new leader if it led), unless it is the last member."""
        if not self.brokers[broker_id].alive or broker_id not in self.controller_live:
            return
        # the controller's StopReplica: the broker stops fetching, so no leader adds it back
        self._stopping.add(broker_id)
        for key in [k for k in self._sessions if k[0] == broker_id]:
            self._end_session(*key)
        changed = []
        for p in list(self.partitions.values()):
            others = [r for r in p.isr if r != broker_id and r in self.controller_live]
            if broker_id not in p.isr or not others:
                continue
            p.set_isr(others, self.now)
            p.partition_epoch += 1
            p.leader_epoch += 1
            leader = p.leader
            if leader == broker_id:
                leader = next(r for r in p.replicas if r in others)
            if leader != NO_LEADER:
                self._become_leader(p, leader)
            self._leader_and_isr(p, f"controlled shutdown of broker {broker_id}")
            changed.append(p)
        self._send_update_metadata(changed)
        self._schedule(self.now + exit_after_ms, self._clean_exit, broker_id)

    def _clean_exit(self, broker_id: int) -> None:
        """The broker exits; its session closes cleanly: the controller sees it at once."""
        epoch = self.brokers[broker_id].epoch
        self._crash(broker_id, "broker_stop")
        self._session_expired(broker_id, epoch)

    def _registered(self, broker_id: int, epoch: int) -> None:
        broker = self.brokers[broker_id]
        if not broker.alive or broker.epoch != epoch:
            return
        bounced = broker_id in self.controller_live
        self.controller_live[broker_id] = epoch
        self._broker_change()
        self.truth.add(self.now, "broker_change", dead=[], new=[] if bounced else [broker_id],
                       bounced=[broker_id] if bounced else [])  # fmt: skip
        if bounced:  # KafkaController.onBrokerFailure then onBrokerStartup
            self._on_broker_failure(broker_id)
        self._on_broker_startup(broker_id)

    def _on_broker_failure(self, broker_id: int) -> None:
        """KafkaController.onBrokerFailure: elect new leaders, drop the broker from ISRs."""
        changed: list[Partition] = []
        for p in list(self.partitions.values()):
            if broker_id not in p.replicas:
                continue
            if p.leader == broker_id:
                candidates = [r for r in p.replicas if r != broker_id]
                p.set_isr([r for r in p.isr if r != broker_id] or p.isr, self.now)
                self._elect(p, candidates, f"broker {broker_id} failed")
                changed.append(p)
            elif broker_id in p.isr and len(p.isr) > 1:
                p.set_isr([r for r in p.isr if r != broker_id], self.now)
                p.partition_epoch += 1
                p.leader_epoch += 1
                if p.leader != NO_LEADER:
                    self._become_leader(p, p.leader)
                self._leader_and_isr(p, f"replica on broker {broker_id} offline")
                changed.append(p)
        self._send_update_metadata(changed)

    def _on_broker_startup(self, broker_id: int) -> None:
        everything = list(self.partitions.values())
        offline = [
            p for p in everything
            if p.leader == NO_LEADER and broker_id in p.isr
        ]  # fmt: skip
        for p in offline:
            self._elect(p, [broker_id], f"broker {broker_id} back")
        self._send_update_metadata(everything)
        for p in everything:
            if broker_id in p.replicas and p.leader not in (NO_LEADER, broker_id):
                self._ensure_fetcher(broker_id, p.leader)

    # ------------------------------------------------------------------ controller

    def _fail_over(self, new_controller: int) -> None:
        self.controller_id = new_controller
        self.controller_epoch += 1
        self._controller_event(str(new_controller), "ControllerChange")
        self.truth.add(self.now, "controller_change", controller_id=new_controller,
                       controller_epoch=self.controller_epoch)  # fmt: skip

    def _zombie_decision(self, old_controller: int, old_epoch: int) -> None:
        """A deposed controller's late LeaderAndIsr: Kafka fences it by controller epoch."""
        if not self.partitions:
            return
        p = self.partitions[min(self.partitions)]
        self._emit(Source.CONTROLLER_EVENTS, p.key, {
            "type": "LeaderAndIsr", "controller_id": old_controller,
            "controller_epoch": old_epoch, "topic": p.topic, "partition": p.partition,
            "leader": p.leader, "leader_epoch": p.leader_epoch + 1, "isr": list(p.isr),
            "replicas": list(p.replicas), "partition_epoch": p.partition_epoch + 1,
        })  # fmt: skip
        self.truth.add(
            self.now,
            "zombie_event",
            controller_id=old_controller,
            controller_epoch=old_epoch,
            topic=p.topic,
            partition=p.partition,
        )

    # ------------------------------------------------------------------ timeline

    def _act(self, action: Action) -> None:
        self.truth.add(
            self.now,
            "action",
            action=action.action,
            **action.model_dump(exclude={"action", "at_s"}, exclude_none=True),
        )
        match action:
            case SlowFollower():
                slowness = (action.fetch_delay_ms, action.max_records)
                self._slow_follower(action.broker, action.leader, slowness)
                if action.duration_s is not None:
                    self._schedule(
                        self.now + round(action.duration_s * 1000),
                        self._slow_follower,
                        action.broker,
                        action.leader,
                        None,
                    )
            case CrashBroker():
                self._crash(action.broker)
            case RestartBroker():
                self._restart(action.broker)
            case ControlledShutdown():
                self._controlled_shutdown(action.broker, action.exit_after_ms)
                if action.down_ms is not None:
                    self._schedule(self.now + action.exit_after_ms + action.down_ms,
                                   self._restart, action.broker)  # fmt: skip
            case BounceBroker():
                self._crash(action.broker)
                self._schedule(self.now + action.down_ms, self._restart, action.broker)
            case ControllerFailover():
                old = (self.controller_id, self.controller_epoch)
                if self.brokers[action.to].alive:
                    self._fail_over(action.to)
                    self._broker_change()
                    self._send_update_metadata(list(self.partitions.values()), refresh=True)
                    if action.zombie_events:
                        self._schedule(self.now + 200, self._zombie_decision, *old)
            case PreferredElection():
                self._preferred_election()
            case CreateTopic():
                self._create_topics([action.topic])
            case DeleteTopic():
                self._delete_topic(action.topic)
            case StuckLeader():
                self._set_stuck(action.broker, True)
                if action.duration_s is not None:
                    self._schedule(self.now + round(action.duration_s * 1000),
                                   self._set_stuck, action.broker, False)  # fmt: skip
            case SlowController():
                self.controller_delay_ms = action.delay_ms
                if action.duration_s is not None:
                    self._schedule(self.now + round(action.duration_s * 1000),
                                   self._controller_recovers)  # fmt: skip
            case ProduceRate():
                for (topic, _), p in self.partitions.items():
                    if topic == action.topic:
                        p.produce_rate = action.rate

    def _slow_follower(
        self, broker_id: int, leader: int | None, slowness: tuple[int, int | None] | None
    ) -> None:
        broker = self.brokers[broker_id]
        if slowness is None:
            broker.slowness.pop(leader, None)
            # back to normal: a stalled fetcher retries at once rather than after its stall
            for follower, from_leader in [k for k in self._sessions if k[0] == broker_id]:
                if leader in (None, from_leader):
                    self._end_session(follower, from_leader)
                    self._ensure_fetcher(follower, from_leader)
        else:
            broker.slowness[leader] = slowness

    def _set_stuck(self, broker_id: int, stuck: bool) -> None:
        self.brokers[broker_id].stuck = stuck

    def _controller_recovers(self) -> None:
        self.controller_delay_ms = None

    def _preferred_election(self) -> None:
        moved = []
        for p in self.partitions.values():
            preferred = p.replicas[0]
            if p.leader != preferred and preferred in p.isr and self.brokers[preferred].alive:
                p.partition_epoch += 1
                p.leader_epoch += 1
                self._become_leader(p, preferred)
                self._leader_and_isr(p, "preferred leader election")
                moved.append(p)
        self._send_update_metadata(moved)
