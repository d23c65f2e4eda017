"""Two snapshots of a cluster -> the controller events and fetch responses between them.

Pure: a ``ClusterSnapshot`` is what one poll of the admin API saw (``admin_source`` takes
it); ``AdminPoller.poll`` compares it with the previous one and returns the events, the
fetch responses as columns (``diff``: each event a record of its own). Its
memory (the previous snapshot and the brokers' epochs) is plain JSON, saved after each
published poll, so that a restarted collector goes on diffing instead of starting over.

What is observed and what is derived (docs/collectors.md#collect-admin):

* ``LeaderAndIsr`` when a partition appears or its leader, leader epoch or replicas
  change: leader, leader epoch, ISR and replicas are observed (Metadata); the partition
  epoch is not exposed by the admin API and is set to the leader epoch, a lower bound of
  the real one (Kafka bumps the partition epoch at every leader change too).
* ``IsrChange`` when only the ISR changed: observed, with the leader epoch; no partition
  epoch.
* ``BrokerChange`` when the live set changes: the ids are observed (DescribeCluster);
  the epochs are not exposed and are counted by the collector: 0 on first sight, one more
  each time a broker reappears after a poll without it. A bounce shorter than a poll is
  not seen.
* ``ControllerChange`` only where the controller epoch is exposed: KRaft, as the
  metadata quorum's leader epoch (DescribeQuorum). ZooKeeper-mode clusters expose no
  controller epoch; events then carry ``controller_id`` only.
* ``MetadataLogProgress`` at every poll of a KRaft cluster (DescribeQuorum): each
  replica of ``__cluster_metadata`` with its log end offset and last caught-up time, as
  the quorum leader reports them; ``interval_ms`` says when the next report is due.
* ``BrokersAnswered`` at every other poll (ZooKeeper mode, or DescribeQuorum missing):
  the live brokers that answered every request the poll sent them, the model's news of
  each broker where no quorum report gives it (docs/domain.md#silent-leader).
* ``TopicChange`` for topics (and partitions) that appear or disappear; ``TopicConfig``
  and ``BrokerConfig`` when ``min.insync.replicas`` / ``replica.lag.time.max.ms`` are
  first seen or change (DescribeConfigs).
* ``FetchResponse`` per follower per poll, from per-replica log end offsets (ListOffsets
  with the debugging replica id -2, which a broker answers from its own replica, leader
  or follower): ``fetch_offset`` is the follower's log end offset, ``leader_leo`` the
  leader's, ``high_watermark`` the leader's (ListOffsets as a consumer), ``ts`` the time
  the leaders were asked (before the followers, so a follower at or past ``leader_leo``
  really had everything the leader had at ``ts``). A follower whose broker does not
  answer gets no record, as a follower that does not fetch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from state.events import (
    BrokerChange,
    BrokerConfig,
    BrokerRegistration,
    BrokersAnswered,
    ControllerChange,
    ControllerEvent,
    IsrChange,
    LeaderAndIsr,
    MetadataLogProgress,
    ReplicaProgress,
    TopicChange,
    TopicConfig,
)
from state.fetch_pack import FetchRows
from streaming.feeds.collectors.polled_partitions import (
    NO_EPOCH,
    NO_OFFSET,
    PartitionOffsets,
    PolledPartitions,
    ReplicaOffsets,
)
from streaming.feeds.wire import InputBatch, InputRecord, split_created
from streaming.feeds.wire_encoding import input_record

STATE_VERSION = 1


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    leader: int
    leader_epoch: int | None  # None: the broker's Metadata has no leader epoch (< 2.1)
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class QuorumReplica:
    broker: int
    log_end_offset: int
    last_caught_up_ms: int | None
    last_fetch_ms: int | None


@dataclass(frozen=True, slots=True)
class QuorumSnapshot:
    """The metadata log's quorum (DescribeQuorum): leader, epoch, high watermark, and how
    far each voter and observer has fetched."""

    leader: int
    epoch: int
    high_watermark: int
    replicas: tuple[QuorumReplica, ...]
    fetch_timeout_ms: int | None = None  # controller.quorum.fetch.timeout.ms, if described


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """What one poll saw. ``admin_source`` gives the partitions and offsets as columns
    (``PolledPartitions``, ``ReplicaOffsets``, ``PartitionOffsets``); any mapping of the
    same shape will do (the state file's, a test's)."""

    ts: int
    controller_id: int | None
    controller_epoch: int | None
    brokers: tuple[int, ...]
    partitions: Mapping[str, Mapping[int, PartitionInfo]]
    min_insync_replicas: Mapping[str, int] = field(default_factory=dict)
    replica_lag_time_max_ms: Mapping[int, int] = field(default_factory=dict)
    # (topic, partition, broker) -> that replica's log end offset
    log_end_offsets: Mapping[tuple[str, int, int], int] = field(default_factory=dict)
    high_watermarks: Mapping[tuple[str, int], int] = field(default_factory=dict)
    offsets_ts: int | None = None
    quorum: QuorumSnapshot | None = None  # KRaft (not compared between polls)
    # the live brokers that answered every request the poll sent them, in id order (None:
    # not known, as in a state file's snapshot); not compared between polls
    answered: tuple[int, ...] | None = None

    @property
    def partition_count(self) -> int:
        return PolledPartitions.of(self.partitions).rows

    def to_json(self, partitions: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The part a later diff compares (offsets are not compared, only reported).
        ``partitions``: the JSON of the partitions if already made (``partitions_json``
        of a snapshot with the same partitions)."""
        return {
            "ts": self.ts,
            "controller_id": self.controller_id,
            "controller_epoch": self.controller_epoch,
            "brokers": list(self.brokers),
            "partitions": self.partitions_json() if partitions is None else partitions,
            "min_insync_replicas": dict(sorted(self.min_insync_replicas.items())),
            "replica_lag_time_max_ms": {
                str(b): v for b, v in sorted(self.replica_lag_time_max_ms.items())
            },
        }

    def partitions_json(self) -> dict[str, dict[str, list[Any]]]:
        """Each partition's leader, leader epoch, replicas and ISR, by topic."""
        return {
            topic: {
                str(p): [i.leader, i.leader_epoch, list(i.replicas), list(i.isr)]
                for p, i in sorted(parts.items())
            }
            for topic, parts in sorted(self.partitions.items())
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> ClusterSnapshot:
        return ClusterSnapshot(
            ts=int(data["ts"]),
            controller_id=data["controller_id"],
            controller_epoch=data["controller_epoch"],
            brokers=tuple(data["brokers"]),
            partitions={
                topic: {
                    int(p): PartitionInfo(leader, epoch, tuple(replicas), tuple(isr))
                    for p, (leader, epoch, replicas, isr) in parts.items()
                }
                for topic, parts in data["partitions"].items()
            },
            min_insync_replicas=dict(data["min_insync_replicas"]),
            replica_lag_time_max_ms={int(b): v for b, v in data["replica_lag_time_max_ms"].items()},
        )


class AdminPoller:
    """Diffs each snapshot against the previous one; ``skipped`` counts what it could not
    describe honestly, by reason."""

    def __init__(
        self,
        state: Mapping[str, Any] | None = None,
        *,
        fetch_responses: bool = True,
        broker_changes: bool = True,
        partition_events: bool = True,
        interval_ms: int | None = None,
    ) -> None:
        state = state or {}
        if state and state.get("version") != STATE_VERSION:
            raise ValueError(f"unknown admin collector state version {state.get('version')!r}")
        previous = state.get("snapshot")
        self._previous = ClusterSnapshot.from_json(previous) if previous else None
        # the previous snapshot's partitions as a table, made once (its own if a source's)
        self._previous_table = (
            PolledPartitions.of(self._previous.partitions) if self._previous else None
        )
        # self._previous.partitions_json(), once made: kept while the partitions do not
        # change (every poll of a quiet cluster), since making it for 100,000 partitions
        # cost more than the rest of the poll once its fetches were columns.
        self._partitions_json: dict[str, Any] | None = None
        self._epochs: dict[int, int] = {int(b): e for b, e in state.get("epochs", {}).items()}
        self._fetch_responses = fetch_responses
        self._broker_changes = broker_changes
        self._interval_ms = interval_ms
        self._partition_events = partition_events
        self.skipped: dict[str, int] = {}

    def state(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "snapshot": self._snapshot_json(),
            "epochs": {str(b): e for b, e in sorted(self._epochs.items())},
        }

    def diff(self, snapshot: ClusterSnapshot) -> list[InputRecord]:
        """The events since the previous snapshot, each a record of its own."""
        return list(self.poll(snapshot))

    def poll(self, snapshot: ClusterSnapshot) -> InputBatch:
        """The events since the previous snapshot: the controller events, then the fetch
        responses as columns."""
        previous, previous_table = self._previous, self._previous_table
        table = PolledPartitions.of(snapshot.partitions)
        # Most polls: no partition changed (only offsets moved, which are not compared):
        # no partition or topic to diff, and the state's partitions as they were. When
        # the same partitions are described, only the rows that differ are diffed one by
        # one (an ISR change: a few rows of 100,000).
        same = previous_table is not None and table.same_partitions(previous_table)
        changed = (
            table.changed_rows(previous_table) if same and previous_table is not None else None
        )
        unchanged = changed is not None and not len(changed)
        out: list[InputRecord] = []
        controller = snapshot.controller_id
        if controller is not None and controller < 0:
            controller = None  # no controller (-1): the events name none

        def event(kind: type[ControllerEvent], **fields: Any) -> None:
            out.append(
                input_record(
                    kind(
                        ts=snapshot.ts,
                        controller_id=controller,
                        controller_epoch=snapshot.controller_epoch,
                        **fields,
                    )
                )
            )

        if (
            snapshot.controller_epoch is not None
            and controller is not None
            and (
                previous is None
                or (previous.controller_id, previous.controller_epoch)
                != (snapshot.controller_id, snapshot.controller_epoch)
            )
        ):
            event(ControllerChange)
        if previous is None or set(previous.brokers) != set(snapshot.brokers):
            live = self._live(previous, snapshot)
            if self._broker_changes:
                event(BrokerChange, live=live)
        if self._partition_events and changed is not None and previous_table is not None:
            topic_of_row = table.topic_of_row()
            for row in changed.tolist():
                change = self._partition_event(
                    table.topics[topic_of_row[row]],
                    int(table.partition[row]),
                    previous_table.info(row),
                    table.info(row),
                )
                if change is not None:
                    kind, fields = change
                    event(kind, **fields)
        elif self._partition_events:
            created, deleted = _topic_changes(previous, snapshot)
            for part in split_created(created):
                event(TopicChange, created=part)
            if deleted:
                event(TopicChange, deleted=tuple(deleted))
            for topic, parts in sorted(snapshot.partitions.items()):
                before_parts = previous.partitions.get(topic, {}) if previous else {}
                for partition, info in sorted(parts.items()):
                    before = before_parts.get(partition)
                    change = self._partition_event(topic, partition, before, info)
                    if change is not None:
                        kind, fields = change
                        event(kind, **fields)
        for topic, value in sorted(snapshot.min_insync_replicas.items()):
            if previous is None or previous.min_insync_replicas.get(topic) != value:
                event(TopicConfig, topic=topic, min_insync_replicas=value)
        for broker, value in sorted(snapshot.replica_lag_time_max_ms.items()):
            if previous is None or previous.replica_lag_time_max_ms.get(broker) != value:
                event(BrokerConfig, broker=broker, replica_lag_time_max_ms=value)
        if snapshot.quorum is not None:
            event(MetadataLogProgress, **self._quorum_progress(snapshot.quorum))
        elif snapshot.answered is not None:
            event(BrokersAnswered, brokers=snapshot.answered)
        fetches = self._fetches(snapshot, table) if self._fetch_responses else FetchRows.empty()
        if not unchanged:
            self._partitions_json = None
        self._previous, self._previous_table = snapshot, table
        return InputBatch(out, fetches)

    def _snapshot_json(self) -> dict[str, Any] | None:
        if self._previous is None:
            return None
        if self._partitions_json is None:
            self._partitions_json = self._previous.partitions_json()
        return self._previous.to_json(self._partitions_json)

    def _partition_event(
        self, topic: str, partition: int, before: PartitionInfo | None, info: PartitionInfo
    ) -> tuple[type[ControllerEvent], dict[str, Any]] | None:
        """The event of a partition's change since the last poll, as (class, fields)."""
        identity = {"topic": topic, "partition": partition, "leader": info.leader}
        if before is None or (before.leader, before.leader_epoch, before.replicas) != (
            info.leader,
            info.leader_epoch,
            info.replicas,
        ):
            if info.leader_epoch is None:
                self._skip("leader_and_isr_without_leader_epoch")
                return None
            return LeaderAndIsr, {
                **identity,
                "leader_epoch": info.leader_epoch,
                "isr": info.isr,
                "replicas": info.replicas,
                "partition_epoch": info.leader_epoch,
            }
        if set(before.isr) != set(info.isr):
            return IsrChange, {
                **identity,
                "old_isr": before.isr,
                "new_isr": info.isr,
                "leader_epoch": info.leader_epoch,
            }
        return None

    def _quorum_progress(self, quorum: QuorumSnapshot) -> dict[str, Any]:
        """The fields of the poll's ``MetadataLogProgress``."""
        return {
            "high_watermark": max(quorum.high_watermark, 0),
            "replicas": tuple(
                ReplicaProgress(
                    broker=r.broker,
                    log_end_offset=r.log_end_offset,
                    last_caught_up_ms=r.last_caught_up_ms,
                    last_fetch_ms=r.last_fetch_ms,
                )
                for r in quorum.replicas
                if r.broker >= 0 and r.log_end_offset >= -1
            ),
            "fetch_timeout_ms": quorum.fetch_timeout_ms,
            "interval_ms": self._interval_ms,
        }

    def _live(
        self, previous: ClusterSnapshot | None, snapshot: ClusterSnapshot
    ) -> tuple[BrokerRegistration, ...]:
        was_live = set(previous.brokers) if previous is not None else set()
        live = []
        for broker in sorted(snapshot.brokers):
            if previous is not None and broker not in was_live and broker in self._epochs:
                self._epochs[broker] += 1  # back after a poll without it
            self._epochs.setdefault(broker, 0)
            live.append(BrokerRegistration(id=broker, epoch=self._epochs[broker]))
        return tuple(live)

    def _fetches(self, snapshot: ClusterSnapshot, table: PolledPartitions) -> FetchRows:
        """One fetch response per follower that answered, partitions in order and each
        one's followers in replica order, as columns joined as arrays: no Python object
        per follower (a poll of 100,000 partitions has 200,000)."""
        if snapshot.offsets_ts is None:
            return FetchRows.empty()
        leos = ReplicaOffsets.aligned(snapshot.log_end_offsets, table)
        hws = PartitionOffsets.aligned(snapshot.high_watermarks, table)
        row_of_slot = table.row_of_slot()
        leader_slot = table.replicas == table.leader[row_of_slot]
        # The leader's log end offset, from its own slot: Kafka's leader is one of the
        # partition's replicas.
        leader_leos = np.full(table.rows, NO_OFFSET, np.int64)
        leader_leos[row_of_slot[leader_slot]] = leos[leader_slot]
        led = (table.leader >= 0) & (table.leader_epoch != NO_EPOCH)
        answered = (leader_leos != NO_OFFSET) & (hws != NO_OFFSET)
        missing = int(np.count_nonzero(led & ~answered))
        if missing:
            self.skipped["fetch_without_leader_offsets"] = (
                self.skipped.get("fetch_without_leader_offsets", 0) + missing
            )
        slots = np.flatnonzero((led & answered)[row_of_slot] & ~leader_slot & (leos != NO_OFFSET))
        rows = row_of_slot[slots]
        return FetchRows.of_columns(
            ts=np.full(len(slots), snapshot.offsets_ts, np.int64),
            topic=np.array(table.topics, dtype=object)[table.topic_of_row()[rows]],
            partition=table.partition[rows],
            leader=table.leader[rows],
            follower=table.replicas[slots],
            leader_epoch=table.leader_epoch[rows],
            fetch_offset=leos[slots],
            leader_leo=leader_leos[rows],
            high_watermark=hws[rows],
        )

    def _skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def _topic_changes(
    previous: ClusterSnapshot | None, snapshot: ClusterSnapshot
) -> tuple[dict[str, dict[int, tuple[int, ...]]], list[str]]:
    before = previous.partitions if previous is not None else {}
    created: dict[str, dict[int, tuple[int, ...]]] = {}
    for topic, parts in sorted(snapshot.partitions.items()):
        new = {p: i.replicas for p, i in sorted(parts.items()) if p not in before.get(topic, {})}
        if new:
            created[topic] = new
    deleted = sorted(set(before) - set(snapshot.partitions))
    return created, deleted
