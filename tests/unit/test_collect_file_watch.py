"""streaming.feeds.collectors.file_watch: a followed file written, created or rotated
wakes the collector; its own reads and files it does not read do not.

The waits are bounded by an hour-long timeout only so that a broken watch fails the test
instead of hanging it: a wait that returns True was ended by a change, never by time."""

from __future__ import annotations

import errno
import threading
from pathlib import Path

import pytest
from watchdog.observers.api import BaseObserver

from streaming.feeds.collectors.file_watch import FileWatch
from streaming.feeds.collectors.metadata_log.segments import holds_records

HOUR_S = 3600.0
# long enough for a notification that was going to come to arrive; a wait this long
# that returns False only shows that nothing woke it
QUIET_S = 0.5


def test_a_write_to_a_followed_file_wakes_the_wait(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("")
    with FileWatch.of_files([log]) as watch:
        assert watch.watching
        with log.open("a") as out:
            out.write("[2026-11-27 18:44:08,123] INFO line (kafka.cluster.Partition)\n")
        assert watch.wait(HOUR_S, threading.Event())


def test_a_rotated_file_wakes_the_wait(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("old\n")
    with FileWatch.of_files([log]) as watch:
        log.rename(tmp_path / "server.log.2026-11-27-18")
        assert watch.wait(HOUR_S, threading.Event())
        log.write_text("")  # log4j opens the file again
        assert watch.wait(HOUR_S, threading.Event())


def test_a_change_during_a_read_wakes_the_next_wait(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("")
    with FileWatch.of_files([log]) as watch:
        log.write_text("one\n")
        assert watch.wait(HOUR_S, threading.Event())
        # a write's truncation and data may come as two notifications: let the first
        # write's last one in, so that only the second write can end the next wait
        watch.wait(QUIET_S, threading.Event())
        log.write_text("one\ntwo\n")  # written while the collector reads
        assert watch.wait(HOUR_S, threading.Event())


def test_reading_the_file_or_writing_other_files_does_not_wake(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("a line\n")
    with FileWatch.of_files([log]) as watch:
        assert log.read_text() == "a line\n"  # the collector's own read
        (tmp_path / "logs.json").write_text("{}")  # its state file, in the same directory
        (tmp_path / "gc.log").write_text("a JVM's\n")
        assert not watch.wait(QUIET_S, threading.Event())


def test_which_files_wake_a_metadata_log_reader() -> None:
    directory = Path("/var/lib/kafka/meta/__cluster_metadata-0")
    assert holds_records(directory / "00000000000000000000.log")
    assert holds_records(directory / "00000000000000004096-0000000002.checkpoint")
    assert not holds_records(directory / "00000000000000000000.index")
    assert not holds_records(directory / "00000000000000000000.timeindex")
    assert not holds_records(directory / "quorum-state")
    assert not holds_records(directory / "leader-epoch-checkpoint")


def test_a_metadata_log_segment_written_wakes_the_wait(tmp_path: Path) -> None:
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"")
    with FileWatch([tmp_path], holds_records) as watch:
        (tmp_path / "quorum-state").write_text("{}")
        assert not watch.wait(QUIET_S, threading.Event())
        with segment.open("ab") as out:
            out.write(b"\0" * 61)
        assert watch.wait(HOUR_S, threading.Event())


def test_no_directory_to_watch_leaves_the_interval(tmp_path: Path) -> None:
    with FileWatch.of_files([tmp_path / "absent" / "server.log"]) as watch:
        assert not watch.watching
        assert not watch.wait(0.01, threading.Event())


def test_a_stop_ends_the_wait(tmp_path: Path) -> None:
    stop = threading.Event()
    with FileWatch.of_files([tmp_path / "server.log"]) as watch:
        threading.Timer(0.1, stop.set).start()
        assert not watch.wait(HOUR_S, stop)


def test_a_watch_that_cannot_be_set_up_leaves_the_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the inotify limits (``fs.inotify.max_user_instances``, ``max_user_watches``)
    the observer fails to start: the collector reads every poll interval instead."""

    def refuse(_self: object) -> None:
        raise OSError(errno.EMFILE, "inotify instance limit reached")

    monkeypatch.setattr(BaseObserver, "start", refuse)
    log = tmp_path / "server.log"
    log.write_text("")
    with FileWatch.of_files([log]) as watch:
        assert not watch.watching
        log.write_text("a line\n")
        assert not watch.wait(QUIET_S, threading.Event())
