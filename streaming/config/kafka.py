"""The ``kafka`` section: how to reach the Kafka cluster, and how the source reads it."""

from __future__ import annotations

import logging
from enum import StrEnum
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    SecretStr,
    model_validator,
)

from streaming.config.errors import Problem, raise_problems
from streaming.config.field_types import NonEmptyStr
from streaming.config.librdkafka import librdkafka_names

log = logging.getLogger("isrwatch.config")

__all__ = [
    "DEFAULT_MAX_EVENTS_PER_PARTITION_PER_BATCH",
    "DEFAULT_REQUEST_TIMEOUT_MS",
    "DEFAULT_RETRY_BACKOFF_MAX_MS",
    "DEFAULT_RETRY_BACKOFF_MS",
    "KafkaSettings",
    "SaslMechanism",
    "SecurityProtocol",
    "SourceFormat",
    "StartingOffsets",
    "backoff_max_too_short",
]

# The defaults of the settings the Kafka source also takes as options of its own
# (streaming.job.kafka_source.options): one definition for both.
DEFAULT_MAX_EVENTS_PER_PARTITION_PER_BATCH = 3_000_000
"""The cap the sustained figures of README.md and docs/performance.md were measured with.
100,000 (the default until 1,000,000) cost two thirds of the throughput on a backlog, in
small batches and their event-time alignment (docs/performance.md#as-shipped); with
1,000,000 the job did not keep up with 1,000,000 fetch events/s at 100,000 partitions,
with 3,000,000 it did, in the memory 1,000,000 took once the source's reader held
32 MiB at a time (docs/performance.md#at-1000000-events-s)."""
DEFAULT_REQUEST_TIMEOUT_MS = 30_000  # kafka-python's request_timeout_ms default
DEFAULT_RETRY_BACKOFF_MS = 1_000
DEFAULT_RETRY_BACKOFF_MAX_MS = 30_000


def backoff_max_too_short(retry_backoff_ms: int, retry_backoff_max_ms: int) -> bool:
    """Whether the longest wait between reconnection attempts is shorter than the first:
    the wait doubles from the first up to the longest, so that cannot be."""
    return retry_backoff_max_ms < retry_backoff_ms


class SecurityProtocol(StrEnum):
    """Kafka's security.protocol."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


class SaslMechanism(StrEnum):
    """The SASL mechanisms supported (username and password based)."""

    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"


class SourceFormat(StrEnum):
    """How the job reads Kafka."""

    PYTHON = "python"  # our Python Data Source, reading with kafka-python
    KAFKA = "kafka"  # Spark's JVM connector (spark-sql-kafka-0-10), when installed


class StartingOffsets(StrEnum):
    """Where a query with no checkpoint starts reading."""

    EARLIEST = "earliest"
    LATEST = "latest"


_SASL_PROTOCOLS = (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)
_TLS_PROTOCOLS = (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)


def check_servers(servers: str) -> str:
    """A comma-separated list of host:port, each entry stripped."""
    entries = [entry.strip() for entry in servers.split(",")]
    if not all(entries):
        raise ValueError("must be a comma-separated list of host:port, with no empty entry")
    return ",".join(entries)


class KafkaSettings(BaseModel):
    """How to reach the Kafka cluster, and how the source reads it."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    bootstrap_servers: Annotated[str, AfterValidator(check_servers)] = Field(
        default="127.0.0.1:9092", description="comma-separated host:port of brokers to start from"
    )
    client_id: NonEmptyStr = Field(
        default="isrwatch", description="client.id sent to the brokers (quotas, logs)"
    )
    security_protocol: SecurityProtocol = Field(
        default=SecurityProtocol.PLAINTEXT,
        description="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
    )
    sasl_mechanism: SaslMechanism | None = Field(
        default=None,
        description="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; required by the SASL protocols",
    )
    sasl_username: NonEmptyStr | None = Field(
        default=None, description="SASL user name; required by the SASL protocols"
    )
    sasl_password: SecretStr | None = Field(
        default=None,
        min_length=1,
        description="SASL password; required by the SASL protocols; never printed",
    )
    ssl_cafile: NonEmptyStr | None = Field(
        default=None, description="path of the PEM CA bundle that signs the brokers' certificates"
    )
    ssl_certfile: NonEmptyStr | None = Field(
        default=None, description="path of the PEM client certificate (mutual TLS)"
    )
    ssl_keyfile: NonEmptyStr | None = Field(
        default=None, description="path of the PEM private key of ssl_certfile"
    )
    ssl_check_hostname: bool = Field(
        default=True, description="check that a broker's certificate matches its host name"
    )
    source_format: SourceFormat = Field(
        default=SourceFormat.PYTHON,
        description="python: our Data Source over kafka-python; kafka: Spark's JVM connector",
    )
    starting_offsets: StartingOffsets = Field(
        default=StartingOffsets.EARLIEST,
        description="where a query with no checkpoint starts: earliest or latest",
    )
    max_events_per_partition_per_batch: PositiveInt = Field(
        default=DEFAULT_MAX_EVENTS_PER_PARTITION_PER_BATCH,
        description="events read per topic-partition per micro-batch (a fetch pack counts "
        "its rows); a micro-batch it cuts stops every partition at one event time, and "
        "reads at most this many events per partition in all, busy partitions past it "
        "what quiet ones leave (python source; Spark's connector counts records, per "
        "partition)",
    )
    max_records_per_batch: PositiveInt | None = Field(
        default=None,
        description="most records read per micro-batch over all topic-partitions, shared out "
        "in proportion to their backlog (Spark's maxOffsetsPerTrigger), aligned on event "
        "time as the per-partition limit; none: no such limit",
    )
    request_timeout_ms: PositiveInt = Field(
        default=DEFAULT_REQUEST_TIMEOUT_MS, description="client request timeout, ms"
    )
    retry_backoff_ms: PositiveInt = Field(
        default=DEFAULT_RETRY_BACKOFF_MS,
        description="first wait before retrying a failed request or connection, ms",
    )
    retry_backoff_max_ms: PositiveInt = Field(
        default=DEFAULT_RETRY_BACKOFF_MAX_MS,
        description="longest wait between reconnection attempts, ms",
    )

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: object) -> object:
        """``max_records_per_partition_per_batch`` (until the packed fetch wire, when the
        cap came to count events) is read as ``max_events_per_partition_per_batch``."""
        old, new = "max_records_per_partition_per_batch", "max_events_per_partition_per_batch"
        if isinstance(data, dict) and old in data and new not in data:
            log.warning("kafka.%s is now kafka.%s (it counts events): read as that", old, new)
            return {new if key == old else key: value for key, value in data.items()}
        return data

    @model_validator(mode="after")
    def _check_security(self) -> KafkaSettings:
        protocol = self.security_protocol
        problems: list[Problem] = []
        for name in ("sasl_mechanism", "sasl_username", "sasl_password"):
            value = getattr(self, name)
            if protocol in _SASL_PROTOCOLS and value is None:
                why = f"required when security_protocol is {protocol}"
                problems.append((name, why, ("security_protocol", name)))
            elif protocol not in _SASL_PROTOCOLS and value is not None:
                why = (
                    f"only used with security_protocol SASL_PLAINTEXT or SASL_SSL "
                    f"(security_protocol is {protocol})"
                )
                problems.append((name, why, (name, "security_protocol")))
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            if protocol not in _TLS_PROTOCOLS and getattr(self, name) is not None:
                why = (
                    f"only used with security_protocol SSL or SASL_SSL "
                    f"(security_protocol is {protocol})"
                )
                problems.append((name, why, (name, "security_protocol")))
        if backoff_max_too_short(self.retry_backoff_ms, self.retry_backoff_max_ms):
            why = f"must be at least retry_backoff_ms ({self.retry_backoff_ms})"
            problems.append(
                ("retry_backoff_max_ms", why, ("retry_backoff_max_ms", "retry_backoff_ms"))
            )
        raise_problems(problems)
        return self

    def kafka_python_options(self) -> dict[str, object]:
        """Keyword arguments for kafka-python's KafkaConsumer, KafkaProducer, KafkaAdminClient.

        Holds the SASL password in clear: never log the result.
        """
        options: dict[str, object] = {
            "bootstrap_servers": self.bootstrap_servers.split(","),
            "client_id": self.client_id,
            "security_protocol": self.security_protocol.value,
            "request_timeout_ms": self.request_timeout_ms,
            "retry_backoff_ms": self.retry_backoff_ms,
            "reconnect_backoff_max_ms": self.retry_backoff_max_ms,
        }
        mechanism, password = self.sasl_mechanism, self.sasl_password
        if mechanism is not None and password is not None:  # set only with a SASL protocol
            options["sasl_mechanism"] = mechanism.value
            options["sasl_plain_username"] = self.sasl_username
            options["sasl_plain_password"] = password.get_secret_value()
        if self.security_protocol in _TLS_PROTOCOLS:
            options["ssl_check_hostname"] = self.ssl_check_hostname
            for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
                if (path := getattr(self, name)) is not None:
                    options[name] = path
        return options

    def librdkafka_options(self) -> dict[str, object]:
        """The same settings for a confluent-kafka (librdkafka) client, by librdkafka's
        names (CONFIGURATION.md of librdkafka). Holds the SASL password: never log it."""
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "socket.timeout.ms": self.request_timeout_ms,
            **librdkafka_names(self.kafka_python_options()),
        }
