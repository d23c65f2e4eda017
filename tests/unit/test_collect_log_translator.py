"""streaming.feeds.collectors.log_translator: parsed records -> controller events.

Every event is also checked with the job's own parser, so a collector can never emit a
record the job would dead-letter for its shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from state import parse_json_line
from state.events import DeadLetter, Source
from streaming.feeds.collectors.log_messages.controller import (
    BrokerEpochsInitialized,
    BrokerRegistered,
    BrokerSetChanged,
    ControllerElected,
    ControllerSeen,
    PreferredLeaderElected,
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
from streaming.feeds.collectors.log_translator import (
    CANCEL_WINDOW_MS,
    LogTranslator,
    MetadataUpdate,
    TranslatorInput,
    group_metadata_updates,
)
from streaming.feeds.wire import InputRecord


def values(events: Sequence[InputRecord]) -> list[dict[str, Any]]:
    for event in events:
        assert event.source is Source.CONTROLLER_EVENTS
        parsed = parse_json_line(event.source, dict(event.value))
        assert not isinstance(parsed, DeadLetter), parsed
    return [dict(event.value) for event in events]


def state(
    topic: str, partition: int, leader: int, epoch: int, isr: tuple[int, ...], version: int = 0
) -> PartitionState:
    return PartitionState(topic, partition, leader, epoch, isr, (1, 2, 3), (), version)


def received(ts: int, broker: int, s: PartitionState) -> LeaderAndIsrReceived:
    return LeaderAndIsrReceived(ts, broker, 1, 7, s)


def test_cache_lines_of_one_request_make_one_update_metadata() -> None:
    a = CachedLeaderInfo(10, 2, 1, 7, 6, state("t", 0, 1, 0, (1, 2, 3)))
    b = CachedLeaderInfo(11, 2, 1, 7, 6, state("t", 1, 2, 0, (2, 3)))
    c = DeletedFromCache(12, 2, 1, 7, 6, "u", 4)
    other_request = CachedLeaderInfo(13, 2, 1, 7, 8, state("t", 0, 1, 0, (1, 2)))
    other_broker = CachedLeaderInfo(14, 3, 1, 7, 8, state("t", 0, 1, 0, (1, 2)))
    grouped = group_metadata_updates([a, b, c, other_request, other_broker])
    assert [(g.ts, len(g.states)) for g in grouped if isinstance(g, MetadataUpdate)] == [
        (12, 3),
        (13, 1),
        (14, 1),
    ]
    assert values(LogTranslator().translate(grouped[:1])) == [
        {
            "type": "UpdateMetadata",
            "ts": 12,
            "broker": 2,
            "controller_id": 1,
            "controller_epoch": 7,
            "partitions": [
                {
                    "topic": "t",
                    "partition": 0,
                    "leader": 1,
                    "leader_epoch": 0,
                    "isr": [1, 2, 3],
                    "replicas": [1, 2, 3],
                    "offline_replicas": [],
                },
                {
                    "topic": "t",
                    "partition": 1,
                    "leader": 2,
                    "leader_epoch": 0,
                    "isr": [2, 3],
                    "replicas": [1, 2, 3],
                    "offline_replicas": [],
                },
                {
                    "topic": "u",
                    "partition": 4,
                    "leader": -2,
                    "leader_epoch": 0,
                    "isr": [],
                    "replicas": [],
                    "offline_replicas": [],
                },
            ],
        }
    ]


def test_a_large_request_is_split_under_the_record_size_limit() -> None:
    """A controller failover sends every partition in one UpdateMetadata request."""
    lines = [CachedLeaderInfo(10 + p, 2, 1, 7, 6, state("t", p, 1, 0, (1,))) for p in range(2300)]
    grouped = group_metadata_updates(lines)
    events = values(LogTranslator().translate(grouped))
    assert [(e["ts"], len(e["partitions"])) for e in events] == [
        (1009, 1000),
        (2009, 1000),
        (2309, 300),
    ]


def test_update_metadata_key_is_the_broker() -> None:
    grouped = group_metadata_updates([CachedLeaderInfo(10, 5, 1, 7, 6, state("t", 0, 1, 0, (1,)))])
    assert [e.key for e in LogTranslator().translate(grouped)] == ["5"]


def test_leader_and_isr_is_sent_once_per_epochs() -> None:
    translator = LogTranslator()
    first = state("t", 0, 1, 3, (1, 2), version=9)
    events = translator.translate(
        [
            received(10, 1, first),
            received(11, 2, first),
            received(12, 3, first),  # every replica
            received(13, 2, state("t", 0, 1, 2, (1, 2, 3), version=8)),  # older: a late log
            received(14, 2, state("t", 0, 1, 3, (1,), version=10)),  # same leader epoch, newer
        ]
    )
    assert [(e.key, e.value["ts"], e.value["partition_epoch"]) for e in events] == [
        ("t:0", 10, 9),
        ("t:0", 14, 10),
    ]
    assert values(events)[0] == {
        "type": "LeaderAndIsr",
        "ts": 10,
        "topic": "t",
        "partition": 0,
        "leader": 1,
        "leader_epoch": 3,
        "isr": [1, 2],
        "replicas": [1, 2, 3],
        "partition_epoch": 9,
        "controller_id": 1,
        "controller_epoch": 7,
    }
    assert translator.dropped == {"leader_and_isr_seen": 3}


def test_isr_change_needs_the_commit() -> None:
    translator = LogTranslator()
    events = translator.translate(
        [
            IsrProposal(10, 2, "t", 1, (2, 3, 1), (2, 1)),
            IsrCommitted(11, 2, "t", 1, (2, 1), 5),
            IsrProposal(20, 2, "t", 1, (2, 1), (2, 1, 3)),
            IsrUpdateFailed(21, 2, "t", 1),
            IsrCommitted(30, 3, "t", 2, (3, 1), 2),  # nothing known of t-2 before
        ]
    )
    assert values(events) == [
        {
            "type": "IsrChange",
            "ts": 11,
            "topic": "t",
            "partition": 1,
            "leader": 2,
            "old_isr": [2, 3, 1],
            "new_isr": [2, 1],
            "partition_epoch": 5,
        },
        {  # the partial form: no ISR before it was read, so no old_isr
            "type": "IsrChange",
            "ts": 30,
            "topic": "t",
            "partition": 2,
            "leader": 3,
            "new_isr": [3, 1],
            "partition_epoch": 2,
        },
    ]
    assert translator.dropped == {"isr_update_failed": 1}


def test_expansion_without_proposal_uses_the_last_isr_seen() -> None:
    """Kafka 3.x logs no proposal for an expansion, only the commit."""
    translator = LogTranslator()
    events = translator.translate(
        [
            received(5, 1, state("t", 0, 1, 4, (1, 2, 3), version=8)),
            IsrProposal(10, 1, "t", 0, (1, 2, 3), (1, 2)),
            IsrCommitted(11, 1, "t", 0, (1, 2), 9),
            IsrCommitted(20, 1, "t", 0, (1, 2, 3), 10),
            IsrCommitted(30, 1, "t", 0, (3, 2, 1), 10),  # the same set again
        ]
    )
    assert [(e.value["type"], e.value.get("old_isr"), e.value.get("new_isr")) for e in events] == [
        ("LeaderAndIsr", None, None),
        ("IsrChange", [1, 2, 3], [1, 2]),
        ("IsrChange", [1, 2], [1, 2, 3]),
    ]
    # the third line commits partition epoch 10 again: the change was sent already
    assert translator.dropped == {"isr_update_seen": 1}


def test_controller_epoch_of_the_last_election_goes_on_controller_events() -> None:
    translator = LogTranslator()
    events = translator.translate(
        [
            TopicsCreated(1, 1, {"t": {1: (2, 1), 0: (1, 2)}}),  # before any election line
            ControllerElected(2, 1, 12),
            TopicDeleted(3, 1, "t"),
            TopicDeleted(4, 2, "u"),  # another controller, never seen elected
        ]
    )
    assert values(events) == [
        {
            "type": "TopicChange",
            "created": {"t": {"0": [1, 2], "1": [2, 1]}},
            "deleted": [],
            "ts": 1,
            "controller_id": 1,
        },
        {"type": "ControllerChange", "ts": 2, "controller_id": 1, "controller_epoch": 12},
        {
            "type": "TopicChange",
            "created": {},
            "deleted": ["t"],
            "ts": 3,
            "controller_id": 1,
            "controller_epoch": 12,
        },
        {"type": "TopicChange", "created": {}, "deleted": ["u"], "ts": 4, "controller_id": 2},
    ]
    assert [e.key for e in events] == ["1", "1", "1", "2"]


def test_topic_creation_without_assignment_gives_nothing() -> None:
    assert LogTranslator().translate([TopicsCreated(1, 1, {})]) == []


def test_broker_epochs_only_grow_when_kafka_says_a_broker_came_back() -> None:
    translator = LogTranslator()
    events = translator.translate(
        [
            BrokerEpochsInitialized(1, 1, {1: 100, 2: 200, 3: 300}),
            BrokerSetChanged(2, 1, (), (3,), (), (1, 2)),  # 3 dies
            BrokerRegistered(3, 2, 450),  # 2 registers again (its own server.log) ...
            BrokerSetChanged(4, 1, (3,), (), (2,), (1, 2, 3)),  # ... and is reported bounced
            BrokerRegistered(5, 1, 999),  # a registration the controller has not reported
            BrokerSetChanged(6, 1, (), (), (), (1, 2, 3)),
        ]
    )
    events += translator.flush()  # the last broker change is held for an epochs line
    lives = [[(b["id"], b["epoch"]) for b in e["live"]] for e in values(events)]
    assert lives == [
        [(1, 100), (2, 200), (3, 300)],
        [(1, 100), (2, 200)],
        [(1, 100), (2, 450), (3, 301)],
        [(1, 100), (2, 450), (3, 301)],
    ]


def test_broker_change_without_a_baseline() -> None:
    """A collector started after the controller's election: unknown epochs start at 0."""
    translator = LogTranslator()
    events = translator.translate([BrokerSetChanged(2, 1, (4,), (), (), (1, 4))])
    events += translator.flush()
    assert values(events)[0]["live"] == [{"id": 1, "epoch": 0}, {"id": 4, "epoch": 0}]


def test_state_round_trip_gives_the_same_events() -> None:
    """What a restarted collector remembers: pending proposals, ISRs, epochs."""
    before: list[TranslatorInput] = [
        ControllerElected(1, 1, 3),
        BrokerEpochsInitialized(2, 1, {1: 10, 2: 20}),
        received(3, 1, state("t", 0, 1, 4, (1, 2), version=6)),
        IsrProposal(4, 1, "t", 0, (1, 2), (1,)),
    ]
    after: list[TranslatorInput] = [
        IsrCommitted(5, 1, "t", 0, (1,), 7),
        received(6, 2, state("t", 0, 1, 4, (1, 2), version=6)),  # seen before the restart
        BrokerSetChanged(7, 1, (), (), (2,), (1, 2)),
    ]
    one = LogTranslator()
    one.translate(before)
    expected = values(one.translate(after) + one.flush())
    restarted = LogTranslator()
    restarted.translate(before)
    resumed = LogTranslator(restarted.state())
    assert values(resumed.translate(after) + resumed.flush()) == expected
    assert [e["type"] for e in expected] == ["IsrChange", "BrokerChange"]


def test_deleting_a_topic_forgets_its_partitions() -> None:
    translator = LogTranslator()
    translator.translate(
        [
            received(1, 1, state("t", 0, 1, 0, (1,))),
            IsrProposal(2, 1, "t", 0, (1,), (1,)),
            received(1, 1, state("tt", 0, 1, 0, (1,))),
            TopicDeleted(3, 1, "t"),
        ]
    )
    kept = translator.state()
    assert list(kept["leader_and_isr"]) == ["tt:0"]
    assert kept["pending"] == {}
    # the topic is created again with the same epochs: a new LeaderAndIsr is sent
    again = translator.translate([received(4, 1, state("t", 0, 1, 0, (1,)))])
    assert [e.value["type"] for e in again] == ["LeaderAndIsr"]


# --------------------------------------------------------------------------- versions

TRACE, INFO, UNKNOWN = CommitLogging.TRACE, CommitLogging.INFO, CommitLogging.UNKNOWN


def isr_change(ts: int, leader: int, old: list[int], new: list[int]) -> dict[str, Any]:
    """A change stated by a Kafka 0.10-2.3 proposal: no partition epoch."""
    return {
        "type": "IsrChange",
        "ts": ts,
        "topic": "t",
        "partition": 3,
        "leader": leader,
        "old_isr": old,
        "new_isr": new,
    }


def test_kafka_0_10_to_2_1_proposal_is_the_change_when_the_input_ends() -> None:
    """Up to 2.3 Kafka logs the ZooKeeper write's success at TRACE only."""
    translator = LogTranslator()
    assert translator.translate([IsrProposal(1000, 1, "t", 3, (1, 2, 3), (1, 2), TRACE)]) == []
    assert values(translator.flush()) == [isr_change(1000, 1, [1, 2, 3], [1, 2])]
    assert translator.flush() == []


def test_kafka_0_10_to_2_3_cancel_undoes_the_proposal() -> None:
    translator = LogTranslator()
    assert (
        translator.translate(
            [
                IsrProposal(1000, 1, "t", 3, (1, 2, 3), (1, 2), TRACE),
                IsrUpdateFailed(1108, 1, "t", 3, TRACE),  # Cached zkVersion [4] not equal ...
            ]
        )
        == []
    )
    assert translator.flush() == []
    assert translator.dropped == {"isr_update_failed": 1}


def test_kafka_0_10_to_2_3_proposal_stands_once_the_log_moved_past_the_window() -> None:
    translator = LogTranslator()
    translator.translate([IsrProposal(1000, 1, "t", 3, (1, 2, 3), (1, 2), TRACE)])
    assert translator.advance(1000 + CANCEL_WINDOW_MS - 1) == []
    assert values(translator.advance(1000 + CANCEL_WINDOW_MS)) == [
        isr_change(1000, 1, [1, 2, 3], [1, 2])
    ]


def test_kafka_2_2_shrink_then_expand_without_commit_means_2_3_or_older() -> None:
    """The shared 2.2-2.7 wording: a second proposal for the partition with no commit
    between tells a broker that logs commits at TRACE."""
    translator = LogTranslator()
    first = translator.translate(
        [
            IsrProposal(1000, 4, "t", 3, (4, 1, 2), (4,), UNKNOWN),
            IsrProposal(1240, 4, "t", 3, (4,), (4, 2), UNKNOWN),
        ]
    )
    assert values(first) == [isr_change(1000, 4, [4, 1, 2], [4])]
    assert values(translator.flush()) == [isr_change(1240, 4, [4], [4, 2])]
    assert translator.state()["commit_logging"] == {"4": "trace"}


def test_shared_wording_from_an_unknown_version_gives_nothing() -> None:
    translator = LogTranslator()
    translator.translate([IsrProposal(1000, 1, "t", 3, (1, 2, 3), (1, 2), UNKNOWN)])
    assert translator.advance(1000 + 10 * CANCEL_WINDOW_MS) == []
    assert translator.flush() == []
    assert translator.dropped == {"isr_proposal_unconfirmed": 1}


@pytest.mark.parametrize(
    "teller",
    [
        IsrCommitted(500, 1, "u", 0, (1, 2), 8),  # any commit line at INFO
        IsrUpdateFailed(500, 1, "u", 0, INFO),  # "Cached zkVersion 7" (no brackets): 2.4+
    ],
)
def test_a_broker_known_to_log_commits_waits_for_the_commit(
    teller: IsrCommitted | IsrUpdateFailed,
) -> None:
    translator = LogTranslator()
    translator.translate([teller, IsrProposal(1000, 1, "t", 3, (1, 2, 3), (1, 2), UNKNOWN)])
    assert translator.flush() == []  # still waiting: AlterIsr answers come later
    events = translator.translate([IsrCommitted(1500, 1, "t", 3, (1, 2), 9)])
    assert values(events) == [{**isr_change(1500, 1, [1, 2, 3], [1, 2]), "partition_epoch": 9}]
    assert "isr_proposal_unconfirmed" not in translator.dropped


def test_a_broker_known_to_log_commits_at_trace_needs_no_commit() -> None:
    translator = LogTranslator()
    translator.translate(
        [
            IsrUpdateFailed(500, 1, "u", 0, TRACE),  # "Cached zkVersion [7]": 0.10-2.3
            IsrProposal(1000, 1, "t", 3, (1, 2, 3), (1, 2), UNKNOWN),
        ]
    )
    assert values(translator.advance(3000)) == [isr_change(1000, 1, [1, 2, 3], [1, 2])]


def test_a_second_proposal_while_one_waits_for_its_commit_replaces_it() -> None:
    translator = LogTranslator()
    events = translator.translate(
        [
            IsrProposal(1000, 1, "t", 3, (1, 2, 3), (1, 2), INFO),
            IsrProposal(2000, 1, "t", 3, (1, 2, 3), (1, 3), INFO),
            IsrCommitted(2100, 1, "t", 3, (1, 3), 4),
        ]
    )
    assert values(events) == [{**isr_change(2100, 1, [1, 2, 3], [1, 3]), "partition_epoch": 4}]
    assert translator.dropped == {"isr_proposal_superseded": 1}


def test_version_memory_survives_a_restart() -> None:
    translator = LogTranslator()
    translator.translate(
        [
            IsrUpdateFailed(500, 1, "u", 0, TRACE),
            IsrProposal(1000, 1, "t", 3, (1, 2, 3), (1, 2), UNKNOWN),
        ]
    )
    resumed = LogTranslator(translator.state())
    assert values(resumed.flush()) == [isr_change(1000, 1, [1, 2, 3], [1, 2])]


def test_state_of_version_1_is_read() -> None:
    """Version 1 kept the ISR before each pending proposal of a 2.4+ broker."""
    resumed = LogTranslator({"version": 1, "pending": {"2 t:3": [2, 3, 1]}})
    events = resumed.translate([IsrCommitted(11, 2, "t", 3, (2, 1), 5)])
    assert values(events) == [{**isr_change(11, 2, [2, 3, 1], [2, 1]), "partition_epoch": 5}]


def test_lines_that_state_part_of_an_event_give_its_partial_form() -> None:
    """A losing broker's controller line and a preferred election's result name no epoch,
    ISR or replicas: the partial events carry only what they state, and the epoch of
    an election seen before goes only where the line is the controller's own."""
    translator = LogTranslator()
    events = translator.translate(
        [
            ControllerSeen(5, 2),  # no election seen yet
            ControllerElected(6, 2, 9),
            ControllerSeen(7, 2),  # an election of 2 was seen, but maybe not this one
            PreferredLeaderElected(8, 2, "t", 3, 1),  # controller 2's own line (epoch 9)
            PreferredLeaderElected(9, 4, "t", 4, 3),  # controller 4: no epoch known
        ]
    )
    assert [e.key for e in events] == ["2", "2", "2", "t:3", "t:4"]
    assert values(events) == [
        {"type": "ControllerChange", "ts": 5, "controller_id": 2},
        {"type": "ControllerChange", "ts": 6, "controller_id": 2, "controller_epoch": 9},
        {"type": "ControllerChange", "ts": 7, "controller_id": 2},
        {
            "type": "LeaderAndIsr",
            "ts": 8,
            "topic": "t",
            "partition": 3,
            "leader": 1,
            "controller_id": 2,
            "controller_epoch": 9,
        },
        {
            "type": "LeaderAndIsr",
            "ts": 9,
            "topic": "t",
            "partition": 4,
            "leader": 3,
            "controller_id": 4,
        },
    ]
