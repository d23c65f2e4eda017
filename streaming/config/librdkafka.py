"""The Kafka client settings by librdkafka's names (CONFIGURATION.md of librdkafka), for
the confluent-kafka clients: one table for the source's readers and the sinks' producer."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["librdkafka_names"]

_LIBRDKAFKA_NAMES = {
    "client_id": "client.id",
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "retry_backoff_ms": "retry.backoff.ms",
    "reconnect_backoff_max_ms": "reconnect.backoff.max.ms",
}
"""kafka-python's setting names (``kafka_python_options``) -> librdkafka's."""


def librdkafka_names(client: Mapping[str, object]) -> dict[str, object]:
    """kafka-python client options (``KafkaSettings.kafka_python_options``) by librdkafka's
    names: one table for the source's readers and the sinks' producer."""
    options = {
        key: client[name] for name, key in _LIBRDKAFKA_NAMES.items() if client.get(name) is not None
    }
    if "ssl_check_hostname" in client:
        options["ssl.endpoint.identification.algorithm"] = (
            "https" if client["ssl_check_hostname"] else "none"
        )
    return options
