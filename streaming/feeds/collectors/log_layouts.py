"""Log lines -> entries (time, level, logger, message), whatever the layout. Pure.

A broker's log reaches the collector in one of a few layouts, often behind a prefix
that the tool shipping it added. The reader first removes the prefixes, then tries each
layout in turn:

* prefixes: ``docker compose`` (``kafka-1  | ``), ``kubectl logs --prefix``
  (``[pod/kafka-0/kafka] ``), ``kubectl logs --timestamps`` (an RFC 3339 time), journald's
  and syslog's ``Mmm dd HH:MM:SS host unit[pid]: `` and RFC 5424's
  ``<pri>1 time host app pid msgid - ``;
* layouts, by their log4j pattern:

  - ``apache``: ``[%d] %p %m (%c)%n``, Kafka's own ``log4j.properties`` (0.10 to 3.x),
    Kafka 4's ``log4j2.yaml``, Confluent's and Bitnami's images;
  - ``strimzi``: ``%d{ISO8601} %p %m (%c) [%t]%n``, no brackets around the time and the
    thread after the logger;
  - ``spring``: Spring Boot's console layout of an embedded broker,
    ``2024-01-02T10:11:12.345Z  INFO 1 --- [thread] k.cluster.Partition : message``;
  - ``custom``: a regex with named groups from the configuration (``collect.logs.layout``);
  - ``timeless``: ``%p %m (%c)%n``, a level first and the logger last but no time (a
    pattern without ``%d``, or a time lost when the line was copied). Log4j appends
    entries in order, so such an entry is placed at the time of the entry above it in
    the same file, the earliest it can have been written; with no timed entry above it,
    it is unrecognised (``no_timestamp``), never given a time out of nothing.

A broker's entry in Kafka's own layout inside another program's line (*nested*: a
Spring Boot test run logging a container's output, a harness that puts its own header
before each broker line) is read as the broker's entry: its time, level, logger and
message, whatever the outer line.

A line that is none of these is a *continuation* of the entry above (a stack trace, a
wrapped message) when it does not itself look like the start of an entry; a line that
does (it has a date or a level word near its start) is *unrecognised*: the collector
counts those and shows one, so that a layout it cannot read is noticed at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Final

LEVELS: Final = ("TRACE", "DEBUG", "INFO", "WARN", "WARNING", "ERROR", "FATAL")
_LEVEL = r"(?P<level>TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)"
# log4j's %d (``2024-01-02 10:11:12,345``), %d{ISO8601} (same, or with ``T``), and the
# RFC 3339 form with ``.`` and an optional zone.
_TIME = (
    r"(?P<time>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[,.]\d{1,9})?"
    r"(?:Z|[+-]\d{2}:?\d{2})?)"
)
# %c, or %c:%L as in Kafka's own test log4j configuration
_LOGGER = r"(?P<logger>[A-Za-z_$][\w.$-]*)(?::\d+)?"

_PREFIXES: Final = (
    # docker compose: "kafka  | ", "kafka-1      | ", "broker_1 | "
    re.compile(r"[A-Za-z0-9][\w.-]*\s*\| ?"),
    # kubectl logs --prefix: "[pod/kafka-0/kafka] "
    re.compile(r"\[pod/[^\]\s]+\] "),
    # kubectl logs --timestamps (RFC 3339, nanoseconds)
    re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}) "),
    # journald (journalctl's "short") and RFC 3164 syslog: "Jan  2 10:11:12 host unit[pid]: "
    re.compile(
        r"(?:<\d{1,3}>)?[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \S+ [^\s:\[]+(?:\[\d+\])?: "
    ),
    # RFC 5424 syslog: "<14>1 2024-01-02T10:11:12.345Z host app pid msgid - "
    re.compile(r"<\d{1,3}>1 \S+ \S+ \S+ \S+ \S+ (?:-|\[.*?\]) "),
)


@dataclass(frozen=True, slots=True)
class _Layout:
    """A layout as a head (time, level, ...: matched at the start) and a tail (logger,
    thread: searched at the end), which is faster than one regex with a lazy message."""

    name: str
    head: re.Pattern[str]
    tail: re.Pattern[str] | None = None
    tail_required: bool = False

    def groups(self, text: str) -> dict[str, str | None] | None:
        head = self.head.match(text)
        if head is None:
            return None
        groups: dict[str, str | None] = head.groupdict()
        rest = text[head.end() :]
        tail = self.tail.search(rest) if self.tail is not None else None
        if tail is None and self.tail_required:
            return None
        if tail is not None:
            groups.update(tail.groupdict())
            rest = rest[: tail.start()]
        groups["message"] = groups.get("message") or rest
        return groups


class _CustomLayout:
    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.name = "custom"
        self._pattern = pattern

    def groups(self, text: str) -> dict[str, str | None] | None:
        match = self._pattern.fullmatch(text)
        return match.groupdict() if match is not None else None


_LAYOUTS: Final = (
    _Layout(
        "apache",
        re.compile(rf"\[{_TIME}\]\s+{_LEVEL}\s+"),
        re.compile(rf"\s+\({_LOGGER}\)\s*$"),
    ),
    _Layout(
        "strimzi",
        re.compile(rf"{_TIME}\s+{_LEVEL}\s+"),
        re.compile(rf"\s+\({_LOGGER}\)(?:\s+\[(?P<thread>[^\]]*)\])?\s*$"),
        tail_required=True,
    ),
    _Layout(
        "spring",
        re.compile(
            rf"{_TIME}\s+{_LEVEL}\s+(?:\d+\s+)?---\s+(?:\[[^\]]*\]\s+)?\[\s*(?P<thread>[^\]]*)\]\s+"
            rf"{_LOGGER}\s*:\s(?P<message>.*)"
        ),
    ),
)

# ``%p %m (%c)%n``: tried last, and only a line that starts with a level and ends with a
# logger; it has no time of its own (LineReader gives it the time of the entry above).
_TIMELESS = _Layout(
    "timeless",
    re.compile(rf"{_LEVEL}\s+(?=\S)"),
    re.compile(rf"\s+\({_LOGGER}\)\s*$"),
    tail_required=True,
)

# Kafka's own layout's head anywhere in a line: "[2024-01-02 10:11:12,345] INFO "
_EMBEDDED = re.compile(rf"\[{_TIME}\]\s+{_LEVEL}\s+")

_LOOKS_LIKE_ENTRY = re.compile(
    r"^.{0,64}?(?:\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}|\b(?:TRACE|DEBUG|INFO|WARN|ERROR|FATAL)\b)"
)


@dataclass(frozen=True, slots=True)
class Entry:
    """The first line of a log entry."""

    ts: int  # epoch milliseconds
    level: str
    logger: str | None
    message: str  # without the logger, the thread or any prefix
    layout: str


@dataclass(frozen=True, slots=True)
class Continuation:
    """A line that continues the entry above it (a stack trace, a wrapped message)."""


@dataclass(frozen=True, slots=True)
class Unrecognised:
    """A line that looks like the start of an entry in a layout the reader does not know,
    or a header whose time is not a valid date."""

    reason: str


CONTINUATION: Final = Continuation()
UNKNOWN_LAYOUT: Final = Unrecognised("unknown_layout")
BAD_TIMESTAMP: Final = Unrecognised("bad_timestamp")
NO_TIMESTAMP: Final = Unrecognised("no_timestamp")

ReadLine = Entry | Continuation | Unrecognised


class LineReader:
    """Reads lines in the known layouts, and in ``custom`` (tried first) when given."""

    def __init__(self, zone: tzinfo, custom: re.Pattern[str] | None = None) -> None:
        self._zone = zone
        layouts: list[_Layout | _CustomLayout] = list(_LAYOUTS)
        if custom is not None:
            layouts.insert(0, _CustomLayout(custom))
        layouts.append(_TIMELESS)
        self._layouts = tuple(layouts)
        self._last_ts: int | None = None  # the time of the latest timed entry read

    def read(self, line: str) -> ReadLine:
        # The layouts are tried before each prefix is removed: a layout's own time can
        # look like kubectl's (Spring Boot's RFC 3339 time).
        text = line.rstrip("\r\n").lstrip()
        for _ in range(_MAX_PREFIXES + 1):
            entry = self._entry(text)
            if entry is not None:
                nested = self._nested(text) if isinstance(entry, Entry) else None
                return nested or entry
            shorter = _strip_one_prefix(text)
            if shorter is None:
                break
            text = shorter
        nested = self._nested(text)
        if nested is not None:
            return nested
        if _LOOKS_LIKE_ENTRY.match(text):
            return UNKNOWN_LAYOUT
        return CONTINUATION

    def _nested(self, text: str) -> Entry | None:
        """A broker's entry inside another program's line (a test run's logger, a harness
        that prints each broker line after its own header): Kafka's own layout after
        the start of the line, ending with its logger. The broker's entry is the one read:
        its time, level, logger and message."""
        inner = _EMBEDDED.search(text, 1)
        if inner is None:
            return None
        entry = self._entry_in(_LAYOUTS[0], text[inner.start() :])
        if entry is None or entry.logger is None:
            return None
        return Entry(entry.ts, entry.level, entry.logger, entry.message, "apache, nested")

    def _entry_in(self, layout: _Layout, text: str) -> Entry | None:
        groups = layout.groups(text)
        if groups is None or groups.get("logger") is None:
            return None
        ts = parse_time(groups["time"] or "", self._zone)
        level = (groups.get("level") or "").upper()
        if ts is None or level not in LEVELS:
            return None
        self._last_ts = ts if self._last_ts is None else max(self._last_ts, ts)
        return Entry(ts, level, groups.get("logger"), (groups["message"] or "").strip(), "")

    def _entry(self, text: str) -> Entry | Unrecognised | None:
        for layout in self._layouts:
            groups = layout.groups(text)
            if groups is None:
                continue
            level = (groups.get("level") or "INFO").upper()
            if level not in LEVELS:
                continue
            if layout is _TIMELESS:
                ts = self._last_ts
                if ts is None:
                    return NO_TIMESTAMP
            else:
                ts = parse_time(groups["time"] or "", self._zone)
                if ts is None:
                    return BAD_TIMESTAMP
                self._last_ts = ts if self._last_ts is None else max(self._last_ts, ts)
            message = (groups["message"] or "").strip()
            return Entry(ts, level, groups.get("logger"), message, layout.name)
        return None


_MAX_PREFIXES = 4


def _strip_one_prefix(text: str) -> str | None:
    for prefix in _PREFIXES:
        match = prefix.match(text)
        if match is not None and match.end() < len(text):
            return text[match.end() :].lstrip()
    return None


_ZONE = re.compile(r"(Z|[+-]\d{2}:?\d{2})$")


def parse_time(text: str, zone: tzinfo) -> int | None:
    """Epoch milliseconds of a log timestamp; ``zone`` when the text names none."""
    zone_match = _ZONE.search(text)
    when_zone: tzinfo = zone
    if zone_match is not None:
        text = text[: zone_match.start()]
        name = zone_match.group(1)
        if name == "Z":
            when_zone = UTC
        else:
            sign = 1 if name[0] == "+" else -1
            digits = name[1:].replace(":", "")
            when_zone = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
    date_time, _, fraction = text.replace(",", ".").partition(".")
    try:
        local = datetime.fromisoformat(date_time.replace(" ", "T"))
    except ValueError:
        return None
    millis = int((fraction + "000")[:3]) if fraction else 0
    return int(local.replace(tzinfo=when_zone).timestamp()) * 1000 + millis
