"""The partition health record (docs/health-record.md): the product of ``state``.

:meth:`state.partition_health.HealthFrame.records` builds them, ``state.causes`` gives
them their causes; the job writes them to the ``partition-health`` topic, ``isrwatch
replay`` prints them, and every reader inside isrwatch (the exporter, the live view, the
restart check, the timeline) reads their attributes.

Field order is the order on the wire (msgspec encodes fields in definition order, which
the structs keep with ``kw_only``), so the JSON stays what docs/health-record.md shows.
A field that records of an earlier release lack has a default, so that they still decode
(:func:`decode_record`): records live on in the compacted topic and in ``--health-out``
files across upgrades. ``tests/unit/test_health_schema.py`` holds these structs and
conf/schemas/partition-health.schema.json to the same fields.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from state.cause_kinds import NO_BROKER, CauseKind

# The record's words for the model's codes; tests/unit/test_health_schema.py holds each
# equal to its enum (FollowerStatus, MetadataState, LagTimeUnknown) and to the schema.
StatusName = Literal[
    "IN_SYNC",
    "LAGGING",
    "SHRINK_ELIGIBLE",
    "SHRINK_OVERDUE",
    "CATCHING_UP",
    "OUT_OF_SYNC",
    "OFFLINE",
]
MetadataStateName = Literal["CONSISTENT", "STALE_EXPECTED", "STALE_OVERDUE"]
OfflineRecoveryName = Literal["ISR", "ELR", "UNCLEAN_ONLY"]
"""How an offline partition can get a leader again (docs/domain.md#offline-recovery):
a member of its ISR returns; its ISR is empty and a member of its ELR returns (Kafka
4.0+); or only an unclean election, which loses the writes the chosen replica lacks."""
LagTimeUnknownName = Literal["NEVER_CAUGHT_UP"]

KAFKA_DEFAULT_MIN_INSYNC_REPLICAS = 1
"""``min.insync.replicas``' default in Kafka (TopicConfig, every release): what a record
written before the field existed (before the restart check needed it) is read with."""


class Cause(msgspec.Struct, frozen=True):
    """Why a follower or a partition is unhealthy (docs/causes.md)."""

    kind: CauseKind
    broker: int | None  # the broker held responsible; None: none is
    text: str  # one sentence, with the counts behind it


def cause(kind: CauseKind, broker: int, text: str) -> Cause:
    """The cause of ``kind`` blaming ``broker`` (NO_BROKER: none)."""
    return Cause(kind, None if broker == NO_BROKER else broker, text)


class MetadataHealth(msgspec.Struct, frozen=True):
    """Whether brokers' metadata caches still show an old ISR
    (docs/domain.md#metadata-staleness)."""

    stale_brokers: list[int]
    state: MetadataStateName
    blackout_earliest_ms: int | None  # the propagation window; None without one
    blackout_latest_ms: int | None


class FollowerHealth(msgspec.Struct, frozen=True, kw_only=True):
    """One follower (a replica that is not the leader) of a partition."""

    broker: int
    in_isr: bool
    fetch_offset: int | None  # None until it fetched from the current leader
    last_caught_up_ms: int | None  # None: not caught up since its leader's election
    lag_time_ms: int | None
    # Why lag_time_ms is None (a state.lag_time.LagTimeUnknown); records before it lack it.
    lag_time_unknown: LagTimeUnknownName | None = None
    lag_messages: int | None
    status: StatusName
    # SHRINK_ELIGIBLE and SHRINK_OVERDUE only: absent from the JSON of any other status
    # (UNSET), null when neither a catch-up nor its entry into the ISR was seen.
    shrink_by_ms: int | msgspec.UnsetType | None = msgspec.UNSET
    # Present as shrink_by_ms is: the leader's isr-expiration run that removes it, null
    # while the leader's runs are not known (state.expiration_schedule).
    shrink_at_ms: int | msgspec.UnsetType | None = msgspec.UNSET
    cause: Cause | None = None  # None while IN_SYNC, and until causes are attributed

    @property
    def shrink_deadline_ms(self) -> int | None:
        """The shrink deadline, None where the record has none (absent or null)."""
        return None if isinstance(self.shrink_by_ms, msgspec.UnsetType) else self.shrink_by_ms


class HealthRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The health of one partition at ``as_of_ms`` (docs/health-record.md)."""

    topic: str
    partition: int
    as_of_ms: int
    leader: int  # -1: none
    leader_epoch: int
    replicas: list[int]  # preferred leader first
    isr: list[int]
    # Kafka 4.0+ (KIP-966): Eligible Leader Replicas and the last known ELR; None where
    # no event stated them (ZooKeeper, before 4.0, or a producer that does not know).
    elr: list[int] | None = None
    last_known_elr: list[int] | None = None
    min_insync_replicas: int = KAFKA_DEFAULT_MIN_INSYNC_REPLICAS  # of the topic
    high_watermark: int
    # Under min ISR on Kafka 3.7+ (KAFKA-15583): the leader does not advance it, so
    # consumers see none of the writes appended meanwhile (acks=1 ones included).
    high_watermark_frozen: bool = False
    leader_leo: int
    under_replicated: bool
    under_min_isr: bool
    at_min_isr: bool
    offline: bool
    offline_recovery: OfflineRecoveryName | None = None  # None while it has a leader
    # The partition's latest news of its leader, while it is more than T / 2 old (the
    # leader is silent: state.leader_news); None while it is heard of, or not judged.
    leader_silent_since_ms: int | None = None
    predicted_under_replicated: bool
    followers: list[FollowerHealth]
    metadata: MetadataHealth
    cause: Cause | None = None  # the principal cause; None while healthy

    def conditions(self) -> dict[str, bool]:
        """The partition's conditions (docs/domain.md#partition-health) by name: its
        flags, and ``offline_unclean_only`` for an ``offline_recovery`` of UNCLEAN_ONLY."""
        return {
            "under_replicated": self.under_replicated,
            "under_min_isr": self.under_min_isr,
            "at_min_isr": self.at_min_isr,
            "offline": self.offline,
            "offline_unclean_only": self.offline_recovery == "UNCLEAN_ONLY",
            "high_watermark_frozen": self.high_watermark_frozen,
            "leader_silent": self.leader_silent_since_ms is not None,
            "predicted_under_replicated": self.predicted_under_replicated,
        }

    @property
    def key(self) -> str:
        """Its key in the compacted ``partition-health`` topic."""
        return f"{self.topic}:{self.partition}"


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(HealthRecord)


def encode_record(record: HealthRecord) -> bytes:
    """The record's JSON, as the topic, ``--health-out`` and replay carry it."""
    return _ENCODER.encode(record)


def decode_record(text: str | bytes) -> HealthRecord:
    """A record from its JSON (any release's); ``msgspec.ValidationError`` (a
    ``msgspec.DecodeError``) when the text is not a health record."""
    return _DECODER.decode(text)
