"""Classifying librdkafka's connection errors (no broker needed: a fake admin client)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from pyspark.sql.streaming.datasource import ReadAllAvailable

from streaming.job.connection_errors import (
    ConnectionFailure,
    ConnectionProblem,
    classify,
    diagnose,
    explain_failure,
    most_telling,
)

# What librdkafka 2.x said in the integration tests (tests/integration/test_security.py).
REFUSED_LOGIN = (
    "sasl_ssl://127.0.0.1:9093/bootstrap: SASL authentication error: SASL SCRAM "
    "authentication failed: broker responded with unknown-user (after 45ms in state AUTH_REQ)"
)
UNTRUSTED = (
    "ssl://127.0.0.1:9093/bootstrap: SSL handshake failed: error:0A000086:SSL "
    "routines::certificate verify failed: broker certificate could not be verified"
)
REFUSED_CONNECTION = "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused"
# A broker that wants a client certificate (stunnel's verifyChain, tests/integration/
# test_mutual_tls.py) and gets none it trusts. Over TLS 1.3 it says so after the client's
# side of the handshake, and librdkafka reports the alert as a transport failure
# (_TRANSPORT); librdkafka presents no certificate whose CA the broker does not list, so an
# untrusted one gives the same words as none.
NO_CLIENT_CERTIFICATE = (
    "ssl://127.0.0.1:50827/bootstrap: Receive failed: error:0A00045C:SSL routines::tlsv13 "
    "alert certificate required: SSL alert number 116 (after 0ms in state APIVERSION_QUERY)"
)
# The same broker limited to TLS 1.2 (sslVersionMax): the handshake itself fails (_SSL).
NO_CLIENT_CERTIFICATE_TLS12 = (
    "ssl://127.0.0.1:56675/bootstrap: SSL handshake failed: error:0A000410:SSL "
    "routines::ssl/tls alert handshake failure: SSL alert number 40 (after 1ms in state "
    "SSL_HANDSHAKE)"
)


@pytest.mark.parametrize(
    ("code", "text", "reason"),
    [
        (KafkaError._AUTHENTICATION, REFUSED_LOGIN, ConnectionFailure.AUTHENTICATION),
        (KafkaError.SASL_AUTHENTICATION_FAILED, "Authentication failed", "authentication"),
        (KafkaError._SSL, UNTRUSTED, ConnectionFailure.TLS),
        (KafkaError._TRANSPORT, REFUSED_CONNECTION, ConnectionFailure.UNREACHABLE),
        (KafkaError._RESOLVE, "Failed to resolve 'nowhere:9092'", ConnectionFailure.UNREACHABLE),
        (KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down", ConnectionFailure.UNREACHABLE),
        # librdkafka reports some handshake failures with the transport code
        (KafkaError._TRANSPORT, "ssl://k:9093/1: SSL handshake failed: EOF", ConnectionFailure.TLS),
        # the broker's TLS alert names a refused handshake, whatever the code
        (KafkaError._TRANSPORT, NO_CLIENT_CERTIFICATE, ConnectionFailure.TLS),
        (KafkaError._SSL, NO_CLIENT_CERTIFICATE_TLS12, ConnectionFailure.TLS),
        # OpenSSL's own words for a closed connection are no alert: the broker went away
        (
            KafkaError._TRANSPORT,
            "ssl://k:9093/1: Receive failed: error:0A000126:SSL routines::unexpected eof while "
            "reading",
            ConnectionFailure.UNREACHABLE,
        ),
    ],
)
def test_librdkafka_errors_are_classified(code: int, text: str, reason: str) -> None:
    assert classify(code, text) == ConnectionProblem(ConnectionFailure(reason), text)


def test_errors_that_are_not_about_connecting_are_not_classified() -> None:
    assert classify(KafkaError.UNKNOWN_TOPIC_OR_PART, "Unknown topic or partition") is None
    assert classify(KafkaError._MSG_TIMED_OUT, "Message timed out") is None


def test_a_refused_login_explains_the_brokers_being_down_not_the_other_way_round() -> None:
    down = ConnectionProblem(ConnectionFailure.UNREACHABLE, "1/1 brokers are down")
    login = ConnectionProblem(ConnectionFailure.AUTHENTICATION, REFUSED_LOGIN)
    tls = ConnectionProblem(ConnectionFailure.TLS, UNTRUSTED)
    assert most_telling([down, login]) is login
    assert most_telling([down, tls, login]) is login
    assert most_telling([down, tls]) is tls
    assert most_telling([down]) is down
    assert most_telling([]) is None


def test_the_description_names_the_cause_the_brokers_and_what_to_check() -> None:
    problem = ConnectionProblem(ConnectionFailure.AUTHENTICATION, REFUSED_LOGIN)
    assert problem.describe("k1:9093,k2:9093") == (
        f"authentication failed connecting to Kafka at k1:9093,k2:9093: {REFUSED_LOGIN} "
        "(check kafka.sasl_mechanism, kafka.sasl_username and kafka.sasl_password)"
    )
    tls = ConnectionProblem(ConnectionFailure.TLS, UNTRUSTED).describe("k1:9093")
    assert tls.startswith(f"TLS handshake failed connecting to Kafka at k1:9093: {UNTRUSTED} (")
    assert "kafka.ssl_cafile" in tls


def test_a_refused_client_certificate_points_at_the_client_certificate() -> None:
    refused = ConnectionProblem(ConnectionFailure.TLS, NO_CLIENT_CERTIFICATE).describe("k:9093")
    assert refused == (
        f"TLS handshake failed connecting to Kafka at k:9093: {NO_CLIENT_CERTIFICATE} (the "
        "brokers want a client certificate signed by a CA they trust: check "
        "kafka.ssl_certfile and kafka.ssl_keyfile)"
    )
    tls12 = ConnectionProblem(ConnectionFailure.TLS, NO_CLIENT_CERTIFICATE_TLS12).describe("k:1")
    assert tls12.endswith(
        "(the brokers refused the handshake: check that kafka.security_protocol matches the "
        "listener, and kafka.ssl_certfile and kafka.ssl_keyfile if they want a client "
        "certificate)"
    )


class FakeAdmin:
    """An AdminClient whose metadata requests fail until ``answer_after`` calls, reporting
    ``errors`` (one list per call) to the error_cb on poll()."""

    def __init__(self, errors: list[list[KafkaError]], answer_after: int | None = None) -> None:
        self.errors = errors
        self.answer_after = answer_after
        self.calls = 0
        self.config: dict[str, Any] = {}

    def __call__(self, config: dict[str, Any]) -> FakeAdmin:
        self.config = config
        return self

    def list_topics(self, timeout: float) -> object:
        self.calls += 1
        if self.answer_after is not None and self.calls > self.answer_after:
            return object()
        raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Failed to get metadata"))

    def poll(self, timeout: float) -> int:
        batch = self.errors[self.calls - 1] if self.calls <= len(self.errors) else []
        for error in batch:
            self.config["error_cb"](error)
        return len(batch)


def test_diagnose_stops_at_the_first_refused_handshake() -> None:
    admin = FakeAdmin(
        [
            [KafkaError(KafkaError._TRANSPORT, "Disconnected")],
            [
                KafkaError(KafkaError._SSL, UNTRUSTED),
                KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"),
            ],
            [KafkaError(KafkaError._AUTHENTICATION, REFUSED_LOGIN)],
        ]
    )
    config = {"bootstrap.servers": "k:9093", "security.protocol": "SSL"}
    assert diagnose(config, 30, admin) == ConnectionProblem(ConnectionFailure.TLS, UNTRUSTED)
    assert admin.calls == 2
    assert admin.config["security.protocol"] == "SSL"
    assert admin.config["log_level"] == 0  # its errors are ours to report, not its logs


def test_diagnose_says_unreachable_once_every_broker_failed() -> None:
    admin = FakeAdmin(
        [
            [KafkaError(KafkaError._TRANSPORT, REFUSED_CONNECTION)],
            [KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down")],
        ]
    )
    found = diagnose({"bootstrap.servers": "127.0.0.1:1"}, 30, admin)
    assert found == ConnectionProblem(ConnectionFailure.UNREACHABLE, REFUSED_CONNECTION)
    assert admin.calls == 2


def test_diagnose_without_any_error_report_gives_up_at_its_timeout() -> None:
    found = diagnose({"bootstrap.servers": "k:9092"}, 0.3, FakeAdmin([]))
    assert found is not None
    assert found.reason is ConnectionFailure.UNREACHABLE
    assert found.detail == "Failed to get metadata"


def test_diagnose_finds_nothing_when_the_brokers_answer() -> None:
    admin = FakeAdmin([[KafkaError(KafkaError._TRANSPORT, "Disconnected")]], answer_after=1)
    assert diagnose({"bootstrap.servers": "k:9092"}, 30, admin) is None
    assert admin.calls == 2


def test_diagnose_stops_at_a_refused_client_certificate_reported_as_a_transport_failure() -> None:
    admin = FakeAdmin(
        [
            [
                KafkaError(KafkaError._TRANSPORT, NO_CLIENT_CERTIFICATE),
                KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"),
            ],
        ]
    )
    found = diagnose({"bootstrap.servers": "k:9093", "security.protocol": "SSL"}, 30, admin)
    assert found == ConnectionProblem(ConnectionFailure.TLS, NO_CLIENT_CERTIFICATE)
    assert admin.calls == 1


def test_the_source_logs_and_publishes_the_cause_of_a_failed_offset_request(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The reader's failure path with the diagnosis stubbed: nothing listens on the port,
    so kafka-python fails at once; the cause is what the diagnosis found."""
    from streaming.job.kafka_source import KafkaStreamReader, SourceSettings
    from streaming.tools.embedded_broker import free_port

    servers = f"127.0.0.1:{free_port()}"
    status_file = tmp_path / "source-status.json"
    reader = KafkaStreamReader(
        SourceSettings.from_options(
            {
                "kafka.bootstrap.servers": servers,
                "subscribe": "t",
                "statusFile": str(status_file),
                "kafkaOptions": json.dumps(
                    {"request_timeout_ms": 500, "bootstrap_timeout_ms": 200}
                ),
            }
        )
    )
    reader._sleep = lambda seconds: None
    login = ConnectionProblem(ConnectionFailure.AUTHENTICATION, REFUSED_LOGIN)
    reader._diagnose = lambda: login
    start = {"t:0": 3}
    try:
        with caplog.at_level(logging.WARNING, logger="isrwatch.kafka_source"):
            assert reader.latestOffset(start, ReadAllAvailable()) == start
        status = json.loads(status_file.read_text())
        assert status["last_error_reason"] == "authentication"
        assert status["last_error"] == login.describe(servers) == reader.last_error
        assert login.describe(servers) in caplog.text
        # Not a connection problem (the brokers answer the diagnosis): kafka-python's words.
        reader._diagnose = lambda: None
        assert reader.latestOffset(start, ReadAllAvailable()) == start
        status = json.loads(status_file.read_text())
        assert status["last_error_reason"] is None
        assert status["consecutive_failures"] == 2
        assert status["last_error"].startswith("KafkaTimeoutError: ")
    finally:
        reader.stop()


@pytest.mark.parametrize(
    ("text", "reason", "line"),
    [
        (  # Spark's JVM connector, as the failed query reports it
            "[STREAM_FAILED] Query terminated with exception\n"
            "Caused by: org.apache.kafka.common.errors.SaslAuthenticationException: "
            "Authentication failed during authentication due to invalid credentials with "
            "SASL mechanism SCRAM-SHA-512\n\tat org.apache.kafka...",
            ConnectionFailure.AUTHENTICATION,
            1,
        ),
        (
            "Caused by: org.apache.kafka.common.errors.SslAuthenticationException: SSL "
            "handshake failed\nCaused by: javax.net.ssl.SSLHandshakeException: PKIX path "
            "building failed",
            ConnectionFailure.TLS,
            0,
        ),
        (  # the sinks' producer (streaming.job.sinks.DeliveryError)
            '3 of 3 records not written (first error: KafkaError{code=_SSL,val=-181,str="'
            'ssl://k:9093/1: SSL handshake failed: certificate verify failed"})',
            ConnectionFailure.TLS,
            0,
        ),
    ],
)
def test_a_failed_query_is_explained_by_the_refused_login_or_handshake_it_names(
    text: str, reason: ConnectionFailure, line: int
) -> None:
    assert explain_failure(text) == ConnectionProblem(reason, text.splitlines()[line].strip())


def test_a_failed_query_for_another_cause_is_not_explained() -> None:
    assert explain_failure("java.io.EOFException\n\tat java.base/java.io.Data") is None
    assert explain_failure("1 of 5 records not written (first error: flush timed out)") is None
