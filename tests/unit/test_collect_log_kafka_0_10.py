"""Kafka 0.10's lines as a real 0.10.2.2 broker wrote them (issue 27): each sample is a line
of tests/unit/data/kafka_logs/generated/0.10.2-zookeeper/logs/apache/. Expected values are
written by hand from the lines and the run's ground truth (ground-truth.jsonl)."""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

from streaming.feeds.collectors.log_lines import parse_line
from streaming.feeds.collectors.log_messages.controller import TopicDeleted
from streaming.feeds.collectors.log_translator import LogTranslator

UTC_ZONE = ZoneInfo("UTC")

# broker-1/controller.log: the controller's DeleteTopicsThread, not "[Topic Deletion Manager"
DELETED = (
    "[2026-11-27 06:43:59,155] INFO [delete-topics-thread-1], Deletion of topic doomed"
    " successfully completed (kafka.controller.TopicDeletionManager$DeleteTopicsThread)"
)
# broker-1/state-change.log: orders-1 is assigned [3, 1, 2] (ground truth); the request's
# replicas are printed from a Set
RECEIVED = (
    "[2026-11-27 06:41:55,025] TRACE Broker 1 received LeaderAndIsr request"
    " PartitionState(controllerEpoch=1, leader=3, leaderEpoch=0, isr=[3, 1, 2], zkVersion=0,"
    " replicas=[1, 2, 3]) correlation id 1 from controller 3 epoch 1 for partition [orders,1]"
    " (state.change.logger)"
)
# broker-3/server.log
EXPANDING = (
    "[2026-11-27 06:43:07,480] INFO Partition [doomed,0] on broker 3: Expanding ISR for"
    " partition doomed-0 from 3,2 to 3,2,1 (kafka.cluster.Partition)"
)


def translate(*lines: str) -> list[dict[str, Any]]:
    translator = LogTranslator()
    records: list[Any] = [parse_line(line, UTC_ZONE) for line in lines]
    return [dict(e.value) for e in translator.translate(records) + translator.flush()]


def test_the_delete_topics_thread_states_the_deletion() -> None:
    record = parse_line(DELETED, UTC_ZONE)
    assert isinstance(record, TopicDeleted)
    assert (record.controller_id, record.topic) == (1, "doomed")


def test_a_0_10_leader_and_isr_line_states_the_leader_not_the_replicas_order() -> None:
    [event] = translate(RECEIVED)
    assert {k: v for k, v in event.items() if k != "ts"} == {
        "type": "LeaderAndIsr",
        "controller_id": 3,
        "topic": "orders",
        "partition": 1,
        "leader": 3,
    }


def test_a_standing_proposal_outlives_its_topics_deletion() -> None:
    """The expansion stood (its cancel window passed) long before doomed was deleted: the
    deletion does not take it back."""
    events = translate(EXPANDING, DELETED)
    assert [(e["type"], e.get("new_isr"), e.get("deleted")) for e in events] == [
        ("IsrChange", [3, 2, 1], None),
        ("TopicChange", None, ["doomed"]),
    ]
