"""KRaft brokers' and controllers' lines that state partition states, leadership and topic
changes (issue 27): each sample is a real line, copied from the generated corpus
(tests/unit/data/kafka_logs/generated/<run>/logs/apache/...), written by a real broker
of that release in the lab. Expected values are written by hand from the line."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from streaming.feeds.collectors.log_lines import IGNORED, parse_line
from streaming.feeds.collectors.log_messages.controller import TopicsCreated, TopicsDeleted
from streaming.feeds.collectors.log_messages.state_changes import (
    LeadershipStarted,
    PartitionState,
    PartitionStateApplied,
)
from streaming.feeds.collectors.log_translator import LogTranslator

UTC_ZONE = ZoneInfo("UTC")


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


# 3.6-kraft, broker-1/state-change.log
SKIPPED_FOLLOWER_3_6 = (
    "[2026-11-27 06:15:46,116] INFO [Broker id=1] Skipped the become-follower state change"
    " for orders-1 with topic id Some(clW6aup0Tgy_209aGSKLBA) and partition state"
    " LeaderAndIsrPartitionState(topicName='orders', partitionIndex=1, controllerEpoch=-1,"
    " leader=3, leaderEpoch=0, isr=[3, 1], partitionEpoch=1, replicas=[3, 1, 2],"
    " addingReplicas=[], removingReplicas=[], isNew=false, leaderRecoveryState=0) since it is"
    " already a follower with leader epoch 0. (state.change.logger)"
)
# 3.6-kraft, broker-1/state-change.log
SKIPPED_LEADER_3_6 = (
    "[2026-11-27 06:15:46,391] INFO [Broker id=1] Skipped the become-leader state change for"
    " orders-0 with topic id Some(clW6aup0Tgy_209aGSKLBA) and partition state"
    " LeaderAndIsrPartitionState(topicName='orders', partitionIndex=0, controllerEpoch=-1,"
    " leader=1, leaderEpoch=0, isr=[1, 3], partitionEpoch=1, replicas=[1, 2, 3],"
    " addingReplicas=[], removingReplicas=[], isNew=false, leaderRecoveryState=0) since it is"
    " already the leader with leader epoch 0. Current high watermark 218, ISR [1,3], adding"
    " replicas [] and removing replicas []. (state.change.logger)"
)
# 3.3-kraft, broker-1/state-change.log
LEADER_STARTS_3_3 = (
    "[2026-11-27 06:17:49,605] INFO [Broker id=1] Leader orders-0 with topic id"
    " Some(v8dGXSv6SQafmwdeCZqjSQ) starts at leader epoch 0 from offset 0 with partition epoch"
    " 0, high watermark 0, ISR [1,3,2], adding replicas [] and removing replicas []. Previous"
    " leader epoch was -1. (state.change.logger)"
)
# 3.3-kraft, broker-1/state-change.log
FOLLOWER_STARTS_3_3 = (
    "[2026-11-27 06:18:31,890] INFO [Broker id=1] Follower orders-0 starts at leader epoch 2"
    " from offset 364 with partition epoch 3 and high watermark 286. Current leader is 3."
    " Previous leader epoch was -1. (state.change.logger)"
)
# 4.1-kraft, broker-1/state-change.log: 3.7+ name the previous leader; 3.9 and 4.x put a
# space before the leader line's period
LEADER_STARTS_4_1 = (
    "[2026-11-27 06:13:38,168] INFO [Broker id=1] Leader orders-0 with topic id"
    " Some(r6G47xBnQqevNc72Ocnygg) starts at leader epoch 2 from offset 873 with partition"
    " epoch 5, high watermark 872, ISR [3,1], adding replicas [] and removing replicas [] ."
    " Previous leader Some(1) and previous leader epoch was 2. (state.change.logger)"
)
# 4.1-kraft, broker-3/controller.log (the active controller)
CREATE_TOPICS_4_1 = (
    "[2026-11-27 06:12:48,593] INFO [QuorumController id=3] CreateTopics result(s):"
    " CreatableTopic(name='orders', numPartitions=-1, replicationFactor=-1,"
    " assignments=[CreatableReplicaAssignment(partitionIndex=0, brokerIds=[1, 2, 3]),"
    " CreatableReplicaAssignment(partitionIndex=1, brokerIds=[3, 1, 2])], configs=[]): SUCCESS,"
    " CreatableTopic(name='moving', numPartitions=-1, replicationFactor=-1,"
    " assignments=[CreatableReplicaAssignment(partitionIndex=0, brokerIds=[1, 2])],"
    " configs=[]): SUCCESS, CreatableTopic(name='doomed', numPartitions=-1,"
    " replicationFactor=-1, assignments=[CreatableReplicaAssignment(partitionIndex=0,"
    " brokerIds=[1, 3, 2])], configs=[]): SUCCESS"
    " (org.apache.kafka.controller.ReplicationControlManager)"
)
# 4.1-kraft, broker-1/controller.log
DELETE_TOPICS_4_1 = (
    "[2026-11-27 06:14:09,534] INFO [QuorumController id=1] DeleteTopics result(s): {id:"
    " q3Njnl8CQC6iCYvzYt0fDw, name: doomed, result: SUCCESS}"
    " (org.apache.kafka.controller.ReplicationControlManager)"
)


def test_a_kraft_broker_that_already_follows_states_the_new_partition_state() -> None:
    assert parse_line(SKIPPED_FOLLOWER_3_6, UTC_ZONE) == PartitionStateApplied(
        ms("2026-11-27 06:15:46.116"),
        1,
        PartitionState("orders", 1, 3, 0, (3, 1), (3, 1, 2), (), 1),
    )


def test_a_kraft_broker_that_already_leads_states_the_new_partition_state() -> None:
    assert parse_line(SKIPPED_LEADER_3_6, UTC_ZONE) == PartitionStateApplied(
        ms("2026-11-27 06:15:46.391"),
        1,
        PartitionState("orders", 0, 1, 0, (1, 3), (1, 2, 3), (), 1),
    )


def test_leader_and_follower_lines_state_the_leader_and_epochs() -> None:
    assert parse_line(LEADER_STARTS_3_3, UTC_ZONE) == LeadershipStarted(
        ms("2026-11-27 06:17:49.605"), 1, "orders", 0, 1, 0, 0, (1, 3, 2)
    )
    assert parse_line(FOLLOWER_STARTS_3_3, UTC_ZONE) == LeadershipStarted(
        ms("2026-11-27 06:18:31.890"), 1, "orders", 0, 3, 2, 3, None
    )
    assert parse_line(LEADER_STARTS_4_1, UTC_ZONE) == LeadershipStarted(
        ms("2026-11-27 06:13:38.168"), 1, "orders", 0, 1, 2, 5, (3, 1)
    )


def test_kraft_controller_topic_results() -> None:
    assert parse_line(CREATE_TOPICS_4_1, UTC_ZONE) == TopicsCreated(
        ms("2026-11-27 06:12:48.593"),
        3,
        {"orders": {0: (1, 2, 3), 1: (3, 1, 2)}, "moving": {0: (1, 2)}, "doomed": {0: (1, 3, 2)}},
    )
    assert parse_line(DELETE_TOPICS_4_1, UTC_ZONE) == TopicsDeleted(
        ms("2026-11-27 06:14:09.534"), 1, ("doomed",)
    )


def test_a_failed_creation_states_nothing() -> None:
    """The same line with the result a second request for the topic gets (edited: the
    lab's runs create each topic once)."""
    failed = CREATE_TOPICS_4_1.replace("SUCCESS", "TOPIC_ALREADY_EXISTS")
    assert parse_line(failed, UTC_ZONE) is IGNORED


def translate(*lines: str) -> list[dict[str, Any]]:
    translator = LogTranslator()
    records: list[Any] = [parse_line(line, UTC_ZONE) for line in lines]
    return [dict(event.value) for event in translator.translate(records)]


def test_applied_states_are_full_leader_and_isr_once_per_version() -> None:
    events = translate(
        SKIPPED_FOLLOWER_3_6, SKIPPED_FOLLOWER_3_6.replace("[Broker id=1]", "[Broker id=2]")
    )
    assert [
        {
            k: e[k]
            for k in (
                "type",
                "topic",
                "partition",
                "leader",
                "leader_epoch",
                "isr",
                "replicas",
                "partition_epoch",
            )
        }
        for e in events
    ] == [
        {
            "type": "LeaderAndIsr",
            "topic": "orders",
            "partition": 1,
            "leader": 3,
            "leader_epoch": 0,
            "isr": [3, 1],
            "replicas": [3, 1, 2],
            "partition_epoch": 1,
        }
    ]
    assert "controller_id" not in events[0]  # a KRaft broker's line names no controller


def test_leadership_lines_are_partial_leader_and_isr_once_per_version() -> None:
    follower_2 = FOLLOWER_STARTS_3_3.replace("[Broker id=1]", "[Broker id=2]")
    events = translate(FOLLOWER_STARTS_3_3, follower_2)
    assert [(e["type"], e["topic"], e["partition"], e["leader"]) for e in events] == [
        ("LeaderAndIsr", "orders", 0, 3)
    ]
    assert "leader_epoch" not in events[0]


# 4.1-kraft, broker-3/server.log and state-change.log: the leader's shrink of orders-1 was
# applied from the metadata log before its AlterPartition response, and no commit line came.
SHRINK_PROPOSAL_4_1 = (
    "[2026-11-27 06:12:58,443] INFO [Partition orders-1 broker=3] Shrinking ISR from 3,1,2 to"
    " 3,1. Leader: (highWatermark: 33, endOffset: 146). Out of sync replicas: (brokerId: 2,"
    " endOffset: 33, lastCaughtUpTimeMs: 1795759972082). (kafka.cluster.Partition)"
)
LEADER_APPLIED_SHRINK_4_1 = (
    "[2026-11-27 06:12:58,530] INFO [Broker id=3] Skipped the become-leader state change for"
    " orders-1 with topic id Some(r6G47xBnQqevNc72Ocnygg) and partition state"
    " LeaderAndIsrPartitionState(topicName='orders', partitionIndex=1, controllerEpoch=-1,"
    " leader=3, leaderEpoch=0, isr=[3, 1], partitionEpoch=1, replicas=[3, 1, 2],"
    " addingReplicas=[], removingReplicas=[], isNew=false, leaderRecoveryState=0) since it is"
    " already the leader with leader epoch 0. Current high watermark 33, ISR [3,1], adding"
    " replicas [] and removing replicas []. (state.change.logger)"
)


def test_a_leader_applying_its_own_shrink_commits_the_proposal() -> None:
    events = translate(SHRINK_PROPOSAL_4_1, LEADER_APPLIED_SHRINK_4_1)
    changes = [e for e in events if e["type"] == "IsrChange"]
    assert [
        (e["topic"], e["partition"], e["leader"], e["old_isr"], e["new_isr"], e["partition_epoch"])
        for e in changes
    ] == [("orders", 1, 3, [3, 1, 2], [3, 1], 1)]
    commit = (
        "[2026-11-27 06:12:58,600] INFO [Partition orders-1 broker=3] ISR updated to 3,1  and"
        " version updated to 1 (kafka.cluster.Partition)"
    )  # had it come (invented): the same change, not sent twice
    again = translate(SHRINK_PROPOSAL_4_1, LEADER_APPLIED_SHRINK_4_1, commit)
    assert len([e for e in again if e["type"] == "IsrChange"]) == 1


# 4.1-kraft, broker-3/state-change.log (06:13:54,004) and broker-1/server.log (06:13:54,010):
# a follower applied partition epoch 6 before its leader logged the change.
FOLLOWER_FIRST_4_1 = (
    "[2026-11-27 06:13:54,004] INFO [Broker id=3] Skipped the become-follower state change for"
    " orders-0 with topic id Some(r6G47xBnQqevNc72Ocnygg) and partition state"
    " LeaderAndIsrPartitionState(topicName='orders', partitionIndex=0, controllerEpoch=-1,"
    " leader=1, leaderEpoch=2, isr=[3, 1, 2], partitionEpoch=6, replicas=[1, 2, 3],"
    " addingReplicas=[], removingReplicas=[], isNew=false, leaderRecoveryState=0) since it is"
    " already a follower with leader epoch 2. (state.change.logger)"
)
LEADER_COMMIT_4_1 = (
    "[2026-11-27 06:13:54,010] INFO [Partition orders-0 broker=1] ISR updated to 3,1,2  and"
    " version updated to 6 (kafka.cluster.Partition)"
)


def test_a_commit_after_a_follower_applied_the_same_version_is_still_a_change() -> None:
    events = translate(LEADER_STARTS_4_1, FOLLOWER_FIRST_4_1, LEADER_COMMIT_4_1)
    changes = [e for e in events if e["type"] == "IsrChange"]
    assert [(e["old_isr"], e["new_isr"], e["partition_epoch"]) for e in changes] == [
        ([3, 1], [3, 1, 2], 6)
    ]


# 3.3-kraft, broker-2/controller.log and broker-1/controller.log: each controller logs the
# removal it replays (3.0 to 3.4)
REMOVED_BY_2_3_3 = (
    "[2026-11-27 06:18:55,613] INFO [Controller 2] Removed topic doomed with ID"
    " t_hQegWQQMqyecIsbTbYeg. (org.apache.kafka.controller.ReplicationControlManager)"
)
REMOVED_BY_1_3_3 = (
    "[2026-11-27 06:18:56,124] INFO [Controller 1] Removed topic doomed with ID"
    " t_hQegWQQMqyecIsbTbYeg. (org.apache.kafka.controller.ReplicationControlManager)"
)


def test_a_kraft_3_3_removal_is_one_deletion_whatever_the_controllers_logging_it() -> None:
    assert parse_line(REMOVED_BY_2_3_3, UTC_ZONE) == TopicsDeleted(
        ms("2026-11-27 06:18:55.613"), 2, ("doomed",)
    )
    events = translate(REMOVED_BY_2_3_3, REMOVED_BY_1_3_3)
    assert [(e["type"], e["deleted"]) for e in events] == [("TopicChange", ["doomed"])]


GENERATED = Path(__file__).parent / "data" / "kafka_logs" / "generated"


def corpus_line(run: str, file: str, *needles: str) -> str:
    """The first line of a generated run's file (Kafka's layout) holding every needle."""
    lines = (GENERATED / run / "logs" / "apache" / file).read_text().splitlines()
    return next(line for line in lines if all(n in line for n in needles))


def elections(*lines: str) -> list[tuple[int, int]]:
    return [
        (e["controller_id"], e["controller_epoch"])
        for e in translate_all(*lines)
        if e["type"] == "ControllerChange"
    ]


def translate_all(*lines: str) -> list[dict[str, Any]]:
    translator = LogTranslator()
    records: list[Any] = [parse_line(line, UTC_ZONE) for line in lines]
    return [dict(e.value) for e in translator.translate(records) + translator.flush()]


def test_a_raft_leaders_line_is_its_election_once() -> None:
    """3.6: node 3 leads the quorum at epoch 1 (Raft), then its controller says it is
    active at epoch 1: one election; the Raft line alone (an image that shows no
    QuorumController line) gives the same."""
    raft = corpus_line("3.6-kraft", "broker-3/server.log", "Completed transition to Leader(")
    active = corpus_line("3.6-kraft", "broker-3/controller.log", "Becoming the active")
    assert "epoch=1," in raft
    assert elections(raft, active) == [(3, 1)]
    assert elections(raft) == [(3, 1)]


def test_a_raft_leadership_a_higher_epoch_overtakes_is_no_election() -> None:
    """4.0: node 3 logged leadership at epoch 2 and node 2 at epoch 3 a second later;
    __cluster_metadata has no LeaderChange of epoch 2 (ground-truth.jsonl), and only node
    2 became the active controller."""
    lost = corpus_line("4.0-kraft", "broker-3/server.log", "Completed transition to Leader(")
    won = corpus_line("4.0-kraft", "broker-2/server.log", "Completed transition to Leader(")
    active = corpus_line("4.0-kraft", "broker-2/controller.log", "Becoming the active")
    assert ", epoch=2," in lost
    assert ", epoch=3," in won
    assert elections(lost, won, active) == [(2, 3)]
