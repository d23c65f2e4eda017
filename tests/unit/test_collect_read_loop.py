"""streaming.feeds.collectors.read_loop: read to the end, follow, retry a failed publish."""

from __future__ import annotations

import logging
import threading

import pytest
from prometheus_client import CollectorRegistry

from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.collectors.read_loop import read_until_stopped

LOG = logging.getLogger("test.read_loop")


class Reads:
    """``read_once`` answering from a script: a number read, or an exception to raise."""

    def __init__(self, *script: int | Exception) -> None:
        self.script = list(script)
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        step = self.script.pop(0) if self.script else 0
        if isinstance(step, Exception):
            raise step
        return step


def failures(metrics: CollectorMetrics) -> float:
    found = metrics.registry.get_sample_value(
        "isrwatch_collect_poll_failures_total", {"collector": "logs", "stage": "publish"}
    )
    return 0.0 if found is None else found


def test_reads_until_nothing_is_found_then_ends_once() -> None:
    reads, ends = Reads(5, 3, 0), []
    metrics = CollectorMetrics("logs", CollectorRegistry())
    read_until_stopped(
        reads,
        metrics,
        LOG,
        interval_ms=1,
        follow=False,
        stop=threading.Event(),
        at_end=lambda: ends.append(reads.calls),
    )
    assert (reads.calls, ends) == (3, [3])


def test_without_follow_a_failed_read_is_raised_and_counted() -> None:
    metrics = CollectorMetrics("logs", CollectorRegistry())
    with pytest.raises(ConnectionError):
        read_until_stopped(
            Reads(ConnectionError("down")),
            metrics,
            LOG,
            interval_ms=1,
            follow=False,
            stop=threading.Event(),
        )
    assert failures(metrics) == 1


def test_following_retries_a_failed_read_and_stops_when_asked() -> None:
    reads, stop = Reads(ConnectionError("down"), ConnectionError("down"), 2, 0), threading.Event()
    metrics = CollectorMetrics("logs", CollectorRegistry())
    read_until_stopped(reads, metrics, LOG, interval_ms=1, follow=True, stop=stop, at_end=stop.set)
    assert reads.calls == 4  # two failures, then 2 read, then the end: stopped there
    assert failures(metrics) == 2
