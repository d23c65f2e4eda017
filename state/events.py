"""Typed events of the input contract (docs/event-contract.md), as the parser produces them.

Field names are the wire names; lists become tuples. ``controller_id`` and
``controller_epoch`` are set when the controller produced the event; the model fences
events whose ``controller_epoch`` is older than the newest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

NO_LEADER = -1
"""``leader`` of a partition that has no leader (OfflinePartition)."""

LEADER_DURING_DELETE = -2
"""``leader`` in an UpdateMetadata partition state: the partition is being deleted."""

FETCH_ERROR_NONE = "NONE"

MOST_ROWS_PER_PACK = 4096
"""Fetch responses per fetch pack (docs/event-contract.md#fetch-packs) at the most, as
this release's producers write them (``streaming.feeds.wire``): about 350 KB with
20-character topic names. A larger pack costs no less to read per row
(``bench/packed_wire_bench.py``: 0.07 us a row from 1,000 rows on), and Kafka's default
record limit is 1 MB. The job's source takes it as the most events a record holds when
it sizes a micro-batch in events (``kafka_source.planner.cap_events``)."""


class Source(StrEnum):
    """The two input streams, by their logical (default topic) names."""

    CONTROLLER_EVENTS = "controller-events"
    FETCH_RESPONSES = "fetch-responses"


@dataclass(frozen=True, slots=True)
class TopicPartition:
    topic: str
    partition: int

    def key(self) -> str:
        """The record key of events about this partition: ``"<topic>:<partition>"``."""
        return f"{self.topic}:{self.partition}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerEvent:
    """Fields common to every controller event. ``metadata_offset`` (KRaft) is the offset
    in ``__cluster_metadata`` of the record the event comes from: the model reads it on
    ``LeaderAndIsr`` and ``IsrChange`` (which brokers have applied the change); the KRaft
    producers put it on every event they derive from the log."""

    ts: int
    controller_id: int | None = None
    controller_epoch: int | None = None
    metadata_offset: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsr(ControllerEvent):
    """The controller's decision for a partition. The *partial* form (docs/event-contract.md)
    states only the new leader: a log line such as ``completed preferred replica leader
    election. New leader is 3`` names no epoch, ISR or replicas. Its four state fields are
    then all None (the schema allows all of them or none): test ``is_partial``."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int | None = None
    isr: tuple[int, ...] | None = None
    replicas: tuple[int, ...] | None = None
    partition_epoch: int | None = None
    # Kafka 4.0+ (KIP-966): the partition's ELR and last known ELR after the decision,
    # stated together by a producer that knows them (the KRaft metadata log); None:
    # not stated (state.eligible_leaders).
    elr: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None

    @property
    def is_partial(self) -> bool:
        """Only the leader is stated (no epochs, ISR or replicas)."""
        return self.leader_epoch is None


@dataclass(frozen=True, slots=True, kw_only=True)
class IsrChange(ControllerEvent):
    topic: str
    partition: int
    leader: int
    new_isr: tuple[int, ...]
    # None in the partial form: the line states no ISR before the change (a Kafka 2.8+
    # commit line); the model's own ISR is then the old one.
    old_isr: tuple[int, ...] | None = None
    leader_epoch: int | None = None
    partition_epoch: int | None = None
    # As on LeaderAndIsr: the ELR after the change, where the producer knows it.
    elr: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class IsrChangePropagation(ControllerEvent):
    broker: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataPartitionState:
    """One partition state of an UpdateMetadata request, as a broker cached it."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadata(ControllerEvent):
    broker: int
    partitions: tuple[MetadataPartitionState, ...]
    live_brokers: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistration:
    id: int
    epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerChange(ControllerEvent):
    live: tuple[BrokerRegistration, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerChange(ControllerEvent):
    """A controller failover; ``controller_id`` is required. ``controller_epoch`` is None
    in the partial form (a losing broker's ``Broker N has been elected as the controller``
    names none): such an event fences nothing (docs/event-contract.md)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicChange(ControllerEvent):
    created: Mapping[str, Mapping[int, tuple[int, ...]]] = field(default_factory=dict)
    deleted: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ClearElr(ControllerEvent):
    """Kafka 4.0+: the controller emptied the ELR and last known ELR of every partition of
    ``topic``, or of every topic when None (``ClearElrRecord``, written when
    ``min.insync.replicas`` changes)."""

    topic: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicConfig(ControllerEvent):
    topic: str
    min_insync_replicas: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig(ControllerEvent):
    broker: int
    replica_lag_time_max_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaProgress:
    """How far one replica of the KRaft metadata log has fetched, as the quorum leader
    reports it (DescribeQuorum, KIP-836)."""

    broker: int
    log_end_offset: int
    last_caught_up_ms: int | None = None
    last_fetch_ms: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataLogProgress(ControllerEvent):
    """KRaft: each broker's position in ``__cluster_metadata`` at ``ts``. A broker has
    applied a committed record once its log end offset is past the record's offset."""

    high_watermark: int
    replicas: tuple[ReplicaProgress, ...]
    fetch_timeout_ms: int | None = None  # controller.quorum.fetch.timeout.ms, if known
    interval_ms: int | None = None  # the next report is due by ts + interval_ms


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokersAnswered(ControllerEvent):
    """The live brokers that answered every request a poll of the admin API sent them,
    the poll taken at ``ts``: news that each one runs, where no DescribeQuorum report
    tells of it (ZooKeeper mode). A broker that did not answer in time is not listed."""

    brokers: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchResponse:
    """One follower fetch of one partition served by a leader."""

    ts: int
    topic: str
    partition: int
    leader: int
    follower: int
    leader_epoch: int
    fetch_offset: int
    leader_leo: int
    high_watermark: int
    log_start_offset: int | None = None
    error: str = FETCH_ERROR_NONE
    bytes: int | None = None


CONTROLLER_EVENT_TYPES: Mapping[str, type[ControllerEvent]] = {
    cls.__name__: cls
    for cls in (
        LeaderAndIsr,
        IsrChange,
        IsrChangePropagation,
        UpdateMetadata,
        BrokerChange,
        ControllerChange,
        TopicChange,
        TopicConfig,
        ClearElr,
        BrokerConfig,
        MetadataLogProgress,
        BrokersAnswered,
    )
}
"""The ``type`` field of a controller event names its class."""

Event = ControllerEvent | FetchResponse


class DeadLetterReason(StrEnum):
    """Why an input record was not applied. Every rejected record carries one."""

    # The parser's reasons: the record does not meet the contract.
    INVALID_JSON = "invalid_json"
    NOT_AN_OBJECT = "not_an_object"
    MISSING_FIELD = "missing_field"
    WRONG_TYPE = "wrong_type"
    INVALID_VALUE = "invalid_value"
    UNKNOWN_TYPE = "unknown_type"
    INVALID_PACK = "invalid_pack"  # a fetch pack that cannot be read: dead whole
    # The model's reasons: a valid event that Kafka itself would ignore.
    STALE_CONTROLLER_EPOCH = "stale_controller_epoch"
    STALE_LEADER_EPOCH = "stale_leader_epoch"
    STALE_PARTITION_EPOCH = "stale_partition_epoch"
    NOT_LEADER = "not_leader"
    UNKNOWN_PARTITION = "unknown_partition"
    UNKNOWN_LEADER_EPOCH = "unknown_leader_epoch"
    NOT_ASSIGNED_REPLICA = "not_assigned_replica"
    # The streaming job's reasons (event time and delivery).
    LATE = "late"
    DUPLICATE = "duplicate"


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A record that was not applied, kept with its raw value and the reason."""

    source: str  # a Source, or the file the record came from
    raw: str
    reason: DeadLetterReason
    detail: str
    pack_row: int | None = None
    """The row of a fetch pack this letter is (docs/event-contract.md#fetch-packs): many
    letters may come from one Kafka record. None: the letter is a whole record."""
