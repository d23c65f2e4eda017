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
* ``maxEventsPerPartition``: most events per topic-partition per micro-batch (1000000):
  a JSON record is one, a fetch pack (docs/event-contract.md#fetch-packs) one record of
  many, whose mean rows per record the planner reads from the records at the start of
  what a partition would read (``planner.cap_events``);
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
  decodes and routes what it reads itself (``streaming.job.routing.route_record_batches``: the
  routing the job otherwise runs with ``mapInArrow``) and the source's columns are the
  routed rows (``streaming.job.routing.ROUTED_SCHEMA``). The records are in Python already:
  routing them there saves handing every raw value to the JVM and back to another
  Python worker (``bench/pipeline_bench.py``).

Event-time alignment. When a limit leaves records of a partition unread, every partition
of the micro-batch stops before its first record at or after the earliest event time
(``ts``) left unread, so that a backlog read in capped batches is applied in the order one
batch would apply it (``event_time``; the times are fetched from the records,
``record_times``). The aligned batch is then widened back towards the events the cap
allows it in all (``event_time.fill``): busy partitions read past the cap what quiet ones
leave.

Trigger.AvailableNow is supported: the run reads up to the true end offsets taken when it
starts, in micro-batches capped by ``maxEventsPerPartition``.

Failures. When Kafka does not answer, ``latestOffset`` finds out why with librdkafka
(a refused SASL login, a failed TLS handshake, or no broker answering:
``streaming.job.connection_errors``), logs a warning naming the cause and the brokers, waits
(exponential back-off from ``retryBackoffMs`` to ``retryBackoffMaxMs`` over consecutive
failures, at most a few seconds per call) and returns its ``start``: the micro-batch has
no new data and the query goes on (clients are made afresh for the next try, so a CA or
certificate file replaced on disk is read again). A read that stops making progress
raises, and Spark retries the task. A read that Kafka stops answering while the batch still
has records to read (a refused connection, a transport error, or nothing at all for a
request timeout) reports its partition as stalled next to ``statusFile``
(``read_status_dir``) until it reads again: the planner is not called while a batch is
stuck reading, so without it the exporter would go on saying the source is up through an
outage (docs/faults.md).

New partitions (and topics created after the query started) are registered at their
beginning offset in one micro-batch and read from the next one, so that planning a
micro-batch never asks the broker anything (``partitions(start, end)`` depends on the
offsets only, as a restarted query needs).

The stream reader lives in a Python process that the JVM starts for the source (not the
driver's own Python process): its ``last_error`` and ``consecutive_failures`` attributes
are seen there, and its warnings go to that process's stderr.

Modules: ``options`` (names, defaults, parsing), ``offset_reader`` (the driver's questions to
Kafka), ``planner`` (micro-batch ends and input partitions from offsets alone),
``event_time`` and ``record_times`` (a capped micro-batch stopped at one event time),
``partition_reader`` (an executor's read of one input partition) and ``stream_reader``
(Spark's API over them, and the source's health).
"""

from streaming.job.kafka_source.options import (
    OPTION_BOOTSTRAP_SERVERS,
    OPTION_KAFKA_OPTIONS,
    OPTION_MAX_EVENTS_PER_PARTITION,
    OPTION_MAX_OFFSETS_PER_TRIGGER,
    OPTION_READ_TIMEOUT_MS,
    OPTION_RETRY_BACKOFF_MAX_MS,
    OPTION_RETRY_BACKOFF_MS,
    OPTION_ROUTE_TO_SHARDS,
    OPTION_STARTING_OFFSETS,
    OPTION_SUBSCRIBE,
    SOURCE_NAME,
    SourceSettings,
    kafka_source_options,
    redacted_options,
)
from streaming.job.kafka_source.partition_reader import SCHEMA, read_partition
from streaming.job.kafka_source.planner import KafkaInputPartition, share_out
from streaming.job.kafka_source.stream_reader import KafkaSource, KafkaStreamReader, register

__all__ = [
    "OPTION_BOOTSTRAP_SERVERS",
    "OPTION_KAFKA_OPTIONS",
    "OPTION_MAX_EVENTS_PER_PARTITION",
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
    "read_partition",
    "redacted_options",
    "register",
    "share_out",
]
