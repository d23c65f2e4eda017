"""isrwatch against Apache Kafka 4.1's own secured listeners (docs/security.md).

One one-node KRaft cluster at a time (``LabCluster``, on ports the OS picks), its clients'
listener secured one way per module parameter: SASL_SSL with SCRAM-SHA-512 (the user
created by StorageTool's ``--add-scram`` at format), SASL_PLAINTEXT with PLAIN (the user
in the listener's JAAS configuration), SSL, and SSL requiring client certificates. The
certificates are throwaway ones made by ``openssl`` for the module (no key is committed).

On each: the publisher writes the incident sample; the job, with this project's source
and with Spark's connector, writes replay's health records; ``check restart`` reads them
back from the partition-health topic; ``collect admin`` polls the cluster and publishes.
Then refused logins, with either source: a wrong password, an unknown user, an untrusted
broker or client certificate are named in the job's log and by ``reason`` on /metrics,
the job keeps trying, and the password never appears in its log.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from streaming.config import IsrwatchConfig, load_config
from streaming.tools.lab.cluster import LabCluster
from streaming.tools.lab.distribution import LINES
from streaming.tools.lab.node_config import ClientListener
from tests.integration.certificates import Certificates, make_certificates
from tests.integration.job_process import JobProcess, keeps_trying, refused
from tests.integration.kafka_topics import last_per_key, read_topic, replayed
from tests.integration.lab_kafka import create_topics, environment, publish_sample

pytestmark = pytest.mark.integration

assert shutil.which("openssl") is not None, "openssl is not installed"

USER = "isrwatch"
PASSWORD = "isrwatch-S3cret-pw"  # must never appear in a log


@dataclass(frozen=True)
class Refusal:
    """A client setting the broker refuses, what the job must say with each source, and
    its reason. With Spark's connector the words after the cause are the Java client's
    (kafka-clients 3.9.2), which its supervisor logs (``query.explain_query_failure``)."""

    name: str
    settings: dict[str, object]
    reason: str
    words: tuple[str, ...]  # this project's source (librdkafka's words)
    connector_words: tuple[str, ...]

    def said(self, source_format: str) -> tuple[str, ...]:
        return self.connector_words if source_format == "kafka" else self.words


@dataclass(frozen=True)
class Secured:
    """A listener kind: the broker's side, isrwatch's settings for it, and refusals."""

    listener: ClientListener
    settings: dict[str, object]
    refusals: list[Refusal] = field(default_factory=list)


def secured(kind: str, certificates: Certificates, directory: Path) -> Secured:
    keystore = directory / "broker-keystore.pem"  # Kafka's PEM key store: key, then chain
    keystore.write_text(certificates.server_key.read_text() + certificates.server_cert.read_text())
    users = {USER: PASSWORD}
    tls = {"kafka.ssl_cafile": certificates.ca}
    sasl = {"kafka.sasl_username": USER, "kafka.sasl_password": PASSWORD}
    untrusted_broker = Refusal(
        "untrusted broker certificate",
        {"kafka.ssl_cafile": certificates.other_ca},
        "tls",
        ("TLS handshake failed connecting to Kafka at", "certificate verify failed"),
        ("TLS handshake failed connecting to Kafka at", "PKIX path building failed"),
    )
    if kind == "SASL_SSL/SCRAM-SHA-512":
        refused_login = ("authentication failed connecting to Kafka at", "SCRAM")
        return Secured(
            ClientListener("SASL_SSL", "SCRAM-SHA-512", users, keystore=keystore),
            {
                "kafka.security_protocol": "SASL_SSL",
                "kafka.sasl_mechanism": "SCRAM-SHA-512",
                **sasl,
                **tls,
            },
            [
                Refusal(
                    "wrong password",
                    {"kafka.sasl_password": "not-" + PASSWORD},
                    "authentication",
                    refused_login,
                    refused_login,
                ),
                Refusal(
                    "unknown user",
                    {"kafka.sasl_username": "nobody"},
                    "authentication",
                    refused_login,
                    refused_login,
                ),
                untrusted_broker,
            ],
        )
    if kind == "SASL_PLAINTEXT/PLAIN":
        return Secured(
            ClientListener("SASL_PLAINTEXT", "PLAIN", users),
            {"kafka.security_protocol": "SASL_PLAINTEXT", "kafka.sasl_mechanism": "PLAIN", **sasl},
            [
                Refusal(
                    "wrong password",
                    {"kafka.sasl_password": "not-" + PASSWORD},
                    "authentication",
                    ("authentication failed connecting to Kafka at",),
                    # Kafka 4.1's PLAIN server: "Authentication failed: Invalid username
                    # or password"
                    ("authentication failed connecting to Kafka at", "Invalid username"),
                )
            ],
        )
    if kind == "SSL":
        return Secured(
            ClientListener("SSL", keystore=keystore),
            {"kafka.security_protocol": "SSL", **tls},
            [untrusted_broker],
        )
    assert kind == "SSL/mutual"
    return Secured(
        ClientListener("SSL", keystore=keystore, client_ca=certificates.client_ca),
        {
            "kafka.security_protocol": "SSL",
            "kafka.ssl_certfile": certificates.client_cert,
            "kafka.ssl_keyfile": certificates.client_key,
            **tls,
        },
        [
            Refusal(
                "untrusted client certificate",
                {
                    "kafka.ssl_certfile": certificates.untrusted_client_cert,
                    "kafka.ssl_keyfile": certificates.untrusted_client_key,
                },
                "tls",
                ("TLS handshake failed connecting to Kafka at", "check kafka.ssl_certfile"),
                ("TLS handshake failed connecting to Kafka at", "check kafka.ssl_certfile"),
            )
        ],
    )


KINDS = ["SASL_SSL/SCRAM-SHA-512", "SASL_PLAINTEXT/PLAIN", "SSL", "SSL/mutual"]


@dataclass
class SecuredKafka:
    cluster: LabCluster
    secured: Secured
    certificates: Certificates

    def settings(self, **overrides: object) -> dict[str, object]:
        """isrwatch's settings for this listener, fast triggers, no exporter."""
        return {
            "kafka.bootstrap_servers": self.cluster.bootstrap_servers,
            "streaming.trigger_interval_ms": 500,
            "streaming.state_shards": 3,
            "metrics.enabled": "false",
            **self.secured.settings,
            **overrides,
        }

    def config(self, **overrides: object) -> IsrwatchConfig:
        return load_config(None, dict(self.settings(**overrides)), environ={})


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


@pytest.fixture(scope="module", params=KINDS)
def kafka(
    request: pytest.FixtureRequest,
    certificates: Certificates,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[SecuredKafka]:
    """A one-node Kafka 4.1 whose clients' listener is secured as the parameter says,
    with isrwatch's topics created over that listener."""
    directory = tmp_path_factory.mktemp("kafka")
    setup = secured(request.param, certificates, directory)
    cluster = LabCluster(LINES["4.1"], 1, directory / "cluster", client=setup.listener)
    try:
        cluster.start()
        kafka = SecuredKafka(cluster, setup, certificates)
        create_topics(kafka.config())
        yield kafka
    finally:
        cluster.stop()


def isrwatch(
    kafka: SecuredKafka, *arguments: str, **overrides: object
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streaming.cli", *arguments],
        env=environment(kafka.settings(**overrides)),
        capture_output=True,
        text=True,
        timeout=480,
    )


def test_every_component_logs_in_and_does_its_work(kafka: SecuredKafka, tmp_path: Path) -> None:
    config = kafka.config()
    publish_sample(config)
    expected = replayed()
    health: dict[str, Path] = {}
    for source_format in ("python", "kafka"):
        health[source_format] = tmp_path / f"health-{source_format}.jsonl"
        done = isrwatch(
            kafka,
            "run",
            "--available-now",
            "--health-out",
            str(health[source_format]),
            **{
                "kafka.source_format": source_format,
                "streaming.checkpoint_location": tmp_path / f"checkpoint-{source_format}",
            },
        )
        assert done.returncode == 0, f"{source_format}: {done.stderr[-4000:]}"
        assert PASSWORD not in done.stderr + done.stdout
        written: list[tuple[str, str | None]] = [
            (f"{r['topic']}:{r['partition']}", json.dumps(r))
            for r in map(json.loads, health[source_format].read_text().splitlines())
        ]
        assert last_per_key(written) == expected, source_format
    assert last_per_key(read_topic(config, config.topics.partition_health)) == expected

    # check restart reads the partition-health topic through the listener, and answers
    # as it does from the job's file
    from_topic = isrwatch(kafka, "check", "restart", "--broker", "1")
    from_file = isrwatch(
        kafka, "check", "restart", "--broker", "1", "--from", str(health["python"])
    )
    assert from_topic.returncode in (0, 1), from_topic.stderr[-4000:]
    assert (from_topic.returncode, json.loads(from_topic.stdout)) == (
        from_file.returncode,
        json.loads(from_file.stdout),
    )

    # collect admin describes the cluster (its admin client) and publishes what it saw
    state_file = tmp_path / "collect-admin.json"  # its first poll: everything is new
    polled = isrwatch(
        kafka, "collect", "admin", "--once", **{"collect.admin.state_file": state_file}
    )
    assert polled.returncode == 0, polled.stderr[-4000:]
    assert PASSWORD not in polled.stderr + polled.stdout
    events = [
        json.loads(value)
        for _, value in read_topic(config, config.topics.controller_events)
        if value is not None
    ]
    leaders = {
        (e["topic"], e["partition"]): e["leader"]
        for e in events
        if e.get("type") == "LeaderAndIsr" and e.get("topic") == config.topics.fetch_responses
    }
    assert leaders == {(config.topics.fetch_responses, 0): 1, (config.topics.fetch_responses, 1): 1}


@pytest.mark.parametrize("source_format", ["python", "kafka"])
def test_a_refused_login_is_named_and_the_job_keeps_trying(
    kafka: SecuredKafka, source_format: str, tmp_path: Path
) -> None:
    servers = kafka.cluster.bootstrap_servers
    for refusal in kafka.secured.refusals:
        directory = tmp_path / refusal.name.replace(" ", "-")
        directory.mkdir()
        settings = {
            **kafka.secured.settings,
            **refusal.settings,
            "kafka.source_format": source_format,
        }
        job = JobProcess({"kafka.bootstrap_servers": servers, **settings}, directory)
        try:
            words = refusal.said(source_format)
            down = refused(job, refusal.reason, servers, words, secret=PASSWORD)
            keeps_trying(job, down, refusal.reason, servers)
        finally:
            job.stop()
        assert PASSWORD not in job.stderr(), refusal.name
