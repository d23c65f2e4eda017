"""The collectors' Kafka clients take TLS and SASL (PLAIN, SCRAM) from the shared
configuration, through ``KafkaSettings.kafka_python_options`` (no broker needed)."""

from __future__ import annotations

from typing import Any

import kafka
import pytest

from streaming.config import IsrwatchConfig, load_config
from streaming.feeds.collectors.admin_source import KafkaAdminSource
from streaming.feeds.publisher import KafkaPublisher

SECURED = {
    "sasl-scram-tls": {
        "kafka.security_protocol": "SASL_SSL",
        "kafka.sasl_mechanism": "SCRAM-SHA-512",
        "kafka.sasl_username": "collector",
        "kafka.sasl_password": "s3cret",
        "kafka.ssl_cafile": "/etc/kafka/ca.pem",
    },
    "sasl-plain": {
        "kafka.security_protocol": "SASL_PLAINTEXT",
        "kafka.sasl_mechanism": "PLAIN",
        "kafka.sasl_username": "collector",
        "kafka.sasl_password": "s3cret",
    },
    "mutual-tls": {
        "kafka.security_protocol": "SSL",
        "kafka.ssl_cafile": "/etc/kafka/ca.pem",
        "kafka.ssl_certfile": "/etc/kafka/me.pem",
        "kafka.ssl_keyfile": "/etc/kafka/me.key",
    },
}


def config(name: str) -> IsrwatchConfig:
    return load_config(None, {"kafka.bootstrap_servers": "k1:9093", **SECURED[name]}, environ={})


class Recorder:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **options: Any) -> Any:
        self.calls.append(options)
        return self


@pytest.mark.parametrize("name", sorted(SECURED))
def test_producer_and_admin_client_get_the_security_options(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    producer, admin = Recorder(), Recorder()
    monkeypatch.setattr(kafka, "KafkaProducer", producer)
    monkeypatch.setattr(kafka, "KafkaAdminClient", admin)
    settings = config(name)
    KafkaPublisher(settings)
    KafkaAdminSource(settings.kafka)
    expected = settings.kafka.kafka_python_options()
    assert producer.calls == [{"acks": "all", "linger_ms": 20, **expected}]
    assert admin.calls == [expected]
    if "sasl_mechanism" in expected:
        assert expected["sasl_plain_password"] == "s3cret"
        assert expected["sasl_mechanism"] == SECURED[name]["kafka.sasl_mechanism"]
    if name != "sasl-plain":
        assert expected["ssl_cafile"] == "/etc/kafka/ca.pem"


@pytest.mark.parametrize("name", sorted(SECURED))
def test_kafka_python_accepts_every_option(name: str) -> None:
    """KafkaAdminClient refuses unknown settings; the producer ignores them silently."""
    options = set(config(name).kafka.kafka_python_options())
    assert options <= set(kafka.KafkaAdminClient.DEFAULT_CONFIG)
    assert options <= set(kafka.KafkaProducer.DEFAULT_CONFIG)
