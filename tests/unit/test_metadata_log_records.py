"""Decoding KRaft metadata records: real payloads asserted by a public test, then the
synthetic encodings of every record type and version isrwatch reads."""

from __future__ import annotations

import pytest

from streaming.feeds.collectors.metadata_log.records import (
    decode_leader_change,
    decode_metadata_value,
)
from streaming.feeds.collectors.metadata_log.wire import DecodeError, Reader, uuid_canonical
from tests.unit import metadata_log_synthetic as syn

# Real: the three record payloads that codecrafters' Kafka tester asserts in its own test
# (internal/cluster_metadata_payload_test.go), written by a Kafka 3.8 broker for topic
# "foo": https://github.com/codecrafters-io/kafka-tester/blob/
# 018f9bc8ee3317001e26280c41e4cac916564e34/internal/cluster_metadata_payload_test.go
CODECRAFTERS_FEATURE_LEVEL = "010c00116d657461646174612e76657273696f6e001400"
CODECRAFTERS_TOPIC = "01020004666f6fbfd99e5e3235455281f8d4af1741970c00"
CODECRAFTERS_PARTITION = (
    "01030100000000bfd99e5e3235455281f8d4af1741970c020000000102000000010101000000010000"
    "000000000000020224973cbadd44cf874445a99619da3400"
)
TOPIC_ID = "v9meXjI1RVKB-NSvF0GXDA"  # bfd99e5e-3235-4552-81f8-d4af1741970c


def test_codecrafters_feature_level_record() -> None:
    record = decode_metadata_value(bytes.fromhex(CODECRAFTERS_FEATURE_LEVEL))
    assert (record.name, record.version) == ("FeatureLevelRecord", 0)
    assert record.fields == {"Name": "metadata.version", "FeatureLevel": 20}


def test_codecrafters_topic_record() -> None:
    record = decode_metadata_value(bytes.fromhex(CODECRAFTERS_TOPIC))
    assert (record.name, record.version) == ("TopicRecord", 0)
    assert record.fields["Name"] == "foo"
    assert uuid_canonical(record.fields["TopicId"]) == "bfd99e5e-3235-4552-81f8-d4af1741970c"


def test_codecrafters_partition_record_v1() -> None:
    record = decode_metadata_value(bytes.fromhex(CODECRAFTERS_PARTITION))
    assert (record.name, record.version) == ("PartitionRecord", 1)
    f = record.fields
    assert (f["PartitionId"], f["TopicId"]) == (0, TOPIC_ID)
    assert (f["Replicas"], f["Isr"], f["Leader"]) == ((1,), (1,), 1)
    assert (f["LeaderEpoch"], f["PartitionEpoch"], f["LeaderRecoveryState"]) == (0, 0, 0)
    assert [uuid_canonical(d) for d in f["Directories"]] == ["0224973c-badd-44cf-8744-45a99619da34"]


# ---------------------------------------------------------------- hand-computed bytes


def test_partition_change_v0_isr_only_by_hand() -> None:
    # frame 1, type 5, version 0 | PartitionId 2 | TopicId 16 bytes | 1 tagged field:
    # tag 0 (Isr), size 9, compact array of 2 (03) + 1 + 3
    value = bytes.fromhex("01050000000002") + bytes(range(16))
    value += bytes.fromhex("010009030000000100000003")
    record = decode_metadata_value(value)
    assert record.fields["PartitionId"] == 2
    assert record.fields["Isr"] == (1, 3)
    assert record.fields["Leader"] == -2  # absent: "the leader did not change"
    assert record.fields["Replicas"] is None


def test_uvarint_over_several_bytes() -> None:
    assert Reader(bytes([0xAC, 0x02])).uvarint() == 300  # 0x2C + (0x02 << 7)


# ---------------------------------------------------------------- every type and version


@pytest.mark.parametrize("version", [0, 1, 2])
def test_partition_record_versions(version: int) -> None:
    value = syn.partition_record(version, TOPIC_ID, 4, [1, 2, 3], [2, 3], 2, 7, 9)
    f = decode_metadata_value(value).fields
    assert (f["PartitionId"], f["Replicas"], f["Isr"], f["Leader"]) == (4, (1, 2, 3), (2, 3), 2)
    assert (f["LeaderEpoch"], f["PartitionEpoch"]) == (7, 9)
    assert (f["Directories"] is None) == (version == 0)
    assert f["EligibleLeaderReplicas"] is None


@pytest.mark.parametrize("version", [0, 1, 2])
def test_partition_change_record_versions(version: int) -> None:
    value = syn.partition_change_record(version, TOPIC_ID, 1, isr=[3], leader=3, replicas=[3, 1])
    f = decode_metadata_value(value).fields
    assert (f["Isr"], f["Leader"], f["Replicas"]) == ((3,), 3, (3, 1))


def test_partition_change_unknown_tag_is_skipped() -> None:
    value = syn.partition_change_record(2, TOPIC_ID, 1, isr=[1], extra_tags={42: b"\x01\x02"})
    assert decode_metadata_value(value).fields["Isr"] == (1,)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_register_broker_record_versions(version: int) -> None:
    f = decode_metadata_value(syn.register_broker_record(version, 3, 4711, fenced=False)).fields
    assert (f["BrokerId"], f["BrokerEpoch"], f["Fenced"]) == (3, 4711, False)
    assert f["EndPoints"][0]["Port"] == 9092
    assert len(f["LogDirs"]) == (1 if version >= 3 else 0)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_broker_registration_change_versions(version: int) -> None:
    value = syn.broker_registration_change_record(version, 2, 88, fenced=1, controlled_shutdown=1)
    f = decode_metadata_value(value).fields
    assert (f["BrokerId"], f["BrokerEpoch"], f["Fenced"]) == (2, 88, 1)
    assert f["InControlledShutdown"] == (1 if version >= 1 else 0)


def test_small_records() -> None:
    assert decode_metadata_value(syn.remove_topic_record(TOPIC_ID)).fields == {"TopicId": TOPIC_ID}
    assert decode_metadata_value(syn.unregister_broker_record(5, 9)).fields == {
        "BrokerId": 5,
        "BrokerEpoch": 9,
    }
    fence = decode_metadata_value(syn.fence_broker_record(1, 6, fence=True))
    unfence = decode_metadata_value(syn.fence_broker_record(1, 6, fence=False))
    assert (fence.name, unfence.name) == ("FenceBrokerRecord", "UnfenceBrokerRecord")
    config = decode_metadata_value(syn.config_record(2, "t", "min.insync.replicas", "2"))
    assert config.fields == {
        "ResourceType": 2,
        "ResourceName": "t",
        "Name": "min.insync.replicas",
        "Value": "2",
    }
    deleted = decode_metadata_value(syn.config_record(2, "t", "min.insync.replicas", None))
    assert deleted.fields["Value"] is None


def test_leader_change_message() -> None:
    message = decode_leader_change(syn.leader_change_value(2, [1, 2, 3]))
    assert message.fields["LeaderId"] == 2
    assert [v["VoterId"] for v in message.fields["Voters"]] == [1, 2, 3]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (syn.frame(5, 3, b""), "newer"),  # PartitionChangeRecord v3 does not exist yet
        (syn.frame(99, 0, b""), "unknown metadata record type"),
        (bytes.fromhex(CODECRAFTERS_TOPIC)[:-3], "needs"),  # cut short
        (bytes.fromhex(CODECRAFTERS_TOPIC) + b"\x00", "left over"),
        (b"\x02\x02\x00", "frame version"),
    ],
)
def test_bad_values_raise(value: bytes, problem: str) -> None:
    with pytest.raises(DecodeError, match=problem):
        decode_metadata_value(value)
