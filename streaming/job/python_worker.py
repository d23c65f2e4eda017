"""What the job's functions do first in the Python worker processes Spark runs them in.

PySpark's worker daemon runs ``gc.collect()`` after every task a reused worker finishes
(``pyspark/daemon.py``). A full collection walks every object the garbage collector
tracks, and a worker of this job holds ~120,000 of them once pandas, pyarrow, numba and
the model are imported: about 0.16 s of CPU per task on this machine, 14 % of the Python
workers' CPU in ``bench/pipeline_bench.py``'s profile. ``gc.freeze()`` moves the objects
alive at that moment to a generation that collections skip, so that a collection walks
only what the task allocated.

It is called when the task's function starts: Spark has just unpickled the function,
importing what it needs, and the previous task's garbage was collected after it ended,
so what is frozen is the imported modules and the little the task was handed. Objects
freed by their reference count (nearly all of a task's) are freed whether frozen or not.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from functools import wraps
from typing import ParamSpec, TypeVar

__all__ = ["freezing_imports"]

P = ParamSpec("P")
T = TypeVar("T")


def freezing_imports(function: Callable[P, Iterator[T]]) -> Callable[P, Iterator[T]]:
    """``function`` (a generator Spark calls in a Python worker), which ``gc.freeze()``s
    the objects alive when it is called (see the module's doc)."""

    @wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        gc.freeze()
        return function(*args, **kwargs)

    return wrapper
