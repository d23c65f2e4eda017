"""``collect metadata-log`` over a directory that grows, rolls and is cleaned as Kafka
does, and across restarts (synthetic segments)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from streaming.feeds.collectors.metadata_log.collector import MetadataLogCollector
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.wire import InputRecord
from tests.unit import metadata_log_synthetic as syn
from tests.unit.waiting import following, wait_until

T = "v9meXjI1RVKB-NSvF0GXDA"
T0 = 1_700_000_000_000


class Recorder:
    def __init__(self, fail: bool = False) -> None:
        self.events: list[InputRecord] = []
        self.fail = fail

    def publish(self, events: Sequence[InputRecord]) -> None:
        if self.fail:
            raise RuntimeError("broker down")
        self.events.extend(events)

    def close(self) -> None:
        pass


def first_batches() -> list[bytes]:
    """Offsets 0-3: leader change, topic t with one partition on [1, 2], a shrink to [1]."""
    return [
        syn.leader_change_batch(0, 1, T0, leader=1, voters=[1]),
        syn.batch(
            1,
            1,
            T0 + 10,
            [syn.topic_record("t", T), syn.partition_record(0, T, 0, [1, 2], [1, 2], 1)],
        ),
        syn.batch(3, 1, T0 + 20, [syn.partition_change_record(0, T, 0, isr=[1])]),
    ]


def expand(offset: int, ts: int) -> bytes:
    return syn.batch(offset, 1, ts, [syn.partition_change_record(0, T, 0, isr=[1, 2])])


def shrink(offset: int, ts: int) -> bytes:
    return syn.batch(offset, 1, ts, [syn.partition_change_record(0, T, 0, isr=[1])])


def collector(
    directory: Path, publisher: Recorder, state: Path | None, **kwargs: int
) -> MetadataLogCollector:
    return MetadataLogCollector(
        [directory], publisher, CollectorMetrics("metadata-log"), state, **kwargs
    )


def drain(c: MetadataLogCollector) -> None:
    while c.read_once()[0]:
        pass


def offsets(events: Sequence[InputRecord]) -> list[int]:
    return [int(e.value["metadata_offset"]) for e in events]


def test_follows_a_growing_segment_and_waits_for_a_partial_batch(tmp_path: Path) -> None:
    segment = syn.write_segment(tmp_path, 0, first_batches())
    out = Recorder()
    c = collector(tmp_path, out, None)
    drain(c)
    assert offsets(out.events) == [0, 1, 2, 3]
    more = expand(4, T0 + 30)
    with segment.open("ab") as f:
        f.write(more[:40])  # Kafka is still writing it
    assert c.read_once() == (0, 0)
    with segment.open("ab") as f:
        f.write(more[40:])
    drain(c)
    assert offsets(out.events)[-1] == 4
    assert out.events[-1].value["new_isr"] == [1, 2]
    assert c.next_offset == 5


def test_rolls_to_the_next_segment(tmp_path: Path) -> None:
    syn.write_segment(tmp_path, 0, first_batches())
    out = Recorder()
    c = collector(tmp_path, out, None)
    drain(c)
    syn.write_segment(tmp_path, 4, [expand(4, T0 + 30), shrink(5, T0 + 40)])
    drain(c)
    assert offsets(out.events) == [0, 1, 2, 3, 4, 5]


def test_following_reads_a_batch_when_the_controller_writes_it(tmp_path: Path) -> None:
    """With an hour's poll interval, only the write itself can wake the collector."""
    segment = syn.write_segment(tmp_path, 0, first_batches())
    out = Recorder()
    metrics = CollectorMetrics("metadata-log")
    c = MetadataLogCollector([tmp_path], out, metrics, None, poll_interval_ms=3_600_000)
    with following(c):
        assert wait_until(lambda: len(out.events) == 4)
        with segment.open("ab") as f:
            f.write(expand(4, T0 + 30))
        assert wait_until(lambda: len(out.events) == 5)
    assert offsets(out.events) == [0, 1, 2, 3, 4]
    woken = metrics.registry.get_sample_value(
        "isrwatch_collect_reads_woken_total", {"collector": "metadata-log", "by": "file_change"}
    )
    assert woken is not None
    assert woken >= 1


def test_resumes_after_a_restart_without_skipping_or_resending(tmp_path: Path) -> None:
    state = tmp_path / "state" / "metadata-log.json"
    log_dir = tmp_path / "__cluster_metadata-0"
    segment = syn.write_segment(log_dir, 0, first_batches())
    first = Recorder()
    drain(collector(tmp_path, first, state))  # a log dir holding __cluster_metadata-0
    with segment.open("ab") as f:
        f.write(expand(4, T0 + 30))
    second = Recorder()
    restarted = collector(tmp_path, second, state)
    drain(restarted)
    assert offsets(first.events) == [0, 1, 2, 3]
    assert offsets(second.events) == [4]
    # the restarted one replays from the saved image: the expansion starts from [1]
    assert second.events[0].value["old_isr"] == [1]
    assert second.events[0].value["partition_epoch"] == 2


def test_a_failed_publish_is_read_again(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    syn.write_segment(tmp_path, 0, first_batches())
    out = Recorder(fail=True)
    c = collector(tmp_path, out, state)
    with pytest.raises(RuntimeError):
        c.read_once()
    assert not state.exists()
    out.fail = False
    drain(c)
    assert offsets(out.events) == [0, 1, 2, 3]


def test_deleted_segment_resyncs_from_the_newest_snapshot(tmp_path: Path) -> None:
    """The collector was away while Kafka took a snapshot at offset 6 and deleted the old
    segment: what changed meanwhile arrives as the difference, then the log goes on."""
    state = tmp_path / "state.json"
    segment = syn.write_segment(tmp_path, 0, first_batches())
    drain(collector(tmp_path, Recorder(), state))
    segment.unlink()
    partition = syn.partition_record(0, T, 0, [1, 2], [1, 2], 1, 0, 3)
    snapshot = syn.batch(0, 2, T0 + 60, [syn.topic_record("t", T), partition])
    (tmp_path / "00000000000000000006-0000000002.checkpoint").write_bytes(snapshot)
    syn.write_segment(tmp_path, 6, [shrink(6, T0 + 70)])
    out = Recorder()
    drain(collector(tmp_path, out, state))
    assert [e.value["type"] for e in out.events] == ["LeaderAndIsr", "IsrChange"]
    resync, after = (e.value for e in out.events)
    assert (resync["isr"], resync["partition_epoch"], resync["ts"]) == ([1, 2], 3, T0 + 60)
    assert (after["metadata_offset"], after["partition_epoch"]) == (6, 4)


def test_starts_from_a_snapshot_when_offset_zero_is_gone(tmp_path: Path) -> None:
    snapshot = syn.batch(
        0, 2, T0, [syn.topic_record("t", T), syn.partition_record(0, T, 0, [1, 2], [2], 2, 4, 9)]
    )
    (tmp_path / "00000000000000000100-0000000002.checkpoint").write_bytes(snapshot)
    syn.write_segment(tmp_path, 100, [expand(100, T0 + 5)])
    out = Recorder()
    drain(collector(tmp_path, out, None))
    types = [e.value["type"] for e in out.events]
    assert types == ["TopicChange", "LeaderAndIsr", "IsrChange"]
    assert out.events[-1].value["partition_epoch"] == 10


def test_a_corrupt_batch_is_counted_and_stepped_over(tmp_path: Path) -> None:
    batches = first_batches()
    broken = bytearray(batches[2])
    broken[-1] ^= 0xFF  # the CRC no longer matches
    syn.write_segment(tmp_path, 0, [*batches[:2], bytes(broken), expand(4, T0 + 30)])
    out = Recorder()
    metrics = CollectorMetrics("metadata-log")
    c = MetadataLogCollector([tmp_path], out, metrics, None)
    drain(c)
    assert offsets(out.events) == [0, 1, 2, 4]
    assert metrics.dropped.labels("corrupt_batch")._value.get() == 1


def test_second_directory_serves_what_the_first_lacks(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    syn.write_segment(a, 0, first_batches())
    syn.write_segment(b, 0, [*first_batches(), expand(4, T0 + 30)])
    out = Recorder()
    drain(MetadataLogCollector([a, b], out, CollectorMetrics("metadata-log"), None))
    assert offsets(out.events) == [0, 1, 2, 3, 4]  # each offset once


def test_a_batch_larger_than_one_read_is_read_whole(tmp_path: Path) -> None:
    syn.write_segment(tmp_path, 0, first_batches())
    out = Recorder()
    drain(collector(tmp_path, out, None, max_read_bytes=16))
    assert offsets(out.events) == [0, 1, 2, 3]


def test_run_stops_at_the_end_without_follow(tmp_path: Path) -> None:
    syn.write_segment(tmp_path, 0, first_batches())
    out = Recorder()
    collector(tmp_path, out, None).run(follow=False, stop=threading.Event())
    assert len(out.events) == 4


def test_a_truncation_replays_the_log_anew_and_publishes_the_difference(tmp_path: Path) -> None:
    """A new quorum leader truncated an uncommitted record (offset 4, an expansion) and
    wrote another at the same offset (leader 2): the image is rebuilt from the log, and
    the partition's state as the log now says is published."""
    batches = first_batches()
    segment = syn.write_segment(tmp_path, 0, [*batches, expand(4, T0 + 30)])
    out = Recorder()
    metrics = CollectorMetrics("metadata-log")
    c = MetadataLogCollector([tmp_path], out, metrics, None)
    drain(c)
    assert out.events[-1].value["new_isr"] == [1, 2]
    segment.write_bytes(b"".join(batches))  # offset 4 is gone
    assert c.read_once() == (0, 1)
    assert metrics.file_changes.labels(str(segment), "truncated")._value.get() == 1
    # the log as it now is: ISR [1], epochs 0/1 (the lost expansion had made it 0/2)
    resync = out.events[-1].value
    assert (resync["type"], resync["isr"], resync["partition_epoch"]) == ("LeaderAndIsr", [1], 1)
    new_leader = syn.partition_change_record(0, T, 0, leader=2, isr=[2])
    with segment.open("ab") as f:
        f.write(syn.batch(4, 2, T0 + 40, [new_leader]))
    drain(c)
    change = out.events[-1].value
    assert (change["leader"], change["leader_epoch"], change["partition_epoch"]) == (2, 1, 2)
    assert change["metadata_offset"] == 4
