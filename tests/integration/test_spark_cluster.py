"""The job on a real Spark cluster: a standalone master and two workers on loopback.

`isrwatch run` is the driver (its own process, as a user runs it, with
`streaming.spark_master: spark://...`); the executors are JVMs the workers launch, with
Python workers of their own running this interpreter. The RocksDB state store and the
checkpoint live in one local directory that every process shares (the cluster is on one
machine). The input is a simulated cluster's traffic on the embedded broker; the
reference is `replay` over the same events.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from state import encode_record
from state.settings import RuleSettings
from streaming.config import IsrwatchConfig
from streaming.feeds.publisher import KafkaPublisher
from streaming.feeds.simulator import ClusterSimulator, load_scenario
from streaming.feeds.wire import InputRecord, envelope_line
from streaming.tools.embedded_broker import EmbeddedBroker, free_port
from streaming.tools.replay import replay
from tests.integration.kafka_topics import (
    isolated_job_config,
    last_per_key,
    read_topic,
    topic_settings,
)
from tests.spark_cluster import SparkStandaloneCluster, Worker, kill_sessions

pytestmark = pytest.mark.integration

START_MS = 1_700_000_000_000
# Generous bounds for a shared 2-core machine; the assertions are about results, not time.
DEADLINE_S = 600
HELD_BACK = 50  # records the final --available-now pass reads (see its test)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandaloneCluster]:
    """A master and two workers of 1 core and 1 GiB each, killed at the end of the module."""
    with SparkStandaloneCluster(tmp_path_factory.mktemp("spark-cluster")) as running:
        running.start()
        yield running


@pytest.fixture(scope="module")
def events() -> list[InputRecord]:
    """80 simulated seconds of a 5-broker cluster with a slow follower: 17,194 records."""
    simulator = ClusterSimulator(load_scenario("slow-follower", {"duration_s": 80}), 5, START_MS)
    return list(simulator.events())


def job_config(
    broker: EmbeddedBroker,
    tmp_path: Path,
    cluster: SparkStandaloneCluster,
    metrics_port: int | None = None,
) -> IsrwatchConfig:
    metrics = {"metrics.enabled": True, "metrics.host": "127.0.0.1", "metrics.port": metrics_port}
    return isolated_job_config(
        broker,
        tmp_path,
        {
            "streaming.spark_master": cluster.url,
            "streaming.state_store": "rocksdb",
            "streaming.state_shards": 4,
            "streaming.shuffle_partitions": 2,
            **(metrics if metrics_port is not None else {}),
        },
        fetch_partitions=2,
    )


def job_environment(config: IsrwatchConfig, tmp_path: Path) -> dict[str, str]:
    """`isrwatch run`'s environment: its settings as ISRWATCH_* variables, and Spark's own
    properties in a spark-defaults.conf (SPARK_CONF_DIR), as a deployment gives them."""
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir(exist_ok=True)
    (conf_dir / "spark-defaults.conf").write_text(
        "spark.driver.host 127.0.0.1\n"
        "spark.driver.bindAddress 127.0.0.1\n"
        "spark.executor.memory 512m\n"
    )
    settings = {
        "kafka.bootstrap_servers": config.kafka.bootstrap_servers,
        **topic_settings(config),
        "streaming.checkpoint_location": config.streaming.checkpoint_location,
        "streaming.spark_master": config.streaming.spark_master,
        "streaming.state_store": config.streaming.state_store.value,
        "streaming.state_shards": config.streaming.state_shards,
        "streaming.shuffle_partitions": config.streaming.shuffle_partitions,
        "streaming.trigger_interval_ms": config.streaming.trigger_interval_ms,
        "metrics.enabled": str(config.metrics.enabled).lower(),
        "metrics.host": config.metrics.host,
        "metrics.port": config.metrics.port,
    }
    return {
        **os.environ,
        **{f"ISRWATCH_{k.upper().replace('.', '__')}": str(v) for k, v in settings.items()},
        "SPARK_CONF_DIR": str(conf_dir),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }


class Driver:
    """`isrwatch run` in a session of its own (its JVM and Python workers with it)."""

    def __init__(self, arguments: Sequence[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "streaming.cli", "run", *arguments],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    def wait(self) -> int:
        try:
            return self.process.wait(timeout=DEADLINE_S)
        finally:
            self.kill()

    def stop(self) -> int:
        """SIGTERM (the job stops its query and closes its sinks), then nothing left."""
        self.process.send_signal(signal.SIGTERM)
        return self.wait()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        assert not kill_sessions({self.process.pid}), "the driver's processes survived"


def publish(config: IsrwatchConfig, events: Sequence[InputRecord]) -> None:
    publisher = KafkaPublisher(config)
    publisher.publish(events)
    publisher.close()


def replayed(events: Sequence[InputRecord]) -> dict[str, Any]:
    records = replay([envelope_line(e) for e in events], RuleSettings(), None).records
    return {r.key: json.loads(encode_record(r)) for r in records}


def applied_by_type(port: int) -> Counter[str] | None:
    """`isrwatch_state_events_applied` of the running job (checkpointed with the state)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return None
    totals: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        if family.name == "isrwatch_state_events_applied":
            for sample in family.samples:
                totals[sample.labels["type"]] += int(sample.value)
    return totals


def produced_by_type(events: Sequence[InputRecord]) -> Counter[str]:
    """What the job must have applied once each: the records' types, a fetch response
    being a ``FetchResponse`` (the scenario makes no error responses, stale epochs or
    invalid records: every record is applied)."""
    return Counter(str(e.value.get("type", "FetchResponse")) for e in events)


@dataclass
class FirstRun:
    """The first half of the events, run to the end (--available-now) on the cluster."""

    config: IsrwatchConfig
    env: dict[str, str]
    metrics_port: int
    half: int
    driver: Driver


@pytest.fixture(scope="module")
def first_run(
    broker: EmbeddedBroker,
    cluster: SparkStandaloneCluster,
    events: list[InputRecord],
    tmp_path_factory: pytest.TempPathFactory,
) -> FirstRun:
    tmp_path = tmp_path_factory.mktemp("job")
    port = free_port()
    config = job_config(broker, tmp_path, cluster, metrics_port=port)
    env = job_environment(config, tmp_path)
    half = len(events) // 2
    publish(config, events[:half])
    driver = Driver(["--available-now"], env, tmp_path / "first.log")
    driver.wait()
    return FirstRun(config, env, port, half, driver)


def test_job_on_the_cluster_gives_what_replay_gives(
    first_run: FirstRun, cluster: SparkStandaloneCluster, events: list[InputRecord]
) -> None:
    assert first_run.driver.process.returncode == 0, first_run.driver.output()
    # both workers launched an executor for the job (its logs are in their work dirs)
    assert all(worker.executor_dirs() for worker in cluster.started), cluster.logs()
    health = last_per_key(read_topic(first_run.config, first_run.config.topics.partition_health))
    assert health == replayed(events[: first_run.half])


def test_executor_killed_mid_run_loses_and_repeats_nothing(
    first_run: FirstRun,
    cluster: SparkStandaloneCluster,
    events: list[InputRecord],
    tmp_path: Path,
) -> None:
    """The rest of the input, from the same checkpoint, to the always-on job; one executor
    is killed (SIGKILL) once its Python workers run the batch's tasks: Spark launches
    another, the lost tasks run again, and the state restored from the checkpoint is
    applied once."""
    config, port = first_run.config, first_run.metrics_port
    # The last records wait for the final pass: an --available-now run with nothing new
    # runs no batch, and so writes no health (docs/faults.md); the campaign does the same.
    always_on, tail = events[:-HELD_BACK], events[-HELD_BACK:]
    publish(config, always_on[first_run.half :])
    victim = cluster.started[0]
    executors_before = victim.executor_dirs()
    driver = Driver([], first_run.env, tmp_path / "second.log")
    try:
        executor = running_executor(driver, victim)
        os.kill(executor, signal.SIGKILL)
        # The applied totals are checkpointed with the state: since the first run.
        applied = applied_until(driver, port, produced_by_type(always_on).total())
        assert driver.stop() == 0, driver.output()
    finally:
        driver.kill()
    # exactly once: each record applied once, none lost and none counted twice
    assert applied == produced_by_type(always_on), driver.output()
    # Spark replaced the executor it lost: the worker launched another for the job
    assert len(victim.executor_dirs()) - len(executors_before) == 2, cluster.logs()
    # A last pass from the checkpoint, over the held-back records, evaluates every
    # partition at the input's largest event time, as replay does.
    publish(config, tail)
    final = Driver(["--available-now"], first_run.env, tmp_path / "final.log")
    assert final.wait() == 0, final.output()
    health = last_per_key(read_topic(config, config.topics.partition_health))
    assert health == replayed(events)


def running_executor(driver: Driver, worker: Worker) -> int:
    """The worker's executor for ``driver``'s job, once its Python workers run tasks."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        assert driver.process.poll() is None, driver.output()
        for executor in worker.executors():
            if worker.python_workers(executor):
                return executor
        time.sleep(0.2)
    raise AssertionError(f"no executor ran Python tasks on {worker}:\n{driver.output()}")


def applied_until(driver: Driver, port: int, total: int) -> Counter[str]:
    """The running job's applied totals once they reach ``total`` (or at the deadline)."""
    deadline = time.monotonic() + DEADLINE_S
    seen: Counter[str] = Counter()
    while time.monotonic() < deadline:
        assert driver.process.poll() is None, driver.output()
        seen = applied_by_type(port) or seen
        if seen.total() >= total:
            break
        time.sleep(1)
    return seen
