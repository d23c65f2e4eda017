"""``collect metadata-log`` read to the end of a directory of real metadata logs, its
events kept in a list: what the tests of real logs share."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from streaming.feeds.collectors.metadata_log.collector import MetadataLogCollector
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.wire import InputRecord


class ListPublisher:
    def __init__(self) -> None:
        self.events: list[InputRecord] = []

    def publish(self, events: Sequence[InputRecord]) -> None:
        self.events.extend(events)

    def close(self) -> None:
        pass


def collect(directory: Path) -> tuple[MetadataLogCollector, list[InputRecord]]:
    """The collector after reading every record of ``directory`` (the metadata log
    directory, holding ``__cluster_metadata-0``), and the events it published."""
    publisher = ListPublisher()
    collector = MetadataLogCollector([directory], publisher, CollectorMetrics("metadata-log"), None)
    while collector.read_once()[0]:
        pass
    return collector, publisher.events
