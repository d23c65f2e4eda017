"""A Kafka streaming source on PySpark's Python Data Source API: planned with kafka-python on
the driver, read with confluent-kafka (librdkafka) on the executors.

Spark's own Kafka connector (``spark-sql-kafka-0-10``) needs jars from Maven, which a
deployment may not have; this source gives the same columns (``key, value, topic,
partition, offset, timestamp, timestampType``) so that a job can switch between
``format("isrwatch_kafka")`` and ``format("kafka")`` by configuration::

    register(spark)
    spark.readStream.format("isrwatch_kafka").options(**kafka_source_options(config, topics))

Offsets are ``{"<topic>:<partition>": next offset to read}``. Each micro-batch plans one
input partition per topic-partition with new records, read on an executor with a
confluent-kafka consumer (``assign`` at the start offset), as Arrow record batches.

End offsets. kafka-python's ``end_offsets()`` is exact on Kafka, but Tansu (the embedded
broker) answers the base offset of the last record batch + 1, which hides the rest of a
multi-record last batch until another batch arrives. The source computes the *true* end:
if the reported end is past the beginning, it fetches from ``reported - 1`` and takes
``max(reported, last offset returned + 1)``: on Kafka that returns the last record (exact),
on Tansu the whole last batch. The result is cached per (topic id, reported end), so a
partition is probed again only when its reported end moves.

Options (strings; names are case-insensitive):

* ``kafka.bootstrap.servers``: comma-separated host:port (required);
* ``subscribe``: comma-separated topics (required); topics that do not exist yet are
  picked up when they appear;
* ``startingOffsets``: ``earliest`` or ``latest`` (default), for a query with no checkpoint;
* ``maxOffsetsPerPartition``: most records per topic-partition per micro-batch (100000);
* ``maxOffsetsPerTrigger``: most records per micro-batch over all topic-partitions (no
  limit by default), shared out as Spark's Kafka source does (``KafkaMicroBatchStream``
  ``rateLimit``): each partition gets its share of the limit in proportion to what it
  has to read (rounded down; a partition whose share is below one record reads one);
* ``kafkaOptions``: JSON object of kafka-python client settings (security protocol, SASL,
  SSL files, timeouts...), as ``KafkaSettings.kafka_python_options()`` without
  ``bootstrap_servers``;
* ``retryBackoffMs`` / ``retryBackoffMaxMs``: back-off after failed offset requests (1000 /
  30000);
* ``readTimeoutMs``: a read task with no progress for this long fails (default twice the
  client's request_timeout_ms);
* ``routeToShards``: JSON ``{"shards": n, "sources": {"<topic>": "<source>"}}``: the reader
  decodes and routes what it reads itself (``streaming.routing.route_arrow_batches``, the
  function the job otherwise runs with ``mapInArrow``) and the source's columns are the
  routed rows (``streaming.routing.ROUTED_SCHEMA``). The records are in Python already:
  routing them there saves handing every raw value to the JVM and back to another
  Python worker (``bench/pipeline_bench.py``).

Trigger.AvailableNow is supported: the run reads up to the true end offsets taken when it
starts, in micro-batches capped by ``maxOffsetsPerPartition``.

Failures. When Kafka does not answer, ``latestOffset`` logs a warning, waits (exponential
back-off from ``retryBackoffMs`` to ``retryBackoffMaxMs`` over consecutive failures, at
most a few seconds per call) and returns its ``start``: the micro-batch has no new data
and the query goes on. A read that stops making progress raises, and Spark retries the
task. A read that Kafka stops answering while the batch still has records to read (a
refused connection, a transport error, or nothing at all for a request timeout) reports
its partition as stalled next to ``statusFile`` (``read_status_dir``) until it reads
again: the planner is not called while a batch is stuck reading, so without it the
exporter would go on saying the source is up through an outage (docs/faults.md).

New partitions (and topics created after the query started) are registered at their
beginning offset in one micro-batch and read from the next one, so that planning a
micro-batch never asks the broker anything (``partitions(start, end)`` depends on the
offsets only, as a restarted query needs).

The stream reader lives in a Python process that the JVM starts for the source (not the
driver's own Python process): its ``last_error`` and ``consecutive_failures`` attributes
are seen there, and its warnings go to that process's stderr.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from state.events import Source
from streaming.config import librdkafka_names

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streaming.config import IsrwatchConfig

__all__ = [
    "OPTION_BOOTSTRAP_SERVERS",
    "OPTION_KAFKA_OPTIONS",
    "OPTION_MAX_OFFSETS_PER_PARTITION",
    "OPTION_MAX_OFFSETS_PER_TRIGGER",
    "OPTION_READ_TIMEOUT_MS",
    "OPTION_RETRY_BACKOFF_MAX_MS",
    "OPTION_RETRY_BACKOFF_MS",
    "OPTION_ROUTE_TO_SHARDS",
    "OPTION_STARTING_OFFSETS",
    "OPTION_SUBSCRIBE",
    "SCHEMA",
    "SOURCE_NAME",
    "KafkaInputPartition",
    "KafkaSource",
    "KafkaStreamReader",
    "SourceSettings",
    "kafka_source_options",
    "redacted_options",
    "register",
]

log = logging.getLogger("isrwatch.kafka_source")

SOURCE_NAME = "isrwatch_kafka"

#: The columns of Spark's Kafka source.
SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
)

OPTION_BOOTSTRAP_SERVERS = "kafka.bootstrap.servers"
OPTION_SUBSCRIBE = "subscribe"
OPTION_STARTING_OFFSETS = "startingOffsets"
OPTION_MAX_OFFSETS_PER_PARTITION = "maxOffsetsPerPartition"
OPTION_MAX_OFFSETS_PER_TRIGGER = "maxOffsetsPerTrigger"
OPTION_KAFKA_OPTIONS = "kafkaOptions"
OPTION_RETRY_BACKOFF_MS = "retryBackoffMs"
OPTION_RETRY_BACKOFF_MAX_MS = "retryBackoffMaxMs"
OPTION_READ_TIMEOUT_MS = "readTimeoutMs"
OPTION_STATUS_FILE = "statusFile"
OPTION_ROUTE_TO_SHARDS = "routeToShards"

DEFAULT_MAX_OFFSETS_PER_PARTITION = 100_000
DEFAULT_RETRY_BACKOFF_MS = 1000
DEFAULT_RETRY_BACKOFF_MAX_MS = 30000
DEFAULT_REQUEST_TIMEOUT_MS = 30000

#: The longest a single latestOffset call sleeps after a failure, whatever the back-off.
MAX_WAIT_PER_CALL_S = 5.0
#: How long the true-end probe waits for the last records (Tansu answers at once).
PROBE_TIMEOUT_MS = 3000
#: The longest the driver's clients wait to bootstrap, unless kafkaOptions says otherwise.
DRIVER_BOOTSTRAP_TIMEOUT_MS = 10_000
#: Where read tasks report stalled partitions: a directory next to the status file.
READ_STATUS_SUFFIX = ".reads"
#: librdkafka errors that say the broker is not reachable (a read reports its stall at once).
_UNREACHABLE_ERRORS = ("_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_RESOLVE")
#: Records per poll (and per Arrow batch) when reading.
READ_BATCH_RECORDS = 10_000
_PROBE_MAX_RECORDS = 1_000_000
_PROBE_MAX_POLLS = 10_000
_UNKNOWN_TOPIC_OR_PARTITION = 3
_SECRET_WORDS = ("password", "secret", "token")


# --------------------------------------------------------------------------- options


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
            OPTION_MAX_OFFSETS_PER_PARTITION: str(kafka.max_records_per_partition_per_batch),
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
    max_offsets_per_partition: int = DEFAULT_MAX_OFFSETS_PER_PARTITION
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
        if backoff_max < backoff:
            raise ValueError(
                f"{SOURCE_NAME}: option {OPTION_RETRY_BACKOFF_MAX_MS}: must be at least "
                f"{OPTION_RETRY_BACKOFF_MS} ({backoff})"
            )
        request_timeout = int(client.get("request_timeout_ms", DEFAULT_REQUEST_TIMEOUT_MS))
        return cls(
            bootstrap_servers=servers,
            topics=topics,
            starting_offsets=starting,
            max_offsets_per_partition=_positive_int(
                lowered, OPTION_MAX_OFFSETS_PER_PARTITION, DEFAULT_MAX_OFFSETS_PER_PARTITION
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


def _key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def _split(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition(":")
    return topic, int(partition)


def _offsets(value: Mapping[str, Any] | None) -> dict[str, int]:
    return {str(key): int(offset) for key, offset in (value or {}).items()}


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    """Records ``start <= offset < end`` of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int


@dataclass
class _Snapshot:
    """What the broker said: true end per partition, beginnings asked for, exact ends."""

    ends: dict[str, int] = field(default_factory=dict)
    beginnings: dict[str, int] = field(default_factory=dict)
    exact: set[str] = field(default_factory=set)


# --------------------------------------------------------------------------- source


class KafkaSource(DataSource):
    """``spark.readStream.format("isrwatch_kafka")``: see the module's docstring."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType | str:
        # Parsing reports bad options when the stream is made.
        if SourceSettings.from_options(self.options).route_shards is None:
            return SCHEMA
        from streaming.routing import ROUTED_SCHEMA

        return ROUTED_SCHEMA

    def streamReader(self, schema: StructType) -> KafkaStreamReader:  # noqa: N802 (Spark's API)
        return KafkaStreamReader(SourceSettings.from_options(self.options))


def register(spark: SparkSession) -> None:
    """Register the source with ``spark`` as ``isrwatch_kafka``."""
    spark.dataSource.register(KafkaSource)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches from Kafka's offsets and reads them with kafka-python.

    Spark's read limits have no per-partition kind: the default limit this reader reports
    is ``ReadMaxRows(maxOffsetsPerPartition)``, and it reads ``ReadMaxRows(n)`` as at most
    ``n`` records per topic-partition; ``ReadAllAvailable`` (Trigger.Once) lifts the cap.

    For metrics: ``consecutive_failures`` counts the offset requests in a row that Kafka
    did not answer (0 once it answers), ``last_error`` is the last one's error (None once
    it answers), ``failures_total``, ``last_error_at`` and ``last_success_at`` (epoch
    seconds) tell the history. The reader runs in the Python process the JVM starts for
    the source, not in the driver's Python process.
    """

    def __init__(self, settings: SourceSettings) -> None:
        self._setup(settings)

    def _setup(self, settings: SourceSettings) -> None:
        self.settings = settings
        self.consecutive_failures = 0
        self.failures_total = 0
        self.last_error: str | None = None
        self.last_error_at: float | None = None  # time.time() of the last failure
        self.last_success_at: float | None = None
        self._sleep: Callable[[float], None] = time.sleep
        self._consumer: Any = None
        self._admin: Any = None
        # Per partition: (topic id, reported end, true end) of the last exact computation;
        # the topic id tells a re-created topic (same reported end, other records) apart.
        self._true_ends: dict[str, tuple[str | None, int, int]] = {}
        self._latest: dict[str, int] | None = None
        self._target: dict[str, int] | None = None  # Trigger.AvailableNow
        self._target_beginnings: dict[str, int] = {}

    def __getstate__(self) -> dict[str, Any]:
        """Pickled for the executors' read(): settings only, no clients."""
        return {"settings": self.settings}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._setup(state["settings"])

    # ------------------------------------------------------------------ Spark's API

    def initialOffset(self) -> dict[str, int]:  # noqa: N802 (Spark's API)
        earliest = self.settings.starting_offsets == "earliest"
        attempts = 1 if earliest else 3
        for _ in range(attempts):
            try:
                snapshot = self._snapshot(lambda key: earliest)
            except Exception as error:
                self._failed(error, "the starting offsets")
                continue
            self._succeeded()
            return dict(snapshot.beginnings) if earliest else dict(snapshot.ends)
        if earliest:
            log.warning(
                "%s: starting with no partition known; each is read from its beginning "
                "offset once Kafka answers",
                SOURCE_NAME,
            )
            return {}
        raise RuntimeError(
            f"{SOURCE_NAME}: cannot find the latest offsets of {', '.join(self.settings.topics)}"
            f" (startingOffsets=latest): Kafka at {','.join(self.settings.bootstrap_servers)} "
            f"did not answer: {self.last_error}"
        )

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802 (Spark's API)
        return ReadMaxRows(self.settings.max_offsets_per_partition)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 (Spark's API)
        """Fix the offsets an available-now run reads up to (all partitions' true ends)."""
        for _ in range(3):
            try:
                snapshot = self._snapshot(lambda key: True)
            except Exception as error:
                self._failed(error, "the offsets to read up to (available-now)")
                continue
            self._succeeded()
            self._target = snapshot.ends
            self._target_beginnings = snapshot.beginnings
            return
        raise RuntimeError(
            f"{SOURCE_NAME}: cannot find the offsets to read up to (available-now): Kafka at "
            f"{','.join(self.settings.bootstrap_servers)} did not answer: {self.last_error}"
        )

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:  # noqa: N802
        start = _offsets(start)
        cap = self._cap(limit)
        if self._target is not None:
            ends, beginnings = self._target, self._target_beginnings
            exact: set[str] = set()  # an available-now run never goes back
        else:
            try:
                snapshot = self._snapshot(lambda key: key not in start)
                went_back = [
                    key
                    for key in snapshot.exact
                    if key in start
                    and snapshot.ends[key] < start[key]
                    and key not in snapshot.beginnings
                ]
                if went_back:
                    snapshot.beginnings.update(self._beginnings(went_back))
            except Exception as error:
                self._failed(error, "the latest offsets")
                return start
            self._succeeded()
            ends, beginnings, exact = snapshot.ends, snapshot.beginnings, snapshot.exact
        result = self._advance(start, ends, beginnings, exact, cap)
        if cap is not None and self.settings.max_offsets_per_trigger is not None:
            result = share_out(start, result, self.settings.max_offsets_per_trigger)
        # What is available (for an available-now run: up to its target), never behind
        # what is planned.
        self._latest = {key: max(end, ends.get(key, end)) for key, end in result.items()}
        return result

    def reportLatestOffset(self) -> dict[str, int] | None:  # noqa: N802 (Spark's API)
        return None if self._latest is None else dict(self._latest)

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[KafkaInputPartition]:
        start, end = _offsets(start), _offsets(end)
        planned = []
        for key in sorted(end):
            first, stop = start.get(key), end[key]
            if first is None or first >= stop:  # registered, or nothing new
                continue
            topic, partition = _split(key)
            planned.append(KafkaInputPartition(topic, partition, first, stop))
        return planned

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KafkaInputPartition):
            raise TypeError(f"{SOURCE_NAME}: unexpected input partition {partition!r}")
        gc.freeze()  # the imported modules: see streaming.python_worker
        records = read_partition(self.settings, partition)
        if self.settings.route_shards is None:
            return records
        from streaming.routing import route_arrow_batches

        return route_arrow_batches(records, self.settings.route_sources, self.settings.route_shards)

    def commit(self, end: dict[str, int]) -> None:
        pass

    def stop(self) -> None:
        self._close_clients()

    # ------------------------------------------------------------------ planning

    def _cap(self, limit: ReadLimit) -> int | None:
        if isinstance(limit, ReadAllAvailable):
            return None
        if isinstance(limit, ReadMaxRows):
            return max(1, int(limit.max_rows))
        return self.settings.max_offsets_per_partition

    @staticmethod
    def _advance(
        start: dict[str, int],
        ends: Mapping[str, int],
        beginnings: Mapping[str, int],
        exact: set[str],
        cap: int | None,
    ) -> dict[str, int]:
        result = dict(start)  # partitions not seen this time keep their offset
        for key, end in ends.items():
            first = start.get(key)
            if first is None:
                if key in beginnings:  # new: registered now, read from the next micro-batch
                    result[key] = beginnings[key]
                    log.info("%s: new partition %s from offset %d", SOURCE_NAME, key, result[key])
            elif end < first:
                if key in exact and key in beginnings:
                    log.warning(
                        "%s: %s ends at offset %d, before offset %d already read (topic "
                        "re-created or records lost?): reading again from offset %d",
                        SOURCE_NAME,
                        key,
                        end,
                        first,
                        beginnings[key],
                    )
                    result[key] = beginnings[key]
            else:
                result[key] = end if cap is None else min(end, first + cap)
        return result

    def _snapshot(self, wants_beginning: Callable[[str], bool]) -> _Snapshot:
        """The partitions of the subscribed topics and their true end offsets, with the
        beginning offsets of those ``wants_beginning`` selects (and of those whose end moved).
        """
        from kafka import TopicPartition

        found = self._discover()
        snapshot = _Snapshot()
        if not found:
            return snapshot
        consumer = self._driver_consumer()
        timeout_ms = self.settings.request_timeout_ms
        # kafka-python's offset lookups fail (KeyError) for a partition its own metadata
        # does not know yet: refresh it when the admin client found new ones.
        if any(p not in consumer.partitions_for_topic(topic) for topic, p in found):
            consumer.topics()
        partitions = [TopicPartition(topic, partition) for topic, partition in found]
        ids = {_key(topic, partition): topic_id for (topic, partition), topic_id in found.items()}
        reported = {
            _key(tp.topic, tp.partition): int(offset)
            for tp, offset in consumer.end_offsets(partitions, timeout_ms=timeout_ms).items()
        }
        moved = {
            key
            for key, offset in reported.items()
            if self._true_ends.get(key, (None, -1, -1))[:2] != (ids[key], offset)
        }
        asked = [
            tp
            for tp in partitions
            if (key := _key(tp.topic, tp.partition)) in moved or wants_beginning(key)
        ]
        if asked:
            snapshot.beginnings = {
                _key(tp.topic, tp.partition): int(offset)
                for tp, offset in consumer.beginning_offsets(asked, timeout_ms=timeout_ms).items()
            }
        to_probe = [
            tp
            for tp in partitions
            if (key := _key(tp.topic, tp.partition)) in moved
            and reported[key] > snapshot.beginnings.get(key, reported[key])
        ]
        last = self._probe(to_probe, reported) if to_probe else {}
        probed = {_key(tp.topic, tp.partition) for tp in to_probe}
        for key, offset in reported.items():
            if key not in moved:
                snapshot.ends[key] = self._true_ends[key][2]
            elif key in last:
                snapshot.ends[key] = max(offset, last[key] + 1)
            elif key in probed:
                snapshot.ends[key] = offset  # the probe got nothing: try again next time
                continue
            else:  # an empty partition
                snapshot.ends[key] = offset
            snapshot.exact.add(key)
            self._true_ends[key] = (ids[key], offset, snapshot.ends[key])
        return snapshot

    def _beginnings(self, keys: Sequence[str]) -> dict[str, int]:
        from kafka import TopicPartition

        partitions = [TopicPartition(*_split(key)) for key in keys]
        found = self._driver_consumer().beginning_offsets(
            partitions, timeout_ms=self.settings.request_timeout_ms
        )
        return {_key(tp.topic, tp.partition): int(offset) for tp, offset in found.items()}

    def _discover(self) -> dict[tuple[str, int], str | None]:
        """The partitions (with a leader) of the subscribed topics; topics that do not
        exist yet are left out, as are topics or partitions the broker reports an error for
        (they keep their offsets until it answers)."""
        admin = self._driver_admin()
        found: dict[tuple[str, int], str | None] = {}
        for topic in admin.describe_topics(list(self.settings.topics)):
            name, error = topic.get("name"), topic.get("error_code", 0)
            if name not in self.settings.topics:
                continue
            if error == _UNKNOWN_TOPIC_OR_PARTITION:
                log.debug("%s: topic %s does not exist (yet)", SOURCE_NAME, name)
                continue
            if error:
                log.warning("%s: topic %s: metadata error code %s", SOURCE_NAME, name, error)
                continue
            for partition in topic.get("partitions") or []:
                if partition.get("error_code", 0) == 0 and partition.get("leader_id", 0) >= 0:
                    index = int(partition["partition_index"])
                    found[name, index] = str(topic.get("topic_id") or "") or None
        return dict(sorted(found.items()))

    def _probe(self, partitions: list[Any], reported: Mapping[str, int]) -> dict[str, int]:
        """The last offset a fetch from ``reported - 1`` returns, per partition that
        returned records within the probe timeout."""
        consumer = self._driver_consumer()
        last: dict[str, int] = {}
        consumer.assign(partitions)
        try:
            for tp in partitions:
                consumer.seek(tp, reported[_key(tp.topic, tp.partition)] - 1)
            pending = set(partitions)
            timeout_ms = min(PROBE_TIMEOUT_MS, self.settings.request_timeout_ms)
            deadline = time.monotonic() + timeout_ms / 1000
            for _ in range(_PROBE_MAX_POLLS):
                remaining_ms = int((deadline - time.monotonic()) * 1000)
                waiting = bool(pending) and remaining_ms > 0
                fetched = consumer.poll(
                    timeout_ms=remaining_ms if waiting else 0, max_records=_PROBE_MAX_RECORDS
                )
                got = False
                for tp, records in fetched.items():
                    if records:
                        got = True
                        key = _key(tp.topic, tp.partition)
                        last[key] = max(last.get(key, -1), max(r.offset for r in records))
                        pending.discard(tp)
                if not waiting and not got:  # done waiting, and nothing more is held
                    break
        finally:
            with contextlib.suppress(Exception):
                consumer.unsubscribe()
        return last

    # ------------------------------------------------------------------ clients, failures

    def _driver_admin(self) -> Any:
        if self._admin is None:
            from kafka import KafkaAdminClient

            kwargs = self.settings.client_kwargs(KafkaAdminClient, self._driver_defaults(), {})
            self._admin = KafkaAdminClient(**kwargs)
        return self._admin

    def _driver_consumer(self) -> Any:
        if self._consumer is None:
            from kafka import KafkaConsumer

            kwargs = self.settings.client_kwargs(
                KafkaConsumer,
                self._driver_defaults(),
                {
                    "group_id": None,
                    "enable_auto_commit": False,
                    "allow_auto_create_topics": False,
                    "auto_offset_reset": "latest",  # a probe out of range returns nothing
                    "fetch_max_wait_ms": min(100, self.settings.request_timeout_ms - 1),
                },
            )
            self._consumer = KafkaConsumer(**kwargs)
        return self._consumer

    def _driver_defaults(self) -> dict[str, Any]:
        timeout_ms = min(self.settings.request_timeout_ms, DRIVER_BOOTSTRAP_TIMEOUT_MS)
        return {"bootstrap_timeout_ms": timeout_ms}

    def _close_clients(self) -> None:
        consumer, self._consumer = self._consumer, None
        admin, self._admin = self._admin, None
        if consumer is not None:
            with contextlib.suppress(Exception):
                consumer.close(autocommit=False)
        if admin is not None:
            with contextlib.suppress(Exception):
                admin.close()

    def backoff_s(self, failures: int) -> float:
        """The wait after ``failures`` consecutive failures, before the per-call cap."""
        settings = self.settings
        exponent = min(max(failures - 1, 0), 32)
        backoff_ms = min(settings.retry_backoff_max_ms, settings.retry_backoff_ms << exponent)
        return backoff_ms / 1000

    def _failed(self, error: BaseException, what: str) -> None:
        self.consecutive_failures += 1
        self.failures_total += 1
        self.last_error = f"{type(error).__name__}: {error}"
        self.last_error_at = time.time()
        wait = min(self.backoff_s(self.consecutive_failures), MAX_WAIT_PER_CALL_S)
        log.warning(
            "%s: cannot get %s from Kafka at %s (failure %d in a row): %s; "
            "no new data this micro-batch, next try in %.1f s",
            SOURCE_NAME,
            what,
            ",".join(self.settings.bootstrap_servers),
            self.consecutive_failures,
            self.last_error,
            wait,
        )
        self._publish_status()
        # Fresh clients next time: no stale state, and no client left running in the
        # background while Kafka is away (Tansu auto-creates the topics a client asks about,
        # even with allow_auto_create_topics false, as soon as it is back).
        self._close_clients()
        self._sleep(wait)

    def _succeeded(self) -> None:
        if self.consecutive_failures:
            log.warning(
                "%s: Kafka answers again after %d failures", SOURCE_NAME, self.consecutive_failures
            )
        self.consecutive_failures = 0
        self.last_error = None
        self.last_success_at = time.time()
        self._publish_status()

    def _publish_status(self) -> None:
        """Write the health counters to ``statusFile`` for the driver's exporter: this
        reader runs in a Python process of its own, not in the driver's (see above)."""
        path = self.settings.status_file
        if not path:
            return
        status = {
            "bootstrap_servers": list(self.settings.bootstrap_servers),
            "consecutive_failures": self.consecutive_failures,
            "failures_total": self.failures_total,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
            "last_success_at": self.last_success_at,
        }
        try:
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".tmp")
            partial.write_text(json.dumps(status), encoding="utf-8")
            os.replace(partial, target)  # readers never see half a file
        except OSError as error:
            log.warning("%s: cannot write the status file %s: %s", SOURCE_NAME, path, error)


def read_status_dir(status_file: str | Path) -> Path:
    """The directory where read tasks report stalled partitions (one JSON file each)."""
    return Path(f"{status_file}{READ_STATUS_SUFFIX}")


class ReadStall:
    """A read task's report of its partition to the exporter: ``{"stalled_since": epoch s,
    "error": ...}`` in ``read_status_dir(statusFile)/<topic>-<partition>.json`` while Kafka
    gives nothing although the range holds records; the file is removed once the read
    progresses again. A stall older than the planner's last success is over (the broker
    answered since), whatever a task killed mid-stall left behind."""

    def __init__(self, settings: SourceSettings, topic: str, partition: int) -> None:
        status = settings.status_file
        self.path = read_status_dir(status) / f"{topic}-{partition}.json" if status else None
        self.stalled = False

    def report(self, error: str) -> None:
        if self.stalled or self.path is None:
            return
        self.stalled = True
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_name(self.path.name + ".tmp")
            partial.write_text(json.dumps({"stalled_since": time.time(), "error": error}),
                               encoding="utf-8")  # fmt: skip
            os.replace(partial, self.path)
        except OSError as problem:
            log.warning("%s: cannot write the read status %s: %s", SOURCE_NAME, self.path, problem)

    def progressed(self) -> None:
        if not self.stalled or self.path is None:
            return
        self.stalled = False
        with contextlib.suppress(OSError):
            self.path.unlink()


def share_out(start: Mapping[str, int], end: Mapping[str, int], limit: int) -> dict[str, int]:
    """``end`` cut so that about ``limit`` records are read from ``start`` in all, as
    Spark's Kafka source shares ``maxOffsetsPerTrigger`` (``KafkaMicroBatchStream``
    ``rateLimit``): a partition with ``n`` of the ``total`` records to read gets
    ``limit * n / total`` of them, rounded down, or one if that is below one (so no
    partition starves; the sum may pass ``limit`` by at most one per partition).
    Partitions with nothing to read (new, or going back to their beginning) are as in
    ``end``."""
    sizes = {key: stop - start[key] for key, stop in end.items()
             if key in start and stop > start[key]}  # fmt: skip
    total = sum(sizes.values())
    if total <= limit:
        return dict(end)
    shared = dict(end)
    for key, size in sizes.items():
        share = limit * size / total
        shared[key] = start[key] + min(size, math.ceil(share) if share < 1 else math.floor(share))
    return shared


# --------------------------------------------------------------------------- read


@functools.cache
def _arrow_schema() -> Any:
    """The Arrow schema Spark expects of a Python data source's record batches."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(SCHEMA, timezone="UTC")


def _to_arrow(topic: str, partition: int, records: Sequence[Any]) -> pa.RecordBatch:
    count = len(records)
    timestamps = pa.array(
        [None if r.timestamp is None else int(r.timestamp) * 1000 for r in records], pa.int64()
    )
    return pa.RecordBatch.from_arrays(
        [
            pa.array([r.key for r in records], pa.binary()),
            pa.array([r.value for r in records], pa.binary()),
            pa.array([topic] * count, pa.string()),
            pa.array([partition] * count, pa.int32()),
            pa.array([r.offset for r in records], pa.int64()),
            timestamps.cast(pa.timestamp("us", tz="UTC")),
            pa.array([r.timestamp_type for r in records], pa.int32()),
        ],
        schema=_arrow_schema(),
    )


def librdkafka_config(settings: SourceSettings) -> dict[str, Any]:
    """The reader's consumer settings for confluent-kafka (librdkafka), from the same
    kafka-python client options the driver's clients use (``KafkaSettings``)."""
    config: dict[str, Any] = {
        "bootstrap.servers": ",".join(settings.bootstrap_servers),
        # librdkafka wants a group for a consumer; offsets are assigned, never committed.
        "group.id": "isrwatch-source-reader",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",  # records gone (retention): go on from the first
        "allow.auto.create.topics": False,
        "socket.timeout.ms": settings.request_timeout_ms,
        "fetch.wait.max.ms": 100,
        "queued.max.messages.kbytes": 262144,
        "log_level": 3,  # errors only: the reader reports its own failures
    }
    config.update(librdkafka_names(settings.client_options))
    return config


def read_partition(settings: SourceSettings, part: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
    """The records ``part.start <= offset < part.end`` of one topic-partition, in order,
    as Arrow record batches; raises RuntimeError when the broker makes no progress for
    ``settings.read_timeout_ms``. Read with confluent-kafka (librdkafka): ten times
    kafka-python's records/s on one core (``bench/stream_bench.py``)."""
    from confluent_kafka import Consumer, KafkaException, Message
    from confluent_kafka import TopicPartition as ConfluentPartition

    where = f"{part.topic}:{part.partition} offsets [{part.start}, {part.end})"
    try:
        consumer = Consumer(librdkafka_config(settings))
    except KafkaException as error:
        raise RuntimeError(
            f"{SOURCE_NAME}: cannot make a Kafka consumer for "
            f"{','.join(settings.bootstrap_servers)} to read {where}: {error}"
        ) from error
    timeout_s = settings.read_timeout_ms / 1000
    stall = ReadStall(settings, part.topic, part.partition)
    try:
        consumer.assign([ConfluentPartition(part.topic, part.partition, part.start)])
        position = part.start
        progress_at = time.monotonic()
        while position < part.end:
            # consume() returns once it has this many messages or at the timeout: ask for
            # no more than the range holds, so that a short range costs no waiting.
            wanted = max(1, min(READ_BATCH_RECORDS, part.end - position))
            messages = consumer.consume(wanted, timeout=min(1.0, timeout_s))
            records = [m for m in messages if m.error() is None]
            if records:
                offsets = np.fromiter(map(Message.offset, records), np.int64, len(records))
                keep = (offsets >= part.start) & (offsets < part.end)
                if not keep.all():
                    records = [m for m, k in zip(records, keep.tolist(), strict=True) if k]
                    offsets = offsets[keep]
                if records:
                    stall.progressed()
                    yield _messages_to_arrow(part.topic, part.partition, records, offsets)
                    position = int(offsets[-1]) + 1
                    progress_at = time.monotonic()
                    continue
            unreachable = _unreachable(messages)
            if unreachable is not None:
                stall.report(unreachable)
            elif time.monotonic() - progress_at > settings.request_timeout_ms / 1000:
                stall.report(f"no records for {settings.request_timeout_ms} ms")
            if time.monotonic() - progress_at > timeout_s:
                errors = "; ".join(str(m.error()) for m in messages if m.error() is not None)
                raise RuntimeError(
                    f"{SOURCE_NAME}: reading {where}: no progress at offset {position} for "
                    f"{timeout_s:.0f} s; is Kafka at {','.join(settings.bootstrap_servers)} "
                    f"answering? {errors} (Spark retries the task)"
                )
    finally:
        with contextlib.suppress(Exception):
            consumer.close()


def _unreachable(messages: Sequence[Any]) -> str | None:
    """The first error among ``messages`` that says the broker is not reachable."""
    for message in messages:
        error = message.error()
        if error is not None and error.name() in _UNREACHABLE_ERRORS:
            return str(error)
    return None


def _messages_to_arrow(
    topic: str, partition: int, messages: Sequence[Any], offsets: npt.NDArray[np.int64]
) -> pa.RecordBatch:
    """confluent-kafka messages as the source's columns (one C call per field and record)."""
    from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Message

    count = len(messages)
    stamps = list(map(Message.timestamp, messages))  # (type, ms); types 1 create, 2 append
    kinds = np.fromiter((kind for kind, _ in stamps), np.int32, count)
    millis = np.fromiter((ms for _, ms in stamps), np.int64, count)
    missing = kinds == TIMESTAMP_NOT_AVAILABLE
    return pa.RecordBatch.from_arrays(
        [
            pa.array(list(map(Message.key, messages)), pa.binary()),
            pa.array(list(map(Message.value, messages)), pa.binary()),
            pa.repeat(pa.scalar(topic), count),
            pa.repeat(pa.scalar(partition, pa.int32()), count),
            pa.array(offsets),
            pa.array(millis * 1000, pa.int64(), mask=missing).cast(pa.timestamp("us", tz="UTC")),
            pa.array(kinds - 1, pa.int32(), mask=missing),  # Spark's 0 create, 1 append
        ],
        schema=_arrow_schema(),
    )


def read_partition_kafka_python(
    settings: SourceSettings, part: KafkaInputPartition
) -> Iterator[pa.RecordBatch]:
    """:func:`read_partition` with kafka-python (the reader before confluent-kafka; the
    bench compares the two)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaTimeoutError

    where = f"{part.topic}:{part.partition} offsets [{part.start}, {part.end})"
    kwargs = settings.client_kwargs(
        KafkaConsumer,
        {"max_poll_records": READ_BATCH_RECORDS},
        {
            "group_id": None,
            "enable_auto_commit": False,
            "allow_auto_create_topics": False,
            "auto_offset_reset": "earliest",  # records gone (retention): go on from the first
        },
    )
    try:
        consumer = KafkaConsumer(**kwargs)
    except Exception as error:
        raise RuntimeError(
            f"{SOURCE_NAME}: cannot connect to Kafka at {','.join(settings.bootstrap_servers)} "
            f"to read {where}: {type(error).__name__}: {error}"
        ) from error
    timeout_s = settings.read_timeout_ms / 1000
    tp = TopicPartition(part.topic, part.partition)
    try:
        consumer.assign([tp])
        consumer.seek(tp, part.start)
        position = part.start
        progress_at = time.monotonic()
        while position < part.end:
            fetched = consumer.poll(
                timeout_ms=min(1000, settings.read_timeout_ms), max_records=READ_BATCH_RECORDS
            )
            records = [r for r in fetched.get(tp, ()) if part.start <= r.offset < part.end]
            if records:
                yield _to_arrow(part.topic, part.partition, records)
            try:
                now_at = consumer.position(tp, timeout_ms=1000)
            except KafkaTimeoutError:
                now_at = None
            if now_at is not None and now_at > position:
                position = now_at
                progress_at = time.monotonic()
            elif time.monotonic() - progress_at > timeout_s:
                raise RuntimeError(
                    f"{SOURCE_NAME}: reading {where}: no progress at offset {position} for "
                    f"{timeout_s:.0f} s; is Kafka at {','.join(settings.bootstrap_servers)} "
                    "answering? (Spark retries the task)"
                )
    finally:
        with contextlib.suppress(Exception):
            consumer.close(autocommit=False)
