"""SYNTHETIC KRaft metadata records and batches, for tests only.

Nothing here is real Kafka output: the bytes are built in code, field by field, from the
layouts in Apache Kafka's ``metadata/src/main/resources/common/metadata/*.json`` (3.3.0
to 4.0) and ``LeaderChangeMessage.json``, written again by hand here (not from the
decoder's own table, so that a slip in one shows up against the other). Real logs are
tested in ``test_metadata_log_fixtures.py``.

Batches are framed by kafka-python's ``DefaultRecordBatchBuilder``; the fields a broker
sets (base offset, partition leader epoch, the control bit) are then written into the
header and the CRC-32C computed again.
"""

from __future__ import annotations

import struct
from base64 import urlsafe_b64decode
from collections.abc import Sequence
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

CONTROL_ATTRIBUTE = 0x20


def uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def uuid_bytes(text: str) -> bytes:
    """A Kafka Uuid string (url-safe base64, 22 characters) as its 16 bytes."""
    return urlsafe_b64decode(text + "==")


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(text: str | None) -> bytes:
    if text is None:
        return uvarint(0)
    raw = text.encode("utf-8")
    return uvarint(len(raw) + 1) + raw


def int32s(values: Sequence[int] | None) -> bytes:
    if values is None:
        return uvarint(0)
    return uvarint(len(values) + 1) + b"".join(i32(v) for v in values)


def uuids(values: Sequence[str] | None) -> bytes:
    if values is None:
        return uvarint(0)
    return uvarint(len(values) + 1) + b"".join(uuid_bytes(v) for v in values)


def tagged(fields: dict[int, bytes]) -> bytes:
    """The tagged-field section: count, then (tag, size, bytes) by ascending tag."""
    out = uvarint(len(fields))
    for tag in sorted(fields):
        out += uvarint(tag) + uvarint(len(fields[tag])) + fields[tag]
    return out


def frame(type_id: int, version: int, body: bytes) -> bytes:
    return uvarint(1) + uvarint(type_id) + uvarint(version) + body


# ---------------------------------------------------------------- records


def topic_record(name: str, topic_id: str) -> bytes:
    return frame(2, 0, string(name) + uuid_bytes(topic_id) + tagged({}))


def partition_record(
    version: int,
    topic_id: str,
    partition: int,
    replicas: Sequence[int],
    isr: Sequence[int],
    leader: int,
    leader_epoch: int = 0,
    partition_epoch: int = 0,
    directories: Sequence[str] | None = None,
) -> bytes:
    body = i32(partition) + uuid_bytes(topic_id) + int32s(replicas) + int32s(isr)
    body += int32s([]) + int32s([]) + i32(leader) + i32(leader_epoch) + i32(partition_epoch)
    if version >= 1:
        body += uuids(
            directories if directories is not None else ["AAAAAAAAAAAAAAAAAAAAAA"] * len(replicas)
        )
    return frame(3, version, body + tagged({}))


def partition_change_record(
    version: int,
    topic_id: str,
    partition: int,
    *,
    isr: Sequence[int] | None = None,
    leader: int | None = None,
    replicas: Sequence[int] | None = None,
    directories: Sequence[str] | None = None,
    extra_tags: dict[int, bytes] | None = None,
) -> bytes:
    tags: dict[int, bytes] = dict(extra_tags or {})
    if isr is not None:
        tags[0] = int32s(isr)
    if leader is not None:
        tags[1] = i32(leader)
    if replicas is not None:
        tags[2] = int32s(replicas)
    if directories is not None and version >= 1:
        tags[8] = uuids(directories)
    return frame(5, version, i32(partition) + uuid_bytes(topic_id) + tagged(tags))


def remove_topic_record(topic_id: str) -> bytes:
    return frame(9, 0, uuid_bytes(topic_id) + tagged({}))


def register_broker_record(
    version: int, broker: int, epoch: int, *, fenced: bool = True, incarnation: str = "A" * 22
) -> bytes:
    body = i32(broker)
    if version >= 2:
        body += i8(0)  # IsMigratingZkBroker
    body += uuid_bytes(incarnation) + i64(epoch)
    endpoint = string("PLAINTEXT") + string("localhost") + struct.pack(">H", 9092) + i16(0)
    body += uvarint(2) + endpoint + tagged({})  # one endpoint
    body += uvarint(1)  # no features
    body += string(None)  # rack
    body += i8(1 if fenced else 0)
    if version >= 1:
        body += i8(0)  # InControlledShutdown
    tags = {0: uuids(["AAAAAAAAAAAAAAAAAAAAAQ"])} if version >= 3 else {}
    return frame(0, version, body + tagged(tags))


def unregister_broker_record(broker: int, epoch: int) -> bytes:
    return frame(1, 0, i32(broker) + i64(epoch) + tagged({}))


def fence_broker_record(broker: int, epoch: int, *, fence: bool) -> bytes:
    return frame(7 if fence else 8, 0, i32(broker) + i64(epoch) + tagged({}))


def broker_registration_change_record(
    version: int,
    broker: int,
    epoch: int,
    *,
    fenced: int | None = None,
    controlled_shutdown: int | None = None,
) -> bytes:
    tags = {}
    if fenced is not None:
        tags[0] = i8(fenced)
    if controlled_shutdown is not None and version >= 1:
        tags[1] = i8(controlled_shutdown)
    return frame(17, version, i32(broker) + i64(epoch) + tagged(tags))


def config_record(resource_type: int, resource: str, name: str, value: str | None) -> bytes:
    body = i8(resource_type) + string(resource) + string(name) + string(value)
    return frame(4, 0, body + tagged({}))


def feature_level_record(name: str, level: int) -> bytes:
    return frame(12, 0, string(name) + i16(level) + tagged({}))


def no_op_record() -> bytes:
    return frame(20, 0, tagged({}))


def begin_transaction_record(name: str = "synthetic") -> bytes:
    return frame(23, 0, tagged({0: string(name)}))


def end_transaction_record() -> bytes:
    return frame(24, 0, tagged({}))


def abort_transaction_record() -> bytes:
    return frame(25, 0, tagged({}))


def leader_change_value(leader: int, voters: Sequence[int]) -> bytes:
    """``LeaderChangeMessage`` v0: Version, LeaderId, Voters, GrantingVoters."""
    voter_array = uvarint(len(voters) + 1) + b"".join(i32(v) + tagged({}) for v in voters)
    return i16(0) + i32(leader) + voter_array + voter_array + tagged({})


# ---------------------------------------------------------------- batches


def batch(
    base_offset: int,
    epoch: int,
    timestamp: int,
    values: Sequence[bytes],
    *,
    control_key: bytes | None = None,
) -> bytes:
    """One v2 batch holding ``values`` at offsets ``base_offset``..; a control batch when
    ``control_key`` is given (every record gets that key)."""
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 20)
    for delta, value in enumerate(values):
        builder.append(delta, timestamp, control_key, value, [])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)
    struct.pack_into(">i", data, 12, epoch)
    if control_key is not None:
        attributes = struct.unpack_from(">h", data, 21)[0] | CONTROL_ATTRIBUTE
        struct.pack_into(">h", data, 21, attributes)
    struct.pack_into(">I", data, 17, calc_crc32c(memoryview(data)[21:]))
    return bytes(data)


def leader_change_batch(
    base_offset: int, epoch: int, timestamp: int, leader: int, voters: Sequence[int]
) -> bytes:
    key = i16(0) + i16(2)  # control record key: version 0, type LEADER_CHANGE
    return batch(
        base_offset, epoch, timestamp, [leader_change_value(leader, voters)], control_key=key
    )


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


def write_segment(directory: Path, base_offset: int, batches: Sequence[bytes]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / segment_name(base_offset)
    path.write_bytes(b"".join(batches))
    return path
