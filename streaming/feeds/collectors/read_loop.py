"""The loop that drives a collector that reads files (``collect logs``,
``collect metadata-log``): read until the input is read to its end, then, with
``follow``, wait for more until stopped: until a followed file changes (``FileWatch``), at
most the poll interval. A read whose events cannot be published is retried after the poll
interval, the wait doubled up to a minute; without ``follow`` the error is raised, so that
a one-shot run fails loudly."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable

from streaming.feeds.collectors.file_watch import FileWatch
from streaming.feeds.collectors.metrics import CollectorMetrics

MAX_RETRY_WAIT_S = 60.0


def read_until_stopped(
    read_once: Callable[[], int],
    metrics: CollectorMetrics,
    log: logging.Logger,
    *,
    interval_ms: int,
    follow: bool,
    stop: threading.Event,
    at_end: Callable[[], object] = lambda: None,
    watch: Callable[[], FileWatch] | None = None,
) -> None:
    """Call ``read_once`` (it returns how much it read: 0 when at the end) while it finds
    something; at the end call ``at_end``, then return, or with ``follow`` wait until
    the ``FileWatch`` that ``watch`` makes sees a change, at most ``interval_ms``, and read
    again, until ``stop``."""
    with watch() if follow and watch is not None else contextlib.nullcontext() as watching:
        interval = interval_ms / 1000
        wait = interval
        while not stop.is_set():
            try:
                found = read_once()
            except Exception as error:
                metrics.failed("publish")
                if not follow:
                    raise
                log.error(
                    "cannot publish the events read; reading again in %.1f s: %s", wait, error
                )
                stop.wait(wait)
                wait = min(2 * wait, MAX_RETRY_WAIT_S)
                continue
            wait = interval
            if found:
                continue  # more may be waiting beyond a read's size limit
            at_end()
            if not follow:
                return
            if watching is None:
                stop.wait(interval)
                woken_by = "interval"
            else:
                woken_by = "file_change" if watching.wait(interval, stop) else "interval"
            if not stop.is_set():
                metrics.reads_woken.labels(metrics.collector, woken_by).inc()
