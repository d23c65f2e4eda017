"""Kafka's primitive wire types, as the metadata records use them (flexible versions only).

Every metadata record and the KRaft control records are *flexible* messages (KIP-482):
lengths are unsigned varints, strings and arrays are "compact" (length + 1, 0 for null),
and each message (and each struct inside it) ends with a tagged-field section: a count,
then per field its tag, its size and its bytes. Unknown tags are skipped, which is what
lets a reader decode records written by a newer Kafka.
"""

from __future__ import annotations

import struct
import uuid
from base64 import urlsafe_b64encode


class DecodeError(ValueError):
    """The bytes do not hold what the layout says they should."""


class Reader:
    """Reads primitives from ``data`` in order; raises ``DecodeError`` past the end."""

    __slots__ = ("_data", "_end", "pos")

    def __init__(self, data: bytes | memoryview, pos: int = 0, end: int | None = None) -> None:
        self._data = memoryview(data)
        self.pos = pos
        self._end = len(self._data) if end is None else end

    def remaining(self) -> int:
        return self._end - self.pos

    def take(self, size: int) -> memoryview:
        if size < 0 or self.pos + size > self._end:
            raise DecodeError(f"needs {size} bytes at {self.pos}, has {self.remaining()}")
        start = self.pos
        self.pos += size
        return self._data[start : self.pos]

    def _unpack(self, fmt: str, size: int) -> int:
        value: int = struct.unpack(fmt, self.take(size))[0]
        return value

    def int8(self) -> int:
        return self._unpack(">b", 1)

    def int16(self) -> int:
        return self._unpack(">h", 2)

    def uint16(self) -> int:
        return self._unpack(">H", 2)

    def int32(self) -> int:
        return self._unpack(">i", 4)

    def int64(self) -> int:
        return self._unpack(">q", 8)

    def boolean(self) -> bool:
        return self.int8() != 0

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            if shift > 28:
                raise DecodeError(f"unsigned varint longer than 5 bytes at {self.pos}")
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def uuid(self) -> str:
        """Kafka's own textual form of a Uuid: url-safe base64 without padding."""
        return uuid_text(bytes(self.take(16)))

    def compact_length(self) -> int | None:
        """A compact string/array length: None for null."""
        encoded = self.uvarint()
        return None if encoded == 0 else encoded - 1

    def compact_string(self) -> str | None:
        size = self.compact_length()
        if size is None:
            return None
        try:
            return bytes(self.take(size)).decode("utf-8")
        except UnicodeDecodeError as error:
            raise DecodeError(f"string is not UTF-8: {error}") from None


def uuid_text(raw: bytes) -> str:
    """``Uuid.toString()``: 16 bytes as url-safe base64, without the ``==`` padding."""
    return urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def uuid_canonical(text: str) -> str:
    """The 8-4-4-4-12 hex form of a Kafka Uuid string (what ``partition.metadata`` shows)."""
    from base64 import urlsafe_b64decode

    return str(uuid.UUID(bytes=urlsafe_b64decode(text + "==")))
