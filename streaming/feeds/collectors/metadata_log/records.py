"""Decoding one metadata record value, or one KRaft control record, from its bytes.

A metadata record value is a frame (Kafka's ``MetadataRecordSerde``): unsigned varints
for the frame version (1), the record type (the schema's ``apiKey``) and the record
version, then the message at that version. Control records (batches with the control
attribute) carry their type in the key (int16 version, int16 type) and the message in
the value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streaming.feeds.collectors.metadata_log.layouts import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT32S,
    INT64,
    LEADER_CHANGE,
    METADATA_LAYOUTS,
    STRING,
    STRUCTS,
    UINT16,
    UUID,
    UUIDS,
    Field,
)
from streaming.feeds.collectors.metadata_log.wire import DecodeError, Reader

FRAME_VERSION = 1

# ControlRecordType (org.apache.kafka.common.record)
CONTROL_LEADER_CHANGE = 2
CONTROL_SNAPSHOT_HEADER = 3
CONTROL_SNAPSHOT_FOOTER = 4
CONTROL_TYPE_NAMES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    """A decoded record: ``fields`` by schema name; absent tagged fields hold their default."""

    type_id: int
    name: str
    version: int
    fields: dict[str, Any]


def decode_metadata_value(value: bytes | memoryview) -> MetadataRecord:
    """Decode a metadata record value; ``DecodeError`` for unknown types or versions."""
    reader = Reader(value)
    frame = reader.uvarint()
    if frame != FRAME_VERSION:
        raise DecodeError(f"unknown frame version {frame}")
    type_id = reader.uvarint()
    version = reader.uvarint()
    layout = METADATA_LAYOUTS.get(type_id)
    if layout is None:
        raise DecodeError(f"unknown metadata record type {type_id}")
    if layout.fields is None:
        return MetadataRecord(type_id, layout.name, version, {})
    if version > layout.max_version:
        raise DecodeError(f"{layout.name} version {version} is newer than {layout.max_version}")
    fields = _message(reader, layout.fields, version)
    if reader.remaining():
        raise DecodeError(f"{layout.name} v{version}: {reader.remaining()} bytes left over")
    return MetadataRecord(type_id, layout.name, version, fields)


def decode_leader_change(value: bytes | memoryview) -> MetadataRecord:
    """The ``LeaderChangeMessage`` of a LEADER_CHANGE control record."""
    reader = Reader(value)
    version = reader.int16()
    if not 0 <= version <= LEADER_CHANGE.max_version:
        raise DecodeError(f"LeaderChangeMessage version {version} unknown")
    assert LEADER_CHANGE.fields is not None
    fields = _message(reader, LEADER_CHANGE.fields, version)
    return MetadataRecord(CONTROL_LEADER_CHANGE, LEADER_CHANGE.name, version, fields)


def _message(reader: Reader, fields: tuple[Field, ...], version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tagged: dict[int, Field] = {}
    for field in fields:
        if not field.present_in(version):
            out[field.name] = field.default
        elif field.tag is not None:
            tagged[field.tag] = field
            out[field.name] = field.default
        else:
            out[field.name] = _value(reader, field, version)
    for _ in range(reader.uvarint()):
        tag = reader.uvarint()
        size = reader.uvarint()
        known = tagged.get(tag)
        if known is None:
            reader.take(size)  # a field of a newer version: skipped, as Kafka does
            continue
        inner = Reader(reader.take(size))
        out[known.name] = _value(inner, known, version)
        if inner.remaining():
            raise DecodeError(f"tagged field {known.name}: {inner.remaining()} bytes left over")
    return out


def _value(reader: Reader, field: Field, version: int) -> Any:
    kind = field.type
    if kind == INT8:
        return reader.int8()
    if kind == INT16:
        return reader.int16()
    if kind == UINT16:
        return reader.uint16()
    if kind == INT32:
        return reader.int32()
    if kind == INT64:
        return reader.int64()
    if kind == BOOL:
        return reader.boolean()
    if kind == UUID:
        return reader.uuid()
    if kind == STRING:
        text = reader.compact_string()
        if text is None and not field.nullable_in(version):
            raise DecodeError(f"{field.name} is null but not nullable in v{version}")
        return text
    size = reader.compact_length()
    if size is None:
        if not field.nullable_in(version):
            raise DecodeError(f"{field.name} is null but not nullable in v{version}")
        return None
    if kind == INT32S:
        return tuple(reader.int32() for _ in range(size))
    if kind == UUIDS:
        return tuple(reader.uuid() for _ in range(size))
    if kind == STRUCTS:
        return tuple(_message(reader, field.fields, version) for _ in range(size))
    raise DecodeError(f"no reader for type {kind}")
