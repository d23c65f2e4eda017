"""A failure of the demo in one line (the details are in its log)."""

from __future__ import annotations

import pytest

from streaming.tools.foreground import one_line

PY4J = (
    "An error occurred while calling o210.getResult.\n"
    ": org.apache.spark.SparkException: Exception thrown in awaitResult:\n"
    "\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:70)\n"
)


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (OSError(98, "Address already in use"), "[Errno 98] Address already in use"),
        # Py4J's first line names a Java object; the Java exception follows it.
        (RuntimeError(PY4J), "org.apache.spark.SparkException: Exception thrown in awaitResult"),
        (RuntimeError("\n  \n"), "RuntimeError"),  # nothing to say: its type
        (RuntimeError("x" * 160), "x" * 160),  # 160 characters: kept
        (RuntimeError("x" * 161), "x" * 157 + "..."),  # 161: cut to 160
    ],
)
def test_one_line(error: BaseException, line: str) -> None:
    assert one_line(error) == line
