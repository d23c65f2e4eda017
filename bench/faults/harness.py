"""The campaign's test bed: an embedded broker (optionally behind a fault proxy), fresh
topics, and the job as a child process (``isrwatch run``) with its exporter on a free port.

The job runs as ``python -m streaming.cli run`` in its own process group, configured by
``ISRWATCH_*`` environment variables (docs/configuration.md), with the RocksDB state
store and a checkpoint directory the campaign watches and reuses across restarts.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from prometheus_client.parser import text_string_to_metric_families

from streaming.tools.embedded_broker import EmbeddedBroker, free_port
from streaming.tools.fault_proxy import FaultProxy

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Topics:
    controller_events: str
    fetch_responses: str
    partition_health: str
    dead_letters: str

    @classmethod
    def fresh(cls) -> Topics:
        suffix = uuid.uuid4().hex[:8]
        return cls(
            f"controller-events-{suffix}",
            f"fetch-responses-{suffix}",
            f"partition-health-{suffix}",
            f"dead-letters-{suffix}",
        )


@contextlib.contextmanager
def broker_stack(with_proxy: bool) -> Iterator[tuple[EmbeddedBroker, FaultProxy | None]]:
    """A running broker; with a proxy in front whose address the broker advertises."""
    if not with_proxy:
        with EmbeddedBroker() as broker:
            broker.start()
            yield broker, None
        return
    port = free_port()
    with (
        FaultProxy(("127.0.0.1", port)) as proxy,
        EmbeddedBroker(port=port, advertised_port=proxy.port) as broker,
    ):
        broker.start()
        yield broker, proxy


def create_topics(broker: EmbeddedBroker, topics: Topics, fetch_partitions: int) -> None:
    broker.create_topics([topics.controller_events], partitions=1)
    broker.create_topics([topics.fetch_responses], partitions=fetch_partitions)
    broker.create_topics([topics.partition_health, topics.dead_letters])


@dataclass
class JobSettings:
    """What the job under test is told (``ISRWATCH_*`` variables)."""

    bootstrap_servers: str
    topics: Topics
    checkpoint: Path
    metrics_port: int = field(default_factory=free_port)
    trigger_interval_ms: int = 1000
    state_shards: int = 3
    max_events_per_partition_per_batch: int = (
        100_000  # a backlog in one batch (as the campaign ran)
    )
    request_timeout_ms: int = 5000
    extra: dict[str, str] = field(default_factory=dict)

    def settings(self) -> dict[str, object]:
        """The job's configuration, as ``load_config`` overrides."""
        return {
            "kafka.bootstrap_servers": self.bootstrap_servers,
            "kafka.request_timeout_ms": self.request_timeout_ms,
            "kafka.retry_backoff_max_ms": 2000,
            "kafka.max_events_per_partition_per_batch": self.max_events_per_partition_per_batch,
            "topics.controller_events": self.topics.controller_events,
            "topics.fetch_responses": self.topics.fetch_responses,
            "topics.partition_health": self.topics.partition_health,
            "topics.dead_letters": self.topics.dead_letters,
            "streaming.checkpoint_location": str(self.checkpoint),
            "streaming.trigger_interval_ms": self.trigger_interval_ms,
            "streaming.state_shards": self.state_shards,
            "streaming.state_store": "rocksdb",
            "metrics.enabled": "true",
            "metrics.host": "127.0.0.1",
            "metrics.port": self.metrics_port,
            **self.extra,
        }

    def environment(self) -> dict[str, str]:
        variables = {
            f"ISRWATCH_{k.upper().replace('.', '__')}": str(v) for k, v in self.settings().items()
        }
        environ = {k: v for k, v in os.environ.items() if not k.startswith("ISRWATCH_")}
        pythonpath = os.pathsep.join(p for p in (str(ROOT), environ.get("PYTHONPATH")) if p)
        return {**environ, **variables, "PYTHONPATH": pythonpath}

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"


class JobProcess:
    """``isrwatch run`` as a child process group; its output goes to ``log``."""

    def __init__(self, settings: JobSettings, log: Path, *, available_now: bool = False) -> None:
        command = [sys.executable, "-m", "streaming.cli", "run"]
        if available_now:
            command.append("--available-now")
        self.settings = settings
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log: IO[bytes] = log.open("ab")
        self.process = subprocess.Popen(
            command,
            env=settings.environment(),
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.started = time.monotonic()

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill9(self) -> None:
        """SIGKILL to the whole group: the driver, Spark's JVM and its Python workers."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self._log.close()

    def stop(self, timeout_s: float = 60.0) -> int:
        """SIGTERM (the job stops its query and exits), SIGKILL after ``timeout_s``."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGTERM)
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            code = -9
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # the JVM, workers, if left
        self._log.close()
        return code

    def wait(self, timeout_s: float) -> int:
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            code = self.stop(5)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self._log.close()
        return code


Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape(url: str, timeout_s: float = 5.0) -> Samples | None:
    """Every sample of the exporter by name; None when it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            text = response.read().decode()
    except (OSError, ValueError):
        return None
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


def value(samples: Samples | None, name: str) -> float | None:
    """The value of an unlabelled series; None when absent."""
    if samples is None:
        return None
    for labels, number in samples.get(name, []):
        if not labels:
            return number
    return None


def applied_totals(samples: Samples | None) -> dict[str, int]:
    """``isrwatch_state_events_applied`` by event type (checkpointed totals)."""
    if samples is None:
        return {}
    return {
        labels["type"]: int(number)
        for labels, number in samples.get("isrwatch_state_events_applied", [])
    }


def batches_completed(samples: Samples | None) -> int:
    return int(value(samples, "isrwatch_batch_duration_seconds_count") or 0)
