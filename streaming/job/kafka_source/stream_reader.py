"""The source as Spark sees it: ``KafkaSource`` (``format("isrwatch_kafka")``) and its stream
reader, which answers Spark's calls with the offset reader and the planner, reads with the
partition reader, and keeps the source's health (failures, back-off, the status file)."""

from __future__ import annotations

import functools
import gc
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from streaming.config import librdkafka_names
from streaming.job.connection_errors import ConnectionProblem, diagnose
from streaming.job.kafka_source.event_time import cut_partitions, fill
from streaming.job.kafka_source.offset_reader import OffsetReader
from streaming.job.kafka_source.options import SOURCE_NAME, SourceSettings
from streaming.job.kafka_source.partition_reader import SCHEMA, read_partition, read_records
from streaming.job.kafka_source.planner import (
    KafkaInputPartition,
    advance,
    cap_events,
    offsets_of,
    per_partition_cap,
    planned_events,
    planned_partitions,
    share_out,
)
from streaming.job.source_status import write_status

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("isrwatch.kafka_source")

#: The longest a single latestOffset call sleeps after a failure, whatever the back-off.
MAX_WAIT_PER_CALL_S = 5.0
#: The longest a failed offset request spends finding out why (connection_errors).
DIAGNOSIS_TIMEOUT_S = 3.0


class KafkaSource(DataSource):
    """``spark.readStream.format("isrwatch_kafka")``: see the module's docstring."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType | str:
        # Parsing reports bad options when the stream is made.
        if SourceSettings.from_options(self.options).route_shards is None:
            return SCHEMA
        from streaming.job.routing import ROUTED_SCHEMA

        return ROUTED_SCHEMA

    def streamReader(self, schema: StructType) -> KafkaStreamReader:  # noqa: N802 (Spark's API)
        return KafkaStreamReader(SourceSettings.from_options(self.options))


def register(spark: SparkSession) -> None:
    """Register the source with ``spark`` as ``isrwatch_kafka``."""
    spark.dataSource.register(KafkaSource)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches from Kafka's offsets (``OffsetReader``, kafka-python, on the
    driver) and reads them (``read_partition``, confluent-kafka, on the executors).

    The default read limit this reader reports is ``ReadMaxRows(maxEventsPerPartition)``,
    which the planner reads per topic-partition (``per_partition_cap``).

    For metrics: ``consecutive_failures`` counts the offset requests in a row that Kafka
    did not answer (0 once it answers), ``last_error`` is the last one's error (None once
    it answers) and ``last_error_reason`` its cause when it is about connecting
    (``streaming.job.connection_errors``: authentication, tls, unreachable), ``failures_total``,
    ``last_error_at`` and ``last_success_at`` (epoch seconds) tell the history. The reader
    runs in the Python process the JVM starts for the source, not in the driver's Python
    process.
    """

    def __init__(self, settings: SourceSettings) -> None:
        self._setup(settings)

    def _setup(self, settings: SourceSettings) -> None:
        self.settings = settings
        self.consecutive_failures = 0
        self.failures_total = 0
        self.last_error: str | None = None
        self.last_error_reason: str | None = None  # a ConnectionFailure value
        self.last_error_at: float | None = None  # time.time() of the last failure
        self.last_success_at: float | None = None
        self._sleep: Callable[[float], None] = time.sleep
        self._diagnose: Callable[[], ConnectionProblem | None] = self._connection_problem
        self._offsets = OffsetReader(settings)
        self._latest: dict[str, int] | None = None
        self._target: dict[str, int] | None = None  # Trigger.AvailableNow
        self._target_beginnings: dict[str, int] = {}
        self.alignments = 0  # capped micro-batches aligned on event time, and their fetches
        self.alignment_fetches = 0
        # The events they read and the events their caps allowed, as estimated (fill)
        self.aligned_events = 0.0
        self.allowed_events = 0.0
        self.alignment_failures = 0  # read as capped, unaligned

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
                snapshot = self._offsets.snapshot(lambda key: earliest)
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
        return ReadMaxRows(self.settings.max_events_per_partition)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 (Spark's API)
        """Fix the offsets an available-now run reads up to (all partitions' true ends)."""
        for _ in range(3):
            try:
                snapshot = self._offsets.snapshot(lambda key: True)
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
        start = offsets_of(start)
        cap = per_partition_cap(limit, self.settings.max_events_per_partition)
        if self._target is not None:
            ends, beginnings = self._target, self._target_beginnings
            exact: set[str] = set()  # an available-now run never goes back
        else:
            try:
                snapshot = self._offsets.snapshot(lambda key: key not in start)
                went_back = [
                    key
                    for key in snapshot.exact
                    if key in start
                    and snapshot.ends[key] < start[key]
                    and key not in snapshot.beginnings
                ]
                if went_back:
                    snapshot.beginnings.update(self._offsets.beginnings(went_back))
            except Exception as error:
                self._failed(error, "the latest offsets")
                return start
            self._succeeded()
            ends, beginnings, exact = snapshot.ends, snapshot.beginnings, snapshot.exact
        result = advance(start, ends, beginnings, exact, cap)
        if cap is not None and self.settings.max_offsets_per_trigger is not None:
            result = share_out(start, result, self.settings.max_offsets_per_trigger)
        if cap is not None:
            try:  # the cap counts events; a cut partition stops all at one event time
                result = self._within_limits(start, result, ends, cap)
            except Exception as error:
                # Kafka answered the offsets just now: a look that gets nothing is more
                # likely a log with no record where one was expected (control records,
                # compaction) than an outage, and failing would stall the query on it
                # for good. Read the batch as capped in records: at worst, fetches from
                # before an election are dead-lettered (stale_leader_epoch), not lost
                # from sight.
                self.alignment_failures += 1
                log.warning(
                    "%s: cannot size the capped micro-batch in events or align it on event "
                    "time (%s: %s); it is read as capped in records, and fetches from "
                    "before an election it holds may be dead-lettered as stale_leader_epoch",
                    SOURCE_NAME,
                    type(error).__name__,
                    error,
                )
        # What is available (for an available-now run: up to its target), never behind
        # what is planned.
        self._latest = {key: max(end, ends.get(key, end)) for key, end in result.items()}
        return result

    def _within_limits(
        self, start: dict[str, int], planned: dict[str, int], available: dict[str, int], cap: int
    ) -> dict[str, int]:
        """``planned`` cut to about ``cap`` events a partition (a fetch pack is one record
        of many: ``planner.cap_events``), then, if that or the limits cut a partition,
        back to the earliest event time it leaves unread and widened again towards the
        events the cap allows the batch in all (``event_time.fill``): a backlog read in
        capped batches keeps its order, and uneven partitions still fill the batch."""
        began = time.monotonic()
        with self._offsets.records() as records:
            planned = cap_events(start, planned, cap, records.events_per_record)
            if not cut_partitions(start, planned, available):
                return planned

            @functools.cache
            def mean_events(key: str) -> float | None:
                return records.events_per_record(key, start[key], available[key])

            def events(ends: Mapping[str, int]) -> float:
                return planned_events(start, ends, mean_events)

            alignment = fill(start, planned, available, records, events)
            read, allowed = events(alignment.ends), events(planned)
        self.alignments += 1
        self.alignment_fetches += records.fetches
        self.aligned_events += read
        self.allowed_events += allowed
        log.info(
            "%s: capped micro-batch stops at event time %s%s, about %.0f of the %.0f events "
            "the cap allows it (%d fetches, %.0f ms)",
            SOURCE_NAME,
            alignment.frontier,
            ", one past a run of records sharing a millisecond" if alignment.widened else "",
            read,
            allowed,
            records.fetches,
            (time.monotonic() - began) * 1000,
        )
        return alignment.ends

    def reportLatestOffset(self) -> dict[str, int] | None:  # noqa: N802 (Spark's API)
        return None if self._latest is None else dict(self._latest)

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[KafkaInputPartition]:
        return planned_partitions(offsets_of(start), offsets_of(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KafkaInputPartition):
            raise TypeError(f"{SOURCE_NAME}: unexpected input partition {partition!r}")
        gc.freeze()  # the imported modules: see streaming.job.python_worker
        if self.settings.route_shards is None:
            return read_partition(self.settings, partition)
        from streaming.job.routing import route_record_batches

        records = read_records(self.settings, partition)
        return route_record_batches(
            records, self.settings.route_sources, self.settings.route_shards
        )

    def commit(self, end: dict[str, int]) -> None:
        pass

    def stop(self) -> None:
        self._offsets.close()

    # ------------------------------------------------------------------ failures

    def backoff_s(self, failures: int) -> float:
        """The wait after ``failures`` consecutive failures, before the per-call cap."""
        settings = self.settings
        exponent = min(max(failures - 1, 0), 32)
        backoff_ms = min(settings.retry_backoff_max_ms, settings.retry_backoff_ms << exponent)
        return backoff_ms / 1000

    def _connection_problem(self) -> ConnectionProblem | None:
        """Why librdkafka cannot connect with these settings (kafka-python, which failed,
        reports a refused login or handshake as a bootstrap timeout)."""
        config = {
            "bootstrap.servers": ",".join(self.settings.bootstrap_servers),
            "socket.timeout.ms": self.settings.request_timeout_ms,
            **librdkafka_names(self.settings.client_options),
        }
        timeout_s = min(DIAGNOSIS_TIMEOUT_S, self.settings.request_timeout_ms / 1000)
        try:
            return diagnose(config, timeout_s)
        except Exception as error:  # a bad setting librdkafka refuses: say so, go on
            log.warning("%s: cannot check the connection to Kafka: %s", SOURCE_NAME, error)
            return None

    def _failed(self, error: BaseException, what: str) -> None:
        self.consecutive_failures += 1
        self.failures_total += 1
        self.last_error = f"{type(error).__name__}: {error}"
        self._publish_status()  # down now; the diagnosis below may take seconds
        problem = self._diagnose()
        servers = ",".join(self.settings.bootstrap_servers)
        self.last_error_reason = problem.reason.value if problem is not None else None
        self.last_error = (
            problem.describe(servers) if problem is not None else f"{type(error).__name__}: {error}"
        )
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
        self._offsets.close()
        self._sleep(wait)

    def _succeeded(self) -> None:
        if self.consecutive_failures:
            log.warning(
                "%s: Kafka answers again after %d failures", SOURCE_NAME, self.consecutive_failures
            )
        self.consecutive_failures = 0
        self.last_error = None
        self.last_error_reason = None
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
            "last_error_reason": self.last_error_reason,
            "last_error_at": self.last_error_at,
            "last_success_at": self.last_success_at,
            "denied_topics": self._offsets.denied,
        }
        write_status(Path(path), status)
