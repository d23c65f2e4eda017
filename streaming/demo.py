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

from streaming.config import IsrwatchConfig
from streaming.embedded_broker import EmbeddedBroker
from streaming.input_records import KafkaPublisher
from streaming.live_view import COUNTED, ClusterHealth, clock, plain_line, render
from streaming.metrics import HealthExporter
from streaming.simulator.cluster import ClusterSimulator
from streaming.simulator.publish import paced, publish_all
from streaming.simulator.scenario import Scenario

log = logging.getLogger(__name__)

DEMO_SETTINGS: dict[str, object] = {
    "streaming.trigger_interval_ms": 2_000,  # a livelier view than the 5 s default
    "streaming.state_shards": 8,  # a few dozen partitions: fewer groups, less overhead
    "kafka.starting_offsets": "earliest",
}
TRUTH_LABELS = {
    "isr_shrink": "ISR shrinks", "isr_expand": "ISR expansions",
    "propagation": "ISR change propagations", "broker_crash": "broker crashes",
    "shrink_failed": "failed shrinks",
}  # fmt: skip
STARTUP_TIMEOUT_S = 300
PLAIN_EVERY_S = 10


@contextlib.contextmanager
def quiet_stderr(log_path: Path) -> Iterator[TextIO]:
    """Send this process's stderr (and so Spark's JVM and Python workers', started
    within) to ``log_path``; yield a stream to the real terminal for the view."""
    sys.stderr.flush()
    terminal_fd = os.dup(2)
    terminal = os.fdopen(terminal_fd, "w", buffering=1, encoding="utf-8", closefd=False)
    with log_path.open("ab") as log_file:
        os.dup2(log_file.fileno(), 2)
        try:
            yield terminal
        finally:
            sys.stderr.flush()
            os.dup2(terminal_fd, 2)
            terminal.close()
            os.close(terminal_fd)


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
    """A thread that keeps the exception that ended it."""

    def __init__(self, name: str, target: Callable[[], None]) -> None:
        super().__init__(name=name, daemon=True)
        self._target_function = target
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._target_function()
        except BaseException as error:  # reported by the demo, which then stops
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
                names = [topics.controller_events, topics.fetch_responses,
                         topics.partition_health, topics.dead_letters]  # fmt: skip
                step(f"Creating topics {', '.join(names)}")
                broker.create_topics(names)
                job_config = demo_config(config, broker.bootstrap_servers, Path(work) / "ckpt")
                exporter = HealthExporter()
                job = _Worker("streaming job", lambda: _run_job(
                    job_config, exporter, stop, health, query_started.set
                ))  # fmt: skip
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

                workers.insert(0, _Worker("simulator", publish))
                step(f"Starting the simulator ({options.scenario.name})")
                workers[0].start()
                step("Waiting for the streaming query's first micro-batch")
                _wait_for(lambda: health.snapshot().batches > 0, workers, stop,
                          "the first micro-batch")  # fmt: skip
            _watch(health, sim, options, workers, job_config, console, started)
        except KeyboardInterrupt:
            console.print("[bold]Stopping (interrupted)[/bold]")
        finally:
            stop.set()
            with console.status("Stopping the query, Spark, the simulator and the broker"):
                _join(workers)
                broker.stop()
    error = next((f"{w.name}: {w.error}" for w in workers if w.error is not None), None)
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
    from pyspark.sql import SparkSession

    from streaming.job import run

    try:
        run(config, exporter=exporter, stop=stop, on_batch=health.on_batch, on_started=on_started)
    finally:
        session = SparkSession.getActiveSession()  # per thread: the one this thread made
        if session is not None:
            session.stop()


@contextlib.contextmanager
def _startup_progress(console: Console) -> Iterator[Callable[[str], None]]:
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
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
        failed = [w for w in workers if w.error is not None]
        if failed:
            raise DemoError(f"{failed[0].name} failed during start-up: {failed[0].error}")
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
        elapsed = time.monotonic() - started
        return (
            f"isrwatch demo: {options.scenario.name}, simulated {clock(sim.now)} "
            f"(+{(sim.now - sim.start_ms) / 1000:.0f}s, x{options.speed:g}), wall {elapsed:.0f}s"
        )

    def finished() -> str | None:
        for worker in workers:
            if worker.error is not None:
                return f"{worker.name} failed: {worker.error}"
        if deadline is not None and time.monotonic() >= deadline:
            return "time is up"
        if not workers[0].is_alive():
            return "the scenario ended"
        if not workers[1].is_alive():
            return "the streaming job stopped"
        return None

    reason: str | None = None
    if options.live:
        with Live(console=console, refresh_per_second=2) as live:
            while (reason := finished()) is None:
                live.update(render(health.snapshot(), header(), sim.truth.records[-200:]))
                time.sleep(0.5)
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
        lines.append("dead letters: " + ", ".join(
            f"{reason} {n}" for reason, n in sorted(snapshot.dead_letters.items())
        ))  # fmt: skip
    if result.error:
        lines.append(f"error: {result.error}")
    return lines
