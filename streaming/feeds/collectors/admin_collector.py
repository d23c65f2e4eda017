"""``isrwatch collect admin``: poll a cluster, publish the differences.

Each poll takes a snapshot (``KafkaAdminSource``), diffs it against the previous one
(``AdminPoller``), publishes the events and, once they are acknowledged, saves the
poller's memory. A poll that fails (the cluster does not answer, the events cannot be
written) changes nothing: the next poll diffs against the same previous snapshot.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from streaming.feeds.collectors.admin_poller import AdminPoller, ClusterSnapshot
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.collectors.sending import checked_batch, count_published
from streaming.feeds.collectors.state_file import load_state, save_state
from streaming.feeds.publisher import Publisher

log = logging.getLogger("isrwatch.collect.admin")


class SnapshotSource(Protocol):
    def snapshot(self) -> ClusterSnapshot: ...

    def close(self) -> None: ...


class AdminCollector:
    """Polls ``source``; ``state_file`` None keeps no state (``--dry-run``)."""

    def __init__(
        self,
        source: SnapshotSource,
        publisher: Publisher,
        metrics: CollectorMetrics,
        state_file: Path | None,
        *,
        fetch_responses: bool = True,
        broker_changes: bool = True,
        partition_events: bool = True,
        interval_ms: int | None = None,
    ) -> None:
        self._source = source
        self._publisher = publisher
        self._metrics = metrics
        self._state_file = state_file
        self._options: dict[str, Any] = {
            "fetch_responses": fetch_responses,
            "broker_changes": broker_changes,
            "partition_events": partition_events,
            "interval_ms": interval_ms,
        }
        self._committed: dict[str, Any] | None = (
            load_state(state_file) if state_file is not None else None
        )
        self._poller = AdminPoller(self._committed, **self._options)

    def poll_once(self) -> int:
        """One poll; the number of events published. Raises if the poll failed."""
        try:
            snapshot = self._source.snapshot()
        except Exception:
            self._metrics.failed("snapshot")
            raise
        skipped_before = dict(self._poller.skipped)
        events = checked_batch(self._poller.poll(snapshot), self._metrics)
        try:
            if events:
                self._publisher.publish(events)
            state = self._poller.state()
            if self._state_file is not None:
                save_state(self._state_file, state)
        except Exception:
            self._metrics.failed("publish")
            self._poller = AdminPoller(self._committed, **self._options)
            raise
        self._committed = state
        for reason, count in self._poller.skipped.items():
            if count > skipped_before.get(reason, 0):
                self._metrics.dropped.labels(reason).inc(count - skipped_before.get(reason, 0))
        self._metrics.partitions.set(snapshot.partition_count)
        count_published(events, self._metrics)
        self._metrics.succeeded()
        return len(events)

    def run(
        self,
        *,
        interval_ms: int,
        stop: threading.Event,
        once: bool = False,
        on_poll: Callable[[int], None] | None = None,
    ) -> None:
        """Poll every ``interval_ms`` until ``stop`` (or once). A failed poll is logged and
        retried at the next interval, unless ``once``."""
        while not stop.is_set():
            try:
                published = self.poll_once()
            except Exception as error:
                if once:
                    raise
                log.error("poll failed; trying again in %d ms: %s", interval_ms, error)
            else:
                if on_poll is not None:
                    on_poll(published)
            if once:
                return
            stop.wait(interval_ms / 1000)

    def close(self) -> None:
        self._source.close()
        self._publisher.close()
