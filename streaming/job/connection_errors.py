"""Why a Kafka client cannot talk to the brokers: refused credentials, a failed TLS
handshake, or no broker answering, in words an operator can act on.

kafka-python, which plans the source's micro-batches on the driver, reports a failed
bootstrap as a timeout ("Unable to bootstrap", ``NoBrokersAvailable``) and the cause only
to its own log. librdkafka
reports it to the client's ``error_cb`` as a ``KafkaError``: ``_AUTHENTICATION`` for a SASL
login the broker refused, ``_SSL`` for a failed TLS handshake (an untrusted or mismatched
certificate, or TLS against a plaintext listener), ``_TRANSPORT``, ``_RESOLVE`` and
``_ALL_BROKERS_DOWN`` when nothing answers. A broker that wants a client certificate
(mutual TLS) and gets none it trusts refuses it with a TLS alert; over TLS 1.3 it checks
the certificate after the client has finished its side of the handshake, so librdkafka
reports the alert on its first read, as ``_TRANSPORT`` ("Receive failed: ... tlsv13 alert
certificate required"): the alert, not the code, makes that a TLS failure.
:func:`diagnose` asks for metadata with a short-lived librdkafka client on the same
settings and keeps the most telling of those errors; :func:`classify` maps one error to a
:class:`ConnectionProblem`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from streaming.acl_denial import denial_in

__all__ = [
    "ConnectionFailure",
    "ConnectionProblem",
    "classify",
    "diagnose",
    "explain_failure",
    "most_telling",
]


class ConnectionFailure(StrEnum):
    """The cause of a failed connection: the ``reason`` label of
    ``isrwatch_source_connection_error`` (docs/security.md)."""

    AUTHENTICATION = "authentication"  # the broker refused the SASL login
    TLS = "tls"  # the TLS handshake failed
    UNREACHABLE = "unreachable"  # no broker answered (down, refused, unresolvable)
    AUTHORIZATION = "authorization"  # logged in, but an ACL is missing (streaming.acl_denial)


_HINTS = {
    ConnectionFailure.AUTHENTICATION: (
        "authentication failed",
        "check kafka.sasl_mechanism, kafka.sasl_username and kafka.sasl_password",
    ),
    ConnectionFailure.TLS: (
        "TLS handshake failed",
        "check kafka.ssl_cafile (the CA that signed the brokers' certificates), "
        "kafka.ssl_check_hostname, and that kafka.security_protocol matches the listener",
    ),
    ConnectionFailure.UNREACHABLE: (
        "no broker answered",
        "check kafka.bootstrap_servers and that the brokers are up",
    ),
    ConnectionFailure.AUTHORIZATION: (
        "a request was refused",
        "grant the ACL named, or check kafka.sasl_username (the principal)",
    ),
}
# A TLS failure the broker announced with an alert (below) is about what the client
# offered, not about the broker's certificate: these hints replace the TLS one.
_CLIENT_CERTIFICATE_HINT = (
    "the brokers want a client certificate signed by a CA they trust: check "
    "kafka.ssl_certfile and kafka.ssl_keyfile"
)
_REFUSED_HANDSHAKE_HINT = (
    "the brokers refused the handshake: check that kafka.security_protocol matches the "
    "listener, and kafka.ssl_certfile and kafka.ssl_keyfile if they want a client certificate"
)
# The most telling cause first: a refused login or handshake explains the brokers being
# "down" that librdkafka reports next, not the other way round.
_PRIORITY = (
    ConnectionFailure.AUTHENTICATION,
    ConnectionFailure.TLS,
    ConnectionFailure.AUTHORIZATION,
    ConnectionFailure.UNREACHABLE,
)

# librdkafka's local error codes (confluent_kafka.KafkaError), and the broker's
# SASL_AUTHENTICATION_FAILED (58), ILLEGAL_SASL_STATE (34), UNSUPPORTED_SASL_MECHANISM (33).
_AUTHENTICATION_CODES = frozenset({-169, 58, 34, 33})
_TLS_CODES = frozenset({-181})
_ALL_BROKERS_DOWN = -187
_UNREACHABLE_CODES = frozenset({-195, -193, _ALL_BROKERS_DOWN, -185})
# A TLS alert the broker sent, in OpenSSL's words ("SSL routines::tlsv13 alert certificate
# required", "sslv3 alert bad certificate"): the broker refused the TLS session, whatever
# the code. OpenSSL's own failures ("unexpected eof while reading") are not alerts.
_TLS_ALERT = re.compile(r"ssl routines::[^:]*\balert\b")
# The alerts a broker sends about the client's certificate: none presented (librdkafka
# presents none whose CA the broker does not list), or one it does not trust. A client
# that distrusts the broker's certificate fails locally ("certificate verify failed").
_CLIENT_CERTIFICATE_ALERT = re.compile(
    r"ssl routines::[^:]*\balert (certificate required|bad certificate|unknown ca"
    r"|certificate unknown|unsupported certificate|certificate expired|certificate revoked)"
)


@dataclass(frozen=True)
class ConnectionProblem:
    """A classified connection failure and the client library's own words for it."""

    reason: ConnectionFailure
    detail: str

    def describe(self, bootstrap_servers: str) -> str:
        """One line for the log: the cause, the brokers, what the client said, what to check."""
        cause, hint = _HINTS[self.reason]
        if self.reason is ConnectionFailure.AUTHORIZATION:
            return f"{cause} by Kafka at {bootstrap_servers}: {self.detail} ({hint})"
        if self.reason is ConnectionFailure.TLS:
            lowered = self.detail.lower()
            if _CLIENT_CERTIFICATE_ALERT.search(lowered):
                hint = _CLIENT_CERTIFICATE_HINT
            elif _TLS_ALERT.search(lowered):  # over TLS 1.2, a missing one: handshake failure
                hint = _REFUSED_HANDSHAKE_HINT
        return f"{cause} connecting to Kafka at {bootstrap_servers}: {self.detail} ({hint})"


def classify(code: int, text: str) -> ConnectionProblem | None:
    """The problem a librdkafka error (``KafkaError.code()``, ``KafkaError.str()``) stands
    for; None for an error that is not about connecting."""
    lowered = text.lower()
    if code in _AUTHENTICATION_CODES or "sasl authentication" in lowered:
        return ConnectionProblem(ConnectionFailure.AUTHENTICATION, text)
    if code in _TLS_CODES or "ssl handshake failed" in lowered or _TLS_ALERT.search(lowered):
        return ConnectionProblem(ConnectionFailure.TLS, text)
    if code in _UNREACHABLE_CODES:
        return ConnectionProblem(ConnectionFailure.UNREACHABLE, text)
    return None


# What a failed query says (its exception's text) when the cause was connecting: Spark's
# JVM connector (the Java client's exceptions) and the sinks' producer (librdkafka).
_FAILURE_WORDS = (
    (
        ConnectionFailure.AUTHENTICATION,
        ("SaslAuthenticationException", "SASL authentication error", "_AUTHENTICATION"),
    ),
    (
        ConnectionFailure.TLS,
        (
            "SslAuthenticationException",
            "SSLHandshakeException",
            "PKIX path building failed",
            "SSL handshake failed",
            "code=_SSL",
        ),
    ),
)
_DETAIL_CHARS = 500


def explain_failure(text: str) -> ConnectionProblem | None:
    """The refused login, TLS handshake or request a failed query's error text names
    (Spark's JVM connector, the sinks' producer), with the line that names it; None
    otherwise. A refused request is said as a ``streaming.acl_denial.Denial`` (its ACL)."""
    for reason, words in _FAILURE_WORDS:
        for line in text.splitlines():
            if any(word in line for word in words):
                return ConnectionProblem(reason, line.strip()[:_DETAIL_CHARS])
    denial = denial_in(text)
    if denial is not None:
        return ConnectionProblem(ConnectionFailure.AUTHORIZATION, str(denial))
    return None


def most_telling(problems: Iterable[ConnectionProblem]) -> ConnectionProblem | None:
    """The first problem of the highest-priority reason among ``problems``."""
    found = list(problems)
    for reason in _PRIORITY:
        for problem in found:
            if problem.reason is reason:
                return problem
    return None


def diagnose(
    config: Mapping[str, Any],
    timeout_s: float = 3.0,
    admin_factory: Callable[[dict[str, Any]], Any] | None = None,
) -> ConnectionProblem | None:
    """Why a librdkafka client with ``config`` (``bootstrap.servers``, security settings,
    by librdkafka's names) cannot get metadata; None once metadata arrives.

    Returns as soon as a refused login or handshake is seen or every broker has failed,
    else after ``timeout_s`` (no answer at all: ``UNREACHABLE``).
    """
    from confluent_kafka import KafkaError, KafkaException

    seen: list[ConnectionProblem] = []
    all_down = False  # librdkafka tried every broker, and said why each failed before

    def on_error(error: KafkaError) -> None:
        nonlocal all_down
        all_down = all_down or error.code() == _ALL_BROKERS_DOWN
        problem = classify(error.code(), error.str())
        if problem is not None:
            seen.append(problem)

    settings = {**config, "error_cb": on_error, "log_level": 0}
    if admin_factory is None:
        from confluent_kafka.admin import AdminClient

        admin_factory = AdminClient
    admin = admin_factory(settings)
    deadline = time.monotonic() + timeout_s
    last_words = f"no metadata within {timeout_s:g} s"
    while True:
        remaining = deadline - time.monotonic()
        try:
            admin.list_topics(timeout=max(0.1, min(0.5, remaining)))
            return None  # the brokers answer: not a connection problem
        except KafkaException as error:  # "Failed to get metadata": error_cb says why
            last_words = str(error.args[0].str() if error.args else error)
        admin.poll(0.1)  # serves error_cb
        found = most_telling(seen)
        if found is not None and found.reason is not ConnectionFailure.UNREACHABLE:
            return found
        if remaining <= 0 or all_down:
            return found or ConnectionProblem(ConnectionFailure.UNREACHABLE, last_words)
