"""Typed events (``state.events``) -> their wire form: the one place that writes it.

Every producer of the job's input (the collectors, the simulator and through it the
demo) builds ``state.events`` values and turns them into records here, so that what
they send is the contract's form (docs/event-contract.md, ``conf/schemas/``) by
construction, and the parser (``state.event_parser``), the contract's reader, gives
back the event it was made from (``tests/unit/test_wire_encoding.py``).

The rules of the value (:func:`wire_value`):

* a controller event starts with ``type``, the name of its class
  (``state.events.CONTROLLER_EVENT_TYPES``); the fields follow in the class's order;
* a field that is None is left out, never ``null``: that is the partial form of
  ``LeaderAndIsr``, ``IsrChange`` and ``ControllerChange``, and every other optional
  field (``metadata_offset``, ``live_brokers``, a replica's ``last_fetch_ms``, ...);
* a field with a default other than None is written, unless the schema lets it be absent
  and it holds its default, which its absence means: ``FetchResponse.error`` is left
  out when it is ``NONE`` (the collectors have always left it out; the simulator wrote
  it until the encoder), while ``TopicChange.created`` and ``deleted`` are required and
  written even when empty. :data:`OMITTED_AT_DEFAULT` lists such fields;
* tuples are lists, nested parts (``TopicPartition``, ``MetadataPartitionState``, ...)
  objects of their fields, and ``TopicChange.created``'s partition numbers strings.

The key (:func:`record_key`): ``"<topic>:<partition>"`` of a per-partition event
(``LeaderAndIsr``, ``IsrChange``, ``FetchResponse``); the broker of ``UpdateMetadata``,
``IsrChangePropagation`` and ``BrokerConfig``; the ``controller_id`` of every other
event, or :data:`NO_CONTROLLER_KEY` when it names none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields, is_dataclass
from typing import Any

from state.events import (
    FETCH_ERROR_NONE,
    BrokerConfig,
    ControllerEvent,
    Event,
    FetchResponse,
    IsrChange,
    IsrChangePropagation,
    LeaderAndIsr,
    MetadataPartitionState,
    Source,
    UpdateMetadata,
)
from streaming.feeds.wire import InputRecord

__all__ = [
    "NO_CONTROLLER_KEY",
    "OMITTED_AT_DEFAULT",
    "fetch_response",
    "input_record",
    "record_key",
    "wire_value",
]

NO_CONTROLLER_KEY = "-1"
"""The key of an event keyed by its controller that names none (an admin poll of a
cluster that reports no controller, a metadata log read before its first leader change):
all such events share one Kafka partition of the input topic, and stay in order."""

OMITTED_AT_DEFAULT: Mapping[type[Any], frozenset[str]] = {
    FetchResponse: frozenset({"error"}),
}
"""Fields with a default other than None that the schema lets be absent: left out while
they hold their default (the parser reads the absence as the default)."""

_PER_BROKER = (UpdateMetadata, IsrChangePropagation, BrokerConfig)


def wire_value(event: Event) -> dict[str, Any]:
    """The JSON-ready value of ``event``, as docs/event-contract.md defines it."""
    return _encode(event)


def record_key(event: Event) -> str:
    """The Kafka key of ``event`` (docs/event-contract.md, *Keys*)."""
    if isinstance(event, FetchResponse | LeaderAndIsr | IsrChange):
        return f"{event.topic}:{event.partition}"
    if isinstance(event, _PER_BROKER):
        return str(event.broker)
    controller = event.controller_id
    return NO_CONTROLLER_KEY if controller is None else str(controller)


def input_record(event: Event, key: str | None = None) -> InputRecord:
    """``event`` as a record of its input topic, keyed by :func:`record_key` unless
    ``key`` is given."""
    if type(event) is FetchResponse:  # the bulk of the records: the shortest way
        if key is None:
            key = f"{event.topic}:{event.partition}"
        return InputRecord(Source.FETCH_RESPONSES, key, _fetch_response(event))
    if key is None:
        key = record_key(event)
    if isinstance(event, FetchResponse):
        return InputRecord(Source.FETCH_RESPONSES, key, _fetch_response(event))
    return InputRecord(Source.CONTROLLER_EVENTS, key, _encode(event))


def fetch_response(
    *,
    ts: int,
    topic: str,
    partition: int,
    leader: int,
    follower: int,
    leader_epoch: int,
    fetch_offset: int,
    leader_leo: int,
    high_watermark: int,
    log_start_offset: int | None = None,
    error: str = FETCH_ERROR_NONE,
    bytes: int | None = None,
) -> FetchResponse:
    """``FetchResponse(...)`` at less than half the cost, for the producers that make
    hundreds of thousands (the simulator): the frozen dataclass's ``__init__`` sets each
    field through ``object.__setattr__``; this sets the slots directly. The class has no
    ``__post_init__``, so the value is the same (a property test compares them)."""
    event = _new(FetchResponse)
    _set_ts(event, ts)
    _set_topic(event, topic)
    _set_partition(event, partition)
    _set_leader(event, leader)
    _set_follower(event, follower)
    _set_leader_epoch(event, leader_epoch)
    _set_fetch_offset(event, fetch_offset)
    _set_leader_leo(event, leader_leo)
    _set_high_watermark(event, high_watermark)
    _set_log_start_offset(event, log_start_offset)
    _set_error(event, error)
    _set_bytes(event, bytes)
    return event


_new = object.__new__
(
    _set_ts,
    _set_topic,
    _set_partition,
    _set_leader,
    _set_follower,
    _set_leader_epoch,
    _set_fetch_offset,
    _set_leader_leo,
    _set_high_watermark,
    _set_log_start_offset,
    _set_error,
    _set_bytes,
) = (vars(FetchResponse)[f.name].__set__ for f in fields(FetchResponse))


# ---------------------------------------------------------------------- encoders

_Encoder = Callable[[Any], dict[str, Any]]


def _encode(obj: Any) -> dict[str, Any]:
    """An event, or a nested part of one, as a JSON object."""
    encode = _ENCODERS.get(type(obj))
    if encode is None:
        encode = _ENCODERS.setdefault(type(obj), _encoder(type(obj)))
    return encode(obj)


def _fetch_response(e: FetchResponse) -> dict[str, Any]:
    """Written out by hand: a simulated or polled cluster sends hundreds of thousands.
    (The round-trip property test fails if it forgets a field.)"""
    value = {
        "ts": e.ts,
        "topic": e.topic,
        "partition": e.partition,
        "leader": e.leader,
        "follower": e.follower,
        "leader_epoch": e.leader_epoch,
        "fetch_offset": e.fetch_offset,
        "leader_leo": e.leader_leo,
        "high_watermark": e.high_watermark,
    }
    if e.log_start_offset is not None:
        value["log_start_offset"] = e.log_start_offset
    if e.error != FETCH_ERROR_NONE:
        value["error"] = e.error
    if e.bytes is not None:
        value["bytes"] = e.bytes
    return value


def _metadata_partition_state(s: MetadataPartitionState) -> dict[str, Any]:
    """By hand too: a failover's UpdateMetadata carries every partition to every broker."""
    return {
        "topic": s.topic,
        "partition": s.partition,
        "leader": s.leader,
        "leader_epoch": s.leader_epoch,
        "isr": list(s.isr),
        "replicas": list(s.replicas),
        "offline_replicas": list(s.offline_replicas),
    }


def _partition_states(partitions: tuple[MetadataPartitionState, ...]) -> list[Any]:
    """UpdateMetadata's ``partitions``; a tuple encoded before from :data:`_PARTITION_LISTS`."""
    cached = _PARTITION_LISTS.get(id(partitions))
    if cached is None or cached[0] is not partitions:
        cached = (partitions, [_metadata_partition_state(s) for s in partitions])
        if len(_PARTITION_LISTS) >= _PARTITION_LISTS_KEPT:
            del _PARTITION_LISTS[next(iter(_PARTITION_LISTS))]  # the oldest
        _PARTITION_LISTS[id(partitions)] = cached
    return cached[1]


_PARTITION_LISTS: dict[int, tuple[tuple[MetadataPartitionState, ...], list[Any]]] = {}
"""The last partition-state tuples encoded, by identity (each kept with its tuple, so that
its id is not reused meanwhile), and their JSON lists. A controller sends the same states
to every live broker (the simulator passes one tuple): a failover's 100,000 partitions
to 12 brokers are then written once, and the records share the lists, instead of 1.2
million dicts that the garbage collector walks again and again."""
_PARTITION_LISTS_KEPT = 32


def _encoder(cls: type[Any]) -> _Encoder:
    """The encoder of a dataclass: its fields by the rules of the module's docstring
    (a field named in :data:`_CONVERTERS` is written by its own function)."""
    if not is_dataclass(cls):
        raise TypeError(f"not an event: {cls.__name__}")
    omitted = OMITTED_AT_DEFAULT.get(cls, frozenset())
    defaults = {f.name: f.default for f in fields(cls) if f.name in omitted}
    if any(default is MISSING for default in defaults.values()):
        raise TypeError(f"{cls.__name__}: a field without a default cannot be omitted")
    special = _CONVERTERS.get(cls, {})
    names = tuple((f.name, special.get(f.name, _plain)) for f in fields(cls))
    head = {"type": cls.__name__} if issubclass(cls, ControllerEvent) else {}

    def encode(event: Any) -> dict[str, Any]:
        value = dict(head)
        for name, convert in names:
            item = getattr(event, name)
            if item is None or (name in defaults and item == defaults[name]):
                continue
            value[name] = convert(item)
        return value

    return encode


def _plain(item: Any) -> Any:
    """A field's value as JSON-ready data."""
    if isinstance(item, int | str):
        return item
    if isinstance(item, tuple | list):  # a list where a producer did not make a tuple
        return [_plain(part) for part in item]
    if isinstance(item, Mapping):  # TopicChange.created: JSON keys are strings
        return {str(key): _plain(part) for key, part in item.items()}
    return _encode(item)  # a nested part (its encoder adds no ``type``)


_CONVERTERS: Mapping[type[Any], Mapping[str, Callable[[Any], Any]]] = {
    UpdateMetadata: {"partitions": _partition_states},
}
_ENCODERS: dict[type[Any], _Encoder] = {
    FetchResponse: _fetch_response,
    MetadataPartitionState: _metadata_partition_state,
}
