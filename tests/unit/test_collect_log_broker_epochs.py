"""A ZooKeeper-mode controller's broker changes with the brokers' real epochs (issue 27):
the samples are real lines of the generated corpus (2.8-zookeeper, broker-2's
controller.log and broker-1's server.log), written when broker 1 came back after a kill.
Expected values are written by hand from the lines."""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

from streaming.feeds.collectors.log_lines import parse_line
from streaming.feeds.collectors.log_messages.controller import BrokerEpochsInitialized
from streaming.feeds.collectors.log_translator import HOLD_MS, LogTranslator

UTC_ZONE = ZoneInfo("UTC")

INITIALIZED = (
    "[2026-11-27 06:21:26,281] INFO [Controller id=2] Initialized broker epochs cache:"
    " HashMap(1 -> 62, 2 -> 57) (kafka.controller.KafkaController)"
)
ADDED = (
    "[2026-11-27 06:22:40,313] INFO [Controller id=2] Newly added brokers: 1, deleted brokers: ,"
    " bounced brokers: , all live brokers: 1,2,3 (kafka.controller.KafkaController)"
)
REGISTERED = (
    "[2026-11-27 06:22:40,316] INFO Registered broker 1 at path /brokers/ids/1 with addresses:"
    " PLAINTEXT://127.0.0.1:32004,REPLICATION://127.0.0.1:32006, czxid (broker epoch): 118"
    " (kafka.zk.KafkaZkClient)"
)
UPDATED = (
    "[2026-11-27 06:22:40,320] INFO [Controller id=2] Updated broker epochs cache:"
    " HashMap(1 -> 118, 2 -> 57, 3 -> 93) (kafka.controller.KafkaController)"
)


def live_sets(*lines: str, flush: bool = True) -> list[list[tuple[int, int]]]:
    translator = LogTranslator()
    records: list[Any] = [parse_line(line, UTC_ZONE) for line in lines]
    events = translator.translate(records) + (translator.flush() if flush else [])
    return [
        [(b["id"], b["epoch"]) for b in event.value["live"]]
        for event in events
        if event.value["type"] == "BrokerChange"
    ]


def test_updated_epochs_cache_is_read() -> None:
    record = parse_line(UPDATED, UTC_ZONE)
    assert isinstance(record, BrokerEpochsInitialized)
    assert (record.controller_id, dict(record.epochs)) == (2, {1: 118, 2: 57, 3: 93})


def test_the_controller_line_with_epochs_replaces_the_broker_change_line() -> None:
    """Broker 3's epoch (93) is only in the controller's line: one change goes out, with
    Kafka's epochs."""
    assert live_sets(INITIALIZED, ADDED, REGISTERED, UPDATED) == [
        [(1, 62), (2, 57)],
        [(1, 118), (2, 57), (3, 93)],
    ]


def test_without_the_epochs_line_the_registration_gives_the_epoch() -> None:
    """A broker-change line alone (Kafka before the epochs cache line): broker 1's own
    registration line, logged 3 ms later, gives its epoch; broker 3, never seen, starts
    at 0."""
    assert live_sets(INITIALIZED, ADDED, REGISTERED) == [
        [(1, 62), (2, 57)],
        [(1, 118), (2, 57), (3, 0)],
    ]


def test_a_held_change_goes_out_once_the_logs_move_past_it() -> None:
    translator = LogTranslator()
    records: list[Any] = [parse_line(line, UTC_ZONE) for line in (INITIALIZED, ADDED)]
    assert len(translator.translate(records)) == 1  # the initialized cache; ADDED is held
    added_ts = records[1].ts
    assert translator.advance(added_ts + HOLD_MS - 1) == []
    assert [e.value["type"] for e in translator.advance(added_ts + HOLD_MS)] == ["BrokerChange"]
