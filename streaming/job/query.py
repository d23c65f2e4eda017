"""The Spark Structured Streaming job: Kafka -> routing -> per-shard state -> sinks.

```
controller-events ─┐                     ┌─ partition-health (compacted)
                   ├─ route ─ shard state ┼─ isrwatch-dead-letters
fetch-responses ───┘                      └─ /metrics, --health-out
                       applyInPandasWithState, grouped by shard
```

The source is this project's Python Data Source (confluent-kafka reads, kafka-python plans)
(``streaming.job.kafka_source``), whose reader also routes what it reads, or Spark's JVM
connector (``kafka.source_format: kafka``, its jars from ``make spark-kafka``:
``streaming.job.connector``), routed by
``mapInArrow`` (the same function, the same rows). Where the time goes and why:
docs/pipeline.md. State lives in the RocksDB state store by default; source
offsets and state are in the checkpoint, so a restarted job applies every event once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from state.events import Source
from streaming.acl_denial import Denial, undescribable_topics
from streaming.config import IsrwatchConfig, SourceFormat, StateStore
from streaming.job.connection_errors import (
    ConnectionFailure,
    ConnectionProblem,
    diagnose,
    explain_failure,
)
from streaming.job.connector import connector_jars
from streaming.job.exporter_http import ExporterServer
from streaming.job.metrics import HealthExporter
from streaming.job.python_worker import freezing_imports
from streaming.job.reachability import ReachabilityWatch, watch_timing
from streaming.job.routing import ROUTED_LAYOUT, ROUTED_SCHEMA, route_arrow_batches
from streaming.job.shard_state import (
    CLOCK_DELAY_MS,
    OUTPUT_SCHEMA,
    STATE_SCHEMA,
    ShardJobSettings,
    make_shard_function,
)
from streaming.job.sinks import BatchSink, HealthFile, kafka_producer
from streaming.job.source_status import SupervisedStatus

log = logging.getLogger("isrwatch.job")

#: The longest a failed query's cause is looked for with librdkafka (as the source's).
DIAGNOSIS_TIMEOUT_S = 3.0
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def spark_session(config: IsrwatchConfig) -> Any:
    """A session for the job; Python workers run this interpreter (docs/architecture.md)
    unless PYSPARK_PYTHON names another: on a cluster, the environment shipped to the
    executors (``./environment/bin/python`` of spark.archives, docs/spark-cluster.md)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    import pyspark
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(config.streaming.spark_master)
        .appName("isrwatch")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # a service logs, it draws no bars
        .config("spark.sql.shuffle.partitions", str(config.streaming.shuffle_partitions))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if config.streaming.state_store is StateStore.ROCKSDB:
        builder = builder.config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
    if config.kafka.source_format is SourceFormat.KAFKA:
        # Read when the JVM starts (spark-submit's classpath): a session this process
        # already started without them keeps its classpath.
        jars = connector_jars(pyspark.__version__)
        if jars:
            builder = builder.config("spark.jars", ",".join(str(jar) for jar in jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def stop_thread_session() -> None:
    """Stop the Spark session this thread made, if any (``SparkSession.getActiveSession``
    is per thread): the demo runs the job in a thread of its own."""
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is not None:
        session.stop()


def input_stream(spark: Any, config: IsrwatchConfig, *, routed: bool = False) -> Any:
    """The input records, with the columns of Spark's Kafka source; ``routed``: the
    routed rows of them instead (``streaming.job.routing.ROUTED_SCHEMA``), which only this
    project's source gives (its reader routes what it reads)."""
    topics = [config.topics.controller_events, config.topics.fetch_responses]
    if config.kafka.source_format is SourceFormat.KAFKA:
        if routed:
            raise ValueError("Spark's Kafka connector gives records, not routed rows")
        return spark.readStream.format("kafka").options(**jvm_kafka_options(config)).load()
    from streaming.job.kafka_source import kafka_source_options, register

    register(spark)
    route = input_sources(config) if routed else None
    options = kafka_source_options(config, topics, str(source_status_file(config)), route)
    return spark.readStream.format("isrwatch_kafka").options(**options).load()


def is_uri(location: str) -> bool:
    return "://" in location or location.startswith("file:")


def checkpoint_location(config: IsrwatchConfig) -> str:
    """A local checkpoint path made absolute; a URI (s3a://, gs://, hdfs://...) as given."""
    location = str(config.streaming.checkpoint_location)
    return location if is_uri(location) else str(Path(location).resolve())


def source_status_file(config: IsrwatchConfig) -> Path:
    """Where the Kafka source's reader publishes its health for the exporter: next to a
    local checkpoint, else in the local temporary directory (one per checkpoint URI). The
    reader must run where the driver can read it (local mode, or a shared volume)."""
    location = checkpoint_location(config)
    if not is_uri(location):
        return Path(location) / "source-status.json"
    digest = hashlib.sha256(location.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"isrwatch-source-{digest}" / "source-status.json"


class CheckpointMismatchError(Exception):
    """The checkpoint was written by a job whose state layout differs from this one's."""


def checkpoint_layout(config: IsrwatchConfig) -> dict[str, object]:
    """What a checkpoint's offsets and state depend on: partitions are hashed into
    ``state_shards`` groups, and the offsets are those of these topics and source.
    ``routed_layout`` names the rows routing hands the shards and the state they keep."""
    return {
        "state_shards": config.streaming.state_shards,
        "routed_layout": ROUTED_LAYOUT,
        "controller_events": config.topics.controller_events,
        "fetch_responses": config.topics.fetch_responses,
        "source_format": config.kafka.source_format.value,
    }


RESTORABLE_ROUTED_LAYOUTS = ("routed-v1", "routed-v2", "routed-v3", ROUTED_LAYOUT)
"""State layouts this release restores: routed-v1 (whose layout file has no
``routed_layout``) and routed-v2 pickled the shard state, read once and migrated
(``streaming.job.state_format``, ``shard_snapshot.migrate_routed_v1``); routed-v3 keeps
the state of routed-v4."""


def guard_checkpoint(config: IsrwatchConfig) -> None:
    """Refuse to reuse a local checkpoint written with another layout (the state would be
    misrouted, or the offsets would belong to other topics); record it on first use, and
    record this release's ``routed_layout`` once it restores an older one.
    Rules may change between runs: restored state is judged by the current ones."""
    location = checkpoint_location(config)
    if is_uri(location):
        return  # object stores: the Helm chart's upgrade check guards the layout
    path = Path(location) / "isrwatch-layout.json"
    layout = checkpoint_layout(config)
    if path.exists():
        kept = json.loads(path.read_text(encoding="utf-8"))
        routed = kept.get("routed_layout", "routed-v1")
        if routed not in RESTORABLE_ROUTED_LAYOUTS:
            raise CheckpointMismatchError(
                f"{location} was written by another release of isrwatch, whose state layout "
                f"({routed}) this one ({ROUTED_LAYOUT}) cannot restore: start from a new "
                "streaming.checkpoint_location (the job rebuilds its state from the "
                "controller events it reads)"
            )
        changed = {
            k: (kept.get(k), v)
            for k, v in layout.items()
            if k != "routed_layout" and kept.get(k) != v
        }
        if changed:
            details = ", ".join(
                f"{k}: {old!r} in the checkpoint, {new!r} now" for k, (old, new) in changed.items()
            )
            raise CheckpointMismatchError(
                f"{location} was written by a job with another layout ({details}); "
                "keep the old settings or use a new streaming.checkpoint_location"
            )
        if kept == layout:
            return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(layout, sort_keys=True), encoding="utf-8")


def jvm_records_per_trigger(config: IsrwatchConfig) -> int:
    """Spark's connector caps records over all partitions (``maxOffsetsPerTrigger``) and
    cannot look into them: ``kafka.max_records_per_batch`` if set, else the events cap
    taken as records. Dividing it by a pack's most rows would starve the controller
    events, one record each, and packs of fewer rows (a cold start of 100,000
    LeaderAndIsr in 410 triggers): with packs a catch-up batch may then hold up to
    4,096 (``MOST_ROWS_PER_PACK``) times the cap in events, which ``kafka.max_records_per_batch``
    bounds (docs/pipeline.md#sizing-a-micro-batch)."""
    kafka = config.kafka
    if kafka.max_records_per_batch is not None:
        return kafka.max_records_per_batch
    return kafka.max_events_per_partition_per_batch


def jvm_kafka_options(config: IsrwatchConfig) -> dict[str, str]:
    """The same settings for Spark's own Kafka source (spark-sql-kafka-0-10)."""
    kafka = config.kafka
    options = {
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "subscribe": f"{config.topics.controller_events},{config.topics.fetch_responses}",
        "startingOffsets": kafka.starting_offsets.value,
        "maxOffsetsPerTrigger": str(jvm_records_per_trigger(config)),
        "failOnDataLoss": "false",
        "kafka.security.protocol": kafka.security_protocol.value,
    }
    if kafka.sasl_mechanism is not None and kafka.sasl_username is not None:
        module = (
            "org.apache.kafka.common.security.plain.PlainLoginModule"
            if kafka.sasl_mechanism.value == "PLAIN"
            else "org.apache.kafka.common.security.scram.ScramLoginModule"
        )
        password = kafka.sasl_password.get_secret_value() if kafka.sasl_password else ""
        options["kafka.sasl.mechanism"] = kafka.sasl_mechanism.value
        options["kafka.sasl.jaas.config"] = (
            f'{module} required username="{kafka.sasl_username}" password="{password}";'
        )
    if kafka.ssl_cafile:
        options["kafka.ssl.truststore.type"] = "PEM"
        options["kafka.ssl.truststore.location"] = str(kafka.ssl_cafile)
    if kafka.ssl_certfile and kafka.ssl_keyfile:
        # Kafka's PEM key store takes the key and its chain in one file or inline; inline
        # keeps the user's two files. The Java client hides the key (a Password) in its logs.
        options["kafka.ssl.keystore.type"] = "PEM"
        options["kafka.ssl.keystore.certificate.chain"] = Path(kafka.ssl_certfile).read_text()
        options["kafka.ssl.keystore.key"] = Path(kafka.ssl_keyfile).read_text()
    if kafka.security_protocol.value.endswith("SSL") and not kafka.ssl_check_hostname:
        options["kafka.ssl.endpoint.identification.algorithm"] = ""
    return options


def input_sources(config: IsrwatchConfig) -> dict[str, Source]:
    """What each input topic carries."""
    return {
        config.topics.controller_events: Source.CONTROLLER_EVENTS,
        config.topics.fetch_responses: Source.FETCH_RESPONSES,
    }


def routed_stream(spark: Any, config: IsrwatchConfig, records: Any = None) -> Any:
    """The input records (by default the Kafka input stream; the columns of Spark's Kafka
    source in any case) parsed and routed to their shards (``streaming.job.routing``).

    This project's source routes in its reader (the records are in Python there: no round
    trip of every raw value through the JVM to another Python worker); Spark's connector
    and the ``records`` given are routed by ``mapInArrow``. Both run
    ``route_arrow_batches``: the rows are the same.
    """
    if records is None and config.kafka.source_format is SourceFormat.PYTHON:
        return input_stream(spark, config, routed=True)
    route = partial(
        freezing_imports(route_arrow_batches),
        sources=input_sources(config),
        shards=config.streaming.state_shards,
    )
    records = input_stream(spark, config) if records is None else records
    return records.mapInArrow(route, ROUTED_SCHEMA)


def start_query(
    spark: Any,
    config: IsrwatchConfig,
    sink: BatchSink,
    *,
    snapshot_when_idle: bool,
    records: Any = None,
) -> Any:
    """The job's query; ``records`` replaces the Kafka input (the bench's Spark floor)."""
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.streaming.state import GroupStateTimeout

    shards = config.streaming.state_shards
    routed = routed_stream(spark, config, records)
    # Spark's watermark only carries the stream's clock; lateness is judged (and
    # dead-lettered) in the state function with the configured delay (shard_state).
    clocked = routed.withColumn("event_time", F.timestamp_millis("ts")).withWatermark(
        "event_time", f"{CLOCK_DELAY_MS} milliseconds"
    )
    settings = ShardJobSettings(
        config.rules, shards, config.streaming.watermark_delay_ms, snapshot_when_idle
    )
    health = clocked.groupBy("shard").applyInPandasWithState(
        freezing_imports(make_shard_function(settings)),
        OUTPUT_SCHEMA,
        STATE_SCHEMA,
        "append",
        GroupStateTimeout.ProcessingTimeTimeout,
    )
    return (
        health.writeStream.queryName("isrwatch")
        .foreachBatch(sink)
        .option("checkpointLocation", checkpoint_location(config))
        .trigger(processingTime=f"{config.streaming.trigger_interval_ms} milliseconds")
        .start()
    )


def make_sink(
    config: IsrwatchConfig,
    exporter: HealthExporter,
    health_out: Path | None,
    on_batch: Callable[[int, pd.DataFrame], None] | None = None,
) -> BatchSink:
    return BatchSink(
        partial(kafka_producer, config.kafka),
        config.topics.partition_health,
        config.topics.dead_letters,
        exporter,
        HealthFile(health_out) if health_out else None,
        on_batch,
    )


def run(
    config: IsrwatchConfig,
    *,
    available_now: bool = False,
    health_out: Path | None = None,
    exporter: HealthExporter | None = None,
    stop: threading.Event | None = None,
    on_batch: Callable[[int, pd.DataFrame], None] | None = None,
    on_started: Callable[[], None] | None = None,
    on_progress: Callable[[Mapping[str, Any]], None] | None = None,
) -> None:
    """Run the job until ``stop`` is set (or, with ``available_now``, until caught up).

    A failing query (broker gone while writing, say) is restarted from its checkpoint
    with back-off, so the job does not die of a transient fault. ``on_progress`` gets
    each micro-batch's ``StreamingQueryProgress`` (as a dict) once, within a second of
    its end.
    """
    guard_checkpoint(config)
    exporter = exporter or HealthExporter()
    exporter.source_status = source_status_file(config)
    # This project's source writes its status from its reader; Spark's connector's is
    # the supervisor's to write, from the queries it runs.
    supervised = (
        SupervisedStatus(exporter.source_status, config.kafka.bootstrap_servers)
        if config.kafka.source_format is SourceFormat.KAFKA
        else None
    )
    server = ExporterServer(exporter)
    if config.metrics.enabled:
        server.serve(config.metrics.host, config.metrics.port)
    stop = stop or threading.Event()
    spark = spark_session(config)
    sink = make_sink(config, exporter, health_out, on_batch)
    backoff = config.kafka.retry_backoff_ms / 1000
    # whether the brokers answer, every fraction of a trigger, whatever the batches do
    timing = watch_timing(config.streaming.trigger_interval_ms, config.kafka.request_timeout_ms)
    watch = ReachabilityWatch(config.kafka.librdkafka_options(), timing).start()
    exporter.watch = watch
    try:
        while not stop.is_set():
            query = start_query(spark, config, sink, snapshot_when_idle=available_now)
            if on_started is not None:
                on_started()
            try:
                if available_now:
                    until_caught_up(query, stop)
                    return
                reported = NewProgress(query) if on_progress is not None else None
                while not stop.is_set() and query.isActive:
                    query.awaitTermination(1)
                    if supervised is not None:
                        supervised.progressed(query.lastProgress)
                    if reported is not None and on_progress is not None:
                        for progress in reported.since_last():
                            on_progress(progress)
                if query.exception() is None:
                    return
            except Exception as error:  # a failed batch: restart from the checkpoint
                problem = explain_query_failure(config, str(error))
                if problem is not None:
                    log.error("%s", problem.describe(config.kafka.bootstrap_servers))
                if supervised is not None:
                    supervised.failed(problem)
                log.error("streaming query failed, restarting from its checkpoint: %s", error)
                if available_now:
                    raise
            finally:
                if query.isActive:
                    query.stop()
            stop.wait(backoff)
            backoff = min(2 * backoff, config.kafka.retry_backoff_max_ms / 1000)
    finally:
        watch.stop()
        exporter.watch = None  # its last state would go stale
        sink.close()
        server.close()


class NewProgress:
    """The progress reports of ``query``'s micro-batches not handed out yet: Spark keeps
    the last ``spark.sql.streaming.numRecentProgressUpdates`` (100), more than a second
    of batches holds."""

    def __init__(self, query: Any) -> None:  # a pyspark StreamingQuery
        self._query = query
        self._last_batch = -1

    def since_last(self) -> list[Mapping[str, Any]]:
        new = [p for p in self._query.recentProgress if p["batchId"] > self._last_batch]
        if new:
            self._last_batch = max(p["batchId"] for p in new)
        return new


def explain_query_failure(config: IsrwatchConfig, text: str) -> ConnectionProblem | None:
    """Why a query failed, when it is about Kafka (``connection_errors.explain_failure``:
    Spark's connector, the sinks). Spark's connector lists offsets with the Java admin
    client, whose TopicAuthorizationException says "Topic authorization failed." and no
    topic (spark-sql-kafka-0-10 4.2.0, kafka-clients 3.9.2): the topic is found by asking
    Kafka which input topic the job's principal may not describe."""
    problem = explain_failure(text)
    if problem is not None and problem.reason is not ConnectionFailure.AUTHORIZATION:
        return with_librdkafkas_words(config, problem)
    if problem is not None or "TopicAuthorizationException" not in text:
        return problem
    topics = [config.topics.controller_events, config.topics.fetch_responses]
    try:
        denied = undescribable_topics(config.kafka.kafka_python_options(), topics)
    except Exception as error:  # Kafka did not answer this either: the text says enough
        log.warning("cannot find which input topic the job may not read: %s", error)
        denied = []
    return ConnectionProblem(
        ConnectionFailure.AUTHORIZATION,
        "; ".join(str(Denial.on_topic("the job", "Read", topic)) for topic in denied)
        or "TopicAuthorizationException: the job's principal needs Read on "
        f"Topic:{' and Topic:'.join(topics)} (docs/security.md#acls)",
    )


def with_librdkafkas_words(config: IsrwatchConfig, problem: ConnectionProblem) -> ConnectionProblem:
    """``problem`` (a refused login or TLS handshake, in the words of the client that
    failed) with what librdkafka says connecting on the same settings, when it finds the
    same cause (``connection_errors.diagnose``, as this project's source does). A failed
    query carries only the Java client's top exception ("SslAuthenticationException: SSL
    handshake failed"), not the broker's TLS alert under it, which tells a refused client
    certificate from an untrusted broker certificate; librdkafka reports the alert."""
    try:
        found = diagnose(config.kafka.librdkafka_options(), DIAGNOSIS_TIMEOUT_S)
    except Exception as error:  # a setting librdkafka refuses: the Java words stand alone
        log.warning("cannot check the connection to Kafka with librdkafka: %s", error)
        return problem
    if found is None or found.reason is not problem.reason:
        return problem
    return ConnectionProblem(problem.reason, f"{problem.detail}; librdkafka: {found.detail}")


def until_caught_up(query: Any, stop: threading.Event, after_batch: int = -1) -> None:
    """Wait for a batch that read nothing although it ended at the source's latest
    offsets: everything available has been applied, and that batch (no data, every
    shard timed out) evaluated all partitions at the largest event time and wrote them.

    A no-data batch alone is not enough: after a restart Spark first re-runs the batch
    it had planned before the stop, which may be one without data. Batches up to
    ``after_batch`` are not considered.
    """
    seen = after_batch
    while not stop.is_set():
        if not query.isActive:
            query.awaitTermination()  # raises the query's exception
            return
        for progress in query.recentProgress:
            if progress["batchId"] > seen:
                seen = progress["batchId"]
                if _caught_up(progress):
                    return
        time.sleep(0.2)


def _caught_up(progress: dict[str, Any]) -> bool:
    if progress["numInputRows"] != 0:
        return False
    for source in progress["sources"]:
        end, latest = _offsets(source.get("endOffset")), _offsets(source.get("latestOffset"))
        if latest is None or end != latest:
            return False
    return True


def _offsets(value: object) -> object:
    return json.loads(value) if isinstance(value, str) else value
