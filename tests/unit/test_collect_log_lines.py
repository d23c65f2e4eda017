"""streaming.feeds.collectors.log_lines and log_messages: Kafka broker log lines of every
supported kind.

The message formats are Kafka's own (the class that logs each one is named next to its
sample; tests/unit/data/kafka_logs/README.md lists them). Expected values are written by
hand from the line.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from streaming.feeds.collectors.log_lines import CONTINUATION, IGNORED, Unparseable, parse_line
from streaming.feeds.collectors.log_messages.controller import (
    BrokerEpochsInitialized,
    BrokerRegistered,
    BrokerSetChanged,
    ControllerElected,
    TopicDeleted,
    TopicsCreated,
)
from streaming.feeds.collectors.log_messages.isr_changes import (
    CommitLogging,
    IsrCommitted,
    IsrProposal,
    IsrUpdateFailed,
)
from streaming.feeds.collectors.log_messages.state_changes import (
    CachedLeaderInfo,
    DeletedFromCache,
    LeaderAndIsrReceived,
    PartitionState,
)
from streaming.feeds.collectors.log_messages.wording import split_topic_partition

UTC_ZONE = ZoneInfo("UTC")
PARTITION_LOGGER = "kafka.cluster.Partition"


def ms(text: str) -> int:
    """Epoch ms of a UTC 'YYYY-MM-DD HH:MM:SS.mmm'."""
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


# ------------------------------------------------------------ lines quoted in Kafka articles


def test_quoted_sample_cached_leader_info() -> None:
    """A state.change.logger line as a reader quoted it from Kafka 2.x ('.' before ms)."""
    line = (
        "[2021-03-16 14:12:39.979] TRACE [Broker id=6] Cached leader info "
        "UpdateMetadataPartitionState(topicName='A', partitionIndex=1, controllerEpoch=29, "
        "leader=2, leaderEpoch=13, isr=[2, 3, 4], zkVersion=25, replicas=[2, 3, 4], "
        "offlineReplicas=[]) for partition A-1 in response to UpdateMetadata request sent by "
        "controller 1 epoch 29 with correlation id 0 (state.change.logger)"
    )
    assert parse_line(line, UTC_ZONE) == CachedLeaderInfo(
        ts=ms("2021-03-16 14:12:39.979"),
        broker=6,
        controller_id=1,
        controller_epoch=29,
        correlation_id=0,
        state=PartitionState("A", 1, 2, 13, (2, 3, 4), (2, 3, 4), (), 25),
    )


def test_quoted_sample_warning_is_ignored() -> None:
    line = (
        "[2021-03-16 15:07:26,164] WARN [ReplicaManager broker=2] Leader 2 failed to record "
        "follower 6's position 11679162 since the replica is not recognized to be one of the "
        "assigned replicas 3,4,2 for partition A-1. Empty records will be returned for this "
        "partition. (kafka.server.ReplicaManager)"
    )
    assert parse_line(line, UTC_ZONE) is IGNORED


def test_quoted_shrink_format() -> None:
    line = (
        "[2021-03-16 15:07:27,000] INFO [Partition A-1 broker=2] Shrinking ISR from 1,2,3 to "
        "1,2. Leader: (highWatermark: 11679100, endOffset: 11679162). Out of sync replicas: "
        "(brokerId: 3, endOffset: 11679100). (kafka.cluster.Partition)"
    )
    assert parse_line(line, UTC_ZONE) == IsrProposal(
        ms("2021-03-16 15:07:27.000"), 2, "A", 1, (1, 2, 3), (1, 2)
    )


# --------------------------------------------------------------------------- header


@pytest.mark.parametrize(
    "line",
    [
        "\tat kafka.controller.KafkaController.process(KafkaController.scala:2413)",
        "org.apache.kafka.common.errors.TimeoutException: Newly added brokers: 1, deleted",
        " (kafka.zk.KafkaZkClient)",
        "",
    ],
)
def test_lines_without_a_header_continue_the_entry(line: str) -> None:
    assert parse_line(line, UTC_ZONE) is CONTINUATION


def test_impossible_date_is_unparseable() -> None:
    line = "[2024-13-40 10:00:00,000] INFO [Controller id=1] whatever (kafka.Foo)"
    assert parse_line(line, UTC_ZONE) == Unparseable("bad_timestamp")


def test_windows_line_ending() -> None:
    line = (
        "[2024-03-11 10:00:00,000] INFO [Topic Deletion Manager 3] Deletion of topic t "
        "successfully completed (kafka.controller.TopicDeletionManager)\r\n"
    )
    assert parse_line(line, UTC_ZONE) == TopicDeleted(ms("2024-03-11 10:00:00.000"), 3, "t")


# --------------------------------------------------------------------------- state change


def test_received_leader_and_isr_kafka_2() -> None:
    """ReplicaManager.becomeLeaderOrFollower, Kafka 2.x: zkVersion."""
    line = (
        "[2024-03-11 10:00:05,120] TRACE [Broker id=2] Received LeaderAndIsr request "
        "LeaderAndIsrPartitionState(topicName='payments', partitionIndex=0, controllerEpoch=7, "
        "leader=1, leaderEpoch=0, isr=[1, 2, 3], zkVersion=0, replicas=[1, 2, 3], "
        "addingReplicas=[], removingReplicas=[], isNew=true) correlation id 5 from controller "
        "1 epoch 7 (state.change.logger)"
    )
    assert parse_line(line, UTC_ZONE) == LeaderAndIsrReceived(
        ms("2024-03-11 10:00:05.120"),
        2,
        1,
        7,
        PartitionState("payments", 0, 1, 0, (1, 2, 3), (1, 2, 3), (), 0),
    )


def test_received_leader_and_isr_kafka_3() -> None:
    """Kafka 3.x: partitionEpoch and leaderRecoveryState; a topic name with dots."""
    line = (
        "[2024-07-18 07:18:55,559] TRACE [Broker id=1] Received LeaderAndIsr request "
        "LeaderAndIsrPartitionState(topicName='pg.public.cards', partitionIndex=3, "
        "controllerEpoch=2, leader=1, leaderEpoch=5, isr=[1, 3], partitionEpoch=11, "
        "replicas=[3, 1, 2], addingReplicas=[], removingReplicas=[], isNew=false, "
        "leaderRecoveryState=0) correlation id 11 from controller 3 epoch 2 (state.change.logger)"
    )
    assert parse_line(line, UTC_ZONE) == LeaderAndIsrReceived(
        ms("2024-07-18 07:18:55.559"),
        1,
        3,
        2,
        PartitionState("pg.public.cards", 3, 1, 5, (1, 3), (3, 1, 2), (), 11),
    )


def test_received_leader_and_isr_without_a_version_is_unparseable() -> None:
    line = (
        "[2024-03-11 10:00:05,120] TRACE [Broker id=2] Received LeaderAndIsr request "
        "LeaderAndIsrPartitionState(topicName='p', partitionIndex=0, controllerEpoch=7, "
        "leader=1, leaderEpoch=0, isr=[1], replicas=[1]) correlation id 5 from controller 1 "
        "epoch 7 (state.change.logger)"
    )
    assert parse_line(line, UTC_ZONE) == Unparseable("malformed_leader_and_isr")


def test_cached_leader_info_with_offline_replicas_and_no_leader() -> None:
    line = (
        "[2024-03-11 10:03:00,100] TRACE [Broker id=3] Cached leader info "
        "UpdateMetadataPartitionState(topicName='my-topic-1', partitionIndex=12, "
        "controllerEpoch=8, leader=-1, leaderEpoch=4, isr=[2], zkVersion=9, replicas=[2, 3], "
        "offlineReplicas=[3]) for partition my-topic-1-12 in response to UpdateMetadata "
        "request sent by controller 1 epoch 8 with correlation id 77 (state.change.logger)"
    )
    assert parse_line(line, UTC_ZONE) == CachedLeaderInfo(
        ms("2024-03-11 10:03:00.100"),
        3,
        1,
        8,
        77,
        PartitionState("my-topic-1", 12, -1, 4, (2,), (2, 3), (3,), 9),
    )


def test_cached_leader_info_for_another_partition_is_unparseable() -> None:
    line = (
        "[2024-03-11 10:03:00,100] TRACE [Broker id=3] Cached leader info "
        "UpdateMetadataPartitionState(topicName='a', partitionIndex=1, controllerEpoch=8, "
        "leader=1, leaderEpoch=4, isr=[1], zkVersion=9, replicas=[1], offlineReplicas=[]) "
        "for partition a-2 in response to UpdateMetadata request sent by controller 1 epoch 8 "
        "with correlation id 77 (state.change.logger)"
    )
    assert parse_line(line, UTC_ZONE) == Unparseable("malformed_cached_leader_info")


def test_deleted_partition_from_metadata_cache() -> None:
    line = (
        "[2024-03-11 10:07:00,010] TRACE [Broker id=2] Deleted partition payments-0 from "
        "metadata cache in response to UpdateMetadata request sent by controller 1 epoch 7 "
        "with correlation id 30 (state.change.logger)"
    )
    assert parse_line(line, UTC_ZONE) == DeletedFromCache(
        ms("2024-03-11 10:07:00.010"), 2, 1, 7, 30, "payments", 0
    )


def test_metadata_cache_summary_line_is_ignored() -> None:
    line = (
        "[2024-03-11 10:00:05,182] INFO [Broker id=2] Add 2 partitions and deleted 0 "
        "partitions from metadata cache in response to UpdateMetadata request sent by "
        "controller 1 epoch 7 with correlation id 6 (state.change.logger)"
    )
    assert parse_line(line, UTC_ZONE) is IGNORED


# --------------------------------------------------------------------------- ISR changes


def test_shrink_kafka_3_with_last_caught_up_time() -> None:
    line = (
        "[2024-05-02 08:16:40.100] INFO [Partition inventory-0 broker=1] Shrinking ISR from "
        "1,2,3 to 1,2. Leader: (highWatermark: 5400, endOffset: 5433). Out of sync replicas: "
        "(brokerId: 3, endOffset: 5400, lastCaughtUpTimeMs: 1714637770000). "
        "(kafka.cluster.Partition)"
    )
    assert parse_line(line, UTC_ZONE) == IsrProposal(
        ms("2024-05-02 08:16:40.100"), 1, "inventory", 0, (1, 2, 3), (1, 2), CommitLogging.INFO
    )


def test_shrink_kafka_1_prefix() -> None:
    """kafka.cluster.Partition's logIdent before 2.0: 'Partition [topic,p] on broker N: '."""
    line = (
        "[2017-07-15 16:17:57,662] INFO Partition [clicks,2] on broker 1: Shrinking ISR from "
        "1,2,0 to 1,2 (kafka.cluster.Partition)"
    )
    assert parse_line(line, UTC_ZONE) == IsrProposal(
        ms("2017-07-15 16:17:57.662"), 1, "clicks", 2, (1, 2, 0), (1, 2), CommitLogging.TRACE
    )


def test_expand() -> None:
    line = (
        "[2022-03-12 18:10:07,381] INFO [Partition __consumer_offsets-43 broker=3] Expanding "
        "ISR from 3 to 3,4 (kafka.cluster.Partition)"
    )
    assert parse_line(line, UTC_ZONE) == IsrProposal(
        ms("2022-03-12 18:10:07.381"), 3, "__consumer_offsets", 43, (3,), (3, 4)
    )


@pytest.mark.parametrize(
    ("message", "isr", "version"),
    [
        ("ISR updated to [2,1] and zkVersion updated to [1]", (2, 1), 1),  # ZooKeeper write
        ("ISR updated from AlterIsr to 2,1 and version updated to [8]", (2, 1), 8),  # 2.7
        ("ISR updated to 1,2  and version updated to 9", (1, 2), 9),  # 3.x
        ("ISR updated to 1 (under-min-isr) and version updated to 4", (1,), 4),  # 3.x
    ],
)
def test_isr_committed_wordings(message: str, isr: tuple[int, ...], version: int) -> None:
    line = f"[2024-05-02 08:16:40,140] INFO [Partition t-7 broker=4] {message} ({PARTITION_LOGGER})"
    assert parse_line(line, UTC_ZONE) == IsrCommitted(
        ms("2024-05-02 08:16:40.140"), 4, "t", 7, isr, version
    )


@pytest.mark.parametrize(
    ("message", "logging"),
    [
        (
            "Cached zkVersion 2 not equal to that in zookeeper, skip updating ISR",
            CommitLogging.INFO,
        ),
        (
            "Cached zkVersion [2] not equal to that in zookeeper, skip updating ISR",
            CommitLogging.TRACE,
        ),
        (
            "Failed to alter partition to PendingShrinkIsr(outOfSyncReplicaIds=Set(3), "
            "sentLeaderAndIsr=LeaderAndIsr(leader=4, leaderEpoch=2, isr=List(4, 2), "
            "leaderRecoveryState=RECOVERED, partitionEpoch=6), leaderRecoveryState=RECOVERED, "
            "lastCommittedState=CommittedPartitionState(isr=Set(4, 2, 3), "
            "leaderRecoveryState=RECOVERED)) since the controller rejected the request with "
            "INELIGIBLE_REPLICA. Partition state has been reset to the latest committed state "
            "CommittedPartitionState(isr=Set(4, 2, 3), leaderRecoveryState=RECOVERED).",
            CommitLogging.INFO,
        ),
    ],
)
def test_isr_update_failures(message: str, logging: CommitLogging) -> None:
    line = f"[2024-05-02 08:18:00,015] INFO [Partition t-7 broker=4] {message} ({PARTITION_LOGGER})"
    assert parse_line(line, UTC_ZONE) == IsrUpdateFailed(
        ms("2024-05-02 08:18:00.015"), 4, "t", 7, logging
    )


def test_isr_committed_in_another_shape_is_unparseable() -> None:
    line = "[2024-05-02 08:16:40,140] INFO [Partition t-7 broker=4] ISR updated to 1,x and version updated to 9 (kafka.cluster.Partition)"  # noqa: E501
    assert parse_line(line, UTC_ZONE) == Unparseable("malformed_isr_committed")


# --------------------------------------------------------------------------- controller


def test_zookeeper_controller_election() -> None:
    line = (
        "[2025-07-17 18:14:11,261] INFO [Controller id=3] 3 successfully elected as the "
        "controller. Epoch incremented to 12 and epoch zk version is now 11 "
        "(kafka.controller.KafkaController)"
    )
    assert parse_line(line, UTC_ZONE) == ControllerElected(ms("2025-07-17 18:14:11.261"), 3, 12)


def test_election_of_another_broker_is_unparseable() -> None:
    line = (
        "[2025-07-17 18:14:11,261] INFO [Controller id=3] 2 successfully elected as the "
        "controller. Epoch incremented to 12 and epoch zk version is now 11 "
        "(kafka.controller.KafkaController)"
    )
    assert parse_line(line, UTC_ZONE) == Unparseable("malformed_controller_elected")


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        # made-up malformed variants of the two partial-event wordings
        (
            "[Controller id=0] Partition T-2 completed preferred replica leader election."
            " New leader is none",
            "malformed_preferred_leader_elected",
        ),
        (
            "[Controller id=0] Partition T completed preferred replica leader election. New leader"
            " is 3",
            "malformed_preferred_leader_elected",
        ),  # no partition number
        (
            "[Controller id=1] Broker x has been elected as the controller, so stopping"
            " the election process.",
            "malformed_controller_seen",
        ),
    ],
)
def test_partial_event_wordings_in_an_unexpected_shape_are_unparseable(
    message: str, reason: str
) -> None:
    line = f"[2021-04-14 10:53:31,013] INFO {message} (kafka.controller.KafkaController)"
    assert parse_line(line, UTC_ZONE) == Unparseable(reason)


@pytest.mark.parametrize(
    "tail",
    [
        "next write offset 1201.",
        "committed offset 1500 and committed epoch 6.",
        "committed offset 1500, committed epoch 6",
    ],
)
def test_kraft_active_controller(tail: str) -> None:
    line = (
        "[2024-05-02 08:15:00.000] INFO [QuorumController id=1] Becoming the active controller"
        f" at epoch 5, {tail} (org.apache.kafka.controller.QuorumController)"
    )
    assert parse_line(line, UTC_ZONE) == ControllerElected(ms("2024-05-02 08:15:00.000"), 1, 5)


def test_initialized_broker_epochs() -> None:
    line = (
        "[2023-10-01 13:57:16,475] INFO [Controller id=1001] Initialized broker epochs cache: "
        "HashMap(1001 -> 28, 1002 -> 4294967345) (kafka.controller.KafkaController)"
    )
    assert parse_line(line, UTC_ZONE) == BrokerEpochsInitialized(
        ms("2023-10-01 13:57:16.475"), 1001, {1001: 28, 1002: 4294967345}
    )


def test_initialized_broker_epochs_of_an_empty_cluster() -> None:
    line = "[2023-10-01 13:57:16,475] INFO [Controller id=1] Initialized broker epochs cache: Map() (kafka.controller.KafkaController)"  # noqa: E501
    assert parse_line(line, UTC_ZONE) == BrokerEpochsInitialized(
        ms("2023-10-01 13:57:16.475"), 1, {}
    )


def test_broker_change() -> None:
    line = (
        "[2024-03-11 10:05:00,000] INFO [Controller id=1] Newly added brokers: 4, deleted "
        "brokers: 3, bounced brokers: 2, all live brokers: 1,2,4 "
        "(kafka.controller.KafkaController)"
    )
    assert parse_line(line, UTC_ZONE) == BrokerSetChanged(
        ms("2024-03-11 10:05:00.000"), 1, (4,), (3,), (2,), (1, 2, 4)
    )


def test_broker_change_with_empty_lists() -> None:
    line = "[2024-03-11 10:05:00,000] INFO [Controller id=1] Newly added brokers: , deleted brokers: 3, bounced brokers: , all live brokers: 1,2 (kafka.controller.KafkaController)"  # noqa: E501
    assert parse_line(line, UTC_ZONE) == BrokerSetChanged(
        ms("2024-03-11 10:05:00.000"), 1, (), (3,), (), (1, 2)
    )


def test_broker_registration() -> None:
    line = (
        "[2023-10-01 13:57:16,288] INFO Registered broker 1001 at path /brokers/ids/1001 with "
        "addresses: PLAINTEXT://kafka:29092,PLAINTEXT_HOST://localhost:9092, czxid (broker "
        "epoch): 28 (kafka.zk.KafkaZkClient)"
    )
    assert parse_line(line, UTC_ZONE) == BrokerRegistered(ms("2023-10-01 13:57:16.288"), 1001, 28)


def test_new_topics() -> None:
    line = (
        "[2023-10-01 13:57:29,606] INFO [Controller id=1001] New topics: [Set(kafka-ckpt, "
        "a-1)], deleted topics: [HashSet()], new partition replica assignment "
        "[Set(TopicIdReplicaAssignment(kafka-ckpt,Some(IXlBGhIoTUaimuoYjPyNRQ),Map(kafka-ckpt-0"
        " -> ReplicaAssignment(replicas=1001, addingReplicas=, removingReplicas=))), "
        "TopicIdReplicaAssignment(a-1,Some(Xq),Map(a-1-0 -> ReplicaAssignment(replicas=2,1,"
        " addingReplicas=, removingReplicas=), a-1-1 -> ReplicaAssignment(replicas=1,2, "
        "addingReplicas=, removingReplicas=))))] (kafka.controller.KafkaController)"
    )
    assert parse_line(line, UTC_ZONE) == TopicsCreated(
        ms("2023-10-01 13:57:29.606"),
        1001,
        {"kafka-ckpt": {0: (1001,)}, "a-1": {0: (2, 1), 1: (1, 2)}},
    )


def test_topic_deletion_completed() -> None:
    line = (
        "[2024-03-11 10:07:00,000] INFO [Topic Deletion Manager 1] Deletion of topic payments "
        "successfully completed (kafka.controller.TopicDeletionManager)"
    )
    assert parse_line(line, UTC_ZONE) == TopicDeleted(ms("2024-03-11 10:07:00.000"), 1, "payments")


def test_other_successfully_completed_lines_are_ignored() -> None:
    line = "[2024-03-11 10:07:00,000] INFO Reassignment of partition t-0 successfully completed (kafka.Foo)"  # noqa: E501
    assert parse_line(line, UTC_ZONE) is IGNORED


@pytest.mark.parametrize(
    ("text", "expected"),
    [("a-0", ("a", 0)), ("my-topic-12", ("my-topic", 12)), ("x-1-2", ("x-1", 2))],
)
def test_topic_partition_names(text: str, expected: tuple[str, int]) -> None:
    assert split_topic_partition(text) == expected
