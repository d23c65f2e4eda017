"""``isrwatch collect logs``: broker log files -> controller-events.

One *read* takes the new complete lines of every file (``LogFollower``), parses them
(``log_lines``), merges the records of all files by event time (stable: a file's own
order is kept), translates them (``LogTranslator``) and publishes the events. Only when
the publisher has them all acknowledged are the file positions and the translator's
memory saved, together, to the state file. A read whose events cannot be published is
forgotten: the follower and the translator go back to the saved state and the same
lines are read again. After a crash between publishing and saving, the last read's
events are sent again, identical (same lines, same memory): the job drops repeated
controller events as duplicates.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from streaming.collectors.log_follower import LogFollower
from streaming.collectors.log_lines import (
    Continuation,
    Ignored,
    Unparseable,
    parse_line,
    record_kind,
)
from streaming.collectors.log_translator import (
    LogTranslator,
    TranslatorInput,
    group_metadata_updates,
    input_ts,
)
from streaming.collectors.metrics import CollectorMetrics
from streaming.collectors.publisher import Publisher, checked, count_published
from streaming.collectors.state_file import load_state, save_state
from streaming.config import LogCollectorSettings

log = logging.getLogger("isrwatch.collect.logs")

STATE_VERSION = 1


class LogCollector:
    """Reads ``paths`` and publishes their events; ``state_file`` None keeps no state
    (``--dry-run``)."""

    def __init__(
        self,
        paths: Sequence[str],
        settings: LogCollectorSettings,
        publisher: Publisher,
        metrics: CollectorMetrics,
        state_file: Path | None,
    ) -> None:
        self._paths = tuple(paths)
        self._settings = settings
        self._zone = ZoneInfo(settings.time_zone)
        self._publisher = publisher
        self._metrics = metrics
        self._state_file = state_file
        saved = load_state(state_file) if state_file is not None else None
        if saved is not None and saved.get("version") != STATE_VERSION:
            raise ValueError(f"{state_file}: unknown state version {saved.get('version')!r}")
        self._committed: dict[str, Any] = saved or {"files": {}, "translator": None}
        self._follower, self._translator = self._restore()

    def _restore(self) -> tuple[LogFollower, LogTranslator]:
        follower = LogFollower(
            self._paths,
            start_at=self._settings.start_at,
            max_read_bytes=self._settings.max_read_bytes,
            state=self._committed["files"],
            on_change=self._file_changed,
        )
        return follower, LogTranslator(self._committed["translator"])

    def _file_changed(self, path: str, change: str) -> None:
        self._metrics.file_changes.labels(path, change).inc()

    def read_once(self) -> tuple[int, int]:
        """One read of every file: (lines read, events published). Raises if the events
        cannot be published (the lines will be read again)."""
        dropped_before = Counter(self._translator.dropped)
        inputs: list[TranslatorInput] = []
        lines = 0
        for batch in self._follower.read():
            records = []
            for line in batch.lines:
                result = parse_line(line, self._zone)
                if isinstance(result, Continuation):
                    label = "continuation"
                elif isinstance(result, Ignored):
                    label = "ignored"
                elif isinstance(result, Unparseable):
                    label = "unparseable"
                    self._metrics.unparseable.labels(result.reason).inc()
                    log.debug("unparseable (%s) in %s: %s", result.reason, batch.path, line)
                else:
                    label = record_kind(result)
                    records.append(result)
                self._metrics.lines.labels(batch.path, label).inc()
            lines += len(batch.lines)
            inputs += group_metadata_updates(records)
        inputs.sort(key=input_ts)
        events = checked(self._translator.translate(inputs), self._metrics)
        try:
            if events:
                self._publisher.publish(events)
            self._commit()
        except Exception:
            self._follower.close()
            self._follower, self._translator = self._restore()
            raise
        for reason, count in (self._translator.dropped - dropped_before).items():
            self._metrics.dropped.labels(reason).inc(count)
        count_published(events, self._metrics)
        self._metrics.succeeded()
        return lines, len(events)

    def _commit(self) -> None:
        state = {"version": STATE_VERSION, "files": self._follower.state(),
                 "translator": self._translator.state()}  # fmt: skip
        if self._state_file is not None:
            save_state(self._state_file, state)
        self._committed = state

    def run(self, *, follow: bool, stop: threading.Event) -> None:
        """Read until every file is read to its end; with ``follow``, until ``stop``.
        A failed read is retried after the poll interval, doubled up to a minute."""
        interval = self._settings.poll_interval_ms / 1000
        wait = interval
        while not stop.is_set():
            try:
                lines, _ = self.read_once()
            except Exception as error:
                self._metrics.failed("publish")
                if not follow:
                    raise
                log.error("cannot publish the events read; reading again in %.1f s: %s",
                          wait, error)  # fmt: skip
                stop.wait(wait)
                wait = min(2 * wait, 60.0)
                continue
            wait = interval
            if lines:
                continue  # more may be waiting beyond max_read_bytes
            if not follow:
                return
            stop.wait(interval)

    def close(self) -> None:
        self._follower.close()
        self._publisher.close()
