"""The source's health as the exporter reads it (``HealthExporter.source_status``): a
JSON file of counters, written whole (a reader never sees half of it).

This project's source writes it from its reader, in the Python process the JVM starts
for it (``kafka_source.stream_reader``). Spark's connector has no such hook: its
failures reach the job's supervisor (``query.run``) as a failed query, and
:class:`SupervisedStatus` writes them in the same form, so that ``isrwatch_source_up``
and ``isrwatch_source_connection_error{reason}`` say the same for either source.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streaming.job.connection_errors import ConnectionProblem

__all__ = ["SupervisedStatus", "write_status"]

log = logging.getLogger("isrwatch.job")


def write_status(path: Path, status: Mapping[str, Any]) -> None:
    """Replace ``path`` with ``status``; a failure to write is logged, not raised (the
    exporter then shows the previous state)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".tmp")
        partial.write_text(json.dumps(status), encoding="utf-8")
        os.replace(partial, path)  # readers never see half a file
    except OSError as error:
        log.warning("cannot write the source's status file %s: %s", path, error)


class SupervisedStatus:
    """The health of Spark's Kafka connector as the supervisor sees it: a query that
    failed is a failed try (with its cause, ``connection_errors``); a query that reports
    progress has reached Kafka (the connector lists offsets before every batch)."""

    def __init__(self, path: Path, bootstrap_servers: str) -> None:
        self.path = path
        self.bootstrap_servers = bootstrap_servers.split(",")
        self.consecutive_failures = 0
        self.failures_total = 0
        self.last_error_reason: str | None = None
        self.last_error_at: float | None = None
        self.last_success_at: float | None = None
        self._progress: object = None  # the last progress counted as a success
        self._write()  # a status left by an earlier run is not this one's

    def failed(self, problem: ConnectionProblem | None) -> None:
        self.consecutive_failures += 1
        self.failures_total += 1
        self.last_error_reason = problem.reason.value if problem is not None else None
        self.last_error_at = time.time()
        self._write()

    def progressed(self, progress: Mapping[str, Any] | None) -> None:
        """A query's ``lastProgress``: a new one is a success."""
        if progress is None:
            return
        mark = (progress.get("id"), progress.get("runId"), progress.get("timestamp"))
        if mark == self._progress:
            return
        self._progress = mark
        self.consecutive_failures = 0
        self.last_error_reason = None
        self.last_success_at = time.time()
        self._write()

    def _write(self) -> None:
        write_status(
            self.path,
            {
                "bootstrap_servers": self.bootstrap_servers,
                "consecutive_failures": self.consecutive_failures,
                "failures_total": self.failures_total,
                "last_error_reason": self.last_error_reason,
                "last_error_at": self.last_error_at,
                "last_success_at": self.last_success_at,
            },
        )
