"""The lab's ``pause`` is done when it returns: every thread of the broker is stopped.

Linux hands SIGSTOP to one thread, which stops the others only once it runs; a JVM's
request handlers answered a request sent after ``kill`` had returned (CI, 2026-11-28).
Checked here on a Python process with busy threads, so no JVM is needed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming.tools.lab.cluster import _wait_all_threads_stopped
from streaming.tools.lab.distribution import LabError

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/task").is_dir(), reason="threads' states are read from /proc"
)

BUSY_THREADS = """
import threading, sys
def spin():
    while True:
        pass
for _ in range(4):
    threading.Thread(target=spin, daemon=True).start()
print("ready", flush=True)
spin()
"""


@pytest.fixture
def busy_process() -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [sys.executable, "-c", BUSY_THREADS], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "ready\n"
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def thread_states(pid: int) -> list[str]:
    return [
        stat.read_text().rsplit(")", 1)[1].split()[0]
        for stat in Path(f"/proc/{pid}/task").glob("*/stat")
    ]


def test_returns_once_every_thread_is_stopped(busy_process: subprocess.Popen[str]) -> None:
    os.kill(busy_process.pid, signal.SIGSTOP)
    _wait_all_threads_stopped(busy_process.pid, timeout_s=30)
    states = thread_states(busy_process.pid)
    assert len(states) == 5
    assert set(states) == {"T"}


def test_a_process_that_does_not_stop_is_an_error(busy_process: subprocess.Popen[str]) -> None:
    with pytest.raises(LabError, match=f"process {busy_process.pid} did not stop"):
        _wait_all_threads_stopped(busy_process.pid, timeout_s=0.2)
    assert "R" in thread_states(busy_process.pid)
