"""What ``isrwatch demo`` and ``isrwatch lab`` share: a run in the foreground of a
terminal, its parts in worker threads, its start-up shown step by step, and everything but
the view sent to a log file.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.live import Live
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.spinner import Spinner

log = logging.getLogger(__name__)

STARTUP_TIMEOUT_S = 300


class StartupError(Exception):
    """The run could not start; the message says what did not."""


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_LEVELS = {"": logging.INFO, "kafka": logging.WARNING, "py4j": logging.WARNING}
"""The run's log: isrwatch's own INFO records; the clients' connection chatter left out."""


@contextlib.contextmanager
def output_to_log(log_path: Path) -> Iterator[TextIO]:
    """Send everything but the view to ``log_path``; yield a stream to the real terminal
    (this process's stderr as it was) for the view.

    Goes there: this process's stdout and stderr, as file descriptors, so Spark's JVM and
    its Python workers, started within, write there too; Python's warnings (pandas',
    pyarrow's, PySpark's) and every log record, through a handler of the root logger.
    """
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    terminal = os.fdopen(saved[2], "w", buffering=1, encoding="utf-8", closefd=False)
    handler = logging.FileHandler(log_path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    levels = {name: logging.getLogger(name).level for name in LOG_LEVELS}
    with log_path.open("ab") as log_file:
        for fd in saved:
            os.dup2(log_file.fileno(), fd)
        root.addHandler(handler)
        for name, level in LOG_LEVELS.items():
            logging.getLogger(name).setLevel(level)
        logging.captureWarnings(True)
        try:
            yield terminal
        finally:
            logging.captureWarnings(False)
            root.removeHandler(handler)
            for name, level in levels.items():
                logging.getLogger(name).setLevel(level)
            handler.close()
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            for fd, original in saved.items():
                os.dup2(original, fd)
            terminal.close()
            for original in saved.values():
                os.close(original)


def one_line(error: BaseException) -> str:
    """An exception as one short line: its message's first line that says something.

    Py4J's errors start with "An error occurred while calling o123.method." and put the
    Java exception on the next line, followed by its stack trace.
    """
    lines = [line.strip(" :") for line in str(error).splitlines() if line.strip(" :")]
    lines = [line for line in lines if not line.startswith("An error occurred while calling")]
    text = lines[0] if lines else type(error).__name__
    return text if len(text) <= 160 else text[:157] + "..."


class Worker(threading.Thread):
    """A thread that keeps the exception that ended it, unless the run was stopping:
    a stop cancels Spark's jobs and ends its workers, which then fail as they should."""

    def __init__(self, name: str, target: Callable[[], None], stop: threading.Event) -> None:
        super().__init__(name=name, daemon=True)
        self._target_function = target
        self._stop_requested = stop
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._target_function()
        except BaseException as error:
            if self._stop_requested.is_set():
                log.info("%s ended with an error while stopping", self.name, exc_info=True)
            else:  # reported by the run, which then stops
                self.error = error
                log.exception("%s failed", self.name)


# rich's Live, Progress and Status send what is written to sys.stdout and sys.stderr
# meanwhile to the terminal, above the view: here everything but the view goes to the log.
QUIET_LIVE: dict[str, Any] = {"redirect_stdout": False, "redirect_stderr": False}


@contextlib.contextmanager
def spinner(console: Console, text: str) -> Iterator[None]:
    with Live(Spinner("dots", text), console=console, transient=True, **QUIET_LIVE):
        yield


@contextlib.contextmanager
def startup_progress(console: Console) -> Iterator[Callable[[str], None]]:
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False, **QUIET_LIVE) as progress:
        current: list[Any] = []

        def step(description: str) -> None:
            if current:
                progress.update(current[-1], completed=1, total=1)
            current.append(progress.add_task(description, total=None))

        yield step
        if current:
            progress.update(current[-1], completed=1, total=1)


def wait_for(
    done: Callable[[], bool], workers: list[Worker], stop: threading.Event, what: str
) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not done():
        for worker in workers:
            if worker.error is not None:
                raise StartupError(
                    f"{worker.name} failed during start-up: {one_line(worker.error)}"
                )
        if time.monotonic() > deadline:
            raise StartupError(f"waited {STARTUP_TIMEOUT_S} s for {what}")
        stop.wait(0.25)


def join(workers: list[Worker]) -> None:
    for worker in workers:
        if worker.is_alive():
            worker.join(timeout=120)
