"""The two large requests of an admin poll, Metadata and ListOffsets, as columns on the wire.

kafka-python builds a request of an object per partition and decodes an answer into an
object per partition (its generic protocol classes): at 10,000 partitions x 3, the
ListOffsets requests of one poll alone held 40,000 partition objects, built and encoded in
about 0.1 s of CPU, and the Metadata answer became 10,000 dicts (``to_dict``) before the
collector read them (docs/real-kafka.md#admin-cost). Here the request's partitions are one
numpy array written as bytes, and the answers are read by a compiled pass (numba) straight
into columns: a ``PolledPartitions`` for Metadata, offset columns for ListOffsets.

Only the flexible versions (KIP-482's compact encoding) are written and read here:
ListOffsets 6 to 10 and Metadata 12 and 13 (Kafka 4.1 answers ListOffsets 10 and
Metadata 13; the embedded broker, Tansu, 9 and 12). ``supported`` says whether a
cluster speaks one; the source otherwise asks with kafka-python's own classes.

The requests go through kafka-python's connections like its own (same header, framing,
correlation and timeouts): an object with the few members its connection and protocol
parser read (``API_VERSION``, ``with_header``, ``encode``, ``header``), whose header names
the answer's reader in place of kafka-python's response class.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, ClassVar

import numba
import numpy as np
import numpy.typing as npt

from streaming.feeds.collectors.polled_partitions import NO_EPOCH, PolledPartitions

LIST_OFFSETS = 2
METADATA = 3
ERROR_NONE = 0
REPLICA_NOT_AVAILABLE = 9  # a partition with a replica offline: still described
NO_CURRENT_LEADER_EPOCH = -1  # ListOffsets: do not fence on the leader's epoch
LATEST_TIMESTAMP = -1
LIST_OFFSETS_TIMEOUT_MS = 30_000  # v10's TimeoutMs: only for tiered storage's lookups

Ints = npt.NDArray[np.int64]
Bytes = npt.NDArray[np.uint8]

# Each partition of a ListOffsets request, v6+: PartitionIndex, CurrentLeaderEpoch,
# Timestamp, and no tagged field (a zero count)
_REQUEST_PARTITION = np.dtype([("p", ">i4"), ("e", ">i4"), ("t", ">i8"), ("tags", "u1")])


class MalformedAnswerError(ValueError):
    """An answer that ends before its fields do (or claims more than it holds)."""


def supported(manager: Any, request: type[RawRequest]) -> bool:
    """Whether the cluster's brokers (as the client negotiated with them) answer one of
    the versions ``request`` is written in."""
    import kafka.errors as errors

    try:
        manager.broker_version_data.api_version(request)
    except (errors.IncompatibleBrokerVersion, AttributeError):
        return False
    return True


# ---------------------------------------------------------------------- the requests


class RawRequest:
    """A request written by hand, sent on kafka-python's connections."""

    API_KEY: ClassVar[int]
    name: ClassVar[str]
    min_version: ClassVar[int]
    max_version: ClassVar[int]
    # what kafka-python's version negotiation reads (on its own classes, per instance)
    _min_version: ClassVar[int]
    _max_version: ClassVar[int]

    def __init_subclass__(cls) -> None:
        cls._min_version, cls._max_version = cls.min_version, cls.max_version

    def __init__(self) -> None:
        self._version: int | None = None
        self._header: _Header | None = None

    @property
    def API_VERSION(self) -> int | None:  # noqa: N802 - kafka-python's name
        return self._version

    @API_VERSION.setter
    def API_VERSION(self, version: int) -> None:  # noqa: N802
        if not self.min_version <= version <= self.max_version:
            raise ValueError(f"{self.name} v{version} is not written here")
        self._version = version

    @property
    def header(self) -> _Header | None:
        return self._header

    def expect_response(self) -> bool:
        return True

    def with_header(self, correlation_id: int = 0, client_id: str = "kafka-python") -> None:
        from kafka.protocol.api_header import RequestHeader

        kafka_header = RequestHeader(
            request_api_key=self.API_KEY,
            request_api_version=self._version,
            correlation_id=correlation_id,
            client_id=client_id,
        )
        self._header = _Header(kafka_header, self)

    def encode(self, header: bool = False, framed: bool = False) -> bytes:
        if self._version is None:
            raise ValueError("Version required to encode data")
        parts = []
        if header:
            if self._header is None:
                raise ValueError("No header found")
            parts.append(self._header.kafka_header.encode(flexible=True))
        parts.append(self.body(self._version))
        data = b"".join(parts)
        return struct.pack(">i", len(data)) + data if framed else data

    def body(self, version: int) -> bytes:
        raise NotImplementedError

    def read(self, body: bytes, version: int) -> Any:
        """The answer's body (after its header), read."""
        raise NotImplementedError

    def __str__(self) -> str:
        return f"{self.name}(v{self._version})"


class _Header:
    """The request header kafka-python's parser keeps until the answer comes: its
    correlation id, and the reader of the answer (kafka-python's own class otherwise)."""

    def __init__(self, kafka_header: Any, request: RawRequest) -> None:
        self.kafka_header = kafka_header
        self.correlation_id = kafka_header.correlation_id
        self.request_api_key = request.API_KEY
        self.request_api_version = request.API_VERSION
        self._request = request

    def get_response_class(self) -> _Reader:
        version = self._request.API_VERSION
        assert version is not None
        return _Reader(self._request, version)


class _Reader:
    """What kafka-python's parser calls an answer's class: its header, then its body."""

    def __init__(self, request: RawRequest, version: int) -> None:
        self._request = request
        self._version = version

    def parse_header(self, data: Any) -> Any:
        from kafka.protocol.api_header import ResponseHeader

        return ResponseHeader.decode(data, flexible=True)

    def decode(self, data: Any) -> Any:
        return self._request.read(bytes(data.read()), self._version)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _compact_string(value: str) -> bytes:
    data = value.encode("utf-8")
    return _uvarint(len(data) + 1) + data


@dataclass(frozen=True, slots=True)
class LatestOffsets:
    """A ListOffsets answer: one entry per partition, ``topic`` an index into
    ``topics``; ``offset`` is meaningful where ``error`` is 0."""

    throttle_time_ms: int
    topics: list[str]
    topic: Ints
    partition: Ints
    error: Ints
    offset: Ints


class ListOffsetsLatest(RawRequest):
    """ListOffsets for the latest offset of some partitions of a table, as ``replica_id``
    (-2, the debugging replica: the answering replica's log end offset; -1, a
    consumer: the high watermark)."""

    API_KEY = LIST_OFFSETS
    name = "ListOffsetsRequest"
    min_version = 6
    max_version = 10

    def __init__(self, table: PolledPartitions, rows: Ints, replica_id: int) -> None:
        super().__init__()
        self._table = table
        self._rows = rows
        self._replica_id = replica_id

    def body(self, version: int) -> bytes:
        table, rows = self._table, self._rows
        entries = np.zeros(len(rows), _REQUEST_PARTITION)
        entries["p"] = table.partition[rows]
        entries["e"] = NO_CURRENT_LEADER_EPOCH
        entries["t"] = LATEST_TIMESTAMP
        packed = entries.tobytes()
        size = _REQUEST_PARTITION.itemsize
        # the rows are in table order: each topic's are one run
        topic = table.topic_of_row()[rows]
        starts = np.flatnonzero(np.concatenate(([True], topic[1:] != topic[:-1])))
        ends = [*starts[1:].tolist(), len(rows)]
        parts = [struct.pack(">ib", self._replica_id, 0), _uvarint(len(starts) + 1)]
        for start, end in zip(starts.tolist(), ends, strict=True):
            parts.append(_compact_string(table.topics[topic[start]]))
            parts.append(_uvarint(end - start + 1))
            parts.append(packed[start * size : end * size])
            parts.append(b"\x00")  # the topic's tagged fields: none
        if version >= 10:
            parts.append(struct.pack(">i", LIST_OFFSETS_TIMEOUT_MS))
        parts.append(b"\x00")
        return b"".join(parts)

    def read(self, body: bytes, version: int) -> LatestOffsets:
        buf = np.frombuffer(body, np.uint8)
        status, throttle, names, topic, partition, error, offset = _read_list_offsets(buf)
        if status < 0:
            raise MalformedAnswerError(f"ListOffsets v{version}: answer ends early")
        return LatestOffsets(
            throttle_time_ms=int(throttle),
            topics=_names(body, names),
            topic=topic,
            partition=partition,
            error=error,
            offset=offset,
        )


@dataclass(frozen=True, slots=True)
class MetadataAnswer:
    """A Metadata answer's partitions (those without error, or with a replica
    unavailable, of topics without error) and controller."""

    throttle_time_ms: int
    controller_id: int
    error_code: int
    partitions: PolledPartitions


class MetadataOfAllTopics(RawRequest):
    """Metadata for every topic, read into a ``PolledPartitions``."""

    API_KEY = METADATA
    name = "MetadataRequest"
    min_version = 12
    max_version = 13

    def body(self, version: int) -> bytes:
        # Topics: null (all); AllowAutoTopicCreation, IncludeTopicAuthorizedOperations:
        # false; no tagged field
        return b"\x00\x00\x00\x00"

    def read(self, body: bytes, version: int) -> MetadataAnswer:
        buf = np.frombuffer(body, np.uint8)
        out = _read_metadata(buf, version >= 13)
        status, throttle, controller, error_code, names, kept = out[:6]
        if status < 0:
            raise MalformedAnswerError(f"Metadata v{version}: answer ends early")
        topic, partition, leader, epoch, replica_start, replicas, isr_start, isr = out[6:]
        all_names = _names(body, names)
        keep = np.flatnonzero(kept)  # topics without error
        index = np.full(len(all_names), -1, np.int64)
        index[keep] = np.arange(len(keep))
        table = PolledPartitions.sorted_from(
            [all_names[i] for i in keep.tolist()],
            index[topic],
            partition,
            leader,
            np.where(epoch >= 0, epoch, NO_EPOCH),
            replica_start,
            replicas,
            isr_start,
            isr,
        )
        return MetadataAnswer(
            throttle_time_ms=int(throttle),
            controller_id=int(controller),
            error_code=int(error_code),
            partitions=table,
        )


def _names(body: bytes, spans: Ints) -> list[str]:
    """The strings at (start, length) rows of ``spans`` in ``body``."""
    return [body[start : start + length].decode("utf-8") for start, length in spans.tolist()]


# ---------------------------------------------------------------------- the readers
# Compiled (numba, cached on disk): a pass over the answer's bytes, one partition after
# the other, as Kafka wrote them. A read past the end returns a negative status.


@numba.njit(cache=True, nogil=True)
def _varint(buf: Bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint at ``pos``: (value, next position), or (0, -1) past the end."""
    value = 0
    shift = 0
    n = len(buf)
    while True:
        if pos >= n or shift > 63:
            return 0, -1
        byte = int(buf[pos])
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


@numba.njit(cache=True, nogil=True)
def _int(buf: Bytes, pos: int, size: int) -> int:
    """A big-endian signed integer of ``size`` bytes at ``pos`` (within bounds)."""
    value = 0
    for i in range(size):
        value = (value << 8) | int(buf[pos + i])
    if value >= 1 << (8 * size - 1):
        value -= 1 << (8 * size)
    return value


@numba.njit(cache=True, nogil=True)
def _skip_tags(buf: Bytes, pos: int) -> int:
    """Past a tagged-fields section (a count, then tag, size and bytes each)."""
    count, pos = _varint(buf, pos)
    for _ in range(count):
        if pos < 0:
            return -1
        _tag, pos = _varint(buf, pos)
        if pos < 0:
            return -1
        size, pos = _varint(buf, pos)
        if pos < 0 or pos + size > len(buf):
            return -1
        pos += size
    return pos


@numba.njit(cache=True, nogil=True)
def _skip_string(buf: Bytes, pos: int) -> int:
    """Past a compact (nullable) string."""
    length, pos = _varint(buf, pos)
    if pos < 0 or pos + max(length - 1, 0) > len(buf):
        return -1
    return pos + max(length - 1, 0)


@numba.njit(cache=True, nogil=True)
def _read_list_offsets(
    buf: Bytes,
) -> tuple[int, int, Ints, Ints, Ints, Ints, Ints]:
    """ListOffsets v6+: (status, throttle, topic name spans, and per partition: topic,
    partition, error, offset)."""
    n = len(buf)
    most = n // 27 + 1  # an answered partition takes at least 27 bytes
    names = np.zeros((n // 2 + 1, 2), np.int64)
    topic = np.zeros(most, np.int64)
    partition = np.zeros(most, np.int64)
    error = np.zeros(most, np.int64)
    offset = np.zeros(most, np.int64)
    empty = np.zeros(0, np.int64)
    if n < 4:
        return -1, 0, names[:0], empty, empty, empty, empty
    throttle = _int(buf, 0, 4)
    topics, pos = _varint(buf, 4)
    rows = 0
    for t in range(topics - 1):
        if pos < 0:
            break
        length, pos = _varint(buf, pos)
        if pos < 0 or pos + max(length - 1, 0) > n:
            pos = -1
            break
        names[t, 0] = pos
        names[t, 1] = max(length - 1, 0)
        pos += max(length - 1, 0)
        count, pos = _varint(buf, pos)
        for _ in range(count - 1):
            if pos < 0 or pos + 26 > n or rows >= most:
                pos = -1
                break
            topic[rows] = t
            partition[rows] = _int(buf, pos, 4)
            error[rows] = _int(buf, pos + 4, 2)
            # pos + 6: the timestamp
            offset[rows] = _int(buf, pos + 14, 8)
            # pos + 22: the leader epoch
            pos = _skip_tags(buf, pos + 26)
            rows += 1
        if pos < 0:
            break
        pos = _skip_tags(buf, pos)
    if pos >= 0:
        pos = _skip_tags(buf, pos)
    status = 0 if pos >= 0 else -1
    kept = max(topics - 1, 0) if pos >= 0 else 0
    return (
        status,
        throttle,
        names[:kept],
        topic[:rows],
        partition[:rows],
        error[:rows],
        offset[:rows],
    )


@numba.njit(cache=True, nogil=True)
def _int_array(buf: Bytes, pos: int, out: Ints, at: int) -> tuple[int, int]:
    """A compact array of int32 at ``pos`` written into ``out`` from ``at``: (next
    position, next ``at``), or (-1, at) past the end."""
    count, pos = _varint(buf, pos)
    if pos < 0:
        return -1, at
    count = max(count - 1, 0)
    if pos + 4 * count > len(buf) or at + count > len(out):
        return -1, at
    for i in range(count):
        out[at + i] = _int(buf, pos + 4 * i, 4)
    return pos + 4 * count, at + count


@numba.njit(cache=True, nogil=True)
def _read_metadata(
    buf: Bytes, top_error: bool
) -> tuple[
    int, int, int, int, Ints, npt.NDArray[np.bool_], Ints, Ints, Ints, Ints, Ints, Ints, Ints, Ints
]:
    """Metadata v12/v13: (status, throttle, controller, error code, topic name spans,
    whether each topic is kept (no error), and the kept partitions' columns: topic,
    partition, leader, leader epoch, replica starts and replicas, ISR starts and ISR)."""
    n = len(buf)
    most = n // 27 + 1  # a partition takes at least 27 bytes
    names = np.zeros((n // 20 + 1, 2), np.int64)
    kept = np.zeros(n // 20 + 1, np.bool_)
    topic = np.zeros(most, np.int64)
    partition = np.zeros(most, np.int64)
    leader = np.zeros(most, np.int64)
    epoch = np.zeros(most, np.int64)
    replica_start = np.zeros(most + 1, np.int64)
    isr_start = np.zeros(most + 1, np.int64)
    replicas = np.zeros(n // 4 + 1, np.int64)
    isr = np.zeros(n // 4 + 1, np.int64)
    offline = np.zeros(n // 4 + 1, np.int64)
    rows = 0
    at_replicas = 0
    at_isr = 0
    throttle = 0
    controller = -1
    error_code = 0
    topics = 0
    pos = -1
    if n >= 4:
        throttle = _int(buf, 0, 4)
        brokers, pos = _varint(buf, 4)
        for _ in range(brokers - 1):
            if pos < 0 or pos + 4 > n:
                pos = -1
                break
            pos = _skip_string(buf, pos + 4)  # NodeId, Host
            if pos < 0 or pos + 4 > n:
                pos = -1
                break
            pos = _skip_string(buf, pos + 4)  # Port, Rack
            if pos < 0:
                break
            pos = _skip_tags(buf, pos)
        if pos >= 0:
            pos = _skip_string(buf, pos)  # ClusterId
        if pos >= 0 and pos + 4 <= n:
            controller = _int(buf, pos, 4)
            topics, pos = _varint(buf, pos + 4)
        else:
            pos = -1
    topics = max(topics - 1, 0)
    if topics > len(kept):
        pos = -1
    t = 0
    while pos >= 0 and t < topics:
        if pos + 2 > n:
            pos = -1
            break
        topic_error = _int(buf, pos, 2)
        length, pos = _varint(buf, pos + 2)
        if pos < 0 or pos + max(length - 1, 0) + 17 > n:
            pos = -1
            break
        names[t, 0] = pos
        names[t, 1] = max(length - 1, 0)
        kept[t] = topic_error == 0 and length > 0
        pos += max(length - 1, 0) + 17  # the name, TopicId, IsInternal
        count, pos = _varint(buf, pos)
        for _ in range(count - 1):
            if pos < 0 or pos + 14 > n or rows >= most:
                pos = -1
                break
            partition_error = _int(buf, pos, 2)
            keep = kept[t] and (partition_error == 0 or partition_error == 9)
            topic[rows] = t
            partition[rows] = _int(buf, pos + 2, 4)
            leader[rows] = _int(buf, pos + 6, 4)
            epoch[rows] = _int(buf, pos + 10, 4)
            pos, next_replicas = _int_array(buf, pos + 14, replicas, at_replicas)
            if pos < 0:
                break
            pos, next_isr = _int_array(buf, pos, isr, at_isr)
            if pos < 0:
                break
            pos, _ = _int_array(buf, pos, offline, 0)  # OfflineReplicas: not read
            if pos < 0:
                break
            pos = _skip_tags(buf, pos)
            if keep:
                at_replicas = next_replicas
                at_isr = next_isr
                rows += 1
                replica_start[rows] = at_replicas
                isr_start[rows] = at_isr
        if pos < 0 or pos + 4 > n:
            pos = -1
            break
        pos = _skip_tags(buf, pos + 4)  # TopicAuthorizedOperations
        t += 1
    if pos >= 0 and top_error:
        if pos + 2 > n:
            pos = -1
        else:
            error_code = _int(buf, pos, 2)
            pos += 2
    if pos >= 0:
        pos = _skip_tags(buf, pos)
    status = 0 if pos >= 0 else -1
    if status < 0:
        rows = 0
        topics = 0
    return (
        status,
        throttle,
        controller,
        error_code,
        names[:topics],
        kept[:topics],
        topic[:rows],
        partition[:rows],
        leader[:rows],
        epoch[:rows],
        replica_start[: rows + 1],
        replicas[: replica_start[rows]],
        isr_start[: rows + 1],
        isr[: isr_start[rows]],
    )
