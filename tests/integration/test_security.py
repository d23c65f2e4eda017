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
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from streaming.config import IsrwatchConfig
from streaming.job.metrics import HealthExporter
from streaming.job.query import run
from streaming.tools.embedded_broker import EmbeddedBroker, free_port
from streaming.tools.tls_proxy import TlsProxy, stunnel_binary
from tests.integration.certificates import Certificates, make_certificates
from tests.integration.job_process import JobProcess, connection_errors, keeps_trying, refused
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


def health_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


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
