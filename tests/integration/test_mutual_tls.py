"""The job against a broker that wants mutual TLS (docs/security.md).

The embedded broker (Tansu) behind stunnel, which terminates TLS and requires a client
certificate signed by the test's client CA (``TlsProxy(client_ca=...)``): a connection
without one never reaches the broker. So a client that works here presented the
certificate of ``kafka.ssl_certfile`` / ``kafka.ssl_keyfile``: the source's planner
(kafka-python), its readers and the sinks' producer (librdkafka), the collectors'
clients (kafka-python) and the source's diagnosis (librdkafka).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from state.events import Source
from streaming.feeds.collectors.admin_source import KafkaAdminSource
from streaming.feeds.publisher import KafkaPublisher
from streaming.feeds.wire import InputRecord
from streaming.job.connection_errors import ConnectionFailure, diagnose
from streaming.job.metrics import HealthExporter
from streaming.job.query import run
from streaming.tools.embedded_broker import EmbeddedBroker
from tests.integration.certificates import Certificates, make_certificates
from tests.integration.job_process import JobProcess, connection_errors, keeps_trying, refused
from tests.integration.kafka_topics import (
    assert_health_is_replays,
    isolated_job_config,
    last_per_key,
    read_topic,
    replayed,
    topic_settings,
)
from tests.integration.test_security import SecuredBroker, health_records, produce_sample

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


@pytest.fixture(scope="module")
def mtls_broker(certificates: Certificates) -> Iterator[EmbeddedBroker]:
    with SecuredBroker(certificates, mutual_tls=True) as broker:
        yield broker


def mutual_tls_options(certificates: Certificates) -> dict[str, Any]:
    return {
        "kafka.security_protocol": "SSL",
        "kafka.ssl_cafile": str(certificates.ca),
        "kafka.ssl_certfile": str(certificates.client_cert),
        "kafka.ssl_keyfile": str(certificates.client_key),
    }


def client_certificate_directory(directory: Path, cert: Path, key: Path) -> Path:
    """``cert`` and ``key`` as ``client.pem`` and ``client.key`` in a new directory."""
    directory.mkdir(parents=True)
    shutil.copy(cert, directory / "client.pem")
    shutil.copy(key, directory / "client.key")
    return directory


def swap_link(link: Path, target: Path) -> None:
    """Point the symbolic link ``link`` at ``target`` in one step, the way Kubernetes
    updates a mounted secret (its ``..data`` link): certificate and key change together."""
    staged = link.with_name(link.name + ".new")
    staged.symlink_to(target)
    os.replace(staged, link)


def broker_ids(broker: EmbeddedBroker, certificates: Certificates) -> tuple[int, ...]:
    """The brokers' ids as librdkafka sees them through the proxy, with the certificate."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "security.protocol": "SSL",
            "ssl.ca.location": str(certificates.ca),
            "ssl.certificate.location": str(certificates.client_cert),
            "ssl.key.location": str(certificates.client_key),
        }
    )
    return tuple(sorted(admin.list_topics(timeout=10).brokers))


def test_a_client_without_a_certificate_is_refused_and_the_connection_check_says_why(
    mtls_broker: EmbeddedBroker, certificates: Certificates
) -> None:
    from confluent_kafka.admin import AdminClient

    settings: dict[str, str | int | float | bool] = {
        "bootstrap.servers": mtls_broker.bootstrap_servers,
        "security.protocol": "SSL",
        "ssl.ca.location": str(certificates.ca),
    }
    with_certificate = {
        **settings,
        "ssl.certificate.location": str(certificates.client_cert),
        "ssl.key.location": str(certificates.client_key),
    }
    # The source's connection check (librdkafka): the broker's alert is a TLS failure.
    refused = diagnose(settings)
    assert refused is not None
    assert refused.reason is ConnectionFailure.TLS
    assert "alert certificate required" in refused.detail
    assert diagnose(with_certificate) is None  # it presents the certificate: metadata
    brokers = AdminClient(with_certificate).list_topics(timeout=10).brokers.values()
    assert [f"{b.host}:{b.port}" for b in brokers] == [mtls_broker.bootstrap_servers]


def test_the_job_reads_and_writes_through_mutual_tls(
    mtls_broker: EmbeddedBroker, certificates: Certificates, tmp_path: Path
) -> None:
    config = isolated_job_config(mtls_broker, tmp_path, mutual_tls_options(certificates))
    produce_sample(config)  # kafka-python's producer, as the collectors' publisher
    health_out = tmp_path / "health.jsonl"
    run(config, available_now=True, health_out=health_out, exporter=HealthExporter())
    # partition-health is written by the sinks' producer (librdkafka) through the proxy
    assert_health_is_replays(config, health_out)


def test_a_collector_polls_and_publishes_through_mutual_tls(
    mtls_broker: EmbeddedBroker, certificates: Certificates, tmp_path: Path
) -> None:
    config = isolated_job_config(mtls_broker, tmp_path, mutual_tls_options(certificates))
    source = KafkaAdminSource(config.kafka, offsets=False)  # collect admin's client
    try:
        snapshot = source.snapshot()
    finally:
        source.close()
    assert snapshot.brokers == broker_ids(mtls_broker, certificates)
    assert set(snapshot.partitions[config.topics.fetch_responses]) == {0, 1}
    publisher = KafkaPublisher(config)
    event = {"type": "ControllerChange", "ts": 1_700_000_000_000, "controller_id": 1}
    try:
        publisher.publish([InputRecord(Source.CONTROLLER_EVENTS, "0", event)])
    finally:
        publisher.close()
    published = read_topic(config, config.topics.controller_events)
    assert [(key, json.loads(value or "null")) for key, value in published] == [("0", event)]


def health_by_key(path: Path) -> dict[str, Any]:
    """The last health record of each partition the job wrote to ``path``."""
    return last_per_key(
        [(f"{r['topic']}:{r['partition']}", json.dumps(r)) for r in health_records(path)]
    )


def test_an_untrusted_client_certificate_is_refused_and_a_rotated_one_is_used_without_restart(
    mtls_broker: EmbeddedBroker, certificates: Certificates, tmp_path: Path
) -> None:
    config = isolated_job_config(mtls_broker, tmp_path / "setup", mutual_tls_options(certificates))
    produce_sample(config)
    untrusted = client_certificate_directory(
        tmp_path / "untrusted",
        certificates.untrusted_client_cert,
        certificates.untrusted_client_key,
    )
    trusted = client_certificate_directory(
        tmp_path / "trusted", certificates.client_cert, certificates.client_key
    )
    current = tmp_path / "current"  # the mounted secret: a link to the certificate's directory
    current.symlink_to(untrusted)
    servers = mtls_broker.bootstrap_servers
    job = JobProcess(
        {
            "kafka.bootstrap_servers": servers,
            "kafka.security_protocol": "SSL",
            "kafka.ssl_cafile": certificates.ca,
            "kafka.ssl_certfile": current / "client.pem",
            "kafka.ssl_keyfile": current / "client.key",
            **topic_settings(config),
        },
        tmp_path,
    )
    try:
        # (Without any client certificate the refusal is the same alert: the connection
        # check above.)
        words = (
            "TLS handshake failed connecting to Kafka at " + servers,
            "alert certificate required",
            "check kafka.ssl_certfile and kafka.ssl_keyfile",
        )
        down = refused(job, "tls", servers, words)
        keeps_trying(job, down, "tls", servers)
        pid = job.process.pid
        swap_link(current, trusted)  # the certificate is rotated: the next try reads it
        up = job.wait_for("source up", lambda s: s.get(("isrwatch_source_up", ())) == 1)
        assert connection_errors(up) == {}
        assert job.process.pid == pid
        # It goes on from where it was: the sample's health, written through the proxy.
        expected, deadline = replayed(), time.monotonic() + 300
        while health_by_key(job.health_out) != expected and time.monotonic() < deadline:
            assert job.process.poll() is None, job.stderr()[-4000:]
            time.sleep(0.5)
        assert health_by_key(job.health_out) == expected
    finally:
        job.stop()
