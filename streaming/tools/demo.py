"""``isrwatch demo``: everything on one machine, in one command.

It starts the embedded Kafka-protocol broker, creates the job's topics, runs the cluster
simulator in (scaled) real time producing to them, runs the streaming job on them with
the Prometheus exporter, and draws the job's view of cluster health live. Ctrl-C (or
``--seconds``) stops it all: the query, Spark, the publisher and the broker; then it
prints a summary. Nothing is left behind: the broker is a child process in its own
process group, and checkpoints live in a temporary directory.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.live import Live
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.spinner import Spinner

from streaming.config import IsrwatchConfig
from streaming.feeds.publisher import KafkaPublisher, paced, publish_all
from streaming.feeds.simulator.cluster import ClusterSimulator
from streaming.feeds.simulator.scenario import Scenario
from streaming.job.metrics import HealthExporter
from streaming.tools.cluster_health import COUNTED, ClusterHealth
from streaming.tools.embedded_broker import EmbeddedBroker
from streaming.tools.live_view import clock, plain_line, render, show_live

log = logging.getLogger(__name__)

DEMO_SETTINGS: dict[str, object] = {
    "streaming.trigger_interval_ms": 2_000,  # a livelier view than the 5 s default
    "streaming.state_shards": 8,  # a few dozen partitions: fewer groups, less overhead
    "kafka.starting_offsets": "earliest",
}
TRUTH_LABELS = {
    "isr_shrink": "ISR shrinks",
    "isr_expand": "ISR expansions",
    "propagation": "ISR change propagations",
    "broker_crash": "broker crashes",
    "shrink_failed": "failed shrinks",
}
STARTUP_TIMEOUT_S = 300
PLAIN_EVERY_S = 10


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_LEVELS = {"": logging.INFO, "kafka": logging.WARNING, "py4j": logging.WARNING}
"""The demo's log: isrwatch's own INFO records; the clients' connection chatter left out."""


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


class DemoError(Exception):
    """The demo could not start."""


@dataclass
class DemoOptions:
    scenario: Scenario
    seconds: float | None  # wall seconds; None: until Ctrl-C or the scenario's end
    speed: float = 1.0
    seed: int = 1
    live: bool = True


@dataclass
class DemoResult:
    wall_seconds: float
    published: dict[str, int]
    health: ClusterHealth
    truth_counts: dict[str, int]
    error: str | None = None
    summary: list[str] = field(default_factory=list)


def demo_config(base: IsrwatchConfig, bootstrap: str, checkpoint: Path) -> IsrwatchConfig:
    """The user's configuration pointed at the embedded broker and a throwaway checkpoint."""
    data = base.model_dump(mode="python")
    for key, value in {
        **DEMO_SETTINGS,
        "kafka.bootstrap_servers": bootstrap,
        "streaming.checkpoint_location": str(checkpoint),
    }.items():
        section, name = key.split(".")
        data[section][name] = value
    return IsrwatchConfig.model_validate(data)


class _Worker(threading.Thread):
    """A thread that keeps the exception that ended it, unless the demo was stopping:
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
            else:  # reported by the demo, which then stops
                self.error = error
                log.exception("%s failed", self.name)


def run_demo(config: IsrwatchConfig, options: DemoOptions, console: Console) -> DemoResult:
    stop = threading.Event()
    query_started = threading.Event()
    health = ClusterHealth()
    started = time.monotonic()
    published: Counter[str] = Counter()
    workers: list[_Worker] = []
    sim: ClusterSimulator | None = None
    with tempfile.TemporaryDirectory(prefix="isrwatch-demo-") as work, EmbeddedBroker() as broker:
        try:
            with _startup_progress(console) as step:
                step("Starting the embedded Kafka-protocol broker (Tansu)")
                broker.start()
                topics = config.topics
                names = [
                    topics.controller_events,
                    topics.fetch_responses,
                    topics.partition_health,
                    topics.dead_letters,
                ]
                step(f"Creating topics {', '.join(names)}")
                broker.create_topics(names)
                job_config = demo_config(config, broker.bootstrap_servers, Path(work) / "ckpt")
                exporter = HealthExporter()
                job = _Worker(
                    "streaming job",
                    lambda: _run_job(job_config, exporter, stop, health, query_started.set),
                    stop,
                )
                workers.append(job)
                step("Starting Spark and the streaming query")
                job.start()
                _wait_for(query_started.is_set, workers, stop, "the streaming query to start")
                # the simulated clock starts now: none of the scenario passes during start-up
                sim = ClusterSimulator(options.scenario, options.seed, int(time.time() * 1000))
                events = paced(sim.events(), sim.start_ms, options.speed, stop)
                publisher = KafkaPublisher(job_config)

                def publish() -> None:
                    try:
                        publish_all(publisher, events, published)
                    finally:
                        publisher.close()

                workers.insert(0, _Worker("simulator", publish, stop))
                step(f"Starting the simulator ({options.scenario.name})")
                workers[0].start()
                step("Waiting for the streaming query's first micro-batch")
                _wait_for(
                    lambda: health.snapshot().batches > 0, workers, stop, "the first micro-batch"
                )
            _watch(health, sim, options, workers, job_config, console, started)
        except KeyboardInterrupt:
            console.print("[bold]Stopping (interrupted)[/bold]")
        finally:
            stop.set()
            with _spinner(console, "Stopping the query, Spark, the simulator and the broker"):
                _join(workers)
                broker.stop()
    failed = [(w.name, w.error) for w in workers if w.error is not None]
    error = f"{failed[0][0]}: {one_line(failed[0][1])}" if failed else None
    truth = {label: sim.truth.count(kind) if sim else 0 for kind, label in TRUTH_LABELS.items()}
    result = DemoResult(time.monotonic() - started, dict(published), health, truth, error)
    result.summary = summarize(result, options.scenario)
    return result


def _run_job(
    config: IsrwatchConfig,
    exporter: HealthExporter,
    stop: threading.Event,
    health: ClusterHealth,
    on_started: Callable[[], None],
) -> None:
    from streaming.job.query import run, stop_thread_session

    try:
        run(config, exporter=exporter, stop=stop, on_batch=health.on_batch, on_started=on_started)
    finally:
        stop_thread_session()


# rich's Live, Progress and Status send what is written to sys.stdout and sys.stderr
# meanwhile to the terminal, above the view: here everything but the view goes to the log.
QUIET_LIVE: dict[str, Any] = {"redirect_stdout": False, "redirect_stderr": False}


@contextlib.contextmanager
def _spinner(console: Console, text: str) -> Iterator[None]:
    with Live(Spinner("dots", text), console=console, transient=True, **QUIET_LIVE):
        yield


@contextlib.contextmanager
def _startup_progress(console: Console) -> Iterator[Callable[[str], None]]:
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


def _wait_for(
    done: Callable[[], bool], workers: list[_Worker], stop: threading.Event, what: str
) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not done():
        for worker in workers:
            if worker.error is not None:
                raise DemoError(f"{worker.name} failed during start-up: {one_line(worker.error)}")
        if time.monotonic() > deadline:
            raise DemoError(f"waited {STARTUP_TIMEOUT_S} s for {what}")
        stop.wait(0.25)


def _watch(
    health: ClusterHealth,
    sim: ClusterSimulator,
    options: DemoOptions,
    workers: list[_Worker],
    config: IsrwatchConfig,
    console: Console,
    started: float,
) -> None:
    """Show the view until the time is up, a worker fails or the scenario ends."""
    deadline = None if options.seconds is None else started + options.seconds
    host = "127.0.0.1" if config.metrics.host in ("0.0.0.0", "::") else config.metrics.host
    metrics = f"http://{host}:{config.metrics.port}/metrics"
    console.print(f"Prometheus metrics: {metrics}   (Ctrl-C stops the demo)")

    def header() -> str:
        # the view adds the time its figures are as of: the monitor's event-time clock
        return (
            f"isrwatch: {options.scenario.name} x{options.speed:g} | cluster {clock(sim.now)[:8]}"
        )

    def finished() -> str | None:
        for worker in workers:
            if worker.error is not None:
                return f"{worker.name} failed: {one_line(worker.error)}"
        if deadline is not None and time.monotonic() >= deadline:
            return "time is up"
        if not workers[0].is_alive():
            return "the scenario ended"
        if not workers[1].is_alive():
            return "the streaming job stopped"
        return None

    reason: str | None = None
    if options.live:
        reason = show_live(
            console, lambda: render(health.snapshot(), header(), sim.truth.records[-200:]), finished
        )
    else:
        last = 0.0
        while (reason := finished()) is None:
            if time.monotonic() - last >= PLAIN_EVERY_S:
                console.print(plain_line(health.snapshot()), highlight=False)
                last = time.monotonic()
            time.sleep(0.25)
    console.print(f"Stopping: {reason}")


def _join(workers: list[_Worker]) -> None:
    for worker in workers:
        if worker.is_alive():
            worker.join(timeout=120)


def summarize(result: DemoResult, scenario: Scenario) -> list[str]:
    snapshot = result.health.snapshot()
    peaks = result.health.peaks
    first = result.health.first_seen_ms
    lines = [
        f"isrwatch demo ({scenario.name}): {result.wall_seconds:.0f} s, "
        f"{sum(result.published.values())} records published, {snapshot.batches} micro-batches",
        "most partitions seen at once: "
        + ", ".join(
            f"{condition.replace('_', '-')} {peaks[condition]}"
            + (f" (first at {clock(first[condition])})" if condition in first else "")
            for condition in COUNTED
        ),
        "the simulated cluster: "
        + ", ".join(f"{label} {count}" for label, count in result.truth_counts.items()),
    ]
    if snapshot.dead_letters:
        lines.append(
            "dead letters: "
            + ", ".join(f"{reason} {n}" for reason, n in sorted(snapshot.dead_letters.items()))
        )
    return lines
