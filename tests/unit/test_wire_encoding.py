"""The wire encoder (streaming/feeds/wire_encoding.py) writes the contract's form.

Properties, for any typed event Hypothesis builds within the schema's ranges (full and
partial forms, every optional field present or absent): the parser, the contract's
reader, gives back an equal event (from the value, from its JSON text, and through the
job's bulk decoders); the value validates against the JSON Schema and holds no ``null``;
the key follows the contract's rule. Then a table of hand-written values, one or more
per event type, with the partial forms and the fields left out at their default.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import MISSING, fields, is_dataclass, replace
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state import decode_controller_events, decode_fetches, parse_record
from state.event_parser import parse_json_line, schema_validator
from state.events import (
    CONTROLLER_EVENT_TYPES,
    BrokerChange,
    BrokerConfig,
    BrokerRegistration,
    BrokersAnswered,
    ClearElr,
    ControllerChange,
    ControllerEvent,
    Event,
    FetchResponse,
    IsrChange,
    IsrChangePropagation,
    LeaderAndIsr,
    MetadataLogProgress,
    MetadataPartitionState,
    ReplicaProgress,
    Source,
    TopicChange,
    TopicConfig,
    TopicPartition,
    UpdateMetadata,
)
from state.fetch_decoder import MAX_TIMESTAMP_MS
from streaming.feeds.wire import encode
from streaming.feeds.wire_encoding import (
    NO_CONTROLLER_KEY,
    OMITTED_AT_DEFAULT,
    fetch_response,
    input_record,
    record_key,
    wire_value,
)

INT64_MAX, INT32_MAX = 2**63 - 1, 2**31 - 1


def ints(low: int, high: int) -> st.SearchStrategy[int]:
    """The range's bounds and their neighbours more often than plain draws would."""
    return st.one_of(st.sampled_from((low, high, low + 1, high - 1)), st.integers(low, high))


ts = ints(0, MAX_TIMESTAMP_MS)  # the contract's latest time (docs/event-contract.md)
offsets = ints(0, MAX_TIMESTAMP_MS)  # the contract's latest time (docs/event-contract.md)
broker_ids = ints(0, INT32_MAX)
epochs = ints(0, INT32_MAX)
partitions = ints(0, 999_999)
leaders = ints(-2, INT32_MAX)
topics = st.one_of(
    st.sampled_from(("t", "ü-topic", " ", "\x00", "😀", "a:b")), st.text(min_size=1, max_size=8)
)
broker_lists = st.lists(broker_ids, max_size=4).map(tuple)


def optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


@st.composite
def common(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "ts": draw(ts),
        "controller_id": draw(optional(broker_ids)),
        "controller_epoch": draw(optional(epochs)),
        "metadata_offset": draw(optional(offsets)),
    }


@st.composite
def leader_and_isr(draw: st.DrawFn) -> LeaderAndIsr:
    place: dict[str, Any] = {"topic": draw(topics), "partition": draw(partitions)}
    if draw(st.booleans()):  # the partial form: a leader or none (-1), no state
        return LeaderAndIsr(**draw(common()), **place, leader=draw(ints(-1, INT32_MAX)))
    elr, last_known_elr = draw(eligible_leaders())
    return LeaderAndIsr(
        **draw(common()),
        **place,
        leader=draw(leaders),
        leader_epoch=draw(epochs),
        isr=draw(broker_lists),
        replicas=draw(broker_lists),
        partition_epoch=draw(epochs),
        elr=elr,
        last_known_elr=last_known_elr,
    )


@st.composite
def eligible_leaders(
    draw: st.DrawFn,
) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """The ELR and last known ELR (Kafka 4.0+): stated together, or neither."""
    if draw(st.booleans()):
        return draw(broker_lists), draw(broker_lists)
    return None, None


@st.composite
def isr_change(draw: st.DrawFn) -> IsrChange:
    elr, last_known_elr = draw(eligible_leaders())
    return IsrChange(
        **draw(common()),
        topic=draw(topics),
        partition=draw(partitions),
        leader=draw(leaders),
        new_isr=draw(broker_lists),
        old_isr=draw(optional(broker_lists)),
        leader_epoch=draw(optional(epochs)),
        partition_epoch=draw(optional(epochs)),
        elr=elr,
        last_known_elr=last_known_elr,
    )


metadata_states = st.builds(
    MetadataPartitionState,
    topic=topics,
    partition=partitions,
    leader=leaders,
    leader_epoch=epochs,
    isr=broker_lists,
    replicas=broker_lists,
    offline_replicas=broker_lists,
)
created_maps = st.dictionaries(
    topics, st.dictionaries(partitions, broker_lists, max_size=3), max_size=3
)
replica_progress = st.builds(
    ReplicaProgress,
    broker=broker_ids,
    log_end_offset=ints(-1, INT64_MAX),
    last_caught_up_ms=optional(ints(-1, INT64_MAX)),
    last_fetch_ms=optional(ints(-1, INT64_MAX)),
)


def controller_events() -> st.SearchStrategy[ControllerEvent]:
    def with_common(cls: type[ControllerEvent], **own: Any) -> st.SearchStrategy[Any]:
        return common().flatmap(
            lambda c: st.builds(cls, **{k: st.just(v) for k, v in c.items()}, **own)
        )

    return st.one_of(
        leader_and_isr(),
        isr_change(),
        with_common(
            IsrChangePropagation,
            broker=broker_ids,
            partitions=st.lists(
                st.builds(TopicPartition, topic=topics, partition=partitions), max_size=3
            ).map(tuple),
        ),
        with_common(
            UpdateMetadata,
            broker=broker_ids,
            partitions=st.lists(metadata_states, max_size=3).map(tuple),
            live_brokers=optional(broker_lists),
        ),
        with_common(
            BrokerChange,
            live=st.lists(
                st.builds(BrokerRegistration, id=broker_ids, epoch=ints(0, INT64_MAX)), max_size=3
            ).map(tuple),
        ),
        # ControllerChange requires its controller_id; its epoch may be absent (partial)
        common().flatmap(
            lambda c: broker_ids.map(lambda b: ControllerChange(**{**c, "controller_id": b}))
        ),
        with_common(
            TopicChange, created=created_maps, deleted=st.lists(topics, max_size=3).map(tuple)
        ),
        with_common(TopicConfig, topic=topics, min_insync_replicas=ints(1, INT32_MAX)),
        with_common(ClearElr, topic=optional(topics)),
        with_common(BrokerConfig, broker=broker_ids, replica_lag_time_max_ms=ints(1, INT32_MAX)),
        with_common(
            MetadataLogProgress,
            high_watermark=offsets,
            replicas=st.lists(replica_progress, max_size=3).map(tuple),
            fetch_timeout_ms=optional(ints(1, INT32_MAX)),
            interval_ms=optional(ints(1, INT64_MAX)),
        ),
        with_common(BrokersAnswered, brokers=st.lists(broker_ids, max_size=4).map(tuple)),
    )


fetch_responses = st.builds(
    FetchResponse,
    ts=ts,
    topic=topics,
    partition=partitions,
    leader=broker_ids,
    follower=broker_ids,
    leader_epoch=epochs,
    fetch_offset=offsets,
    leader_leo=offsets,
    high_watermark=offsets,
    log_start_offset=optional(ints(-1, INT64_MAX)),
    error=st.sampled_from(("NONE", "NOT_LEADER_OR_FOLLOWER", "x")),
    bytes=optional(offsets),
)
events = st.one_of(controller_events(), fetch_responses)


def source_of(event: Event) -> Source:
    return Source.FETCH_RESPONSES if isinstance(event, FetchResponse) else Source.CONTROLLER_EVENTS


def has_null(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, dict):
        return any(has_null(item) for item in value.values())
    if isinstance(value, list):
        return any(has_null(item) for item in value)
    return False


# ---------------------------------------------------------------------- properties


@settings(max_examples=400, deadline=None)
@given(events)
def test_the_parser_reads_back_the_event(event: Event) -> None:
    value = wire_value(event)
    assert parse_json_line(source_of(event), value) == event
    assert parse_record(source_of(event), encode(value)) == event  # through the JSON text


@settings(max_examples=300, deadline=None)
@given(st.lists(events, min_size=1, max_size=4))
def test_the_job_s_bulk_decoders_read_back_the_events(batch: list[Event]) -> None:
    fetches = [e for e in batch if isinstance(e, FetchResponse)]
    controller = [e for e in batch if not isinstance(e, FetchResponse)]
    decoded, dead = decode_controller_events([encode(wire_value(e)) for e in controller])
    assert dead == []
    assert [event for _, event in decoded] == controller
    columns = decode_fetches([encode(wire_value(e)) for e in fetches])
    assert (len(columns), columns.dead) == (len(fetches), [])
    assert columns.error == [e.error for e in fetches]
    assert list(columns.ints["fetch_offset"]) == [e.fetch_offset for e in fetches]


@settings(max_examples=400, deadline=None)
@given(events)
def test_the_value_meets_the_schema_and_holds_no_null(event: Event) -> None:
    value = wire_value(event)
    errors = [error.message for error in schema_validator(source_of(event)).iter_errors(value)]
    assert errors == []
    assert not has_null(value)
    assert json.loads(encode(value)) == value  # JSON-ready: no tuples, no int keys


@settings(max_examples=400, deadline=None)
@given(events)
def test_the_key_follows_the_contract(event: Event) -> None:
    record = input_record(event)
    if isinstance(event, LeaderAndIsr | IsrChange | FetchResponse):
        expected = f"{event.topic}:{event.partition}"
    elif isinstance(event, UpdateMetadata | IsrChangePropagation | BrokerConfig):
        expected = str(event.broker)
    elif event.controller_id is not None:
        expected = str(event.controller_id)
    else:
        expected = "-1"
    assert (record.key, record_key(event)) == (expected, expected)
    assert record.source is source_of(event)
    assert record.value == wire_value(event)
    assert input_record(event, key="given").key == "given"


@settings(max_examples=200, deadline=None)
@given(fetch_responses)
def test_the_cheap_fetch_response_is_the_dataclass_s(event: FetchResponse) -> None:
    built = fetch_response(**{f.name: getattr(event, f.name) for f in fields(event)})
    assert (type(built), built, hash(built)) == (FetchResponse, event, hash(event))
    defaults = fetch_response(
        ts=1,
        topic="t",
        partition=0,
        leader=1,
        follower=2,
        leader_epoch=0,
        fetch_offset=0,
        leader_leo=0,
        high_watermark=0,
    )
    assert (defaults.log_start_offset, defaults.error, defaults.bytes) == (None, "NONE", None)
    assert list(inspect.signature(fetch_response).parameters) == [f.name for f in fields(event)]


def test_fields_left_out_at_their_default_are_those_the_schema_lets_be_absent() -> None:
    """A field with a default other than None is written when the schema requires it,
    and left out at its default otherwise (docs/event-contract.md)."""
    controller = cast("dict[str, Any]", schema_validator(Source.CONTROLLER_EVENTS).schema)
    fetch = cast("dict[str, Any]", schema_validator(Source.FETCH_RESPONSES).schema)
    for cls in (*CONTROLLER_EVENT_TYPES.values(), FetchResponse):
        assert is_dataclass(cls)
        required = set(
            fetch["required"]
            if cls is FetchResponse
            else controller["$defs"][cls.__name__].get("required", [])
        )
        for f in fields(cls):
            has_default = f.default is not MISSING or f.default_factory is not MISSING
            if has_default and f.default is not None:
                left_out = f.name in OMITTED_AT_DEFAULT.get(cls, frozenset())
                assert left_out == (f.name not in required), (cls.__name__, f.name)
    assert {FetchResponse: frozenset({"error"})} == OMITTED_AT_DEFAULT


# ---------------------------------------------------------------------- boundary table

T = 1_700_000_000_000
TABLE: list[tuple[str, Event, str, dict[str, Any]]] = [
    (
        "LeaderAndIsr full, KRaft",
        LeaderAndIsr(
            ts=T,
            controller_id=3,
            controller_epoch=5,
            metadata_offset=12,
            topic="t",
            partition=0,
            leader=1,
            leader_epoch=4,
            isr=(1, 2),
            replicas=(1, 2, 3),
            partition_epoch=9,
        ),
        "t:0",
        {
            "type": "LeaderAndIsr",
            "ts": T,
            "controller_id": 3,
            "controller_epoch": 5,
            "metadata_offset": 12,
            "topic": "t",
            "partition": 0,
            "leader": 1,
            "leader_epoch": 4,
            "isr": [1, 2],
            "replicas": [1, 2, 3],
            "partition_epoch": 9,
        },
    ),
    (
        "LeaderAndIsr deletion (-2), empty lists",
        LeaderAndIsr(
            ts=0,
            topic="t",
            partition=999_999,
            leader=-2,
            leader_epoch=0,
            isr=(),
            replicas=(),
            partition_epoch=0,
        ),
        "t:999999",
        {
            "type": "LeaderAndIsr",
            "ts": 0,
            "topic": "t",
            "partition": 999_999,
            "leader": -2,
            "leader_epoch": 0,
            "isr": [],
            "replicas": [],
            "partition_epoch": 0,
        },
    ),
    (
        "LeaderAndIsr partial: the leader only",
        LeaderAndIsr(ts=T, controller_id=0, topic="t", partition=3, leader=-1),
        "t:3",
        {
            "type": "LeaderAndIsr",
            "ts": T,
            "controller_id": 0,
            "topic": "t",
            "partition": 3,
            "leader": -1,
        },
    ),
    (
        "IsrChange full",
        IsrChange(
            ts=T,
            topic="t",
            partition=1,
            leader=2,
            old_isr=(2, 1),
            new_isr=(2,),
            leader_epoch=0,
            partition_epoch=7,
        ),
        "t:1",
        {
            "type": "IsrChange",
            "ts": T,
            "topic": "t",
            "partition": 1,
            "leader": 2,
            "new_isr": [2],
            "old_isr": [2, 1],
            "leader_epoch": 0,
            "partition_epoch": 7,
        },
    ),
    (
        "IsrChange partial: no old_isr, no epochs",
        IsrChange(ts=T, topic="t", partition=1, leader=2, new_isr=(2, 3)),
        "t:1",
        {
            "type": "IsrChange",
            "ts": T,
            "topic": "t",
            "partition": 1,
            "leader": 2,
            "new_isr": [2, 3],
        },
    ),
    (
        "IsrChangePropagation",
        IsrChangePropagation(
            ts=T, broker=4, partitions=(TopicPartition("a", 0), TopicPartition("b", 2))
        ),
        "4",
        {
            "type": "IsrChangePropagation",
            "ts": T,
            "broker": 4,
            "partitions": [{"topic": "a", "partition": 0}, {"topic": "b", "partition": 2}],
        },
    ),
    (
        "UpdateMetadata with live brokers",
        UpdateMetadata(
            ts=T,
            controller_id=1,
            controller_epoch=2,
            broker=3,
            live_brokers=(1, 3),
            partitions=(
                MetadataPartitionState(
                    topic="t",
                    partition=0,
                    leader=1,
                    leader_epoch=2,
                    isr=(1,),
                    replicas=(1, 3),
                    offline_replicas=(3,),
                ),
            ),
        ),
        "3",
        {
            "type": "UpdateMetadata",
            "ts": T,
            "controller_id": 1,
            "controller_epoch": 2,
            "broker": 3,
            "live_brokers": [1, 3],
            "partitions": [
                {
                    "topic": "t",
                    "partition": 0,
                    "leader": 1,
                    "leader_epoch": 2,
                    "isr": [1],
                    "replicas": [1, 3],
                    "offline_replicas": [3],
                }
            ],
        },
    ),
    (
        "UpdateMetadata without live brokers, no partitions",
        UpdateMetadata(ts=T, broker=0, partitions=()),
        "0",
        {"type": "UpdateMetadata", "ts": T, "broker": 0, "partitions": []},
    ),
    (
        "BrokerChange of a KRaft log: metadata_offset, no controller known",
        BrokerChange(
            ts=T,
            controller_epoch=7,
            metadata_offset=40,
            live=(BrokerRegistration(id=1, epoch=INT64_MAX),),
        ),
        NO_CONTROLLER_KEY,
        {
            "type": "BrokerChange",
            "ts": T,
            "controller_epoch": 7,
            "metadata_offset": 40,
            "live": [{"id": 1, "epoch": INT64_MAX}],
        },
    ),
    (
        "ControllerChange full",
        ControllerChange(ts=T, controller_id=2, controller_epoch=8),
        "2",
        {"type": "ControllerChange", "ts": T, "controller_id": 2, "controller_epoch": 8},
    ),
    (
        "ControllerChange partial: no epoch",
        ControllerChange(ts=T, controller_id=2),
        "2",
        {"type": "ControllerChange", "ts": T, "controller_id": 2},
    ),
    (
        "TopicChange created: partition numbers as strings, deleted written empty",
        TopicChange(ts=T, controller_id=1, created={"t": {0: (1, 2), 10: (2,)}}),
        "1",
        {
            "type": "TopicChange",
            "ts": T,
            "controller_id": 1,
            "created": {"t": {"0": [1, 2], "10": [2]}},
            "deleted": [],
        },
    ),
    (
        "TopicChange deleted: created written empty",
        TopicChange(ts=T, deleted=("t", "u")),
        "-1",
        {"type": "TopicChange", "ts": T, "created": {}, "deleted": ["t", "u"]},
    ),
    (
        "TopicConfig",
        TopicConfig(ts=T, controller_id=5, topic="t", min_insync_replicas=2),
        "5",
        {
            "type": "TopicConfig",
            "ts": T,
            "controller_id": 5,
            "topic": "t",
            "min_insync_replicas": 2,
        },
    ),
    (
        "ClearElr of a topic",
        ClearElr(ts=T, controller_id=5, topic="t"),
        "5",
        {"type": "ClearElr", "ts": T, "controller_id": 5, "topic": "t"},
    ),
    (
        "ClearElr of every topic: no topic written",
        ClearElr(ts=T, controller_id=5),
        "5",
        {"type": "ClearElr", "ts": T, "controller_id": 5},
    ),
    (
        "BrokerConfig: keyed by its broker, not its controller",
        BrokerConfig(ts=T, controller_id=5, broker=2, replica_lag_time_max_ms=30_000),
        "2",
        {
            "type": "BrokerConfig",
            "ts": T,
            "controller_id": 5,
            "broker": 2,
            "replica_lag_time_max_ms": 30_000,
        },
    ),
    (
        "MetadataLogProgress, a replica with and one without its times",
        MetadataLogProgress(
            ts=T,
            controller_id=1,
            controller_epoch=3,
            high_watermark=100,
            replicas=(
                ReplicaProgress(
                    broker=1, log_end_offset=100, last_caught_up_ms=T, last_fetch_ms=-1
                ),
                ReplicaProgress(broker=2, log_end_offset=-1),
            ),
            interval_ms=1000,
        ),
        "1",
        {
            "type": "MetadataLogProgress",
            "ts": T,
            "controller_id": 1,
            "controller_epoch": 3,
            "high_watermark": 100,
            "interval_ms": 1000,
            "replicas": [
                {"broker": 1, "log_end_offset": 100, "last_caught_up_ms": T, "last_fetch_ms": -1},
                {"broker": 2, "log_end_offset": -1},
            ],
        },
    ),
    (
        "BrokersAnswered, keyed by its controller; none answered: an empty list",
        BrokersAnswered(ts=T, controller_id=2, brokers=()),
        "2",
        {"type": "BrokersAnswered", "ts": T, "controller_id": 2, "brokers": []},
    ),
    (
        "FetchResponse: error NONE left out, the optional numbers written",
        FetchResponse(
            ts=T,
            topic="t",
            partition=2,
            leader=1,
            follower=3,
            leader_epoch=4,
            fetch_offset=10,
            leader_leo=20,
            high_watermark=15,
            log_start_offset=0,
            bytes=0,
        ),
        "t:2",
        {
            "ts": T,
            "topic": "t",
            "partition": 2,
            "leader": 1,
            "follower": 3,
            "leader_epoch": 4,
            "fetch_offset": 10,
            "leader_leo": 20,
            "high_watermark": 15,
            "log_start_offset": 0,
            "bytes": 0,
        },
    ),
    (
        "FetchResponse: an error written, the optional numbers absent",
        FetchResponse(
            ts=T,
            topic="t",
            partition=2,
            leader=1,
            follower=3,
            leader_epoch=4,
            fetch_offset=10,
            leader_leo=20,
            high_watermark=15,
            error="NOT_LEADER_OR_FOLLOWER",
        ),
        "t:2",
        {
            "ts": T,
            "topic": "t",
            "partition": 2,
            "leader": 1,
            "follower": 3,
            "leader_epoch": 4,
            "fetch_offset": 10,
            "leader_leo": 20,
            "high_watermark": 15,
            "error": "NOT_LEADER_OR_FOLLOWER",
        },
    ),
]


@pytest.mark.parametrize(
    ("event", "key", "expected"), [row[1:] for row in TABLE], ids=[row[0] for row in TABLE]
)
def test_the_wire_form_by_hand(event: Event, key: str, expected: dict[str, Any]) -> None:
    record = input_record(event)
    assert (record.key, record.value) == (key, expected)
    assert parse_json_line(source_of(event), expected) == event


def test_a_controller_event_begins_with_its_type() -> None:
    value = wire_value(ControllerChange(ts=T, controller_id=1))
    assert next(iter(value)) == "type"
    assert encode(value) == b'{"type":"ControllerChange","ts":1700000000000,"controller_id":1}'


def test_the_table_covers_every_event_type() -> None:
    covered = {type(event) for _, event, _, _ in TABLE}
    assert covered == {*CONTROLLER_EVENT_TYPES.values(), FetchResponse}


def test_update_metadata_to_every_broker_writes_its_states_once() -> None:
    """A controller's states go to every live broker: the records of one tuple share its
    encoded list; another tuple, even right after, gets its own."""
    state = MetadataPartitionState(
        topic="t",
        partition=0,
        leader=1,
        leader_epoch=2,
        isr=(1,),
        replicas=(1, 2),
        offline_replicas=(),
    )
    states = (state,)
    one, two = (wire_value(UpdateMetadata(ts=T, broker=b, partitions=states)) for b in (1, 2))
    assert one["partitions"] is two["partitions"]
    assert (one["broker"], two["broker"]) == (1, 2)
    deleted = (
        MetadataPartitionState(
            topic="t",
            partition=0,
            leader=-2,
            leader_epoch=0,
            isr=(),
            replicas=(),
            offline_replicas=(),
        ),
    )
    assert wire_value(UpdateMetadata(ts=T, broker=1, partitions=deleted))["partitions"] == [
        {
            "topic": "t",
            "partition": 0,
            "leader": -2,
            "leader_epoch": 0,
            "isr": [],
            "replicas": [],
            "offline_replicas": [],
        }
    ]
    for n in range(100):  # more tuples than are kept: each still gets its own states
        again = (replace(state, partition=n),)
        assert (
            wire_value(UpdateMetadata(ts=T, broker=1, partitions=again))["partitions"][0][
                "partition"
            ]
            == n
        )


def test_something_that_is_not_an_event_is_refused() -> None:
    with pytest.raises(TypeError, match="not an event"):
        wire_value("LeaderAndIsr")  # type: ignore[arg-type]
