"""Kafka broker log lines -> typed records. Pure: no I/O, no state.

A log4j entry starts with a header line ``[yyyy-MM-dd HH:mm:ss,SSS] LEVEL message
(logger)`` (Kafka's ``log4j.properties``; ``.`` before the milliseconds is accepted too).
Lines that do not start with a header continue the previous entry (stack traces,
messages with a newline); the kinds parsed here are all single-line messages, so a
continuation line is skipped, never parsed.

Each supported message is recognised by a marker and then parsed strictly: a line that
has the marker but not the expected shape is ``Unparseable`` with a reason, never an
exception. The formats come from Apache Kafka's source (``log_messages`` names the class
that logs each one on its pattern) and were checked against real broker logs; the parser
tests hold one sample of each.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import tzinfo
from typing import Final

from streaming.feeds.collectors.log_layouts import (
    CONTINUATION,
    Continuation,
    LineReader,
    Unrecognised,
)
from streaming.feeds.collectors.log_messages import controller, isr_changes, state_changes
from streaming.feeds.collectors.log_messages.controller import ControllerRecord
from streaming.feeds.collectors.log_messages.isr_changes import IsrRecord
from streaming.feeds.collectors.log_messages.state_changes import StateChangeRecord
from streaming.feeds.collectors.log_messages.wording import MalformedError, Marker, NoFact

__all__ = ["CONTINUATION", "Continuation"]

Record = StateChangeRecord | IsrRecord | ControllerRecord

RECORD_KINDS: Final[Mapping[type[object], str]] = {
    **state_changes.RECORD_KINDS,
    **isr_changes.RECORD_KINDS,
    **controller.RECORD_KINDS,
}
"""The metrics label of each record type."""


def record_kind(record: Record) -> str:
    return RECORD_KINDS[type(record)]


@dataclass(frozen=True, slots=True)
class Ignored:
    """An entry of a kind the collector does not use (most of a broker's log)."""


@dataclass(frozen=True, slots=True)
class Unparseable:
    """A header that is not a valid time, or a supported message in an unexpected shape."""

    reason: str


LineResult = Record | Continuation | Ignored | Unparseable

IGNORED: Final = Ignored()

# --------------------------------------------------------------------------- lines


class LineParser:
    """One file's lines -> results: the layout (``log_layouts``), then the message."""

    def __init__(self, zone: tzinfo, custom_layout: re.Pattern[str] | None = None) -> None:
        self._reader = LineReader(zone, custom_layout)
        self.last_ts: int | None = None  # the time of the latest entry read

    def parse(self, line: str) -> LineResult:
        """Parse one line of a broker log; never raises."""
        read = self._reader.read(line)
        if isinstance(read, Continuation):
            return read
        if isinstance(read, Unrecognised):
            return Unparseable(read.reason)
        self.last_ts = read.ts if self.last_ts is None else max(self.last_ts, read.ts)
        return parse_message(read.ts, read.message)


def parse_line(line: str, zone: tzinfo) -> LineResult:
    """Parse one line in one of the built-in layouts; never raises."""
    return LineParser(zone).parse(line)


# --------------------------------------------------------------------------- messages

_MARKERS: Final[tuple[Marker[Record], ...]] = (
    *state_changes.MARKERS,
    *isr_changes.MARKERS,
    *controller.MARKERS,
)
"""Tried in this order: a message goes to the parser of the first marker it contains."""


def parse_message(ts: int, message: str) -> Record | Ignored | Unparseable:
    """The record a log message (without its header and logger) holds."""
    marker = next((marker for marker in _MARKERS if marker.text in message), None)
    if marker is None:
        return IGNORED
    kind = RECORD_KINDS[marker.record]
    try:
        record = marker.parse(ts, message)
    except (MalformedError, ValueError):
        return Unparseable(f"malformed_{kind}")
    if isinstance(record, NoFact):
        return IGNORED
    if record is None:
        return IGNORED if marker.shared else Unparseable(f"malformed_{kind}")
    return record
