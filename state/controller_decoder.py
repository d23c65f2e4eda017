"""Decode and validate the controller events of a batch, the bulky kinds in C.

A cold start brings one LeaderAndIsr per partition and a controller failover an
UpdateMetadata of every partition to every broker: parsed with ``json.loads``, checked
against the JSON Schema and built field by field (``state.event_parser``), an
UpdateMetadata of 1,000 partition states costs about 40 ms. Here a value is first
decoded by msgspec into a typed struct whose constraints are those of
``conf/schemas/controller-events.schema.json`` for these two kinds (the check), then
into the event class itself (the build); both loops run in msgspec's C code.

A value msgspec refuses (another kind of event, a field the struct does not know, an
integral float such as ``5.0``, anything invalid) goes to ``event_parser.parse_record``,
the validator that explains (jsonschema): it accepts it or gives the dead letter its
reason. So every verdict and reason is the schema's where msgspec says no, and where it
says yes the property test (tests/unit/test_controller_decoder_property.py) shows that
the schema says yes with the same event. With a replaced schema
(``$ISRWATCH_CONF_DIR/schemas``) every value goes through ``parse_record``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

from state.event_parser import parse_record
from state.events import ControllerEvent, DeadLetter, LeaderAndIsr, Source, UpdateMetadata
from state.fetch_decoder import (
    INT32_MAX,
    INT64_MAX,
    MAX_REPLICAS,
    MAX_TIMESTAMP_MS,
    MAX_TOPIC_LENGTH,
    bundled_schema_in_use,
)

# The schema's $defs, as msgspec constraints.
_Timestamp = Annotated[int, msgspec.Meta(ge=0, le=MAX_TIMESTAMP_MS)]
_Offset = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
_BrokerId = Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]
_Epoch = _BrokerId
_Partition = Annotated[int, msgspec.Meta(ge=0, le=999_999)]
_Leader = Annotated[int, msgspec.Meta(ge=-2, le=INT32_MAX)]
_Topic = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TOPIC_LENGTH)]
_BrokerIds = tuple[_BrokerId, ...]
_ReplicaIds = Annotated[tuple[_BrokerId, ...], msgspec.Meta(max_length=MAX_REPLICAS)]


class _Wire(
    msgspec.Struct,
    forbid_unknown_fields=True,
    frozen=True,
    gc=False,
    kw_only=True,
    tag_field="type",
):
    """Fields of every controller event. UNSET, not None: the schema refuses ``null``."""

    ts: _Timestamp
    controller_id: _BrokerId | UnsetType = UNSET
    controller_epoch: _Epoch | UnsetType = UNSET
    metadata_offset: _Offset | UnsetType = UNSET


class WireLeaderAndIsr(_Wire, tag="LeaderAndIsr", frozen=True):
    topic: _Topic
    partition: _Partition
    leader: _Leader
    leader_epoch: _Epoch
    isr: _ReplicaIds
    replicas: _ReplicaIds
    partition_epoch: _Epoch
    # stated together or not at all (the schema's dependentRequired): see _stated_apart
    elr: _ReplicaIds | UnsetType = UNSET
    last_known_elr: _ReplicaIds | UnsetType = UNSET


class WireMetadataPartitionState(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    topic: _Topic
    partition: _Partition
    leader: _Leader
    leader_epoch: _Epoch
    isr: _ReplicaIds
    replicas: _ReplicaIds
    offline_replicas: _ReplicaIds


class WireUpdateMetadata(_Wire, tag="UpdateMetadata", frozen=True):
    broker: _BrokerId
    partitions: tuple[WireMetadataPartitionState, ...]
    live_brokers: _BrokerIds | UnsetType = UNSET


_CHECK = msgspec.json.Decoder(WireLeaderAndIsr | WireUpdateMetadata)
_BUILD: dict[type, msgspec.json.Decoder[Any]] = {
    WireLeaderAndIsr: msgspec.json.Decoder(LeaderAndIsr),
    WireUpdateMetadata: msgspec.json.Decoder(UpdateMetadata),
}


def _stated_apart(checked: object) -> bool:
    """An ELR without its last known ELR, or the reverse: the schema refuses it, and the
    parser gives the reason."""
    return isinstance(checked, WireLeaderAndIsr) and (checked.elr is UNSET) != (
        checked.last_known_elr is UNSET
    )


def decode_controller_events(
    values: Sequence[bytes | None],
) -> tuple[list[tuple[int, ControllerEvent]], list[tuple[int, DeadLetter]]]:
    """``(index, event)`` of the valid values and ``(index, dead letter)`` of the others,
    each in input order."""
    events: list[tuple[int, ControllerEvent]] = []
    dead: list[tuple[int, DeadLetter]] = []
    fast = bundled_schema_in_use(Source.CONTROLLER_EVENTS)
    for index, value in enumerate(values):
        # an escape may be a lone surrogate, which msgspec takes: the parser judges those
        if fast and isinstance(value, bytes) and b"\\u" not in value:
            try:
                checked = _CHECK.decode(value)
                build = None if _stated_apart(checked) else _BUILD.get(type(checked))
                if build is not None:
                    events.append((index, build.decode(value)))
                    continue
            # ValueError: bad UTF-8; RecursionError: deep nesting msgspec skips while it
            # looks for the tag ("type" after a value nested 100,000 deep)
            except (msgspec.MsgspecError, ValueError, RecursionError):
                pass  # judged by the schema below
        parsed = parse_record(Source.CONTROLLER_EVENTS, value)
        if isinstance(parsed, DeadLetter):
            dead.append((index, parsed))
        else:
            assert isinstance(parsed, ControllerEvent)
            events.append((index, parsed))
    return events, dead
