"""The source's options: their names, defaults and parsing into ``SourceSettings``, and the
options the job passes for a configuration (``kafka_source_options``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from state.events import Source
from streaming.config.kafka import (
    DEFAULT_MAX_EVENTS_PER_PARTITION_PER_BATCH,
    DEFAULT_REQUEST_TIMEOUT_MS,
    DEFAULT_RETRY_BACKOFF_MAX_MS,
    DEFAULT_RETRY_BACKOFF_MS,
    backoff_max_too_short,
)

if TYPE_CHECKING:
    from streaming.config import IsrwatchConfig

SOURCE_NAME = "isrwatch_kafka"

OPTION_BOOTSTRAP_SERVERS = "kafka.bootstrap.servers"
OPTION_SUBSCRIBE = "subscribe"
OPTION_STARTING_OFFSETS = "startingOffsets"
OPTION_MAX_EVENTS_PER_PARTITION = "maxEventsPerPartition"
OPTION_MAX_OFFSETS_PER_TRIGGER = "maxOffsetsPerTrigger"
OPTION_KAFKA_OPTIONS = "kafkaOptions"
OPTION_RETRY_BACKOFF_MS = "retryBackoffMs"
OPTION_RETRY_BACKOFF_MAX_MS = "retryBackoffMaxMs"
OPTION_READ_TIMEOUT_MS = "readTimeoutMs"
OPTION_STATUS_FILE = "statusFile"
OPTION_ROUTE_TO_SHARDS = "routeToShards"

_SECRET_WORDS = ("password", "secret", "token")


def kafka_source_options(
    config: IsrwatchConfig,
    topics: Sequence[str],
    status_file: str | None = None,
    route: Mapping[str, Source] | None = None,
) -> dict[str, str]:
    """The options of this source for ``config`` reading ``topics``; with ``route`` (what
    each topic carries), the reader routes the records to ``config``'s state shards.

    The ``kafkaOptions`` value holds the SASL password in clear when one is configured:
    pass the dict to ``DataStreamReader.options(**...)``, never log it (see
    ``redacted_options``). Spark's own redaction (``spark.redaction.regex``) masks the
    value in plans and UIs because it contains the word "password".
    """
    names = _topic_list(",".join(topics))
    kafka = config.kafka
    client = kafka.kafka_python_options()
    client.pop("bootstrap_servers", None)
    return (
        {
            OPTION_BOOTSTRAP_SERVERS: kafka.bootstrap_servers,
            OPTION_SUBSCRIBE: ",".join(names),
            OPTION_STARTING_OFFSETS: kafka.starting_offsets.value,
            OPTION_MAX_EVENTS_PER_PARTITION: str(kafka.max_events_per_partition_per_batch),
            **(
                {OPTION_MAX_OFFSETS_PER_TRIGGER: str(kafka.max_records_per_batch)}
                if kafka.max_records_per_batch is not None
                else {}
            ),
            OPTION_KAFKA_OPTIONS: json.dumps(client, sort_keys=True),
            OPTION_RETRY_BACKOFF_MS: str(kafka.retry_backoff_ms),
            OPTION_RETRY_BACKOFF_MAX_MS: str(kafka.retry_backoff_max_ms),
        }
        | ({OPTION_STATUS_FILE: status_file} if status_file else {})
        | (
            {OPTION_ROUTE_TO_SHARDS: route_option(route, config.streaming.state_shards)}
            if route is not None
            else {}
        )
    )


def route_option(sources: Mapping[str, Source], shards: int) -> str:
    """The ``routeToShards`` option: route to ``shards`` shards, ``sources`` by topic."""
    return json.dumps(
        {"shards": shards, "sources": {topic: source.value for topic, source in sources.items()}},
        sort_keys=True,
    )


def redacted_options(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` fit for a log: secrets inside ``kafkaOptions`` masked."""
    shown = dict(options)
    for key, value in options.items():
        if key.lower() == OPTION_KAFKA_OPTIONS.lower():
            try:
                client = json.loads(value)
            except ValueError:
                shown[key] = "**********"
                continue
            if isinstance(client, dict):
                shown[key] = json.dumps(
                    {
                        name: "**********" if _is_secret(name) else setting
                        for name, setting in client.items()
                    },
                    sort_keys=True,
                )
        elif _is_secret(key):
            shown[key] = "**********"
    return shown


def _is_secret(name: str) -> bool:
    return any(word in name.lower() for word in _SECRET_WORDS)


def _topic_list(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",")))
    if not names or not all(names):
        raise ValueError(
            f"{SOURCE_NAME}: option {OPTION_SUBSCRIBE}: must be a comma-separated list of "
            f"topics, with no empty entry (got {text!r})"
        )
    for name in names:
        if ":" in name:
            raise ValueError(f"{SOURCE_NAME}: option {OPTION_SUBSCRIBE}: bad topic {name!r}")
    return names


def _positive_int(options: Mapping[str, str], name: str, default: int) -> int:
    raw = options.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{SOURCE_NAME}: option {name}: must be a positive integer (got {raw!r})")
    return value


def _known_client_settings() -> frozenset[str]:
    from kafka import KafkaAdminClient, KafkaConsumer

    return frozenset(KafkaConsumer.DEFAULT_CONFIG) | frozenset(KafkaAdminClient.DEFAULT_CONFIG)


@dataclass(frozen=True)
class SourceSettings:
    """The parsed options of the source (picklable; ``client_options`` may hold a password)."""

    bootstrap_servers: tuple[str, ...]
    topics: tuple[str, ...]
    starting_offsets: str = "latest"
    max_events_per_partition: int = DEFAULT_MAX_EVENTS_PER_PARTITION_PER_BATCH
    max_offsets_per_trigger: int | None = None  # over all partitions; None: no such limit
    client_options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    retry_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS
    retry_backoff_max_ms: int = DEFAULT_RETRY_BACKOFF_MAX_MS
    read_timeout_ms: int = 2 * DEFAULT_REQUEST_TIMEOUT_MS
    status_file: str | None = None  # where the reader publishes its health (JSON)
    route_shards: int | None = None  # routeToShards: the reader routes to this many shards
    route_sources: Mapping[str, Source] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> SourceSettings:
        """Parse the (case-insensitive) options; raises ValueError naming the bad option."""
        lowered = {str(key).lower(): str(value) for key, value in options.items()}
        servers_text = lowered.get(OPTION_BOOTSTRAP_SERVERS.lower(), "")
        servers = tuple(server.strip() for server in servers_text.split(","))
        if not servers_text.strip() or not all(servers):
            raise ValueError(
                f"{SOURCE_NAME}: option {OPTION_BOOTSTRAP_SERVERS}: required, a comma-separated "
                "list of host:port"
            )
        if OPTION_SUBSCRIBE.lower() not in lowered:
            raise ValueError(f"{SOURCE_NAME}: option {OPTION_SUBSCRIBE}: required")
        topics = _topic_list(lowered[OPTION_SUBSCRIBE.lower()])
        starting = lowered.get(OPTION_STARTING_OFFSETS.lower(), "latest").strip().lower()
        if starting not in ("earliest", "latest"):
            raise ValueError(
                f"{SOURCE_NAME}: option {OPTION_STARTING_OFFSETS}: must be earliest or latest "
                f"(got {starting!r})"
            )
        client = cls._client_options(lowered.get(OPTION_KAFKA_OPTIONS.lower()))
        backoff = _positive_int(lowered, OPTION_RETRY_BACKOFF_MS, DEFAULT_RETRY_BACKOFF_MS)
        backoff_max = _positive_int(
            lowered, OPTION_RETRY_BACKOFF_MAX_MS, max(backoff, DEFAULT_RETRY_BACKOFF_MAX_MS)
        )
        if backoff_max_too_short(backoff, backoff_max):
            raise ValueError(
                f"{SOURCE_NAME}: option {OPTION_RETRY_BACKOFF_MAX_MS}: must be at least "
                f"{OPTION_RETRY_BACKOFF_MS} ({backoff})"
            )
        request_timeout = int(client.get("request_timeout_ms", DEFAULT_REQUEST_TIMEOUT_MS))
        return cls(
            bootstrap_servers=servers,
            topics=topics,
            starting_offsets=starting,
            max_events_per_partition=_positive_int(
                lowered,
                OPTION_MAX_EVENTS_PER_PARTITION,
                DEFAULT_MAX_EVENTS_PER_PARTITION_PER_BATCH,
            ),
            max_offsets_per_trigger=(
                _positive_int(lowered, OPTION_MAX_OFFSETS_PER_TRIGGER, 1)
                if OPTION_MAX_OFFSETS_PER_TRIGGER.lower() in lowered
                else None
            ),
            client_options=client,
            retry_backoff_ms=backoff,
            retry_backoff_max_ms=backoff_max,
            read_timeout_ms=_positive_int(lowered, OPTION_READ_TIMEOUT_MS, 2 * request_timeout),
            status_file=lowered.get(OPTION_STATUS_FILE.lower()) or None,
            **cls._routing(lowered.get(OPTION_ROUTE_TO_SHARDS.lower()), topics),
        )

    @staticmethod
    def _routing(text: str | None, topics: Sequence[str]) -> dict[str, Any]:
        if text is None or not text.strip():
            return {}
        bad = (
            f"{SOURCE_NAME}: option {OPTION_ROUTE_TO_SHARDS}: must be a JSON object "
            '{"shards": <positive integer>, "sources": {"<topic>": "<source>"}} naming '
            f"every subscribed topic ({', '.join(topics)})"
        )
        try:
            routing = json.loads(text)
            shards, sources = routing["shards"], routing["sources"]
            by_topic = {str(topic): Source(kind) for topic, kind in sources.items()}
        except (ValueError, TypeError, KeyError, AttributeError):
            raise ValueError(bad) from None
        if type(shards) is not int or shards <= 0 or set(by_topic) != set(topics):
            raise ValueError(bad)
        return {"route_shards": shards, "route_sources": by_topic}

    @staticmethod
    def _client_options(text: str | None) -> dict[str, Any]:
        if text is None or not text.strip():
            return {}
        try:
            client = json.loads(text)
        except ValueError as error:  # the message would quote the text: it may hold secrets
            raise ValueError(
                f"{SOURCE_NAME}: option {OPTION_KAFKA_OPTIONS}: not valid JSON "
                f"(line {getattr(error, 'lineno', '?')}, column {getattr(error, 'colno', '?')})"
            ) from None
        if not isinstance(client, dict):
            raise ValueError(
                f"{SOURCE_NAME}: option {OPTION_KAFKA_OPTIONS}: must be a JSON object of "
                "kafka-python client settings"
            )
        if "bootstrap_servers" in client:
            raise ValueError(
                f"{SOURCE_NAME}: option {OPTION_KAFKA_OPTIONS}: must not set bootstrap_servers "
                f"(use the option {OPTION_BOOTSTRAP_SERVERS})"
            )
        unknown = sorted(set(client) - _known_client_settings())
        if unknown:
            raise ValueError(
                f"{SOURCE_NAME}: option {OPTION_KAFKA_OPTIONS}: unknown kafka-python "
                f"settings: {', '.join(unknown)}"
            )
        return client

    @property
    def request_timeout_ms(self) -> int:
        return int(self.client_options.get("request_timeout_ms", DEFAULT_REQUEST_TIMEOUT_MS))

    def client_kwargs(
        self, kind: type, defaults: Mapping[str, Any], forced: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Keyword arguments for a kafka-python client class ``kind``: ``defaults`` <
        the configured client options (those ``kind`` knows) < ``forced``."""
        known: Mapping[str, Any] = getattr(kind, "DEFAULT_CONFIG", {})
        kwargs: dict[str, Any] = {"bootstrap_timeout_ms": self.request_timeout_ms, **defaults}
        kwargs.update(self.client_options)
        kwargs.update(forced)
        kwargs["bootstrap_servers"] = list(self.bootstrap_servers)
        return {name: value for name, value in kwargs.items() if name in known}


# --------------------------------------------------------------------------- offsets
