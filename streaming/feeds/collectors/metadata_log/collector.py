"""``isrwatch collect metadata-log``: a ``__cluster_metadata-0`` directory -> controller-events.

It keeps one position, the next offset of the metadata log to apply, and the image
replayed up to it (``MetadataReplayer``). Each read takes the whole batches from there,
in the segment that holds that offset, from the first given directory that has it
(several directories are copies of the same log, e.g. of two brokers: whichever has the
next offset serves it, and no offset is read twice). Once the publisher has the events
acknowledged, the offset and the image are saved together in the state file. A restart
resumes at that offset; a read whose events cannot be published is forgotten and read
again from the saved state.

Where to start, and what if the offset is gone:

* with no saved state, at offset 0 if a segment still begins there (the whole history,
  each event at its own time), else from the newest snapshot (``*.checkpoint``);
* if the saved offset was deleted meanwhile (Kafka deletes segments a snapshot covers),
  from the newest snapshot at or past it: the differences between the saved image and
  the snapshot are published as events (what changed while the collector was away), and
  counted as a ``resync_from_snapshot`` file change.

The offset kept is always one at the end of a batch outside a metadata transaction, so a
restart never lands inside a transaction.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from streaming.feeds.collectors.file_watch import FileWatch
from streaming.feeds.collectors.metadata_log.image import MetadataImage
from streaming.feeds.collectors.metadata_log.replay import MetadataReplayer
from streaming.feeds.collectors.metadata_log.resync import image_events
from streaming.feeds.collectors.metadata_log.segments import (
    Batch,
    CorruptBatchError,
    Segment,
    Snapshot,
    batches_in,
    holds_records,
    partition_dir,
    read_file,
    segments,
    snapshots,
)
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.collectors.read_loop import read_until_stopped
from streaming.feeds.collectors.sending import checked, count_published
from streaming.feeds.collectors.state_file import load_state, save_state
from streaming.feeds.publisher import Publisher
from streaming.feeds.wire import InputRecord

log = logging.getLogger("isrwatch.collect.metadata_log")

STATE_VERSION = 1


def load_snapshot(snapshot: Snapshot) -> tuple[MetadataImage, int]:
    """The image a snapshot holds, and its last append time."""
    replayer = MetadataReplayer()
    last_ms = 0
    for _, batch in batches_in(snapshot.path.read_bytes()):
        if isinstance(batch, CorruptBatchError):
            raise batch
        replayer.replay(batch)
        last_ms = max(last_ms, batch.append_ms)
    replayer.image.controller_epoch = replayer.image.controller_epoch or snapshot.epoch
    return replayer.image, last_ms


class MetadataLogCollector:
    """Reads ``directories``; ``state_file`` None keeps no state (``--dry-run``)."""

    def __init__(
        self,
        directories: Sequence[Path],
        publisher: Publisher,
        metrics: CollectorMetrics,
        state_file: Path | None,
        *,
        max_read_bytes: int = 8 * 1024 * 1024,
        poll_interval_ms: int = 1000,
    ) -> None:
        self._dirs = tuple(partition_dir(d) for d in directories)
        self._publisher = publisher
        self._metrics = metrics
        self._state_file = state_file
        self._max_read_bytes = max_read_bytes
        self._poll_interval_ms = poll_interval_ms
        saved = load_state(state_file) if state_file is not None else None
        if saved is not None and saved.get("version") != STATE_VERSION:
            raise ValueError(f"{state_file}: unknown state version {saved.get('version')!r}")
        self._committed: dict[str, Any] = saved or {"next_offset": None, "image": None}
        self._positions: dict[Path, tuple[int, int]] = {}  # segment -> (byte position, offset)
        self._truncated = False
        self.records: Counter[str] = Counter()
        self._restore()

    def _restore(self) -> None:
        image = self._committed["image"]
        self._next_offset: int | None = self._committed["next_offset"]
        self._replayer = MetadataReplayer(MetadataImage.from_json(image) if image else None)
        self._stable_offset = self._next_offset

    @property
    def next_offset(self) -> int | None:
        return self._next_offset

    @property
    def image(self) -> MetadataImage:
        return self._replayer.image

    @property
    def dropped(self) -> Counter[str]:
        """Records that gave no event though they should have, by reason (since start)."""
        return self._replayer.dropped

    # ------------------------------------------------------------------ reading

    def read_once(self) -> tuple[int, int]:
        """One read: (batches read, events published). Raises if the events cannot be
        published (the same batches are read again next time)."""
        dropped_before = Counter(self._replayer.dropped)
        records_before = Counter(self._replayer.records)
        events: list[InputRecord] = []
        batches = 0
        if self._next_offset is None or self._offset_gone(self._next_offset):
            events += self._start_from_snapshot()
        if self._next_offset is not None:
            for batch in self._read_batches(self._next_offset):
                batches += 1
                if batch.last_offset < self._next_offset:
                    continue
                was_in_transaction = self._replayer.in_transaction
                events += self._replayer.replay(batch)
                self._next_offset = batch.last_offset + 1
                if not self._replayer.in_transaction:
                    self._stable_offset = self._next_offset
                elif not was_in_transaction:
                    self._stable_offset = batch.base_offset  # resume at the transaction
        if self._truncated:
            events += self._rebuild()
        events = checked(events, self._metrics)
        try:
            if events:
                self._publisher.publish(events)
            self._commit()
        except Exception:
            self._positions.clear()
            self._restore()
            raise
        for reason, count in (self._replayer.dropped - dropped_before).items():
            self._metrics.dropped.labels(reason).inc(count)
        self.records += self._replayer.records - records_before
        count_published(events, self._metrics)
        self._metrics.succeeded()
        return batches, len(events)

    def _commit(self) -> None:
        image = self._replayer.stable_image().to_json()
        state = {"version": STATE_VERSION, "next_offset": self._stable_offset, "image": image}
        if self._state_file is not None:
            save_state(self._state_file, state)
        self._committed = state

    def _offset_gone(self, offset: int) -> bool:
        """No directory holds ``offset`` in a segment any more, but a snapshot covers it."""
        firsts = [s[0].base_offset for s in map(segments, self._dirs) if s]
        if firsts and min(firsts) <= offset:
            return False
        return any(snap.end_offset >= offset for d in self._dirs for snap in snapshots(d))

    def _start_from_snapshot(self) -> list[InputRecord]:
        starts = [s[0].base_offset for s in map(segments, self._dirs) if s]
        if self._next_offset is None and 0 in starts:
            self._next_offset = self._stable_offset = 0
            return []
        newest = max(
            (snap for d in self._dirs for snap in snapshots(d)),
            key=lambda s: s.end_offset,
            default=None,
        )
        if newest is None:
            if starts:  # no snapshot: the oldest record still there
                self._next_offset = self._stable_offset = min(starts)
            return []
        image, last_ms = load_snapshot(newest)
        old = self._replayer.image
        image.controller_id, image.controller_epoch = old.controller_id, old.controller_epoch
        events = image_events(
            old, image, ts=last_ms, epoch=newest.epoch, offset=newest.end_offset - 1
        )
        if self._next_offset is not None:
            self._metrics.file_changes.labels(str(newest.path), "resync_from_snapshot").inc()
            log.warning(
                "offset %d is no longer in the log; resuming from snapshot %s",
                self._next_offset,
                newest.path.name,
            )
        self._replayer = MetadataReplayer(image)
        self._next_offset = self._stable_offset = newest.end_offset
        return events

    def _rebuild(self) -> list[InputRecord]:
        """After a truncation the offsets past it are written again with other records:
        replay the log anew, from its start or its newest snapshot, to its end, and
        publish what differs from the image replayed before."""
        self._truncated = False
        starts = [s[0].base_offset for s in map(segments, self._dirs) if s]
        newest = max(
            (snap for d in self._dirs for snap in snapshots(d)),
            key=lambda s: s.end_offset,
            default=None,
        )
        if 0 in starts or newest is None:
            image, offset, last = MetadataImage(), min(starts, default=0), (0, 0)
        else:
            image, last_ms = load_snapshot(newest)
            offset, last = newest.end_offset, (last_ms, newest.epoch)
        replayer = MetadataReplayer(image)
        while batches := self._read_batches(offset):
            for batch in batches:
                if batch.last_offset >= offset:
                    replayer.replay(batch)
                    offset, last = batch.last_offset + 1, (batch.append_ms, batch.epoch)
        old = self._replayer.image
        events = image_events(
            old, replayer.stable_image(), ts=last[0], epoch=last[1], offset=max(offset - 1, 0)
        )
        self._replayer = replayer
        self._next_offset = self._stable_offset = offset
        return events

    def _read_batches(self, offset: int) -> list[Batch]:
        for directory in self._dirs:
            segment = _segment_of(segments(directory), offset)
            if segment is None:
                continue
            found = self._read_segment(segment, offset)
            if found:
                return found
        return []

    def _read_segment(self, segment: Segment, offset: int) -> list[Batch]:
        position, at_offset = self._positions.get(segment.path, (0, segment.base_offset))
        try:
            shrunk = segment.path.stat().st_size < position
        except FileNotFoundError:
            return []
        if shrunk:  # Kafka truncated the log below what was read (a new quorum leader)
            self._metrics.file_changes.labels(str(segment.path), "truncated").inc()
            self._positions.clear()
            self._truncated = True
            return []
        if at_offset > offset:
            position = 0
        size = self._max_read_bytes
        while True:
            data = read_file(segment.path, position, size)
            out: list[Batch] = []
            end = 0
            for after, batch in batches_in(data):
                end = after
                if isinstance(batch, CorruptBatchError):
                    self._metrics.dropped.labels("corrupt_batch").inc()
                    log.error("%s: %s; skipped", segment.path, batch)
                    continue
                out.append(batch)
            if end or len(data) < size:
                break
            size *= 2  # one batch larger than a read: read it whole
        if end:
            last = out[-1].last_offset + 1 if out else at_offset
            self._positions[segment.path] = (position + end, last)
        return out

    # ------------------------------------------------------------------ running

    def run(self, *, follow: bool, stop: threading.Event) -> None:
        """Read to the end of the log; with ``follow``, until ``stop``."""
        read_until_stopped(
            lambda: self.read_once()[0],
            self._metrics,
            log,
            interval_ms=self._poll_interval_ms,
            follow=follow,
            stop=stop,
            watch=lambda: FileWatch(self._dirs, holds_records),
        )

    def close(self) -> None:
        self._publisher.close()


def _segment_of(found: list[Segment], offset: int) -> Segment | None:
    """The segment that holds ``offset``: the last one that begins at or before it."""
    holder = None
    for segment in found:
        if segment.base_offset <= offset:
            holder = segment
    return holder
