"""``collect admin`` on a KRaft cluster: DescribeQuorum -> MetadataLogProgress.

The embedded test broker (Tansu) does not answer DescribeQuorum, so the answer is built
here byte by byte from Apache Kafka's public description of it,
https://github.com/apache/kafka/blob/3.8.0/clients/src/main/resources/common/message/DescribeQuorumResponse.json
(version 1, KIP-836: flexible, compact arrays and strings, a tagged-field section after
each struct), and decoded by kafka-python's own DescribeQuorumResponse, the class the
collector's request is answered with. SYNTHETIC bytes: no broker wrote them.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin.cluster import DescribeQuorumResponse

from state import parse_json_line
from state.events import DeadLetter, MetadataLogProgress, ReplicaProgress
from streaming.feeds.collectors.admin_poller import (
    AdminPoller,
    ClusterSnapshot,
    PartitionInfo,
    QuorumReplica,
    QuorumSnapshot,
)
from streaming.feeds.collectors.admin_source import quorum_snapshot
from tests.unit.metadata_log_synthetic import i16, i32, i64

NO_TAGS = b"\x00"


def replica_state(replica: int, leo: int, last_fetch: int, last_caught_up: int) -> bytes:
    # ReplicaState v1: ReplicaId, LogEndOffset, LastFetchTimestamp, LastCaughtUpTimestamp
    return i32(replica) + i64(leo) + i64(last_fetch) + i64(last_caught_up) + NO_TAGS


def describe_quorum_v1() -> bytes:
    """Controller 3000 leads epoch 7 at high watermark 1500; brokers 1 and 2 observe, 2
    is behind and never caught up (-1)."""
    name = b"__cluster_metadata"
    partition = (
        i32(0)
        + i16(0)  # PartitionIndex, ErrorCode
        + i32(3000)
        + i32(7)
        + i64(1500)  # LeaderId, LeaderEpoch, HighWatermark
        + bytes([2])
        + replica_state(3000, 1500, 1_700_000_000_900, 1_700_000_000_900)
        + bytes([3])
        + replica_state(1, 1500, 1_700_000_000_800, 1_700_000_000_800)
        + replica_state(2, 1200, 1_700_000_000_700, -1)
        + NO_TAGS
    )
    topic = bytes([len(name) + 1]) + name + bytes([2]) + partition + NO_TAGS
    return i16(0) + bytes([2]) + topic + NO_TAGS  # ErrorCode, Topics, tagged fields


def decoded(data: bytes) -> dict[str, Any]:
    """The response as the collector reads it: kafka-python's decoding, as a dict."""
    result: dict[str, Any] = DescribeQuorumResponse.decode(data, version=1).to_dict()
    return result


def test_hand_built_response_decodes_to_the_quorum() -> None:
    quorum = quorum_snapshot(decoded(describe_quorum_v1()))
    assert quorum == QuorumSnapshot(
        leader=3000,
        epoch=7,
        high_watermark=1500,
        replicas=(
            QuorumReplica(1, 1500, 1_700_000_000_800, 1_700_000_000_800),
            QuorumReplica(2, 1200, None, 1_700_000_000_700),
            QuorumReplica(3000, 1500, 1_700_000_000_900, 1_700_000_000_900),
        ),
    )


def test_a_partition_in_error_gives_no_quorum() -> None:
    described = decoded(describe_quorum_v1())
    described["topics"][0]["partitions"][0]["error_code"] = 6  # NOT_LEADER_OR_FOLLOWER
    assert quorum_snapshot(described) is None


def test_every_poll_publishes_the_progress() -> None:
    quorum = QuorumSnapshot(
        3000, 7, 1500, (QuorumReplica(1, 1500, 900, 950), QuorumReplica(2, 1200, None, 700)), 2000
    )
    poller = AdminPoller(fetch_responses=False, broker_changes=False, interval_ms=10_000)
    for ts in (1000, 11_000):
        snapshot = ClusterSnapshot(
            ts=ts,
            controller_id=3000,
            controller_epoch=7,
            brokers=(1, 2),
            partitions={},
            quorum=quorum,
        )
        (*_, progress) = poller.diff(snapshot)
        parsed = parse_json_line(progress.source, dict(progress.value))
        assert not isinstance(parsed, DeadLetter)
        assert parsed == MetadataLogProgress(
            ts=ts,
            controller_id=3000,
            controller_epoch=7,
            high_watermark=1500,
            fetch_timeout_ms=2000,
            interval_ms=10_000,
            replicas=(
                ReplicaProgress(
                    broker=1, log_end_offset=1500, last_caught_up_ms=900, last_fetch_ms=950
                ),
                ReplicaProgress(broker=2, log_end_offset=1200, last_fetch_ms=700),
            ),
        )


def test_beside_the_metadata_log_collector_no_partition_events() -> None:
    """collect metadata-log has every partition change with Kafka's epochs; admin's
    polled view of the same changes (partition epoch bounded by the leader epoch, time of
    the poll) would only blur them."""
    partitions = {"t": {0: PartitionInfo(1, 4, (1, 2), (1, 2))}}
    poller = AdminPoller(fetch_responses=False, broker_changes=False, partition_events=False)
    first = ClusterSnapshot(
        ts=1000,
        controller_id=1,
        controller_epoch=None,
        brokers=(1, 2),
        partitions=partitions,
        min_insync_replicas={"t": 2},
    )
    assert [e.event_type for e in poller.diff(first)] == ["TopicConfig"]
    shrunk = {"t": {0: PartitionInfo(1, 4, (1, 2), (1,))}}
    second = ClusterSnapshot(
        ts=2000,
        controller_id=1,
        controller_epoch=None,
        brokers=(1, 2),
        partitions=shrunk,
        min_insync_replicas={"t": 2},
    )
    assert poller.diff(second) == []
