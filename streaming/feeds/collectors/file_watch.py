"""Wake a collector that follows files (``collect logs --follow``, ``collect metadata-log
--follow``) as soon as Kafka writes one of them, not at its next poll.

Kafka's controller commits a partition change to ``__cluster_metadata``, and a leader
writes ``Shrinking ISR`` to its ``server.log``, within milliseconds of deciding. A
collector that looked at its files only every ``poll_interval_ms`` added up to that
interval to the time from Kafka's decision to the health record: on the lab, one second
of the two that the goal allows (docs/real-kafka.md#results).

The directories holding the files are watched through the operating system (inotify on
Linux, FSEvents on macOS, ReadDirectoryChangesW on Windows, through ``watchdog``): a file
written, created, moved or deleted there wakes the reader, if the collector reads that
file (``wakes_for``). Files the collector does not read are left out, so that its own
state file, kept in the same directory, cannot wake it in a loop. The poll interval stays
the longest wait between two reads: some file systems send no notification (NFS, some
container overlays), and a watch that cannot be set up (the inotify watch limit) leaves
the collector reading every interval, as it did before.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType

from watchdog.events import (
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

log = logging.getLogger("isrwatch.collect")

# Writes, new files (a rolled segment, a rotated log) and files going away; never opens,
# reads or closes, which the collector's own reads cause.
WAKING_EVENTS: list[type[FileSystemEvent]] = [
    FileModifiedEvent,
    FileCreatedEvent,
    FileMovedEvent,
    FileDeletedEvent,
]
# How often a wait looks at the stop event: a stop is seen within this time.
STOP_CHECK_S = 0.2


class _Waker(FileSystemEventHandler):
    def __init__(self, changed: threading.Event, wakes_for: Callable[[Path], bool]) -> None:
        self._changed = changed
        self._wakes_for = wakes_for

    def on_any_event(self, event: FileSystemEvent) -> None:
        paths = [event.src_path, event.dest_path] if event.dest_path else [event.src_path]
        if any(self._wakes_for(Path(os.fsdecode(path))) for path in paths):
            self._changed.set()


class FileWatch:
    """Watches ``directories`` for changes to the files ``wakes_for`` accepts."""

    def __init__(self, directories: Iterable[Path], wakes_for: Callable[[Path], bool]) -> None:
        self._changed = threading.Event()
        self._observer: BaseObserver | None = None
        existing = sorted({d.resolve() for d in directories if d.is_dir()})
        if not existing:
            log.warning("no directory to watch: reading every poll interval")
            return
        observer = Observer()
        observer.daemon = True
        try:
            handler = _Waker(self._changed, wakes_for)
            for directory in existing:
                observer.schedule(handler, str(directory), event_filter=WAKING_EVENTS)
            observer.start()
        except OSError as error:
            log.warning("cannot watch %s (%s): reading every poll interval", existing, error)
            return
        self._observer = observer

    @classmethod
    def of_files(cls, paths: Iterable[Path]) -> FileWatch:
        """Watch the files ``paths`` and their rotations (``server.log.2026-11-27-18``,
        ``server.log.1``): the files in their directories whose names begin with theirs."""
        names: dict[Path, set[str]] = {}
        for path in paths:
            names.setdefault(path.parent.resolve(), set()).add(path.name)

        def followed(changed: Path) -> bool:
            return any(changed.name.startswith(n) for n in names.get(changed.parent, ()))

        return cls(names, followed)

    @property
    def watching(self) -> bool:
        """Whether changes wake the reader (else it reads every poll interval only)."""
        return self._observer is not None

    def wait(self, timeout_s: float, stop: threading.Event) -> bool:
        """Wait until a watched file changes (True), or ``timeout_s`` passes or ``stop``
        is set (False). A change during the read that follows wakes the next wait."""
        deadline = time.monotonic() + timeout_s
        while not stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if self._changed.wait(min(remaining, STOP_CHECK_S)):
                self._changed.clear()
                return True
        return False

    def close(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None

    def __enter__(self) -> FileWatch:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
