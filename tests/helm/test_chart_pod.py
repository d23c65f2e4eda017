"""The chart's pod, played on this machine: the job runs with the configuration, Spark
defaults and environment the chart renders, and the chart's exec probes judge it.

The pod's mounts become directories (the checkpoint volume, the ConfigMap's files) and the
Kafka cluster an embedded broker of this test's own, which it stops to take the source
down. Everything else is what the chart renders, commands included.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka import KafkaProducer

from streaming.tools.embedded_broker import EmbeddedBroker, free_port
from tests.helm.chart import Manifest, config_file, find, job_container, render

pytestmark = pytest.mark.integration

SAMPLE = Path(__file__).resolve().parents[2] / "conf" / "samples" / "incident.jsonl"
CHECKPOINT_MOUNT = "/var/lib/isrwatch"


def descendants(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    found: list[int] = []
    if children.exists():
        for child in map(int, children.read_text().split()):
            found += [child, *descendants(child)]
    return found


class Pod:
    """The job started as the chart's container would start it."""

    def __init__(self, manifests: list[Manifest], root: Path) -> None:
        self.container = job_container(manifests)
        config = yaml.safe_load(config_file(manifests))
        location = config["streaming"]["checkpoint_location"]
        assert location.startswith(CHECKPOINT_MOUNT + "/")
        config["streaming"]["checkpoint_location"] = str(root / "volume") + location.removeprefix(
            CHECKPOINT_MOUNT
        )
        paths = {"/etc/isrwatch/config": root / "config", "/etc/isrwatch/spark": root / "spark"}
        for directory in paths.values():
            directory.mkdir()
        (paths["/etc/isrwatch/config"] / "isrwatch.yaml").write_text(yaml.safe_dump(config))
        spark_defaults = find(manifests, "ConfigMap")["data"]["spark-defaults.conf"]
        (paths["/etc/isrwatch/spark"] / "spark-defaults.conf").write_text(spark_defaults)
        self.env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
        for item in self.container["env"]:
            value = item["value"]
            for mount, local in paths.items():
                value = value.replace(mount, str(local))
            self.env[item["name"]] = value
        assert self.container["args"] == ["run"]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "streaming.cli", "run"],
            env=self.env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def probe(self, name: str) -> tuple[int, str]:
        """Run the container's probe ``name`` (e.g. readinessProbe) as the kubelet would."""
        command: list[str] = self.container[name]["exec"]["command"]
        assert command[0] == "python"
        result = subprocess.run(
            [sys.executable, *command[1:]],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return result.returncode, result.stdout.strip()

    def wait_for(self, name: str, code: int, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            assert self.process.poll() is None, self.stderr_tail()
            got, output = self.probe(name)
            if got == code:
                return output
            assert time.monotonic() < deadline, f"{name} still says {output!r}"
            time.sleep(2)

    def stderr_tail(self) -> str:
        return self.process.stderr.read().decode()[-3000:] if self.process.stderr else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


@pytest.fixture
def own_broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as running:
        running.start()
        yield running


def chart_values(broker: EmbeddedBroker, port: int) -> dict[str, Any]:
    return {
        "config": {
            "kafka": {
                "bootstrap_servers": broker.bootstrap_servers,
                "request_timeout_ms": 5000,
                "retry_backoff_ms": 500,
                "retry_backoff_max_ms": 2000,
            },
            "streaming": {"trigger_interval_ms": 1000, "state_shards": 3},
        },
        "metrics": {"port": port},
        "deployment": {"driverMemory": "700m"},
        "probes": {"readiness": {"maxBatchAgeSeconds": 60}},
    }


def test_chart_probes_follow_the_real_job(own_broker: EmbeddedBroker, tmp_path: Path) -> None:
    own_broker.create_topics(["controller-events", "fetch-responses"], partitions=2)
    own_broker.create_topics(["partition-health", "isrwatch-dead-letters"])
    manifests = render(chart_values(own_broker, free_port()))
    pod = Pod(manifests, tmp_path)
    try:
        # Liveness holds from the start; readiness waits for a batch and the source.
        output = pod.wait_for("startupProbe", 0, timeout_s=120)
        assert output.startswith("live: ok")
        producer = KafkaProducer(bootstrap_servers=own_broker.bootstrap_servers, linger_ms=20)
        for line in SAMPLE.read_text().splitlines():
            envelope = json.loads(line)
            producer.send(envelope["source"], json.dumps(envelope["value"]).encode())
        producer.flush()
        producer.close()
        output = pod.wait_for("readinessProbe", 0, timeout_s=240)
        assert "Kafka source up" in output
        assert pod.probe("livenessProbe")[0] == 0
        # spark-defaults.conf of the chart's ConfigMap sized the JVM.
        jvm_args = [
            Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            for pid in descendants(pod.process.pid)
        ]
        assert any(b"-Xmx700m" in args for args in jvm_args)

        own_broker.stop()  # Kafka gone: not ready, yet alive (the source retries)
        output = pod.wait_for("readinessProbe", 1, timeout_s=180)
        assert "the Kafka source is down" in output
        assert pod.probe("livenessProbe")[0] == 0
    finally:
        pod.stop()
