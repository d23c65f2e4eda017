"""The job's configuration: one typed object, ``IsrwatchConfig``.

Sources, lowest to highest precedence: the models' defaults, a YAML file
(``conf/isrwatch.yaml`` unless told otherwise), ``ISRWATCH_*`` environment variables and
the command line's ``overrides``. The layers are merged key by key into one plain dict,
remembering which source set each key, and the result is validated once, so that a
setting may be completed by a higher layer (a password from the environment for a SASL
protocol from the file) and every problem is reported against the source that caused it.

This module must not import pyspark: the CLI and the tests load it without a JVM.
"""

from __future__ import annotations

import difflib
import os
import re
import types
from collections.abc import Iterator, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    SecretStr,
    ValidationError,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from state.settings import RuleSettings

__all__ = [
    "CONFIG_DIR_VARIABLE",
    "CONFIG_FILE_VARIABLE",
    "ENV_PREFIX",
    "AdminCollectorSettings",
    "CollectSettings",
    "ConfigError",
    "IsrwatchConfig",
    "KafkaSettings",
    "LogCollectorSettings",
    "LogStartPosition",
    "MetricsSettings",
    "SaslMechanism",
    "SecurityProtocol",
    "SourceFormat",
    "StartingOffsets",
    "StateStore",
    "StreamingSettings",
    "TopicSettings",
    "default_config_path",
    "dump_config",
    "load_config",
]

ENV_PREFIX = "ISRWATCH_"
CONFIG_DIR_VARIABLE = "ISRWATCH_CONF_DIR"
CONFIG_FILE_VARIABLE = "ISRWATCH_CONFIG"
CONFIG_FILE_NAME = "isrwatch.yaml"

# Kubernetes injects "service links" for every Service of the namespace: a Service named
# "isrwatch" (the chart's metrics Service) gives ISRWATCH_SERVICE_HOST, ISRWATCH_PORT,
# ISRWATCH_PORT_9464_TCP_ADDR, ... Settings always contain "__", so these never name one.
_SERVICE_LINK = re.compile(
    r"^ISRWATCH_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_\d+_(TCP|UDP|SCTP)(_[A-Z]+)?)?)$"
)

_FROZEN = ConfigDict(extra="forbid", frozen=True)
_CROSS_FIELD = "cross_field"

Key = tuple[str, ...]


class ConfigError(Exception):
    """The configuration is unusable; the message lists every problem, one per line.

    Each line reads ``<source>: <dotted.key>: <why>``; ``problems`` holds the lines.
    """

    def __init__(self, problems: str | Sequence[str]) -> None:
        self.problems: tuple[str, ...] = (
            (problems,) if isinstance(problems, str) else tuple(problems)
        )
        super().__init__("\n".join(self.problems))


# --------------------------------------------------------------------------- enums


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


class StateStore(StrEnum):
    """Spark's state store provider."""

    ROCKSDB = "rocksdb"
    HDFS = "hdfs"


_SASL_PROTOCOLS = (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)
_TLS_PROTOCOLS = (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)
_LIBRDKAFKA_NAMES = {
    "client_id": "client.id", "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism", "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password", "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location", "ssl_keyfile": "ssl.key.location",
    "retry_backoff_ms": "retry.backoff.ms", "reconnect_backoff_max_ms": "reconnect.backoff.max.ms",
}  # fmt: skip
"""kafka-python's setting names (``kafka_python_options``) -> librdkafka's."""

# A cross-field problem: (field, why, fields whose source is blamed, first set wins).
Problem = tuple[str, str, tuple[str, ...]]


def _raise_problems(problems: list[Problem]) -> None:
    """Raise the cross-field problems of one model as one error; load_config splits it."""
    if problems:
        summary = "; ".join(f"{field}: {why}" for field, why, _ in problems)
        raise PydanticCustomError(
            _CROSS_FIELD, "{summary}", {"summary": summary, "problems": tuple(problems)}
        )


# --------------------------------------------------------------------------- models

_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def _check_topic(name: str) -> str:
    if not _TOPIC_NAME.match(name) or name in (".", ".."):
        raise ValueError(
            "must be a Kafka topic name: 1 to 249 characters of a-z, A-Z, 0-9, '.', '_', '-'"
        )
    return name


def _check_servers(servers: str) -> str:
    entries = [entry.strip() for entry in servers.split(",")]
    if not all(entries):
        raise ValueError("must be a comma-separated list of host:port, with no empty entry")
    return ",".join(entries)


TopicName = Annotated[str, AfterValidator(_check_topic)]
NonEmptyStr = Annotated[str, Field(min_length=1)]


class KafkaSettings(BaseModel):
    """How to reach the Kafka cluster, and how the source reads it."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    bootstrap_servers: Annotated[str, AfterValidator(_check_servers)] = Field(
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
    max_records_per_partition_per_batch: PositiveInt = Field(
        default=100000, description="most records read per topic-partition per micro-batch"
    )
    max_records_per_batch: PositiveInt | None = Field(
        default=None,
        description="most records read per micro-batch over all topic-partitions, shared out "
        "in proportion to their backlog (Spark's maxOffsetsPerTrigger); none: no such limit",
    )
    request_timeout_ms: PositiveInt = Field(default=30000, description="client request timeout, ms")
    retry_backoff_ms: PositiveInt = Field(
        default=1000, description="first wait before retrying a failed request or connection, ms"
    )
    retry_backoff_max_ms: PositiveInt = Field(
        default=30000, description="longest wait between reconnection attempts, ms"
    )

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
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            why = f"must be at least retry_backoff_ms ({self.retry_backoff_ms})"
            problems.append(
                ("retry_backoff_max_ms", why, ("retry_backoff_max_ms", "retry_backoff_ms"))
            )
        _raise_problems(problems)
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


def librdkafka_names(client: Mapping[str, object]) -> dict[str, object]:
    """kafka-python client options (``KafkaSettings.kafka_python_options``) by librdkafka's
    names: one table for the source's readers and the sinks' producer."""
    options = {key: client[name] for name, key in _LIBRDKAFKA_NAMES.items()
               if client.get(name) is not None}  # fmt: skip
    if "ssl_check_hostname" in client:
        options["ssl.endpoint.identification.algorithm"] = (
            "https" if client["ssl_check_hostname"] else "none"
        )
    return options


class TopicSettings(BaseModel):
    """The topics read and written."""

    model_config = _FROZEN

    controller_events: TopicName = Field(
        default="controller-events", description="input: the controller's ISR and leader events"
    )
    fetch_responses: TopicName = Field(
        default="fetch-responses", description="input: followers' fetch responses"
    )
    partition_health: TopicName = Field(
        default="partition-health", description="output: per-partition health records"
    )
    dead_letters: TopicName = Field(
        default="isrwatch-dead-letters", description="output: records that were not applied"
    )

    @model_validator(mode="after")
    def _check_distinct(self) -> TopicSettings:
        problems: list[Problem] = []
        first_of: dict[str, str] = {}
        for name in type(self).model_fields:
            topic = getattr(self, name)
            if topic in first_of:
                why = f"same topic as topics.{first_of[topic]} ({topic!r})"
                problems.append((name, why, (name, first_of[topic])))
            else:
                first_of[topic] = name
        _raise_problems(problems)
        return self


class StreamingSettings(BaseModel):
    """The Spark Structured Streaming query."""

    model_config = _FROZEN

    state_shards: PositiveInt = Field(
        default=64, description="number of state groups partitions are hashed into"
    )
    trigger_interval_ms: PositiveInt = Field(
        default=5000, description="micro-batch trigger interval, ms"
    )
    watermark_delay_ms: NonNegativeInt = Field(
        default=60000, description="event-time watermark delay (late data tolerated), ms"
    )
    checkpoint_location: NonEmptyStr = Field(
        default=".isrwatch/checkpoint", description="checkpoint directory (path or URI)"
    )
    state_store: StateStore = Field(
        default=StateStore.ROCKSDB, description="state store provider: rocksdb or hdfs"
    )
    spark_master: NonEmptyStr = Field(
        default="local[2]", description="Spark master URL used when the job creates its session"
    )
    shuffle_partitions: PositiveInt = Field(default=4, description="spark.sql.shuffle.partitions")
    health_out: NonEmptyStr | None = Field(
        default=None, description="also write health records as JSON lines to this path; none: off"
    )


class MetricsSettings(BaseModel):
    """The Prometheus exporter served by the driver."""

    model_config = _FROZEN

    host: NonEmptyStr = Field(default="0.0.0.0", description="address the exporter listens on")
    port: int = Field(default=9464, ge=1, le=65535, description="TCP port of the exporter")
    enabled: bool = Field(default=True, description="serve the Prometheus exporter")


class LogStartPosition(StrEnum):
    """Where ``collect logs`` starts reading a file it has no saved position for."""

    BEGINNING = "beginning"
    END = "end"


def _check_time_zone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError("must be an IANA time zone name, such as UTC or Europe/Paris") from None
    return name


TimeZoneName = Annotated[str, AfterValidator(_check_time_zone)]


def _check_log_layout(pattern: str | None) -> str | None:
    if pattern is not None:
        from streaming.collectors.log_layouts import compile_custom_layout

        compile_custom_layout(pattern)  # raises LayoutError (a ValueError) saying why
    return pattern


LogLayoutRegex = Annotated[str | None, AfterValidator(_check_log_layout)]
Port = Annotated[int, Field(ge=1, le=65535)]


class LogCollectorSettings(BaseModel):
    """``isrwatch collect logs``: broker log files -> controller-events."""

    model_config = _FROZEN

    time_zone: TimeZoneName = Field(
        default="UTC", description="time zone of the brokers' log4j timestamps (IANA name)"
    )
    start_at: LogStartPosition = Field(
        default=LogStartPosition.BEGINNING,
        description="where to start a file with no saved position: beginning or end",
    )
    poll_interval_ms: PositiveInt = Field(
        default=1000, description="--follow: time between two reads of the files, ms"
    )
    max_read_bytes: PositiveInt = Field(
        default=8 * 1024 * 1024, description="most bytes read from one file in one read"
    )
    state_file: NonEmptyStr = Field(
        default=".isrwatch/collect-logs.json",
        description="resume state: file positions and the translator's memory",
    )
    metrics_port: Port = Field(default=9465, description="TCP port of its Prometheus metrics")
    layout: LogLayoutRegex = Field(
        default=None,
        description="a log layout the collector does not know, as a regex with the named"
        " groups time and message (and optionally level, logger, thread); docs/collectors-logs.md",
    )
    summary_after_lines: PositiveInt = Field(
        default=100,
        description="lines read before the collector says how many it recognised",
    )


class AdminCollectorSettings(BaseModel):
    """``isrwatch collect admin``: a live cluster polled with the admin API."""

    model_config = _FROZEN

    poll_interval_ms: PositiveInt = Field(
        default=10000, description="time between two polls of the cluster, ms"
    )
    fetch_responses: bool = Field(
        default=True,
        description="derive fetch-responses from per-replica log end offsets (ListOffsets)",
    )
    broker_changes: bool = Field(
        default=True,
        description="emit BrokerChange; off when collect logs reads the controller's log",
    )
    partition_events: bool = Field(
        default=True,
        description="emit TopicChange, LeaderAndIsr and IsrChange; off when collect "
        "metadata-log reads the cluster's metadata log (it has the exact epochs)",
    )
    state_file: NonEmptyStr = Field(
        default=".isrwatch/collect-admin.json",
        description="resume state: the last snapshot and the brokers' epochs",
    )
    metrics_port: Port = Field(default=9466, description="TCP port of its Prometheus metrics")


class MetadataLogCollectorSettings(BaseModel):
    """``isrwatch collect metadata-log``: a KRaft ``__cluster_metadata-0`` directory ->
    controller-events."""

    model_config = _FROZEN

    poll_interval_ms: PositiveInt = Field(
        default=1000, description="--follow: time between two reads of the log, ms"
    )
    max_read_bytes: PositiveInt = Field(
        default=8 * 1024 * 1024, description="most bytes read from the log in one read"
    )
    state_file: NonEmptyStr = Field(
        default=".isrwatch/collect-metadata-log.json",
        description="resume state: the next metadata offset and the image replayed up to it",
    )
    metrics_port: Port = Field(default=9467, description="TCP port of its Prometheus metrics")


class CollectSettings(BaseModel):
    """The collectors that feed the input topics from a real cluster."""

    model_config = _FROZEN

    metrics_host: NonEmptyStr = Field(
        default="0.0.0.0", description="address the collectors' metrics listen on"
    )
    metrics_enabled: bool = Field(default=True, description="serve the collectors' metrics")
    logs: LogCollectorSettings = Field(
        default_factory=LogCollectorSettings, description="the broker log collector"
    )
    admin: AdminCollectorSettings = Field(
        default_factory=AdminCollectorSettings, description="the admin API collector"
    )
    metadata_log: MetadataLogCollectorSettings = Field(
        default_factory=MetadataLogCollectorSettings,
        description="the KRaft metadata log collector",
    )


class IsrwatchConfig(BaseModel):
    """The whole configuration of the job."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    kafka: KafkaSettings = Field(
        default_factory=KafkaSettings, description="Kafka connection and source"
    )
    topics: TopicSettings = Field(default_factory=TopicSettings, description="topic names")
    rules: RuleSettings = Field(
        default_factory=RuleSettings, description="the replication model's settings"
    )
    streaming: StreamingSettings = Field(
        default_factory=StreamingSettings, description="the streaming query"
    )
    metrics: MetricsSettings = Field(
        default_factory=MetricsSettings, description="the Prometheus exporter"
    )
    collect: CollectSettings = Field(
        default_factory=CollectSettings, description="the collectors (isrwatch collect)"
    )


# --------------------------------------------------------------------------- model lookup


def _section(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _lookup(key: Key) -> type[BaseModel] | FieldInfo | None:
    """The section (a model class) or the setting (a field) ``key`` names; None: neither."""
    model: type[BaseModel] = IsrwatchConfig
    for depth, name in enumerate(key):
        field = model.model_fields.get(name)
        if field is None:
            return None
        section = _section(field.annotation)
        if depth == len(key) - 1:
            return section or field
        if section is None:
            return None
        model = section
    return model


def _alternatives(annotation: object) -> tuple[object, ...]:
    """The types a (possibly optional, possibly Annotated) annotation admits."""
    if get_origin(annotation) in (Union, types.UnionType):
        return tuple(kind for arg in get_args(annotation) for kind in _alternatives(arg))
    if get_origin(annotation) is Annotated:
        return _alternatives(get_args(annotation)[0])
    return (annotation,)


def _is_text(field: FieldInfo) -> bool:
    """A str or SecretStr setting, possibly optional."""
    kinds = [kind for kind in _alternatives(field.annotation) if kind is not type(None)]
    return all(kind is str or kind is SecretStr for kind in kinds)


def _is_secret(key: Key) -> bool:
    found = _lookup(key)
    return isinstance(found, FieldInfo) and SecretStr in _alternatives(found.annotation)


def _did_you_mean(key: Key) -> str:
    parent = _lookup(key[:-1])
    if not isinstance(parent, type):
        return ""
    close = difflib.get_close_matches(key[-1], list(parent.model_fields), n=1)
    return f" (did you mean {'.'.join((*key[:-1], close[0]))}?)" if close else ""


# --------------------------------------------------------------------------- sources


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """The file load_config reads when given no path: $ISRWATCH_CONFIG, else
    $ISRWATCH_CONF_DIR/isrwatch.yaml, else conf/isrwatch.yaml of the source tree."""
    found = _named_config_path(os.environ if environ is None else environ)
    return found or Path(__file__).resolve().parent.parent / "conf" / CONFIG_FILE_NAME


def _named_config_path(environ: Mapping[str, str]) -> Path | None:
    upper = {name.upper(): value for name, value in environ.items()}
    if upper.get(CONFIG_FILE_VARIABLE):
        return Path(upper[CONFIG_FILE_VARIABLE])
    if upper.get(CONFIG_DIR_VARIABLE):
        return Path(upper[CONFIG_DIR_VARIABLE]) / CONFIG_FILE_NAME
    return None


class _Loader(yaml.SafeLoader):
    """A safe loader that rejects duplicate keys (a second ``kafka:`` would hide the first)."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if isinstance(key, str | int | float | bool) and key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read_file(path: Path, source: str) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{source}: file not found") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: cannot read: not UTF-8 text") from None
    except OSError as error:
        raise ConfigError(f"{source}: cannot read: {error.strerror or error}") from None
    try:
        data = yaml.load(text, Loader=_Loader)  # a SafeLoader
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ConfigError(f"{source}: invalid YAML{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: the top level must be a mapping of sections (got {type(data).__name__})"
        )
    return data


def _leaves(value: object, key: Key) -> Iterator[tuple[Key, object]]:
    """The settings a nested mapping sets; an empty mapping is a leaf."""
    if isinstance(value, Mapping) and value:
        for name, item in value.items():
            yield from _leaves(item, (*key, str(name)))
    else:
        yield key, value


def _env_value(raw: str, field: FieldInfo) -> object:
    """A string setting takes the text as is (a password "123456" stays a string); others
    are parsed as a YAML scalar ("16" -> 16, "true" -> True, "null" -> None)."""
    if _is_text(field):
        optional = type(None) in _alternatives(field.annotation)
        return None if raw == "" and optional else raw
    try:
        parsed = yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw
    return parsed if parsed is None or isinstance(parsed, str | int | float | bool) else raw


def _environment(environ: Mapping[str, str]) -> tuple[list[tuple[Key, object, str]], list[str]]:
    settings: list[tuple[Key, object, str]] = []
    errors: list[str] = []
    set_by: dict[Key, str] = {}
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in (CONFIG_DIR_VARIABLE, CONFIG_FILE_VARIABLE):
            continue
        if _SERVICE_LINK.match(upper):
            continue
        source = f"environment variable {name}"
        key = tuple(part.lower() for part in name[len(ENV_PREFIX) :].split("__"))
        dotted = ".".join(key)
        found = _lookup(key) if all(key) else None
        if found is None:
            example = f"{ENV_PREFIX}KAFKA__BOOTSTRAP_SERVERS"
            errors.append(
                f"{source}: {dotted}: unknown setting{_did_you_mean(key)} "
                f"(settings are named like {example})"
            )
        elif not isinstance(found, FieldInfo):
            errors.append(
                f"{source}: {dotted}: is a section, not a setting; "
                f"set its settings one by one, as {ENV_PREFIX}{name[len(ENV_PREFIX) :]}__<NAME>"
            )
        elif key in set_by:
            errors.append(f"{source}: {dotted}: also set by {set_by[key]}")
        else:
            set_by[key] = source
            settings.append((key, _env_value(environ[name], found), source))
    return settings, errors


def _command_line(
    overrides: Mapping[str, object],
) -> tuple[list[tuple[Key, object, str]], list[str]]:
    source = "command line"
    settings: list[tuple[Key, object, str]] = []
    errors: list[str] = []
    for dotted, value in overrides.items():
        if value is None:
            continue
        key = tuple(dotted.split("."))
        if not all(key):
            errors.append(f"{source}: {dotted}: not a dotted setting name")
            continue
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        settings.extend((key + sub, leaf, source) for sub, leaf in _leaves(value, ()))
    return settings, errors


def _put(
    data: dict[str, Any], sources: dict[Key, str], key: Key, value: object, source: str
) -> None:
    """Set one setting of the merged data and remember its source; a higher layer replaces
    the settings below or above it (a scalar where a section was, or the reverse)."""
    node = data
    for name in key[:-1]:
        child = node.get(name)
        if not isinstance(child, dict):
            child = node[name] = {}
        node = child
    if isinstance(value, Mapping) and isinstance(node.get(key[-1]), dict):
        return  # an empty section over a section: nothing to change
    node[key[-1]] = dict(value) if isinstance(value, Mapping) else value
    for known in [k for k in sources if k[: len(key)] == key or key[: len(k)] == k]:
        del sources[known]
    sources[key] = source


# --------------------------------------------------------------------------- errors

_MESSAGES = {
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "model_type": "must be a section (a mapping of settings)",
    "model_attributes_type": "must be a section (a mapping of settings)",
}


def _source_of(sources: Mapping[Key, str], key: Key) -> str:
    """Who set ``key`` (or the section holding it); for a section, who set its settings."""
    for end in range(len(key), 0, -1):
        if (source := sources.get(key[:end])) is not None:
            return source
    below = [source for known, source in sources.items() if known[: len(key)] == key]
    return ", ".join(dict.fromkeys(below)) or "defaults"


def _blame(sources: Mapping[Key, str], keys: Sequence[Key]) -> str:
    for key in keys:
        for end in range(len(key), 0, -1):
            if (source := sources.get(key[:end])) is not None:
                return source
    return "defaults"


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _why(error: Mapping[str, Any], key: Key) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown setting" + _did_you_mean(key)
    ctx = error.get("ctx") or {}
    if kind in ("too_short", "string_too_short") and ctx.get("min_length") == 1:
        message = "must not be empty"
    else:
        message = _MESSAGES.get(kind) or str(error["msg"])
        for prefix in ("Value error, ", "Assertion failed, "):
            message = message.removeprefix(prefix)
        if message.startswith("Input should be "):
            message = "must be " + message.removeprefix("Input should be ")
    value = error.get("input")
    if kind == "missing" or isinstance(value, Mapping | BaseModel):
        return message
    return f"{message} (got {'**********' if _is_secret(key) else _short(value)})"


def _describe(error: ValidationError, sources: Mapping[Key, str]) -> list[str]:
    lines: list[str] = []
    for item in error.errors():
        loc = tuple(str(part) for part in item["loc"])
        problems = (item.get("ctx") or {}).get("problems")
        if item["type"] == _CROSS_FIELD and problems:
            for field, why, blamed in problems:
                source = _blame(sources, [(*loc, name) for name in blamed])
                lines.append(f"{source}: {'.'.join((*loc, field))}: {why}")
        else:
            dotted = ".".join(loc) or "(top level)"
            lines.append(f"{_source_of(sources, loc)}: {dotted}: {_why(item, loc)}")
    return lines


# --------------------------------------------------------------------------- public API


def load_config(
    path: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
) -> IsrwatchConfig:
    """The effective configuration: defaults < YAML file < environment < overrides.

    ``path`` None reads ``default_config_path(environ)``; when that is the source tree's
    ``conf/isrwatch.yaml`` (no $ISRWATCH_CONFIG / $ISRWATCH_CONF_DIR) and it does not exist
    (an installed wheel), the defaults are used. ``overrides`` maps dotted keys
    (``"kafka.bootstrap_servers"``) to values; None values are skipped. ``environ``
    defaults to ``os.environ``. Raises ConfigError listing every problem.
    """
    environ = os.environ if environ is None else environ
    settings: list[tuple[Key, object, str]] = []
    errors: list[str] = []

    explicit = path is not None or _named_config_path(environ) is not None
    file = Path(path) if path is not None else default_config_path(environ)
    if explicit or file.exists():
        source = os.fspath(path) if path is not None else str(file)
        try:
            data = _read_file(file, source)
        except ConfigError as error:
            errors.extend(error.problems)
        else:
            settings.extend((key, value, source) for key, value in _leaves(data, ()) if key)

    for layer in (_environment(environ), _command_line(overrides or {})):
        settings.extend(layer[0])
        errors.extend(layer[1])
    if errors:  # the merged data would be incomplete: validating it would mislead
        raise ConfigError(errors)

    merged: dict[str, Any] = {}
    sources: dict[Key, str] = {}
    for key, value, source in settings:
        _put(merged, sources, key, value, source)
    try:
        return IsrwatchConfig.model_validate(merged)
    except ValidationError as error:
        raise ConfigError(_describe(error, sources)) from None  # the cause may hold secrets


def dump_config(config: IsrwatchConfig) -> str:
    """YAML of the effective configuration, secrets masked (``**********``)."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
