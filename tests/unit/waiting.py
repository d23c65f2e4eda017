"""Waiting for a thread's work in a unit test, with no timed assertion."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol


def wait_until(condition: Callable[[], bool], timeout_s: float = 60.0) -> bool:
    """Whether ``condition`` came true within ``timeout_s``: the bound only keeps a broken
    test from hanging; it is not a figure the code must meet."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class Following(Protocol):
    def run(self, *, follow: bool, stop: threading.Event) -> None: ...


@contextlib.contextmanager
def following(collector: Following) -> Iterator[None]:
    """``collector.run(follow=True)`` in a thread for the ``with`` block, then stopped; the
    block fails if the collector does not stop."""
    stop = threading.Event()
    thread = threading.Thread(target=collector.run, kwargs={"follow": True, "stop": stop})
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()
