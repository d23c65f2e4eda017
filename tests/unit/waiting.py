"""Waiting for a thread's work in a unit test, with no timed assertion."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], bool], timeout_s: float = 60.0) -> bool:
    """Whether ``condition`` came true within ``timeout_s``: the bound only keeps a broken
    test from hanging; it is not a figure the code must meet."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
