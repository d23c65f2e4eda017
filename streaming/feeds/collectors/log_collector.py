"""``isrwatch collect logs``: broker log files -> controller-events.

One *read* takes the new complete lines of every file (``LogFollower``), parses them
(``log_lines``, in the layout ``log_layouts`` finds, counting what it recognises:
``log_recognition``), merges the records of all files by event time (stable: a file's own
order is kept), translates them (``LogTranslator``) and publishes the events. Only when
the publisher has them all acknowledged are the file positions and the translator's
memory saved, together, to the state file. A read whose events cannot be published is
forgotten: the follower and the translator go back to the saved state and the same
lines are read again. After a crash between publishing and saving, the last read's
events are sent again, identical (same lines, same memory): the job drops repeated
controller events as duplicates.

After each read the translator learns how far the logs have got (the latest time
read), and a read that finds nothing new ends the input for now (``flush``): both settle
the ISR proposals of Kafka 0.10-2.3 brokers, which log the change before its commit.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from streaming.config import LogCollectorSettings
from streaming.config.collect import compile_custom_layout
from streaming.feeds.collectors.file_watch import FileWatch
from streaming.feeds.collectors.log_follower import LogFollower
from streaming.feeds.collectors.log_lines import (
    Continuation,
    Ignored,
    LineParser,
    LineResult,
    Unparseable,
    record_kind,
)
from streaming.feeds.collectors.log_recognition import Recognition
from streaming.feeds.collectors.log_translator import (
    LogTranslator,
    TranslatorInput,
    group_metadata_updates,
    input_ts,
)
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.collectors.read_loop import read_until_stopped
from streaming.feeds.collectors.sending import checked, count_published
from streaming.feeds.collectors.state_file import load_state, save_state
from streaming.feeds.publisher import Publisher

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
        self._layout = compile_custom_layout(settings.layout) if settings.layout else None
        self._parsers: dict[str, LineParser] = {}
        self.recognition = Recognition()
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

    def _parser(self, path: str) -> LineParser:
        if path not in self._parsers:
            self._parsers[path] = LineParser(self._zone, self._layout)
        return self._parsers[path]

    def _recognised(self, path: str, line: str, result: LineResult, record: bool) -> None:
        counts = self.recognition.of(path)
        self._metrics.lines_read.labels(path).inc()
        if counts.count(line, result, record=record):
            self._metrics.lines_recognised.labels(path).inc()
        else:
            self._metrics.lines_unrecognised.labels(path).inc()
        if not counts.reported and counts.read >= self._settings.summary_after_lines:
            self._report(path)

    def _report(self, path: str) -> None:
        counts = self.recognition.of(path)
        counts.reported = True
        if counts.understood():
            log.info("%s", counts.summary(path))
        else:
            log.warning(
                "the layout of this log is not understood (collect.logs.layout names"
                " a custom one): %s",
                counts.summary(path),
            )

    def report_all(self) -> list[str]:
        """Log the counts of every file not yet reported; all the summaries."""
        for path, counts in self.recognition.files.items():
            if not counts.reported:
                self._report(path)
        return self.recognition.summaries()

    def read_once(self) -> tuple[int, int]:
        """One read of every file: (lines read, events published). Raises if the events
        cannot be published (the lines will be read again). A read that finds no new line
        settles the pending ISR proposals of Kafka 0.10-2.3 (``LogTranslator.flush``):
        their cancel would have been written by now."""
        dropped_before = Counter(self._translator.dropped)
        inputs: list[TranslatorInput] = []
        lines = 0
        # How far each file that gave lines has got. A file may stop mid-way (at
        # max_read_bytes), right after a proposal whose cancel it has not given yet, while
        # another file is far ahead: the logs have moved past a time only when every file
        # still being read has. A file with no new line is read to its end.
        file_times: list[int] = []
        for batch in self._follower.read():
            records = []
            parser = self._parser(batch.path)
            for line in batch.lines:
                result = parser.parse(line)
                self._recognised(
                    batch.path,
                    line,
                    result,
                    not isinstance(result, Continuation | Ignored | Unparseable),
                )
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
            if batch.lines and parser.last_ts is not None:
                file_times.append(parser.last_ts)
            inputs += group_metadata_updates(records)
        inputs.sort(key=input_ts)
        translated = self._translator.translate(inputs)
        log_time = min(file_times, default=None)
        if log_time is not None:
            translated += self._translator.advance(log_time)
        if lines == 0:
            translated += self._translator.flush()
        events = checked(translated, self._metrics)
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
        state = {
            "version": STATE_VERSION,
            "files": self._follower.state(),
            "translator": self._translator.state(),
        }
        if self._state_file is not None:
            save_state(self._state_file, state)
        self._committed = state

    def run(self, *, follow: bool, stop: threading.Event) -> None:
        """Read until every file is read to its end; with ``follow``, until ``stop``.
        Each time every file is read to its end, say how much was understood."""
        read_until_stopped(
            lambda: self.read_once()[0],
            self._metrics,
            log,
            interval_ms=self._settings.poll_interval_ms,
            follow=follow,
            stop=stop,
            at_end=self.report_all,
            watch=lambda: FileWatch.of_files(Path(p) for p in self._paths),
        )

    def close(self) -> None:
        self._follower.close()
        self._publisher.close()
