"""The job against brokers that enforce TLS and SASL (docs/security.md).

TLS: the embedded broker (Tansu) behind stunnel, which terminates TLS with a throwaway
CA's certificate; the broker advertises the proxy's address, so every connection of every
client (the source's planner and readers, the sinks' producer) goes through TLS.
SASL: Tansu started with ``--authentication`` refuses every login (this build's only
storage engine, dynostore, stores no SCRAM user: docs/security.md), which is what the
refused credentials test needs; no test here can log in with SASL.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from streaming.config import IsrwatchConfig
from streaming.job.metrics import HealthExporter
from streaming.job.query import run
from streaming.tools.embedded_broker import EmbeddedBroker, free_port
from streaming.tools.tls_proxy import TlsProxy, stunnel_binary
from tests.integration.certificates import Certificates, make_certificates
from tests.integration.kafka_topics import (
    assert_health_is_replays,
    isolated_job_config,
    sample,
    topic_settings,
)

pytestmark = pytest.mark.integration

# The stunnel and openssl programs are installed by .ci/run: missing, the tests fail.
assert stunnel_binary() is not None, "stunnel4 is not installed (apt-get install stunnel4)"
assert shutil.which("openssl") is not None, "openssl is not installed"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


def tls_options(ca: Path) -> dict[str, Any]:
    return {"kafka.security_protocol": "SSL", "kafka.ssl_cafile": str(ca)}


class SecuredBroker:
    """Tansu behind a TLS proxy, advertising the proxy's address; with ``mutual_tls`` the
    proxy requires a client certificate that ``certificates.client_ca`` signed."""

    def __init__(
        self, certificates: Certificates, *, authentication: bool = False, mutual_tls: bool = False
    ) -> None:
        proxy_port = free_port()
        client = {"security_protocol": "SSL", "ssl_cafile": str(certificates.ca)}
        if mutual_tls:  # the broker's own readiness check goes through the proxy too
            client |= {
                "ssl_certfile": str(certificates.client_cert),
                "ssl_keyfile": str(certificates.client_key),
            }
        self.broker = EmbeddedBroker(
            advertised_port=proxy_port, authentication=authentication, client_options=client
        )
        self.proxy = TlsProxy(
            self.broker.listener,
            certificates.server_cert,
            certificates.server_key,
            port=proxy_port,
            client_ca=certificates.client_ca if mutual_tls else None,
        )

    def __enter__(self) -> EmbeddedBroker:
        self.proxy.start()
        self.broker.start()
        return self.broker

    def __exit__(self, *exc: object) -> None:
        self.broker.stop()
        self.proxy.stop()


@pytest.fixture(scope="module")
def tls_broker(certificates: Certificates) -> Iterator[EmbeddedBroker]:
    with SecuredBroker(certificates) as broker:
        yield broker


@pytest.fixture(scope="module")
def sasl_broker(certificates: Certificates) -> Iterator[EmbeddedBroker]:
    with SecuredBroker(certificates, authentication=True) as broker:
        yield broker


# ------------------------------------------------------------------------------ helpers


def produce_sample(config: IsrwatchConfig) -> None:
    topics = {
        "controller-events": config.topics.controller_events,
        "fetch-responses": config.topics.fetch_responses,
    }
    producer = KafkaProducer(**config.kafka.kafka_python_options(), linger_ms=20)
    for envelope in sample():
        value = envelope["value"]
        key = f"{value.get('topic')}:{value.get('partition')}" if "topic" in value else "0"
        producer.send(
            topics[envelope["source"]], key=key.encode(), value=json.dumps(value).encode()
        )
    producer.flush()
    producer.close()


class JobProcess:
    """``isrwatch run`` in a process of its own (its own process group), configured by
    environment variables, with /metrics on a free port and its stderr in a file."""

    def __init__(self, settings: dict[str, object], directory: Path) -> None:
        self.metrics_port = free_port()
        self.health_out = directory / "health.jsonl"
        self.stderr_path = directory / "job.stderr"
        env = {
            **os.environ,
            "PYTHONFAULTHANDLER": "1",
            **{
                f"ISRWATCH_{key.upper().replace('.', '__')}": str(value)
                for key, value in {
                    "streaming.checkpoint_location": directory / "checkpoint",
                    "streaming.trigger_interval_ms": 500,
                    "streaming.state_shards": 3,
                    "metrics.host": "127.0.0.1",
                    "metrics.port": self.metrics_port,
                    "kafka.retry_backoff_ms": 200,
                    "kafka.retry_backoff_max_ms": 1000,
                    "kafka.request_timeout_ms": 5000,
                    **settings,
                }.items()
            },
        }
        with self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "streaming.cli",
                    "run",
                    "--health-out",
                    str(self.health_out),
                ],
                env=env,
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """The samples /metrics serves now (empty while it does not answer)."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                text = answer.read().decode()
        except OSError:
            return {}
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def wait_for(self, what: str, condition: Any, timeout_s: float = 300) -> dict[Any, float]:
        """Poll /metrics until ``condition(samples)``; fails if the job exits meanwhile."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"the job exited:\n{self.stderr()[-4000:]}"
            samples = self.metrics()
            if samples and condition(samples):
                return samples
            time.sleep(0.5)
        raise AssertionError(f"no {what} within {timeout_s} s:\n{self.stderr()[-4000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def health_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def connection_errors(samples: dict[Any, float]) -> dict[tuple[str, str], float]:
    """isrwatch_source_connection_error by (reason, bootstrap_servers)."""
    return {
        (dict(labels)["reason"], dict(labels)["bootstrap_servers"]): value
        for (name, labels), value in samples.items()
        if name == "isrwatch_source_connection_error"
    }


# ------------------------------------------------------------------------------ tests


def test_the_broker_tells_clients_the_tls_address(
    tls_broker: EmbeddedBroker, certificates: Certificates
) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(
        {
            "bootstrap.servers": tls_broker.bootstrap_servers,
            "security.protocol": "SSL",
            "ssl.ca.location": str(certificates.ca),
        }
    )
    brokers = admin.list_topics(timeout=10).brokers.values()
    assert [f"{b.host}:{b.port}" for b in brokers] == [tls_broker.bootstrap_servers]
    assert tls_broker.bootstrap_servers != tls_broker.listener


def test_the_job_reads_and_writes_through_tls(
    tls_broker: EmbeddedBroker, certificates: Certificates, tmp_path: Path
) -> None:
    config = isolated_job_config(tls_broker, tmp_path, tls_options(certificates.ca))
    produce_sample(config)
    health_out = tmp_path / "health.jsonl"
    run(config, available_now=True, health_out=health_out, exporter=HealthExporter())
    assert_health_is_replays(config, health_out)


def refused(
    job: JobProcess, reason: str, servers: str, words: tuple[str, ...], secret: str = ""
) -> dict[Any, float]:
    """Waits for ``/metrics`` to name ``reason`` for ``servers`` after three failed tries
    or more, then checks the source is down and the log says ``words``, with no traceback
    (and never ``secret``). Returns the samples."""
    down = job.wait_for(
        f"{reason} connection error",
        lambda s: (
            connection_errors(s) == {(reason, servers): 1}
            and s[("isrwatch_source_failures_total", ())] >= 3
        ),
    )
    assert down[("isrwatch_source_up", ())] == 0
    log = job.stderr()
    for said in words:
        assert said in log
    assert "Traceback" not in log
    assert not secret or secret not in log
    return down


def keeps_trying(job: JobProcess, down: dict[Any, float], reason: str, servers: str) -> None:
    """Not a crash loop: the same process goes on trying, with back-off."""
    failures = down[("isrwatch_source_failures_total", ())]
    later = job.wait_for(
        "more failures", lambda s: s[("isrwatch_source_failures_total", ())] > failures
    )
    assert connection_errors(later) == {(reason, servers): 1}
    assert job.process.poll() is None


def test_an_untrusted_certificate_is_named_and_the_job_recovers_with_the_right_ca(
    tls_broker: EmbeddedBroker, certificates: Certificates, tmp_path: Path
) -> None:
    config = isolated_job_config(tls_broker, tmp_path / "setup", tls_options(certificates.ca))
    produce_sample(config)
    trusted = tmp_path / "trusted-ca.pem"  # the file the job is told to trust
    shutil.copy(certificates.other_ca, trusted)
    servers = tls_broker.bootstrap_servers
    job = JobProcess(
        {
            "kafka.bootstrap_servers": servers,
            "kafka.security_protocol": "SSL",
            "kafka.ssl_cafile": trusted,
            **topic_settings(config),
        },
        tmp_path,
    )
    try:
        refused(
            job,
            "tls",
            servers,
            ("TLS handshake failed connecting to Kafka at " + servers, "certificate verify failed"),
        )
        pid = job.process.pid
        # The certificate's authority is fixed on disk: the next try reads it again.
        shutil.copy(certificates.ca, trusted)
        up = job.wait_for("source up", lambda s: s.get(("isrwatch_source_up", ())) == 1)
        assert connection_errors(up) == {}
        assert job.process.pid == pid
        assert job.process.poll() is None
        # A batch writes its health records to the file (none: an empty file).
        deadline = time.monotonic() + 300
        while not health_records(job.health_out) and time.monotonic() < deadline:
            assert job.process.poll() is None, job.stderr()[-4000:]
            time.sleep(0.5)
        assert health_records(job.health_out), "no health record written after recovery"
    finally:
        job.stop()


def test_refused_credentials_are_named_and_the_job_keeps_retrying(
    sasl_broker: EmbeddedBroker, certificates: Certificates, tmp_path: Path
) -> None:
    servers = sasl_broker.bootstrap_servers
    job = JobProcess(
        {
            "kafka.bootstrap_servers": servers,
            "kafka.security_protocol": "SASL_SSL",
            "kafka.ssl_cafile": certificates.ca,
            "kafka.sasl_mechanism": "SCRAM-SHA-512",
            "kafka.sasl_username": "isrwatch",
            "kafka.sasl_password": "not-the-password",
        },
        tmp_path,
    )
    try:
        words = (
            "authentication failed connecting to Kafka at " + servers,
            "SASL SCRAM authentication failed",
        )
        down = refused(job, "authentication", servers, words, secret="not-the-password")
        keeps_trying(job, down, "authentication", servers)
    finally:
        job.stop()
