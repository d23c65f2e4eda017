"""Reading log files line by line across rotation, truncation and restarts.

Each followed path has a cursor: the open file (its device and inode), the offset of the
first byte not yet returned, and a fingerprint (SHA-256 of the file's first bytes, up to
1 KiB) that tells a file from another one that reused its inode or was truncated and
written again. Only complete lines (ending with a newline) are returned; a partial last
line is read again once it is complete.

* Rotation (log4j's RollingFileAppender / DailyRollingFileAppender rename the file and
  create a new one): once the open file is read to its end and the path names another
  inode, the rest of the old file has been returned (its last line even without a
  newline) and reading goes on at the start of the new file.
* Truncation (``copytruncate``): the path's file is shorter than the offset, or its first
  bytes changed: reading starts again at its beginning.
* Restart: ``state()`` holds every cursor's position; a follower built from it resumes
  there. If the file was rotated meanwhile, the old file is looked up by inode in the
  same directory and read to its end first, then the new one from its start. If the old
  file is gone (deleted, compressed), what it held after the saved offset is lost, and
  reported. A path with no saved position starts at its beginning, or at the start of
  its last line (``start_at: end``).

What happens is reported through ``on_change(path, what)``: ``rotated``, ``truncated``,
``rotated_while_stopped``, ``lost_while_stopped``, ``truncated_while_stopped``,
``line_too_long``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from streaming.config import LogStartPosition

log = logging.getLogger("isrwatch.collect.logs")

FINGERPRINT_BYTES = 1024
_TAIL_SCAN_BYTES = 64 * 1024

OnChange = Callable[[str, str], None]


@dataclass(frozen=True, slots=True)
class FileLines:
    path: str
    lines: tuple[str, ...]


@dataclass(slots=True)
class _Cursor:
    file: IO[bytes]
    device: int
    inode: int
    offset: int
    fingerprint_length: int
    fingerprint: str

    def position(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "inode": self.inode,
            "offset": self.offset,
            "fingerprint_length": self.fingerprint_length,
            "fingerprint": self.fingerprint,
        }


def _fingerprint(file: IO[bytes], length: int) -> str:
    return hashlib.sha256(os.pread(file.fileno(), length, 0)).hexdigest()


def _identity(status: os.stat_result) -> tuple[int, int]:
    return status.st_dev, status.st_ino


class LogFollower:
    """Follows ``paths``; ``read()`` returns the new complete lines of each file."""

    def __init__(
        self,
        paths: Sequence[str],
        *,
        start_at: LogStartPosition = LogStartPosition.BEGINNING,
        max_read_bytes: int = 8 * 1024 * 1024,
        state: Mapping[str, Mapping[str, Any]] | None = None,
        on_change: OnChange | None = None,
    ) -> None:
        self.paths = tuple(dict.fromkeys(os.path.abspath(path) for path in paths))
        self._start_at = start_at
        self._budget = max_read_bytes
        self._saved: dict[str, Mapping[str, Any]] = dict(state or {})
        self._cursors: dict[str, _Cursor] = {}
        self._from_start: set[str] = set()  # paths whose saved file is lost: next one from 0
        self._on_change = on_change if on_change is not None else (lambda path, what: None)

    # ------------------------------------------------------------------ public

    def read(self) -> list[FileLines]:
        """One read of every file: at most ``max_read_bytes`` of each."""
        return [FileLines(path, tuple(self._read(path))) for path in self.paths]

    def state(self) -> dict[str, dict[str, Any]]:
        """The position of every file after the lines returned so far."""
        positions = {path: dict(saved) for path, saved in self._saved.items()}
        for path, cursor in self._cursors.items():
            positions[path] = cursor.position()
        return positions

    def close(self) -> None:
        for cursor in self._cursors.values():
            cursor.file.close()
        self._cursors.clear()

    # ------------------------------------------------------------------ reading

    def _read(self, path: str) -> list[str]:
        cursor = self._cursors.get(path) or self._open(path)
        if cursor is None:
            return []
        if self._truncated(cursor):
            self._on_change(path, "truncated")
            log.warning("%s was truncated; reading it again from its start", path)
            _restart(cursor)
        budget = self._budget
        lines, used = self._read_lines(path, cursor, budget)
        while used < budget:  # at the end of the open file: rotated or truncated?
            successor = self._successor(path, cursor)
            if successor is None:
                break
            if successor is not cursor:  # rotated: the old file is read to its end
                lines += self._rest(cursor)
                cursor.file.close()
                self._cursors[path] = cursor = successor
            more, more_used = self._read_lines(path, cursor, budget - used)
            lines += more
            used += max(more_used, 1)
        return lines

    def _read_lines(self, path: str, cursor: _Cursor, budget: int) -> tuple[list[str], int]:
        """Complete lines from the cursor on; the bytes read (``budget``: maybe more left)."""
        if budget <= 0:
            return [], 0
        data = os.pread(cursor.file.fileno(), budget, cursor.offset)
        end = data.rfind(b"\n") + 1
        if end == 0:
            if len(data) < budget:
                return [], len(data)
            self._on_change(path, "line_too_long")  # a line longer than the budget: cut
            end = len(data)
        cursor.offset += end
        self._extend_fingerprint(cursor)
        text = data[:end].decode("utf-8", errors="replace")
        return [line.rstrip("\r") for line in text.split("\n")[: text.count("\n") or 1]], len(data)

    @staticmethod
    def _rest(cursor: _Cursor) -> list[str]:
        """The last line of a rotated file, if it has no newline."""
        data = os.pread(cursor.file.fileno(), FINGERPRINT_BYTES * 64, cursor.offset)
        cursor.offset += len(data)
        return [data.decode("utf-8", errors="replace").rstrip("\r")] if data else []

    def _successor(self, path: str, cursor: _Cursor) -> _Cursor | None:
        """At the end of the open file: the cursor to read next (the same one, reset, after
        a truncation; a new one after a rotation), or None if nothing changed."""
        try:
            status = os.stat(path)
        except FileNotFoundError:  # renamed, the new file not created yet
            return None
        if _identity(status) != (cursor.device, cursor.inode):
            new = self._open_file(path, offset=0)
            if new is not None:
                self._on_change(path, "rotated")
                log.info("%s was rotated; reading the new file from its start", path)
            return new
        if self._truncated(cursor):
            self._on_change(path, "truncated")
            log.warning("%s was truncated; reading it again from its start", path)
            _restart(cursor)
            return cursor if status.st_size > 0 else None
        return None

    @staticmethod
    def _truncated(cursor: _Cursor) -> bool:
        """The open file is shorter than the offset, or its first bytes changed."""
        if os.fstat(cursor.file.fileno()).st_size < cursor.offset:
            return True
        return _fingerprint(cursor.file, cursor.fingerprint_length) != cursor.fingerprint

    @staticmethod
    def _extend_fingerprint(cursor: _Cursor) -> None:
        if cursor.fingerprint_length < FINGERPRINT_BYTES and cursor.offset > 0:
            length = min(FINGERPRINT_BYTES, cursor.offset)
            cursor.fingerprint_length = length
            cursor.fingerprint = _fingerprint(cursor.file, length)

    # ------------------------------------------------------------------ opening

    def _open(self, path: str) -> _Cursor | None:
        saved = self._saved.pop(path, None)
        cursor = self._resume(path, saved) if saved is not None else self._start(path)
        if cursor is not None:
            self._cursors[path] = cursor
            self._from_start.discard(path)
        elif saved is not None:
            self._from_start.add(path)
        return cursor

    def _start(self, path: str) -> _Cursor | None:
        cursor = self._open_file(path, offset=0)
        if (
            cursor is not None
            and self._start_at is LogStartPosition.END
            and path not in self._from_start
        ):
            cursor.offset = _start_of_last_line(cursor.file)
        return cursor

    def _resume(self, path: str, saved: Mapping[str, Any]) -> _Cursor | None:
        identity = (int(saved["device"]), int(saved["inode"]))
        offset = int(saved["offset"])
        length, fingerprint = int(saved["fingerprint_length"]), str(saved["fingerprint"])
        current = self._open_file(path, offset=0)
        if current is not None and (current.device, current.inode) == identity:
            if os.fstat(current.file.fileno()).st_size >= offset and (
                _fingerprint(current.file, length) == fingerprint
            ):
                current.offset = offset
                current.fingerprint_length, current.fingerprint = length, fingerprint
                return current
            self._on_change(path, "truncated_while_stopped")
            log.warning("%s was truncated while stopped; reading it from its start", path)
            return current
        rotated = _find_by_identity(os.path.dirname(path), identity)
        if rotated is not None:
            try:
                file = open(rotated, "rb")  # noqa: SIM115 - the cursor owns it
            except OSError:
                file = None
            if file is not None and _fingerprint(file, length) == fingerprint:
                if current is not None:
                    current.file.close()
                self._on_change(path, "rotated_while_stopped")
                log.info(
                    "%s was rotated while stopped; reading the rest of %s first", path, rotated
                )
                return _Cursor(file, *identity, offset, length, fingerprint)
            if file is not None:
                file.close()
        self._on_change(path, "lost_while_stopped")
        log.warning(
            "%s was rotated while stopped and the old file is gone: lines written to it"
            " after the saved position are lost",
            path,
        )
        return current

    @staticmethod
    def _open_file(path: str, offset: int) -> _Cursor | None:
        try:
            file = open(path, "rb")  # noqa: SIM115 - the cursor owns it
        except FileNotFoundError:
            return None
        status = os.fstat(file.fileno())
        if not stat.S_ISREG(status.st_mode):
            file.close()
            raise ValueError(f"{path} is not a regular file")
        return _Cursor(file, *_identity(status), offset, 0, _fingerprint(file, 0))


def _restart(cursor: _Cursor) -> None:
    cursor.offset = 0
    cursor.fingerprint_length = 0
    cursor.fingerprint = _fingerprint(cursor.file, 0)


def _start_of_last_line(file: IO[bytes]) -> int:
    """The offset after the last newline of the file (0 if it has none)."""
    end = os.fstat(file.fileno()).st_size
    while end > 0:
        start = max(0, end - _TAIL_SCAN_BYTES)
        found = os.pread(file.fileno(), end - start, start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def _find_by_identity(directory: str, identity: tuple[int, int]) -> str | None:
    try:
        entries = list(os.scandir(directory or "."))
    except OSError:
        return None
    for entry in entries:
        try:
            if entry.is_file() and _identity(entry.stat()) == identity:
                return entry.path
        except OSError:
            continue
    return None
