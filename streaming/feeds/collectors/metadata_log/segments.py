"""The files of a ``__cluster_metadata-0`` directory: log segments and snapshots.

Kafka names a segment after its base offset (``00000000000000012345.log``, 20 digits) and
a KRaft snapshot after the offset it ends at (exclusive) and its epoch
(``00000000000000012345-0000000007.checkpoint``). Segments roll and the oldest are
deleted once a snapshot covers them (first renamed ``*.deleted``, which is ignored
here, as are ``.index``/``.timeindex``, ``*.checkpoint.part`` and ``*.cleaned``).

A batch is read with kafka-python's ``DefaultRecordBatch`` (magic 2: header, CRC-32C,
records); only whole batches are returned, so a batch Kafka is still writing is read on a
later call.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch

from streaming.feeds.collectors.metadata_log.wire import DecodeError

METADATA_PARTITION_DIR = "__cluster_metadata-0"
_SEGMENT = re.compile(r"^(\d{20})\.log$")
_SNAPSHOT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_LOG_OVERHEAD = 12  # baseOffset int64 + batchLength int32
_MAGIC_AT = 16
_MIN_BATCH = 61  # the v2 batch header


@dataclass(frozen=True, slots=True)
class RecordBytes:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Batch:
    """One record batch; ``epoch`` is the quorum (controller) epoch that appended it and
    ``append_ms`` its timestamp (KRaft stamps every record of a batch with the append time)."""

    base_offset: int
    last_offset: int
    epoch: int
    append_ms: int
    is_control: bool
    records: tuple[RecordBytes, ...]
    size: int


@dataclass(frozen=True, slots=True)
class Segment:
    base_offset: int
    path: Path


@dataclass(frozen=True, slots=True)
class Snapshot:
    end_offset: int  # exclusive: the snapshot holds every record below it
    epoch: int
    path: Path


def partition_dir(path: Path) -> Path:
    """``path`` itself, or its ``__cluster_metadata-0`` child (a log dir was given)."""
    child = path / METADATA_PARTITION_DIR
    return child if child.is_dir() else path


def segments(directory: Path) -> list[Segment]:
    found = []
    for name in _names(directory):
        match = _SEGMENT.match(name)
        if match:
            found.append(Segment(int(match.group(1)), directory / name))
    return sorted(found, key=lambda s: s.base_offset)


def snapshots(directory: Path) -> list[Snapshot]:
    found = []
    for name in _names(directory):
        match = _SNAPSHOT.match(name)
        if match:
            found.append(Snapshot(int(match.group(1)), int(match.group(2)), directory / name))
    return sorted(found, key=lambda s: s.end_offset)


def holds_records(path: Path) -> bool:
    """Whether ``path`` is a segment or a snapshot: a change to it may bring records."""
    return bool(_SEGMENT.match(path.name) or _SNAPSHOT.match(path.name))


def _names(directory: Path) -> list[str]:
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return []


class CorruptBatchError(DecodeError):
    """A whole batch whose bytes fail their check; ``size`` lets the reader step over it."""

    def __init__(self, message: str, base_offset: int, size: int) -> None:
        super().__init__(message)
        self.base_offset = base_offset
        self.size = size


def parse_batch(data: bytes | memoryview) -> Batch:
    """One complete batch (exactly its bytes); ``CorruptBatchError`` for a bad magic or CRC."""
    base_offset, length = struct.unpack_from(">qi", data, 0)
    size = _LOG_OVERHEAD + length
    if data[_MAGIC_AT] != 2:
        raise CorruptBatchError(
            f"batch at offset {base_offset}: magic {data[_MAGIC_AT]}, not 2", base_offset, size
        )
    batch = DefaultRecordBatch(bytes(data))
    if not batch.validate_crc():
        raise CorruptBatchError(
            f"batch at offset {base_offset}: CRC-32C mismatch", base_offset, size
        )
    try:
        records = tuple(
            RecordBytes(
                r.offset,
                r.timestamp,
                None if r.key is None else bytes(r.key),
                None if r.value is None else bytes(r.value),
            )
            for r in batch
        )
    except Exception as error:  # kafka-python raises CorruptRecordError and friends
        message = f"batch at offset {base_offset}: {error}"
        raise CorruptBatchError(message, base_offset, size) from None
    return Batch(
        base_offset=base_offset,
        last_offset=batch.last_offset,
        epoch=batch.leader_epoch,
        append_ms=batch.max_timestamp,
        is_control=bool(batch.is_control_batch),
        records=records,
        size=size,
    )


def batches_in(
    data: bytes | memoryview, start: int = 0
) -> Iterator[tuple[int, Batch | CorruptBatchError]]:
    """``(position after it, batch or its error)`` for every whole batch from ``start``;
    stops at a batch that is not complete yet."""
    view = memoryview(data)
    pos = start
    while pos + _LOG_OVERHEAD <= len(view):
        (length,) = struct.unpack_from(">i", view, pos + 8)
        if length < _MIN_BATCH - _LOG_OVERHEAD:
            return  # zeros past the end of a preallocated segment, or torn bytes
        end = pos + _LOG_OVERHEAD + length
        if end > len(view):
            return
        try:
            yield end, parse_batch(view[pos:end])
        except CorruptBatchError as error:
            yield end, error
        pos = end


def read_file(path: Path, position: int, max_bytes: int) -> bytes:
    """Up to ``max_bytes`` of ``path`` from ``position`` (empty if it is gone)."""
    try:
        with path.open("rb") as handle:
            handle.seek(position)
            return handle.read(max_bytes)
    except FileNotFoundError:
        return b""
