"""Records the fault campaign's fuzzing found to stop the job (bench/faults/fuzz.py):
each is now a dead letter with its reason, and the records around it are unaffected."""

from __future__ import annotations

import json

from state import decode_controller_events, decode_fetches
from state.events import DeadLetterReason
from streaming.job.routing import DEAD
from tests.unit.test_shard_state import Job, kafka_records

B = 1_700_000_000_000
FETCH = (
    b'{"ts":1700000000000,"topic":"%s","partition":0,"leader":1,"follower":2,'
    b'"leader_epoch":0,"fetch_offset":5,"leader_leo":5,"high_watermark":5}'
)
ELECTION = (
    b'{"type":"LeaderAndIsr","ts":1700000000000,"topic":"%s","partition":0,'
    b'"leader":1,"leader_epoch":0,"isr":[1,2],"replicas":[1,2],'
    b'"partition_epoch":0}'
)


def test_an_escaped_lone_surrogate_is_invalid_json_among_valid_fetches() -> None:
    # json and msgspec parse "\ud800" into a str that no UTF-8 encoder takes: Arrow
    # refused it in the source's reader, and the query failed at every retry.
    values = [FETCH % b"orders", FETCH % b"\\ud800", FETCH % b"x\\uDBFF", FETCH % b"clicks"]
    decoded = decode_fetches(values)
    assert decoded.topic == ["orders", "clicks"]
    assert decoded.position.tolist() == [0, 3]
    assert [(i, d.reason) for i, d in decoded.dead] == [
        (1, DeadLetterReason.INVALID_JSON),
        (2, DeadLetterReason.INVALID_JSON),
    ]
    assert decoded.dead[0][1].detail == "not UTF-8: topic holds an escaped lone surrogate"


def test_a_lone_surrogate_in_an_error_name_or_a_controller_event_is_invalid_json() -> None:
    error = (FETCH % b"orders")[:-1] + b',"error":"\\udfff"}'
    assert [d.reason for _, d in decode_fetches([error]).dead] == [DeadLetterReason.INVALID_JSON]
    events, dead = decode_controller_events([ELECTION % b"\\ud800", ELECTION % b"orders"])
    assert [i for i, _ in events] == [1]
    assert [(i, d.reason) for i, d in dead] == [(0, DeadLetterReason.INVALID_JSON)]


def test_escapes_of_real_characters_stay_valid() -> None:
    # a surrogate pair is one character (U+1F600), and an escaped e-acute is text
    pair = (FETCH % b"orders")[:-1] + b',"note":"\\ud83d\\ude00 caf\\u00e9"}'
    assert decode_fetches([pair]).topic == ["orders"]
    events, dead = decode_controller_events([ELECTION % b"caf\\u00e9"])
    assert (len(events), dead) == (1, [])
    assert events[0][1].topic == "caf\u00e9"  # type: ignore[attr-defined]


def test_topic_names_are_at_most_kafkas_249_characters() -> None:
    # a 10 MB topic name made a 10 MB health record, which the producer refused
    longest, too_long = b"t" * 249, b"t" * 250
    decoded = decode_fetches([FETCH % longest, FETCH % too_long])
    assert decoded.topic == ["t" * 249]
    assert [(i, d.reason, d.detail) for i, d in decoded.dead] == [
        (1, DeadLetterReason.INVALID_VALUE, "topic must be at most 249 characters")
    ]
    events, dead = decode_controller_events([ELECTION % longest, ELECTION % too_long])
    assert [i for i, _ in events] == [0]
    assert [(i, d.reason) for i, d in dead] == [(1, DeadLetterReason.INVALID_VALUE)]
    created = json.dumps(
        {"type": "TopicChange", "ts": B, "deleted": [], "created": {"t" * 250: {"0": [1, 2]}}}
    ).encode()
    _, dead = decode_controller_events([created])
    assert [d.reason for _, d in dead] == [DeadLetterReason.INVALID_VALUE]


def test_a_dead_letter_of_a_10_mb_record_fits_a_kafka_record() -> None:
    # The dead letter held the whole raw value: 10 MB, which the sink's producer
    # refuses (1 MB by default), failing the batch at every retry.
    huge = b"{" + b"x" * (10 * 1024 * 1024)
    config = {"type": "BrokerConfig", "ts": B, "broker": 1, "replica_lag_time_max_ms": 30_000}
    records = kafka_records(
        [
            {"source": "controller-events", "value": config},
            {"source": "controller-events", "value": huge},
            {"source": "fetch-responses", "value": b"\xff" * (10 * 1024 * 1024)},
        ]
    )
    dead = Job(shards=2).batch(records)
    dead = dead[dead["kind"] == DEAD]
    letters = [json.loads(value) for value in dead["value"]]
    assert sorted((x["topic"], x["reason"]) for x in letters) == [
        ("controller-events", "invalid_json"),
        ("fetch-responses", "invalid_json"),
    ]
    for value, letter in zip(dead["value"], letters, strict=True):
        assert len(value.encode()) < 1_000_000
        assert len(letter["raw"]) == 65_536
    by_topic = {letter["topic"]: letter for letter in letters}
    assert by_topic["controller-events"]["raw"] == "{" + "x" * 65_535
    assert by_topic["controller-events"]["raw_length"] == 10 * 1024 * 1024 + 1
    # the invalid bytes read as U+FFFD, one character each
    assert by_topic["fetch-responses"]["raw"] == "\ufffd" * 65_536
    assert by_topic["fetch-responses"]["raw_length"] == 10 * 1024 * 1024


def test_a_short_dead_letter_has_its_whole_raw_and_no_length() -> None:
    config = {"type": "BrokerConfig", "ts": B, "broker": 1, "replica_lag_time_max_ms": 30_000}
    records = kafka_records(
        [
            {"source": "controller-events", "value": config},
            {"source": "controller-events", "value": b"[1]"},
        ]
    )
    out = Job(shards=1).batch(records)
    letter = json.loads(out[out["kind"] == DEAD]["value"].iloc[0])
    assert (letter["raw"], letter["reason"], "raw_length" in letter) == (
        "[1]",
        "not_an_object",
        False,
    )


def test_event_times_end_before_2200() -> None:
    # ts 2**62 (valid int64) overflowed Spark's timestamp_millis in the job's event-time
    # column (DATETIME_OVERFLOW), and year 9999 pandas' nanoseconds in the state function
    # (ArrowInvalid): each failed every retry of the batch that held it.
    last, after = b"7258118399999", b"7258118400000"
    fetch = FETCH % b"orders"
    decoded = decode_fetches([fetch.replace(b"1700000000000", v) for v in (last, after)])
    assert decoded.ints["ts"].tolist() == [7_258_118_399_999]
    assert [(i, d.reason, d.detail) for i, d in decoded.dead] == [
        (1, DeadLetterReason.INVALID_VALUE, "ts must be <= 7258118399999")
    ]
    election = ELECTION % b"orders"
    events, dead = decode_controller_events(
        [election.replace(b"1700000000000", v) for v in (last, str(2**62).encode())]
    )
    assert [i for i, _ in events] == [0]
    assert [(i, d.reason) for i, d in dead] == [(1, DeadLetterReason.INVALID_VALUE)]


def test_nesting_deeper_than_msgspec_follows_is_invalid_json() -> None:
    # msgspec raised RecursionError (neither a MsgspecError nor a ValueError) skipping a
    # value nested 100,000 deep while it looked for the tag: the reader failed the batch.
    nested = b"[" * 100_000 + b"]" * 100_000
    values = [b'{"x":' + nested + b',"type":"LeaderAndIsr"}', nested, ELECTION % b"orders"]
    events, dead = decode_controller_events(values)
    assert [i for i, _ in events] == [2]
    assert [(i, d.reason) for i, d in dead] == [
        (0, DeadLetterReason.INVALID_JSON),
        (1, DeadLetterReason.INVALID_JSON),
    ]
    fetches = [b'{"ts":' + nested + b"}", FETCH % b"orders", b'{"x":' + nested + b"}"]
    decoded = decode_fetches(fetches)
    assert decoded.position.tolist() == [1]
    assert [(i, d.reason) for i, d in decoded.dead] == [
        (0, DeadLetterReason.INVALID_JSON),
        (2, DeadLetterReason.INVALID_JSON),
    ]


def _replica_lists(count: int) -> list[bytes]:
    ids = list(range(count))
    election = {
        "type": "LeaderAndIsr",
        "ts": B,
        "topic": "t",
        "partition": 0,
        "leader": 0,
        "leader_epoch": 0,
        "isr": ids,
        "replicas": ids,
        "partition_epoch": 0,
    }
    shrink = {
        "type": "IsrChange",
        "ts": B,
        "topic": "t",
        "partition": 0,
        "leader": 0,
        "old_isr": ids,
        "new_isr": [0],
    }
    state = {
        "topic": "t",
        "partition": 0,
        "leader": 0,
        "leader_epoch": 0,
        "isr": [0],
        "replicas": [0],
        "offline_replicas": ids,
    }
    metadata = {"type": "UpdateMetadata", "ts": B, "broker": 1, "partitions": [state]}
    created = {"type": "TopicChange", "ts": B, "deleted": [], "created": {"t": {"0": ids}}}
    return [json.dumps(v).encode() for v in (election, shrink, metadata, created)]


def test_replica_lists_hold_at_most_64_brokers() -> None:
    # a LeaderAndIsr with 100,000 replicas widened its shard's table past 8 GB (OOM)
    events, dead = decode_controller_events(_replica_lists(64))
    assert ([i for i, _ in events], dead) == ([0, 1, 2, 3], [])
    events, dead = decode_controller_events(_replica_lists(65))
    assert events == []
    assert [(i, d.reason) for i, d in dead] == [
        (i, DeadLetterReason.INVALID_VALUE) for i in range(4)
    ]
    # a broker list that is not a partition's replicas keeps no such bound
    live = json.dumps(
        {
            "type": "UpdateMetadata",
            "ts": B,
            "broker": 1,
            "partitions": [],
            "live_brokers": list(range(1000)),
        }
    ).encode()
    events, dead = decode_controller_events([live])
    assert ([i for i, _ in events], dead) == ([0], [])
