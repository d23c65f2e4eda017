"""``isrwatch demo``: everything on one machine, in one command.

It starts the embedded Kafka-protocol broker, creates the job's topics, runs the cluster
simulator in (scaled) real time producing to them, runs the streaming job on them with
the Prometheus exporter, and draws the job's view of cluster health live. Ctrl-C (or
``--seconds``) stops it all: the query, Spark, the publisher and the broker; then it
prints a summary. Nothing is left behind: the broker is a child process in its own
process group, and checkpoints live in a temporary directory.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from streaming.config import IsrwatchConfig
from streaming.feeds.publisher import KafkaPublisher, paced, publish_all
from streaming.feeds.simulator.cluster import ClusterSimulator
from streaming.feeds.simulator.scenario import Scenario
from streaming.job.metrics import HealthExporter
from streaming.tools.cluster_health import COUNTED, ClusterHealth
from streaming.tools.embedded_broker import EmbeddedBroker
from streaming.tools.foreground import (
    Worker,
    join,
    one_line,
    spinner,
    startup_progress,
    wait_for,
)
from streaming.tools.live_view import clock, render, show_until_finished

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


def run_demo(config: IsrwatchConfig, options: DemoOptions, console: Console) -> DemoResult:
    stop = threading.Event()
    query_started = threading.Event()
    health = ClusterHealth()
    started = time.monotonic()
    published: Counter[str] = Counter()
    workers: list[Worker] = []
    sim: ClusterSimulator | None = None
    with tempfile.TemporaryDirectory(prefix="isrwatch-demo-") as work, EmbeddedBroker() as broker:
        try:
            with startup_progress(console) as step:
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
                job = Worker(
                    "streaming job",
                    lambda: _run_job(job_config, exporter, stop, health, query_started.set),
                    stop,
                )
                workers.append(job)
                step("Starting Spark and the streaming query")
                job.start()
                wait_for(query_started.is_set, workers, stop, "the streaming query to start")
                # the simulated clock starts now: none of the scenario passes during start-up
                sim = ClusterSimulator(options.scenario, options.seed, int(time.time() * 1000))
                events = paced(sim.events(), sim.start_ms, options.speed, stop)
                publisher = KafkaPublisher(job_config)

                def publish() -> None:
                    try:
                        publish_all(publisher, events, published)
                    finally:
                        publisher.close()

                workers.insert(0, Worker("simulator", publish, stop))
                step(f"Starting the simulator ({options.scenario.name})")
                workers[0].start()
                step("Waiting for the streaming query's first micro-batch")
                wait_for(
                    lambda: health.snapshot().batches > 0, workers, stop, "the first micro-batch"
                )
            _watch(health, sim, options, workers, job_config, console, started)
        except KeyboardInterrupt:
            console.print("[bold]Stopping (interrupted)[/bold]")
        finally:
            stop.set()
            with spinner(console, "Stopping the query, Spark, the simulator and the broker"):
                join(workers)
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


def _watch(
    health: ClusterHealth,
    sim: ClusterSimulator,
    options: DemoOptions,
    workers: list[Worker],
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

    reason = show_until_finished(
        console,
        options.live,
        lambda: render(health.snapshot(), header(), sim.truth.records[-200:]),
        health.snapshot,
        finished,
    )
    console.print(f"Stopping: {reason}")


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
