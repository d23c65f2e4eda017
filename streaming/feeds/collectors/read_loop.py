"""The loop that drives a collector that reads files (``collect logs``,
``collect metadata-log``): read until the input is read to its end, then, with
``follow``, poll for more until stopped. A read whose events cannot be published is
retried after the poll interval, the wait doubled up to a minute; without ``follow`` the
error is raised, so that a one-shot run fails loudly."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

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
) -> None:
    """Call ``read_once`` (it returns how much it read: 0 when at the end) while it finds
    something; at the end call ``at_end``, then return, or with ``follow`` wait
    ``interval_ms`` and read again, until ``stop``."""
    interval = interval_ms / 1000
    wait = interval
    while not stop.is_set():
        try:
            found = read_once()
        except Exception as error:
            metrics.failed("publish")
            if not follow:
                raise
            log.error("cannot publish the events read; reading again in %.1f s: %s", wait, error)
            stop.wait(wait)
            wait = min(2 * wait, MAX_RETRY_WAIT_S)
            continue
        wait = interval
        if found:
            continue  # more may be waiting beyond a read's size limit
        at_end()
        if not follow:
            return
        stop.wait(interval)
