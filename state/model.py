"""The replication model of one shard: controller events and fetch responses in, health out.

Events are applied in the order given. Consecutive fetch responses are applied as one
vectorised batch (follower_fetch_state); controller events, which are rare, one at a
time (runs of LeaderAndIsr in bulk: controller_batch). The result is the same for any
batching of the same sequence. The model routes each event to the rules it concerns:
the caught-up rule (caught_up), the leader's own ISR changes (isr_change), the
propagation window (propagation_window) and the brokers' caches (metadata_cache); its
health is evaluated by partition_health.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from state.apply_report import ApplyReport, IsrTransition, isr_change_kind
from state.caught_up import reset_on_become_leader
from state.cluster_state import ClusterState
from state.controller_batch import apply_leader_and_isr_run, apply_metadata_states, takes_in_bulk
from state.controller_routing import ControllerEpochSeen
from state.eligible_leaders import (
    NONE_ELIGIBLE,
    EligibleLeaders,
    after_unstated_change,
    effective_min_isr,
)
from state.events import (
    LEADER_DURING_DELETE,
    NO_LEADER,
    BrokerChange,
    BrokerConfig,
    BrokersAnswered,
    ClearElr,
    ControllerChange,
    ControllerEvent,
    DeadLetterReason,
    Event,
    FetchResponse,
    IsrChange,
    IsrChangePropagation,
    LeaderAndIsr,
    MetadataLogProgress,
    TopicChange,
    TopicConfig,
    TopicPartition,
    UpdateMetadata,
)
from state.expiration_schedule import ExpirationSchedules
from state.flapping import FlapHistory
from state.follower_fetch_state import REJECT_REASONS, FetchBatch, apply_fetches
from state.isr_change import apply_isr_change
from state.maintenance import MaintenanceLog
from state.metadata_cache import (
    MetadataCaches,
    apply_quorum_report,
    apply_update_metadata,
    track_metadata_offset,
)
from state.partition_health import HealthFrame, evaluate
from state.partition_table import PartitionTable
from state.propagation_window import (
    PropagationWindows,
    QuorumProgress,
    observe_propagated,
    record_isr_change,
    record_propagation,
)
from state.settings import PropagationMode, RuleSettings
from state.sharding import Shard

BULK_MIN_EVENTS = 2
"""Runs of fewer consecutive LeaderAndIsr go one at a time (the explaining reference)."""
BULK_MIN_STATES = 2
"""An UpdateMetadata of fewer partition states goes one at a time (the reference)."""


class ReplicationModel:
    """Partition, follower and metadata state of the partitions it is given events for.

    With a ``shard``, it keeps partition state only for the partitions the shard owns,
    while every controller event still updates the cluster-wide state (brokers,
    configs, controller epoch) and every leader's propagation window: the window of a
    leader depends on all the partitions it leads, in whatever shard they are. Only
    the owner of a partition (shard 0 for cluster-wide events) counts and rejects, so
    that a controller event broadcast to every shard is counted once.
    """

    # Kept with the model's state; class-level None so that a model pickled before they
    # existed (a checkpoint of an older version) starts them empty.
    _flaps: FlapHistory | None = None
    _maintenance: MaintenanceLog | None = None
    _epoch_floors: dict[tuple[str, int], int] | None = None
    _schedules: ExpirationSchedules | None = None

    def __init__(self, settings: RuleSettings, shard: Shard | None = None) -> None:
        self.settings = settings
        self.shard = shard
        self.cluster = ClusterState()
        self.table = PartitionTable()
        self.caches = MetadataCaches(self.table)
        self.windows = PropagationWindows(settings.propagation)

    @property
    def flaps(self) -> FlapHistory:
        """Removals from and re-adds to the ISR of this model's followers (flapping)."""
        if self._flaps is None:
            self._flaps = FlapHistory()
        return self._flaps

    @property
    def maintenance(self) -> MaintenanceLog:
        """Brokers' registrations and controlled shutdowns (planned maintenance)."""
        if self._maintenance is None:
            self._maintenance = MaintenanceLog()
        return self._maintenance

    @property
    def schedules(self) -> ExpirationSchedules:
        """Each leader's isr-expiration runs, learned from its shrinks (shrink_at_ms)."""
        if self._schedules is None:
            self._schedules = ExpirationSchedules()
        return self._schedules

    @property
    def epoch_floors(self) -> dict[tuple[str, int], int]:
        """(topic, partition) -> the least leader epoch an epoch-bearing event about it may
        still have: set by a partial leader change (see ``_leader_elected``)."""
        if self._epoch_floors is None:
            self._epoch_floors = {}
        return self._epoch_floors

    @property
    def has_epoch_floors(self) -> bool:
        """Whether any partition has a floor from a partial leader change."""
        return bool(self._epoch_floors)

    @property
    def zookeeper_mode(self) -> bool:
        """ZooKeeper mode: ISR changes reach brokers' caches by the controller's
        UpdateMetadata (KRaft: by the metadata log, whose offsets are tracked)."""
        return self.settings.propagation.mode is PropagationMode.ZK

    # ------------------------------------------------------------------ apply

    def apply(
        self, events: Iterable[tuple[int, Event | ControllerEpochSeen | FetchBatch]]
    ) -> ApplyReport:
        """Apply ``(source_id, event)`` pairs in order; runs of fetches go as one batch."""
        report = ApplyReport()
        run: list[FetchResponse] = []
        run_ids: list[int] = []
        elections: list[tuple[int, LeaderAndIsr]] = []  # consecutive, for the bulk path
        for source_id, event in events:
            if isinstance(event, LeaderAndIsr) and takes_in_bulk(event):
                if run:
                    self.apply_fetch_batch(FetchBatch.from_events(run, run_ids), report)
                    run, run_ids = [], []
                elections.append((source_id, event))
                continue
            self._apply_elections(elections, report)
            elections = []
            if isinstance(event, FetchResponse):
                run.append(event)
                run_ids.append(source_id)
                continue
            if run:
                self.apply_fetch_batch(FetchBatch.from_events(run, run_ids), report)
                run, run_ids = [], []
            if isinstance(event, FetchBatch):
                self.apply_fetch_batch(event, report)
            else:
                self.apply_controller_event(source_id, event, report)
        self._apply_elections(elections, report)
        if run:
            self.apply_fetch_batch(FetchBatch.from_events(run, run_ids), report)
        return report

    def _apply_elections(
        self, elections: Sequence[tuple[int, LeaderAndIsr]], report: ApplyReport
    ) -> None:
        """Consecutive LeaderAndIsr: in bulk (state.controller_batch), one alone as such."""
        if len(elections) >= BULK_MIN_EVENTS:
            apply_leader_and_isr_run(self, elections, report)
        else:
            for source_id, event in elections:
                self.apply_controller_event(source_id, event, report)

    def apply_fetch_batch(self, batch: FetchBatch, report: ApplyReport) -> None:
        outcome = apply_fetches(self.table, batch)
        rejected = outcome.rejected()
        report.applied["FetchResponse"] += len(batch) - len(rejected) - outcome.error_responses
        report.fetch_error_responses += outcome.error_responses
        report.rejected_ids.extend(batch.source_id[rejected].tolist())
        report.rejected_reasons.extend(
            REJECT_REASONS[code - 1] for code in outcome.code[rejected].tolist()
        )

    def owns(self, topic: str, partition: int) -> bool:
        return self.shard is None or self.shard.owns(topic, partition)

    @property
    def reports_cluster_events(self) -> bool:
        """Whether this model counts the events that concern no single partition."""
        return self.shard is None or self.shard.reports_cluster_events

    def _reports(self, event: ControllerEvent) -> bool:
        """Whether this model counts ``event`` (and its rejection) in its report."""
        if isinstance(event, LeaderAndIsr | IsrChange):
            return self.owns(event.topic, event.partition)
        return self.reports_cluster_events

    def apply_controller_event(
        self, source_id: int, event: ControllerEvent | ControllerEpochSeen, report: ApplyReport
    ) -> None:
        if isinstance(event, ControllerEpochSeen):
            # Another shard's event: only its epoch concerns this one (controller_routing).
            self.cluster.observe_controller(event.controller_id, event.controller_epoch)
            return
        # Facts about one partition (observed propagation delays) go to the report of the
        # shard that owns the partition; the event itself is counted by one shard only.
        partition_report = report
        if not self._reports(event):
            report = ApplyReport()  # counted by the shard that owns it
        if not self.cluster.admits_controller_epoch(event.controller_epoch):
            report.reject(source_id, DeadLetterReason.STALE_CONTROLLER_EPOCH)
            return
        # A broker adopts the epoch of any request from a current controller, even one
        # whose partition states it then ignores as stale.
        self.cluster.observe_controller(event.controller_id, event.controller_epoch)
        reason: DeadLetterReason | None = None
        match event:
            case LeaderAndIsr():
                reason = self._leader_and_isr(event, report)
            case IsrChange():
                reason = apply_isr_change(self, event, report)
            case IsrChangePropagation():
                record_propagation(self.table, self.windows, event)
            case UpdateMetadata():
                self._update_metadata(event, partition_report)
            case BrokerChange():
                change = self.cluster.apply_broker_change(event)
                self.maintenance.registered(change.new | change.bounced, event.ts)
                self.schedules.restarted(change.new | change.bounced, event.ts)
                for broker in change.new | change.bounced:
                    self.windows.registered(broker, event.ts)
                self.caches.drop_brokers(change.restarted_caches)
                report.bounced_brokers.extend(sorted(change.bounced))
            case ControllerChange():
                # Its epoch was observed above, as every controller event's. The partial
                # form (no epoch) cannot be ordered against a known epoch: it names the
                # controller only while no epoch is known (docs/event-contract.md).
                if event.controller_epoch is None and self.cluster.controller_epoch is None:
                    self.cluster.controller_id = event.controller_id
            case TopicChange():
                self._topic_change(event)
            case TopicConfig():
                self.cluster.min_insync_replicas[event.topic] = event.min_insync_replicas
            case ClearElr():
                self._clear_elr(event)
            case BrokerConfig():
                self.cluster.lag_time_max_ms[event.broker] = event.replica_lag_time_max_ms
            case MetadataLogProgress():
                self._metadata_log_progress(event, partition_report)
            case BrokersAnswered():
                self.cluster.observe_answers(event)
        if reason is not None:
            report.reject(source_id, reason)
            return
        report.applied[type(event).__name__] += 1

    def _leader_and_isr(self, event: LeaderAndIsr, report: ApplyReport) -> DeadLetterReason | None:
        if not self.owns(event.topic, event.partition):
            return None
        leader_epoch, partition_epoch = event.leader_epoch, event.partition_epoch
        isr, replicas = event.isr, event.replicas
        if leader_epoch is None or partition_epoch is None or isr is None or replicas is None:
            return self._leader_elected(event)  # the partial form: the schema allows no mix
        table = self.table
        row = table.live_row_of(event.topic, event.partition)
        if row >= 0:
            if leader_epoch < self.least_leader_epoch(event.topic, event.partition, row):
                return DeadLetterReason.STALE_LEADER_EPOCH
            if (
                leader_epoch == table.leader_epoch[row]
                and partition_epoch < table.partition_epoch[row]
            ):
                return DeadLetterReason.STALE_PARTITION_EPOCH
        if event.leader == LEADER_DURING_DELETE:
            if row >= 0:
                self._delete(row)
            return None
        if row < 0:
            row = table.create(event.topic, event.partition, replicas)
        self.clear_epoch_floor(event.topic, event.partition)  # an epoch is known again
        old_isr = table.isr[row]
        new_epoch = leader_epoch > table.leader_epoch[row]
        new_leader = event.leader != table.leader[row]
        table.set_replicas(row, replicas)
        table.set_isr(row, isr)
        # A follower that stays in the ISR keeps its entry time (docs/domain.md#shrink-rule).
        table.mark_isr_entries(row, set(isr) - set(old_isr), event.ts)
        table.leader[row] = event.leader
        table.leader_epoch[row] = leader_epoch
        table.partition_epoch[row] = partition_epoch
        self.record_eligible_leaders(row, event.elr, event.last_known_elr)
        if set(old_isr) != set(isr):
            record_isr_change(
                table, self.windows, row, event.ts, by_leader=False, leader=event.leader
            )
            self.record_metadata_offset(row, event.metadata_offset, old_isr)
            if old_isr:
                report.isr_transitions.append(
                    self.record_isr_transition(row, old_isr, isr, event.ts, by_controller=True)
                )
        if new_epoch and event.leader != NO_LEADER:
            reset_on_become_leader(table, row, event.ts, new_leader=new_leader)
        self.caches.refresh(row)
        return None

    def least_leader_epoch(self, topic: str, partition: int, row: int) -> int:
        """The least leader epoch an epoch-bearing event about the row may have: the one
        held, or above it after a partial leader change."""
        held = int(self.table.leader_epoch[row])
        floor = self.floor_after_partial_election(topic, partition)
        return held if floor is None else max(held, floor)

    def floor_after_partial_election(self, topic: str, partition: int) -> int | None:
        """The floor a partial leader change set for the partition, if one is in force."""
        return None if not self._epoch_floors else self._epoch_floors.get((topic, partition))

    def clear_epoch_floor(self, topic: str, partition: int) -> None:
        """An epoch is known again (an epoch-bearing election applied, or a deletion)."""
        if self._epoch_floors:
            self._epoch_floors.pop((topic, partition), None)

    def _leader_elected(self, event: LeaderAndIsr) -> DeadLetterReason | None:
        """The partial LeaderAndIsr: a new leader, with no epoch, ISR or replicas stated.

        Kafka's controller elects a leader from the assigned replicas and keeps the ISR
        (PartitionLeaderElectionAlgorithms.preferredReplicaPartitionLeaderElection,
        ``LeaderAndIsr.newLeader``), bumping the leader and partition epochs; the new
        leader then resets its followers' state (Partition.makeLeader). So: the leader
        changes, the ISR and replicas stay, the followers are reset as on any election,
        and the held epochs stay (the new ones are not known). Fencing: the election
        raised the leader epoch above the one held, so from now on an epoch-bearing
        event with an epoch not above it is stale (``epoch_floors``). An event with no
        epoch is applied in event-time order like any other; it never lowers an epoch.
        """
        table = self.table
        row = table.live_row_of(event.topic, event.partition)
        if row < 0:
            return DeadLetterReason.UNKNOWN_PARTITION  # no replicas to lead: nothing to set
        replicas = table.replicas[row]
        if event.leader != NO_LEADER and replicas and event.leader not in replicas:
            return DeadLetterReason.NOT_ASSIGNED_REPLICA
        if event.leader == table.leader[row]:
            return None  # nothing new: the leader held (or this line read twice)
        key = (event.topic, event.partition)
        self.epoch_floors[key] = self.least_leader_epoch(event.topic, event.partition, row) + 1
        table.leader[row] = event.leader
        self.record_eligible_leaders(row, None, None)  # a leader elected from the ELR leaves it
        if event.leader != NO_LEADER:
            reset_on_become_leader(table, row, event.ts, new_leader=True)
        self.caches.refresh(row)
        return None

    def record_isr_transition(
        self, row: int, old: Sequence[int], new: Sequence[int], ts: int, *, by_controller: bool
    ) -> IsrTransition:
        """An ISR change of the row applied: kept in the flapping history and the
        maintenance log, and returned for the report."""
        tp = self.table.topic_partition(row)
        leader = int(self.table.leader[row])
        kind = isr_change_kind(old, new)
        removed = tuple(sorted(set(old) - set(new)))
        added = tuple(sorted(set(new) - set(old)))
        self.flaps.record(tp.topic, tp.partition, leader, removed, added, ts)
        self.maintenance.isr_changed(
            removed,
            added,
            by_controller=by_controller,
            registered=self.cluster.live_brokers,
            ts=ts,
        )
        return IsrTransition(
            tp.topic, tp.partition, leader, kind, by_controller, ts, removed, added
        )

    def record_eligible_leaders(
        self,
        row: int,
        elr: tuple[int, ...] | None,
        last_known_elr: tuple[int, ...] | None,
    ) -> None:
        table = self.table
        if elr is not None and last_known_elr is not None:
            table.eligible_leaders[row] = EligibleLeaders(elr, last_known_elr)
            return
        if table.eligible_leaders[row] is None:
            return  # no ELR was ever stated: none to change (the cold start's common case)
        topic = table.topic_names[int(table.topic_id[row])]
        configured = self.cluster.min_insync_replicas.get(topic, self.settings.min_insync_replicas)
        table.eligible_leaders[row] = after_unstated_change(
            table.eligible_leaders[row],
            table.isr[row],
            int(table.leader[row]),
            effective_min_isr(configured, int(table.n_replicas[row])),
        )

    def _clear_elr(self, event: ClearElr) -> None:
        """``ClearElrRecord``: every partition of the topic (of all, without one) that has
        an ELR or last known ELR gets empty ones (ReplicationControlManager.removeTopicElrs)."""
        table = self.table
        rows = (
            table.live_rows().tolist() if event.topic is None else table.rows_of_topic(event.topic)
        )
        for row in rows:
            if table.eligible_leaders[row] is not None:
                table.eligible_leaders[row] = NONE_ELIGIBLE

    def _metadata_log_progress(self, event: MetadataLogProgress, report: ApplyReport) -> None:
        quorum = QuorumProgress.of(
            event, self.settings.propagation.kraft_propagation_max_ms
        ).keeping_news_of(self.windows.quorum, self.cluster.is_live)
        self.windows.quorum = quorum
        if self.zookeeper_mode:
            return
        for row, ms in apply_quorum_report(self.caches, self.cluster, quorum):
            self.observe_propagation(row, ms, report)

    def _update_metadata(self, event: UpdateMetadata, report: ApplyReport) -> None:
        if len(event.partitions) >= BULK_MIN_STATES and apply_metadata_states(self, event, report):
            return
        propagated, ignored = apply_update_metadata(self.caches, self.cluster, event, self.owns)
        report.ignored_metadata_entries += ignored
        for row in propagated:
            self.observe_propagation(row, event.ts, report)

    def observe_propagation(self, row: int, ts: int, report: ApplyReport) -> None:
        """The row's ISR reached every live broker's cache at ``ts``: its delay, if the
        change was seen, goes to the report."""
        delay = observe_propagated(self.table, self.windows, row, ts)
        if delay is not None:
            report.propagation_delays_ms.append(delay)

    def record_metadata_offset(self, row: int, offset: int | None, old_isr: Sequence[int]) -> None:
        """KRaft: the metadata log offset of the row's ISR change, which brokers' caches
        have once they applied it (nothing in ZooKeeper mode)."""
        if not self.zookeeper_mode:
            track_metadata_offset(self.caches, self.windows.quorum, row, offset, old_isr)

    def _topic_change(self, event: TopicChange) -> None:
        for topic, partitions in event.created.items():
            for partition, replicas in partitions.items():
                if self.owns(topic, partition) and self.table.live_row_of(topic, partition) < 0:
                    self.table.create(topic, partition, tuple(replicas))
        for topic in event.deleted:
            for row in self.table.rows_of_topic(topic):
                self._delete(row)

    def _delete(self, row: int) -> None:
        tp = self.table.topic_partition(row)
        self.clear_epoch_floor(tp.topic, tp.partition)
        self.flaps.forget_partition(tp.topic, tp.partition)
        self.windows.forget(self.table.topic_partition(row))
        self.caches.forget_row(row)
        self.table.delete(row)

    # --------------------------------------------------------------- evaluate

    def evaluate(self, now_ms: int) -> HealthFrame:
        """The health of every partition of this shard at ``now_ms``."""
        return evaluate(
            self.table,
            self.cluster,
            self.caches,
            self.windows,
            self.settings,
            now_ms,
            self.schedules,
        )

    def partition_count(self) -> int:
        return int(np.count_nonzero(self.table.exists))

    def partitions(self) -> list[TopicPartition]:
        return [self.table.topic_partition(int(r)) for r in self.table.live_rows()]
