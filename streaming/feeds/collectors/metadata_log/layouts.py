"""The layouts of the KRaft metadata records, transcribed from Apache Kafka's schemas.

Source: ``metadata/src/main/resources/common/metadata/<Name>.json`` (record types) and
``clients/src/main/resources/common/message/LeaderChangeMessage.json`` (control record)
in apache/kafka, read at the tags 3.3.0 to 3.8.0, at trunk of October 2024 (4.0) and in
the 4.1.1 sources (``ClearElrRecord``). Every
layout is the union of those versions: a field carries the first (and last) version that
has it, a tagged field its tag. All of these messages are flexible in every version.

Only the record types isrwatch needs are decoded field by field; the others are known by
type id (for the counts) and skipped whole, which is safe: a record value is a frame of
its own, so nothing after it depends on reading it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

INT8 = "int8"
INT16 = "int16"
UINT16 = "uint16"
INT32 = "int32"
INT64 = "int64"
BOOL = "bool"
UUID = "uuid"
STRING = "string"
INT32S = "[]int32"
UUIDS = "[]uuid"
STRUCTS = "[]struct"

LATEST = 1 << 15


@dataclass(frozen=True, slots=True)
class Field:
    """One field: present in versions ``since``..``until``; tagged if ``tag`` is set."""

    name: str
    type: str
    since: int = 0
    until: int = LATEST
    tag: int | None = None
    nullable_since: int | None = None
    default: object = None
    fields: tuple[Field, ...] = ()  # of a STRUCTS element

    def present_in(self, version: int) -> bool:
        return self.since <= version <= self.until

    def nullable_in(self, version: int) -> bool:
        return self.nullable_since is not None and version >= self.nullable_since


@dataclass(frozen=True, slots=True)
class Layout:
    type_id: int
    name: str
    max_version: int
    fields: tuple[Field, ...] | None  # None: known type, body not decoded


_ENDPOINT = (
    Field("Name", STRING),
    Field("Host", STRING),
    Field("Port", UINT16),
    Field("SecurityProtocol", INT16),
)
_BROKER_FEATURE = (
    Field("Name", STRING),
    Field("MinSupportedVersion", INT16),
    Field("MaxSupportedVersion", INT16),
)

METADATA_LAYOUTS: Mapping[int, Layout] = {
    layout.type_id: layout
    for layout in (
        Layout(
            0,
            "RegisterBrokerRecord",
            3,
            (
                Field("BrokerId", INT32),
                Field("IsMigratingZkBroker", BOOL, since=2, default=False),
                Field("IncarnationId", UUID),
                Field("BrokerEpoch", INT64),
                Field("EndPoints", STRUCTS, fields=_ENDPOINT),
                Field("Features", STRUCTS, fields=_BROKER_FEATURE),
                Field("Rack", STRING, nullable_since=0),
                Field("Fenced", BOOL, default=True),
                Field("InControlledShutdown", BOOL, since=1, default=False),
                Field("LogDirs", UUIDS, since=3, tag=0, default=()),
            ),
        ),
        Layout(
            1,
            "UnregisterBrokerRecord",
            0,
            (
                Field("BrokerId", INT32),
                Field("BrokerEpoch", INT64),
            ),
        ),
        Layout(2, "TopicRecord", 0, (Field("Name", STRING), Field("TopicId", UUID))),
        Layout(
            3,
            "PartitionRecord",
            2,
            (
                Field("PartitionId", INT32, default=-1),
                Field("TopicId", UUID),
                Field("Replicas", INT32S),
                Field("Isr", INT32S),
                Field("RemovingReplicas", INT32S),
                Field("AddingReplicas", INT32S),
                Field("Leader", INT32, default=-1),
                Field("LeaderRecoveryState", INT8, tag=0, default=0),
                Field("LeaderEpoch", INT32, default=-1),
                Field("PartitionEpoch", INT32, default=-1),
                Field("Directories", UUIDS, since=1),
                Field("EligibleLeaderReplicas", INT32S, since=2, tag=1, nullable_since=2),
                Field("LastKnownElr", INT32S, since=2, tag=2, nullable_since=2),
            ),
        ),
        Layout(
            4,
            "ConfigRecord",
            0,
            (
                Field("ResourceType", INT8),
                Field("ResourceName", STRING),
                Field("Name", STRING),
                Field("Value", STRING, nullable_since=0),
            ),
        ),
        Layout(
            5,
            "PartitionChangeRecord",
            2,
            (
                Field("PartitionId", INT32, default=-1),
                Field("TopicId", UUID),
                Field("Isr", INT32S, tag=0, nullable_since=0),
                Field("Leader", INT32, tag=1, default=-2),
                Field("Replicas", INT32S, tag=2, nullable_since=0),
                Field("RemovingReplicas", INT32S, tag=3, nullable_since=0),
                Field("AddingReplicas", INT32S, tag=4, nullable_since=0),
                Field("LeaderRecoveryState", INT8, tag=5, default=-1),
                Field("Directories", UUIDS, since=1, tag=8, nullable_since=1),
                Field("EligibleLeaderReplicas", INT32S, since=2, tag=6, nullable_since=2),
                Field("LastKnownElr", INT32S, since=2, tag=7, nullable_since=2),
            ),
        ),
        Layout(6, "AccessControlRecord", 0, None),
        Layout(7, "FenceBrokerRecord", 0, (Field("Id", INT32), Field("Epoch", INT64))),
        Layout(8, "UnfenceBrokerRecord", 0, (Field("Id", INT32), Field("Epoch", INT64))),
        Layout(9, "RemoveTopicRecord", 0, (Field("TopicId", UUID),)),
        Layout(10, "DelegationTokenRecord", 0, None),
        Layout(11, "UserScramCredentialRecord", 0, None),
        Layout(12, "FeatureLevelRecord", 0, (Field("Name", STRING), Field("FeatureLevel", INT16))),
        Layout(13, "FailedReplicasRecord", 0, None),
        Layout(14, "ClientQuotaRecord", 0, None),
        Layout(15, "ProducerIdsRecord", 0, None),
        Layout(16, "RemoveFeatureLevelRecord", 0, None),
        Layout(
            17,
            "BrokerRegistrationChangeRecord",
            2,
            (
                Field("BrokerId", INT32),
                Field("BrokerEpoch", INT64),
                Field("Fenced", INT8, tag=0, default=0),
                Field("InControlledShutdown", INT8, since=1, tag=1, default=0),
                Field("LogDirs", UUIDS, since=2, tag=2, default=()),
            ),
        ),
        Layout(18, "AccessControlEntryRecord", 0, None),
        Layout(19, "RemoveAccessControlEntryRecord", 0, None),
        Layout(20, "NoOpRecord", 0, ()),
        Layout(21, "ZkMigrationStateRecord", 0, None),
        Layout(22, "RemoveUserScramCredentialRecord", 0, None),
        Layout(23, "BeginTransactionRecord", 0, None),
        Layout(24, "EndTransactionRecord", 0, None),
        Layout(25, "AbortTransactionRecord", 0, None),
        Layout(26, "RemoveDelegationTokenRecord", 0, None),
        Layout(27, "RegisterControllerRecord", 0, None),
        # 4.0+: written when min.insync.replicas changes; an empty name clears every topic
        Layout(28, "ClearElrRecord", 0, (Field("TopicName", STRING),)),
    )
}
"""Metadata record layouts by type id (the ``apiKey`` of the schema)."""

_VOTER = (Field("VoterId", INT32), Field("VoterDirectoryId", UUID, since=1))

LEADER_CHANGE = Layout(
    -2,
    "LeaderChangeMessage",
    1,
    (
        Field("LeaderId", INT32),
        Field("Voters", STRUCTS, fields=_VOTER),
        Field("GrantingVoters", STRUCTS, fields=_VOTER),
    ),
)
"""The control record a new quorum leader writes first; its leading int16 ``Version``
field is read apart, since it is the version the rest is read at."""
