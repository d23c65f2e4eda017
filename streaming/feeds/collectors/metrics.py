"""The collectors' own Prometheus metrics (one registry per collector process)."""

from __future__ import annotations

import logging
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

log = logging.getLogger("isrwatch.collect")


class CollectorMetrics:
    """Counters and gauges of ``collect logs`` and ``collect admin``; ``collector`` is
    ``logs`` or ``admin`` and labels the series both share."""

    def __init__(self, collector: str, registry: CollectorRegistry | None = None) -> None:
        self.collector = collector
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.lines = Counter(
            "isrwatch_collect_log_lines",
            "Log lines read, by file and result (a record kind,"
            " ignored, continuation or unparseable)",
            ["file", "result"],
            registry=r,
        )
        self.lines_read = Counter(
            "isrwatch_collect_log_lines_read", "Log lines read, by file", ["file"], registry=r
        )
        self.lines_recognised = Counter(
            "isrwatch_collect_log_lines_recognised",
            "Log lines in a layout the collector reads (an entry, or a continuation of one),"
            " by file",
            ["file"],
            registry=r,
        )
        self.lines_unrecognised = Counter(
            "isrwatch_collect_log_lines_unrecognised",
            "Log lines in no layout the collector reads, by file (collect.logs.layout names"
            " a custom one)",
            ["file"],
            registry=r,
        )
        self.unparseable = Counter(
            "isrwatch_collect_log_unparseable_lines",
            "Log lines not understood, by reason",
            ["reason"],
            registry=r,
        )
        self.dropped = Counter(
            "isrwatch_collect_log_records_dropped",
            "Parsed records that gave no event, by reason",
            ["reason"],
            registry=r,
        )
        self.file_changes = Counter(
            "isrwatch_collect_log_file_changes",
            "Rotations, truncations and losses seen, by file and change",
            ["file", "change"],
            registry=r,
        )
        self.events = Counter(
            "isrwatch_collect_events",
            "Events produced, by collector, input topic and type",
            ["collector", "source", "type"],
            registry=r,
        )
        self.invalid = Counter(
            "isrwatch_collect_invalid_events",
            "Events that broke the contract and were not sent, by collector and reason",
            ["collector", "reason"],
            registry=r,
        )
        self.polls = Counter(
            "isrwatch_collect_polls",
            "Reads (logs) or polls (admin) completed",
            ["collector"],
            registry=r,
        )
        self.reads_woken = Counter(
            "isrwatch_collect_reads_woken",
            "Reads of followed files started after a wait, by what ended it: a change to a"
            " followed file, or the poll interval",
            ["collector", "by"],
            registry=r,
        )
        self.poll_failures = Counter(
            "isrwatch_collect_poll_failures",
            "Reads or polls that failed, by collector and stage",
            ["collector", "stage"],
            registry=r,
        )
        self.last_success = Gauge(
            "isrwatch_collect_last_success_timestamp_seconds",
            "Unix time of the last read or poll whose events were all published",
            ["collector"],
            registry=r,
        )
        self.unavailable = Counter(
            "isrwatch_collect_admin_unavailable",
            "Admin requests the cluster did not answer (the poll goes on without them), by API",
            ["api"],
            registry=r,
        )
        self.partitions = Gauge(
            "isrwatch_collect_admin_partitions", "Partitions in the last snapshot", registry=r
        )
        self._warned: set[str] = set()
        self._server: Any = None

    def succeeded(self) -> None:
        self.polls.labels(self.collector).inc()
        self.last_success.labels(self.collector).set(time.time())

    def failed(self, stage: str) -> None:
        self.poll_failures.labels(self.collector, stage).inc()

    def warn_once(self, key: str, message: str, *args: object) -> None:
        """Log ``message`` the first time ``key`` is seen (degradations repeat every poll)."""
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, *args)

    def serve(self, host: str, port: int) -> None:
        self._server, _ = start_http_server(port, addr=host, registry=self.registry)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
