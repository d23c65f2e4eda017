"""streaming.feeds.collectors.log_follower: rotation, truncation and restarts on real files."""

from __future__ import annotations

import os
from pathlib import Path

from streaming.config import LogStartPosition
from streaming.feeds.collectors.log_follower import LogFollower


class Changes(list[tuple[str, str]]):
    def __call__(self, path: str, what: str) -> None:
        self.append((Path(path).name, what))


def append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as out:
        out.write(text)


def lines(follower: LogFollower) -> list[str]:
    return [line for batch in follower.read() for line in batch.lines]


def test_complete_lines_only(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("one\ntwo\nthr")
    follower = LogFollower([str(log)])
    assert lines(follower) == ["one", "two"]
    assert lines(follower) == []
    append(log, "ee\r\nfour\n")
    assert lines(follower) == ["three", "four"]


def test_missing_file_is_read_once_it_exists(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    follower = LogFollower([str(log)])
    assert lines(follower) == []
    log.write_text("hello\n")
    assert lines(follower) == ["hello"]


def test_rotation_reads_the_end_of_the_old_file_first(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("a1\n")
    changes = Changes()
    follower = LogFollower([str(log)], on_change=changes)
    assert lines(follower) == ["a1"]
    append(log, "a2\na3")  # the last line without its newline when the appender rolls
    log.rename(tmp_path / "server.log.2024-03-11-10")
    log.write_text("b1\nb2\n")
    assert lines(follower) == ["a2", "a3", "b1", "b2"]
    assert changes == [("server.log", "rotated")]
    append(log, "b3\n")
    assert lines(follower) == ["b3"]


def test_rotation_before_the_new_file_exists(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("a1\n")
    follower = LogFollower([str(log)])
    assert lines(follower) == ["a1"]
    append(log, "a2\n")
    log.rename(tmp_path / "server.log.1")
    assert lines(follower) == ["a2"]
    log.write_text("b1\n")
    assert lines(follower) == ["b1"]


def test_copytruncate(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("a1\na2\n")
    changes = Changes()
    follower = LogFollower([str(log)], on_change=changes)
    assert lines(follower) == ["a1", "a2"]
    with log.open("r+") as file:
        file.truncate(0)
    append(log, "b1\n")
    assert lines(follower) == ["b1"]
    assert changes == [("server.log", "truncated")]


def test_truncated_and_written_past_the_old_offset(tmp_path: Path) -> None:
    """The size alone does not show it; the first bytes do."""
    log = tmp_path / "server.log"
    log.write_text("a1\n")
    changes = Changes()
    follower = LogFollower([str(log)], on_change=changes)
    assert lines(follower) == ["a1"]
    with log.open("r+") as file:
        file.truncate(0)
    append(log, "b1 is longer\nb2\n")
    assert lines(follower) == ["b1 is longer", "b2"]
    assert changes == [("server.log", "truncated")]


def test_restart_resumes_without_duplicates_or_gaps(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("a1\na2\npart")
    first = LogFollower([str(log)])
    assert lines(first) == ["a1", "a2"]
    saved = first.state()
    first.close()
    append(log, "ial\na3\n")
    second = LogFollower([str(log)], state=saved)
    assert lines(second) == ["partial", "a3"]


def test_restart_after_rotation_while_stopped(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("a1\n")
    first = LogFollower([str(log)])
    assert lines(first) == ["a1"]
    saved = first.state()
    first.close()
    append(log, "a2\n")
    log.rename(tmp_path / "server.log.2024-03-11-11")
    log.write_text("b1\n")
    changes = Changes()
    second = LogFollower([str(log)], state=saved, on_change=changes)
    assert lines(second) == ["a2", "b1"]
    assert changes == [("server.log", "rotated_while_stopped"), ("server.log", "rotated")]


def test_restart_after_rotation_and_deletion_while_stopped(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("a1\n")
    first = LogFollower([str(log)])
    assert lines(first) == ["a1"]
    saved = first.state()
    first.close()
    append(log, "a2\n")
    replacement = tmp_path / "new"
    replacement.write_text("b1\n")  # created while the old file exists: another inode
    log.unlink()
    replacement.rename(log)
    changes = Changes()
    second = LogFollower([str(log)], state=saved, on_change=changes)
    assert lines(second) == ["b1"]
    assert changes == [("server.log", "lost_while_stopped")]


def test_restart_after_truncation_while_stopped(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("a1\na2\n")
    first = LogFollower([str(log)])
    assert lines(first) == ["a1", "a2"]
    saved = first.state()
    first.close()
    with log.open("r+") as file:
        file.truncate(0)
    append(log, "b1\n")
    changes = Changes()
    second = LogFollower([str(log)], state=saved, on_change=changes)
    assert lines(second) == ["b1"]
    assert changes == [("server.log", "truncated_while_stopped")]


def test_start_at_end(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("old1\nold2\nnew")
    follower = LogFollower([str(log)], start_at=LogStartPosition.END)
    assert lines(follower) == []
    append(log, "er\n")
    assert lines(follower) == ["newer"]


def test_start_at_end_does_not_apply_to_a_saved_file(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("a1\n")
    first = LogFollower([str(log)])
    assert lines(first) == ["a1"]
    saved = first.state()
    append(log, "a2\n")
    second = LogFollower([str(log)], start_at=LogStartPosition.END, state=saved)
    assert lines(second) == ["a2"]


def test_reads_are_bounded_and_a_too_long_line_is_cut(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("12345\nab\n" + "x" * 20 + "\n")
    changes = Changes()
    follower = LogFollower([str(log)], max_read_bytes=8, on_change=changes)
    assert lines(follower) == ["12345"]
    assert lines(follower) == ["ab"]
    assert lines(follower) == ["x" * 8]
    assert changes == [("server.log", "line_too_long")]


def test_several_files_and_invalid_utf8(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_bytes(b"caf\xc3\xa9\n\xff\n")
    b.write_text("b1\n")
    follower = LogFollower([str(a), str(b), str(a)])
    batches = follower.read()
    assert [(Path(x.path).name, x.lines) for x in batches] == [
        ("a.log", ("café", "\ufffd")),
        ("b.log", ("b1",)),
    ]
    assert set(follower.state()) == {os.path.abspath(a), os.path.abspath(b)}
