"""``isrwatch lab``: a real Kafka cluster, the three collectors, the job and its view.

The watched cluster is Apache Kafka from the Maven jars (``cluster.py``). isrwatch's own
topics (``controller-events``, ``fetch-responses``, ``partition-health``, dead letters)
live on the embedded broker, as a production deployment keeps them off the cluster it
watches: a paused broker of the watched cluster cannot stall the monitor.

The collectors run as ``isrwatch collect`` processes, exactly as a user runs them:

* ``collect admin`` polls every second for follower progress (ListOffsets with replica id
  -2 on every replica) and configuration. With KRaft, the metadata log has the exact
  partition epochs and broker registrations, so admin's partition and broker events are
  off; in ZooKeeper mode the controller's log gives broker changes, admin the partitions;
* ``collect logs --follow`` on every broker's ``server.log``, ``state-change.log`` and
  ``controller.log``;
* with KRaft, ``collect metadata-log --follow`` beside each node, on its copy of
  ``__cluster_metadata`` (every voter holds the whole log), as the chart's sidecars run.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import pandas as pd
from rich.console import Console

from streaming.config import IsrwatchConfig
from streaming.job.metrics import HealthExporter
from streaming.tools.cluster_health import ClusterHealth
from streaming.tools.embedded_broker import (
    EmbeddedBroker,
    bindable,
    free_ports,
    parent_death_signal,
)
from streaming.tools.foreground import (
    Worker,
    job_config_for,
    join,
    one_line,
    spinner,
    startup_progress,
    wait_for,
)
from streaming.tools.lab.cluster import LabCluster
from streaming.tools.lab.distribution import KafkaLine, LabError, Mode
from streaming.tools.lab.faults import FaultDesk
from streaming.tools.lab.node_config import DEFAULT_LAG_TIME_MAX_MS
from streaming.tools.lab.scenarios import ScenarioRunner, Step
from streaming.tools.lab.scoreboard import PROGRESS_FILE, RESTARTS_FILE, RUN_FILE, SEEN_FILE
from streaming.tools.lab.workload import CHURN_TOPIC, Workload, create_topics
from streaming.tools.live_view import clock, describe_fact, render, show_until_finished

__all__ = ["LabOptions", "LabResult", "check_ports", "run_lab"]

log = logging.getLogger(__name__)

LAB_SETTINGS: dict[str, object] = {
    "streaming.trigger_interval_ms": 1_000,  # commit to health in a trigger plus a poll
    "streaming.state_shards": 4,  # a dozen partitions
    # one task a core of local[2]: a micro-batch of the lab's few events took 537 ms at
    # the median with 2, 701 ms with the shipped 4 (docs/real-kafka.md#results)
    "streaming.shuffle_partitions": 2,
    "kafka.starting_offsets": "earliest",
}
ADMIN_POLL_MS = 1_000
LOG_POLL_MS = 500
# The job's input topics get one partition each on the embedded broker: the lab's events
# are few, and one partition keeps their order exactly as the collectors sent them.


@dataclass
class LabOptions:
    kafka: KafkaLine
    brokers: int
    elr: bool
    workdir: Path
    steps: tuple[Step, ...]
    scenario_name: str
    seconds: float | None
    health_out: Path | None = None
    after_scenario_s: float | None = None  # stop this long after the scenario's last step
    # the scenario's steps count from this long after the first micro-batch: a lab run
    # is minutes long, and the JVMs compile through its first ones
    # (docs/real-kafka.md#warm-up)
    warm_up_s: float = 0.0
    live: bool = True
    port_base: int | None = None
    lag_time_max_ms: int = DEFAULT_LAG_TIME_MAX_MS


@dataclass
class LabResult:
    wall_seconds: float
    health: ClusterHealth
    faults: list[str]
    workload: str
    error: str | None = None
    summary: list[str] = field(default_factory=list)


class HealthSeenLog:
    """Every health record the job wrote, with the wall time the lab saw its batch
    (``DIR/health-seen.jsonl``: ``{"seen_ms": ..., "record": {...}}`` per line): the
    scoreboard's "seen before Kafka's commit" is this time, not the record's event time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def on_batch(self, _batch_id: int, rows: pd.DataFrame) -> None:
        from state.health_record import encode_record
        from streaming.job.shard_state import HEALTH, TOMBSTONE
        from streaming.job.sinks import shard_stats_of

        seen_ms = int(time.time() * 1000)
        # the changed healthy partitions travel as health rows; the changed unhealthy
        # ones in their shard's stats (shard_stats.UnhealthyPartition), written by the sink
        values = list(rows.loc[rows["kind"] == HEALTH, "value"])
        values += [
            encode_record(partition.record).decode("utf-8")
            for stats in shard_stats_of(rows)
            for partition in stats.unhealthy
            if partition.changed
        ]
        deleted = rows.loc[rows["kind"] == TOMBSTONE, "key"]
        with self._lock, self.path.open("a", encoding="utf-8") as out:
            out.writelines(f'{{"seen_ms":{seen_ms},"record":{value}}}\n' for value in values)
            out.writelines(
                json.dumps({"seen_ms": seen_ms, "deleted": key}) + "\n" for key in deleted
            )


class ProgressLog:
    """Each micro-batch's start, input rows and durations, from Spark's progress report
    (``DIR/progress.jsonl``: ``{"batch", "start_ms", "input_rows", "duration_ms": {...}}``
    per line, ``duration_ms`` Spark's ``durationMs``): the scoreboard's batch times, the
    part of commit-to-record a record's own batch took."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_progress(self, progress: Mapping[str, Any]) -> None:
        started = datetime.fromisoformat(str(progress["timestamp"]).replace("Z", "+00:00"))
        entry = {
            "batch": progress["batchId"],
            "start_ms": int(started.timestamp() * 1000),
            "input_rows": progress.get("numInputRows", 0),
            "duration_ms": progress.get("durationMs", {}),
        }
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")


@dataclass
class _Collector:
    name: str
    process: subprocess.Popen[bytes]
    output: IO[bytes]
    log_path: Path


def run_lab(config: IsrwatchConfig, options: LabOptions, console: Console) -> LabResult:
    stop = threading.Event()
    query_started = threading.Event()
    health = ClusterHealth()
    started = time.monotonic()
    facts: list[dict[str, Any]] = []
    done_faults: list[str] = []
    workers: list[Worker] = []
    collectors: list[_Collector] = []
    workload: Workload | None = None
    desk: FaultDesk | None = None
    runner: ScenarioRunner | None = None
    reason: str | None = None
    options.workdir.mkdir(parents=True, exist_ok=True)

    def note_fault(fault: str, broker: int) -> None:  # broker -1: a step on a topic
        now_ms = int(time.time() * 1000)
        fact: dict[str, Any] = {"kind": "lab_fault", "ts": now_ms, "fault": fault}
        fact |= {"broker": broker} if broker >= 0 else {"topic": CHURN_TOPIC}
        facts.append(fact)
        done_faults.append(f"{clock(now_ms)[:8]} {describe_fact(fact)}")

    cluster = LabCluster(
        options.kafka,
        options.brokers,
        options.workdir,
        elr=options.elr,
        lag_time_max_ms=options.lag_time_max_ms,
        port_base=options.port_base,
    )
    with EmbeddedBroker() as broker:
        try:
            with startup_progress(console) as step:
                step(
                    f"Starting Apache Kafka {options.kafka.version} "
                    f"({options.kafka.mode.value}, {options.brokers} brokers)"
                )
                cluster.start()
                desk = FaultDesk(cluster, options.workdir, note_fault).start()
                step("Creating the lab's topics and starting the producers (acks=all, acks=1)")
                create_topics(cluster.bootstrap_servers, options.brokers)
                workload = Workload(cluster.bootstrap_servers, options.brokers).start()
                step("Starting the embedded broker for isrwatch's own topics")
                broker.start()
                broker_bootstrap = broker.bootstrap_servers
                topics = config.topics
                broker.create_topics(
                    [
                        topics.controller_events,
                        topics.fetch_responses,
                        topics.partition_health,
                        topics.dead_letters,
                    ]
                )
                step(
                    "Starting the collectors: admin, logs"
                    + (", metadata-log" if options.kafka.mode is Mode.KRAFT else "")
                )
                collectors = _start_collectors(cluster, broker.bootstrap_servers, options)
                job_config = job_config_for(
                    config, LAB_SETTINGS, broker.bootstrap_servers, options.workdir / "checkpoint"
                )
                exporter = HealthExporter()
                workers.append(
                    Worker(
                        "streaming job",
                        lambda: _run_job(
                            job_config, exporter, stop, health, query_started.set, options
                        ),
                        stop,
                    )
                )
                step("Starting Spark and the streaming query")
                workers[0].start()
                wait_for(query_started.is_set, workers, stop, "the streaming query to start")
                step("Waiting for the first micro-batch")
                wait_for(
                    lambda: health.snapshot().batches > 0, workers, stop, "the first micro-batch"
                )
            runner = ScenarioRunner(
                cluster,
                options.steps,
                note_fault,
                stop,
                check_restart=lambda broker: _check_restart(broker_bootstrap, broker),
                restarts=options.workdir / RESTARTS_FILE,
                warm_up_s=options.warm_up_s,
            ).start()
            reason = _watch(
                health, options, workers, collectors, runner, job_config, console, facts
            )
        except KeyboardInterrupt:
            console.print("[bold]Stopping (interrupted)[/bold]")
        finally:
            # what Kafka decides from here on (the cluster's own shutdown included) is
            # after the watch: the scoreboard stops there
            ended_ms = int(time.time() * 1000)
            _stop_collectors(collectors)
            if reason == TIME_IS_UP:
                with spinner(console, "Letting the job read what the collectors sent"):
                    _drain(health, workers, ended_ms)
            # the job's clock: the latest event time it applied, so what it could know
            (options.workdir / RUN_FILE).write_text(
                json.dumps({"watch_ended_ms": ended_ms, "job_clock_ms": health.snapshot().now_ms}),
                encoding="utf-8",
            )
            stop.set()
            with spinner(console, "Stopping the query, Spark, the collectors and the cluster"):
                join(workers)
                if desk is not None:
                    desk.stop()
                if workload is not None:
                    workload.stop()
                cluster.stop()
                broker.stop()
    failed = [(w.name, w.error) for w in workers if w.error is not None]
    if runner is not None and runner.error is not None:
        failed.append(("the scenario", runner.error))
    error = f"{failed[0][0]}: {one_line(failed[0][1])}" if failed else None
    result = LabResult(
        time.monotonic() - started,
        health,
        done_faults,
        workload.summary() if workload is not None else "nothing produced",
        error,
    )
    result.summary = summarize(result, options)
    return result


RESTART_CHECK_TIMEOUT_S = 120


def _check_restart(bootstrap: str, broker: int) -> tuple[bool, str]:
    """``isrwatch check restart --broker N --wait``, as an operator's rollout runs it,
    on the partition-health topic the job writes."""
    done = subprocess.run(
        _isrwatch_command(
            "check",
            "restart",
            "--broker",
            str(broker),
            "--wait",
            "--timeout",
            str(RESTART_CHECK_TIMEOUT_S),
            "--bootstrap-servers",
            bootstrap,
        ),
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode == 0, (done.stdout + done.stderr).strip()[-2000:]


def _isrwatch_command(*arguments: str) -> list[str]:
    """``isrwatch ARGUMENTS`` in this interpreter: the lab runs the tools as a user does."""
    return [sys.executable, "-m", "streaming.cli", *arguments]


def _start_collectors(cluster: LabCluster, sink: str, options: LabOptions) -> list[_Collector]:
    state = options.workdir / "collectors"
    state.mkdir(parents=True, exist_ok=True)
    kraft = options.kafka.mode is Mode.KRAFT
    common = ["--set", f"kafka.bootstrap_servers={sink}", "--set", "collect.metrics_host=127.0.0.1"]
    # the collectors' metrics ports, distinct: admin, logs, then one per metadata log
    metrics_ports = iter(free_ports(2 + (len(cluster.node_ids) if kraft else 0)))
    commands: dict[str, list[str]] = {
        "admin": _isrwatch_command(
            "collect",
            "admin",
            *common,
            "--interval-ms",
            str(ADMIN_POLL_MS),
            "--set",
            f"collect.admin.bootstrap_servers={cluster.bootstrap_servers}",
            # a hung broker holds up the whole poll this long: at most one poll interval
            "--set",
            f"collect.admin.broker_timeout_ms={ADMIN_POLL_MS}",
            "--set",
            f"collect.admin.state_file={state / 'admin.json'}",
            "--set",
            f"collect.admin.metrics_port={next(metrics_ports)}",
            "--set",
            "collect.admin.broker_changes=false",
            "--set",
            f"collect.admin.partition_events={'false' if kraft else 'true'}",
        ),
        "logs": _isrwatch_command(
            "collect",
            "logs",
            "--follow",
            *common,
            "--set",
            f"collect.logs.state_file={state / 'logs.json'}",
            "--set",
            f"collect.logs.metrics_port={next(metrics_ports)}",
            "--set",
            f"collect.logs.poll_interval_ms={LOG_POLL_MS}",
            *[
                str(cluster.layout(node).logs / name)
                for node in cluster.node_ids
                for name in ("server.log", "state-change.log", "controller.log")
            ],
        ),
    }
    if kraft:
        # one beside each node, as the chart's sidecars run: a scenario may kill any node,
        # and the copies of the others go on (the job applies a change seen twice once)
        for node in cluster.node_ids:
            commands[f"metadata-log-{node}"] = _isrwatch_command(
                "collect",
                "metadata-log",
                "--follow",
                *common,
                "--set",
                f"collect.metadata_log.state_file={state / f'metadata-log-{node}.json'}",
                "--set",
                f"collect.metadata_log.metrics_port={next(metrics_ports)}",
                str(cluster.layout(node).metadata / "__cluster_metadata-0"),
            )
    started: list[_Collector] = []
    for name, command in commands.items():
        log_path = options.workdir / f"collect-{name}.log"
        output = log_path.open("ab")
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=parent_death_signal(),
        )
        started.append(_Collector(name, process, output, log_path))
    return started


TIME_IS_UP = "time is up"
DRAIN_TIMEOUT_S = 180.0
DRAIN_IDLE_S = 15.0  # Spark runs no micro-batch without new input
# the collectors' last events: an admin poll at most one interval before the end, and a
# metadata-log read at most its poll interval before
DRAIN_LAG_MS = 2 * ADMIN_POLL_MS


def _drain(health: ClusterHealth, workers: list[Worker], ended_ms: int) -> None:
    """Wait until the job has read what the collectors sent before they stopped: its
    clock (the latest event time it applied) within ``DRAIN_LAG_MS`` of the end. On a
    busy machine a micro-batch can take far longer than the trigger; without this, the
    changes of the last seconds would be missing from the health records because the
    job was behind, not because it got them wrong. Bounded by ``DRAIN_TIMEOUT_S``."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    batches, moved = health.snapshot().batches, time.monotonic()
    while time.monotonic() < deadline and all(w.is_alive() for w in workers):
        snapshot = health.snapshot()
        if snapshot.now_ms is not None and snapshot.now_ms >= ended_ms - DRAIN_LAG_MS:
            return
        if snapshot.batches != batches:
            batches, moved = snapshot.batches, time.monotonic()
        elif time.monotonic() - moved > DRAIN_IDLE_S:
            return  # no batch for a while: nothing left to read
        time.sleep(0.5)
    log.warning(
        "the job had not read the collectors' last events %.0f s after the end", DRAIN_TIMEOUT_S
    )


def _stop_collectors(collectors: list[_Collector]) -> None:
    from streaming.tools.embedded_broker import terminate_process_group

    for collector in collectors:
        terminate_process_group(collector.process)
        collector.output.close()


def _run_job(
    config: IsrwatchConfig,
    exporter: HealthExporter,
    stop: threading.Event,
    health: ClusterHealth,
    on_started: Callable[[], None],
    options: LabOptions,
) -> None:
    from streaming.job.query import run, stop_thread_session

    seen = HealthSeenLog(options.workdir / SEEN_FILE)
    progress = ProgressLog(options.workdir / PROGRESS_FILE)

    def on_batch(batch_id: int, rows: pd.DataFrame) -> None:
        health.on_batch(batch_id, rows)
        seen.on_batch(batch_id, rows)

    try:
        run(
            config,
            health_out=options.health_out,
            exporter=exporter,
            stop=stop,
            on_batch=on_batch,
            on_started=on_started,
            on_progress=progress.on_progress,
        )
    finally:
        stop_thread_session()


def _watch(
    health: ClusterHealth,
    options: LabOptions,
    workers: list[Worker],
    collectors: list[_Collector],
    runner: ScenarioRunner,
    config: IsrwatchConfig,
    console: Console,
    facts: list[dict[str, Any]],
) -> str:
    """Show the view until the time is up or a part fails; returns why it ended.
    ``--seconds`` counts from here, the first micro-batch, as the scenario's steps do:
    the cluster's and Spark's start take what they take."""
    deadline = None if options.seconds is None else time.monotonic() + options.seconds
    host = "127.0.0.1" if config.metrics.host in ("0.0.0.0", "::") else config.metrics.host
    console.print(
        f"Prometheus metrics: http://{host}:{config.metrics.port}/metrics   "
        f"cluster: {options.workdir / 'cluster.json'}   (Ctrl-C stops the lab)"
    )
    header = (
        f"isrwatch lab: Kafka {options.kafka.version} {options.kafka.mode.value}"
        f"{'' if options.elr or options.kafka.mode is not Mode.KRAFT else ' (ELR off)'}"
        f" | {options.scenario_name} | wall {time.strftime('%H:%M:%S')}"
    )

    def finished() -> str | None:
        for worker in workers:
            if worker.error is not None:
                return f"{worker.name} failed: {one_line(worker.error)}"
        if runner.error is not None:
            return f"the scenario failed: {one_line(runner.error)}"
        for collector in collectors:
            if collector.process.poll() is not None:
                return f"collect {collector.name} exited; its log: {collector.log_path}"
        if deadline is not None and time.monotonic() >= deadline:
            return TIME_IS_UP
        settled_at = (
            None
            if options.after_scenario_s is None or runner.finished_at is None
            else runner.finished_at + options.after_scenario_s
        )
        if settled_at is not None and time.monotonic() >= settled_at:
            return TIME_IS_UP
        if not workers[0].is_alive():
            return "the streaming job stopped"
        return None

    reason = show_until_finished(
        console,
        options.live,
        lambda: render(health.snapshot(), header, facts[-50:], "What the lab did"),
        health.snapshot,
        finished,
    )
    console.print(f"Stopping: {reason}")
    return reason


def summarize(result: LabResult, options: LabOptions) -> list[str]:
    snapshot = result.health.snapshot()
    lines = [
        f"isrwatch lab (Kafka {options.kafka.version}, {options.kafka.mode.value}, "
        f"{options.scenario_name}): {result.wall_seconds:.0f} s, "
        f"{snapshot.batches} micro-batches",
        f"faults: {', '.join(result.faults) or 'none'}",
        f"producers: {result.workload}",
        f"the cluster's files and logs: {options.workdir}",
    ]
    if options.health_out is not None:
        lines.append(f"health records: {options.health_out}")
    return lines


def check_ports(config: IsrwatchConfig) -> None:
    """The job's /metrics port must be free before anything starts."""
    if config.metrics.enabled and not bindable(config.metrics.port, config.metrics.host):
        raise LabError(
            f"port {config.metrics.port} (/metrics) is taken by another process: stop it, "
            "or choose another with --metrics-port"
        )
