"""streaming.job.python_worker: the job's functions freeze what is alive when they start."""

from __future__ import annotations

import gc
from collections.abc import Iterator

from streaming.job.python_worker import freezing_imports


def test_a_wrapped_function_freezes_the_live_objects_and_gives_the_same_results() -> None:
    def doubled(values: list[int], factor: int = 2) -> Iterator[int]:
        for value in values:
            yield factor * value

    gc.unfreeze()
    try:
        held: list[list[int]] = [[] for _ in range(1000)]  # tracked by the GC, alive at the call
        assert gc.get_freeze_count() == 0
        wrapped = freezing_imports(doubled)
        assert list(wrapped([1, 2, 3], factor=3)) == [3, 6, 9]
        assert gc.get_freeze_count() >= len(held)  # skipped by later collections
        assert wrapped.__name__ == "doubled"
    finally:
        gc.unfreeze()
