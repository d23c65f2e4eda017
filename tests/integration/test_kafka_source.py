"""streaming.job.kafka_source against the embedded broker (Tansu) and a real Spark session."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from state.events import Source
from streaming.config import load_config
from streaming.job.kafka_source import (
    SCHEMA,
    SOURCE_NAME,
    KafkaInputPartition,
    KafkaSource,
    KafkaStreamReader,
    SourceSettings,
    kafka_source_options,
    partition_reader,
    read_partition,
    redacted_options,
    register,
)
from streaming.tools.embedded_broker import EmbeddedBroker

pytestmark = pytest.mark.integration

# (topic, partition, offset, key, value, timestamp ms, timestamp type)
Row = tuple[str, int, int, bytes | None, bytes | None, int, int]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(
    broker: EmbeddedBroker,
    records: Sequence[tuple[str, int, bytes | None, bytes | None]],
    linger_ms: int = 100,
) -> list[Row]:
    """Send (topic, partition, key, value) records; linger so that batches hold many."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=linger_ms)
    futures = [
        (producer.send(topic, key=key, value=value, partition=partition), key, value)
        for topic, partition, key, value in records
    ]
    producer.flush()
    sent: list[Row] = []
    for future, key, value in futures:
        meta = future.get(timeout=10)
        sent.append((meta.topic, meta.partition, meta.offset, key, value, meta.timestamp, 0))
    producer.close()
    return sent


def reported_end(broker: EmbeddedBroker, topic: str, partition: int) -> int:
    """What ListOffsets "latest" answers (Tansu: base offset of the last batch + 1)."""
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
    try:
        tp = TopicPartition(topic, partition)
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


def options(broker: EmbeddedBroker, topics: Sequence[str], **extra: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": broker.bootstrap_servers,
        "subscribe": ",".join(topics),
        "startingOffsets": "earliest",
        **extra,
    }


@pytest.fixture(scope="module")
def registered(spark: Any) -> Any:
    register(spark)
    return spark


def run_available_now(
    spark: Any, source_options: dict[str, str], checkpoint: Path
) -> list[list[Row]]:
    """One available-now run into a foreachBatch collector: the rows of each micro-batch."""
    batches: list[list[Row]] = []

    def collect(frame: Any, batch_id: int) -> None:
        rows = frame.selectExpr(
            "topic",
            "partition",
            "offset",
            "key",
            "value",
            "unix_millis(timestamp) AS ts",
            "timestampType",
        ).collect()
        batches.append([(r[0], r[1], r[2], _bytes(r[3]), _bytes(r[4]), r[5], r[6]) for r in rows])

    query = (
        spark.readStream.format(SOURCE_NAME)
        .options(**source_options)
        .load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120), "the available-now query did not finish"
    finally:
        query.stop()
    assert query.exception() is None
    return batches


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def flat(batches: list[list[Row]]) -> list[Row]:
    return [row for batch in batches for row in batch]


def ordered(rows: Sequence[Row]) -> list[Row]:
    return sorted(rows, key=lambda row: (row[0], row[1], row[2]))


# --------------------------------------------------------------------------- Spark


def test_every_record_arrives_once_with_its_metadata(
    broker: EmbeddedBroker, registered: Any, tmp_path: Path
) -> None:
    first, second = unique("source-a"), unique("source-b")
    broker.create_topics([first], partitions=3)
    broker.create_topics([second], partitions=2)
    records: list[tuple[str, int, bytes | None, bytes | None]] = []
    for i in range(300):
        topic, partitions = (first, 3) if i % 3 else (second, 2)
        key = None if i % 7 == 0 else f"key-{i}".encode()
        value = None if i % 50 == 49 and key is not None else f"value-{i}".encode()
        records.append((topic, i % partitions, key, value))
    sent = produce(broker, records)

    frame = registered.readStream.format(SOURCE_NAME).options(**options(broker, [first])).load()
    assert frame.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )
    got = flat(run_available_now(registered, options(broker, [first, second]), tmp_path))
    assert len(got) == len(sent) == 300
    assert ordered(got) == ordered(sent)


def test_the_last_multi_record_batch_is_read_in_the_same_micro_batch(
    broker: EmbeddedBroker, registered: Any, tmp_path: Path
) -> None:
    topic = unique("tail")
    broker.create_topics([topic])
    sent = produce(broker, [(topic, 0, b"k", f"early-{i}".encode()) for i in range(5)])
    sent += produce(broker, [(topic, 0, b"k", f"tail-{i}".encode()) for i in range(10)])
    # Tansu's quirk: ListOffsets "latest" hides all but the first record of the last batch.
    assert reported_end(broker, topic, 0) == 6, "the test expects Tansu's ListOffsets quirk"
    batches = [
        batch
        for batch in run_available_now(registered, options(broker, [topic]), tmp_path)
        if batch
    ]
    assert len(batches) == 1
    assert ordered(batches[0]) == ordered(sent)
    assert [row[2] for row in ordered(batches[0])] == list(range(15))


def test_a_restart_on_the_same_checkpoint_reads_only_the_new_records(
    broker: EmbeddedBroker, registered: Any, tmp_path: Path
) -> None:
    topic = unique("restart")
    broker.create_topics([topic], partitions=2)
    before = produce(broker, [(topic, i % 2, None, f"before-{i}".encode()) for i in range(30)])
    checkpoint = tmp_path / "checkpoint"
    assert ordered(
        flat(run_available_now(registered, options(broker, [topic]), checkpoint))
    ) == ordered(before)
    after = produce(broker, [(topic, i % 2, None, f"after-{i}".encode()) for i in range(20)])
    assert ordered(
        flat(run_available_now(registered, options(broker, [topic]), checkpoint))
    ) == ordered(after)
    assert ordered(flat(run_available_now(registered, options(broker, [topic]), checkpoint))) == []


def test_starting_offsets_latest_skips_the_existing_records(
    broker: EmbeddedBroker, registered: Any, tmp_path: Path
) -> None:
    topic = unique("latest")
    broker.create_topics([topic], partitions=2)
    produce(broker, [(topic, i % 2, None, f"old-{i}".encode()) for i in range(15)])
    latest = options(broker, [topic], startingOffsets="latest")
    checkpoint = tmp_path / "checkpoint"
    assert flat(run_available_now(registered, latest, checkpoint)) == []
    new = produce(broker, [(topic, i % 2, None, f"new-{i}".encode()) for i in range(5)])
    assert ordered(flat(run_available_now(registered, latest, checkpoint))) == ordered(new)


def test_max_events_per_partition_splits_the_run_into_micro_batches(
    broker: EmbeddedBroker, registered: Any, tmp_path: Path
) -> None:
    topic = unique("capped")
    broker.create_topics([topic])
    sent = produce(broker, [(topic, 0, None, f"v-{i}".encode()) for i in range(25)])
    capped = options(broker, [topic], maxEventsPerPartition="10")
    batches = [batch for batch in run_available_now(registered, capped, tmp_path) if batch]
    assert [len(batch) for batch in batches] == [10, 10, 5]
    assert flat(batches) == sent  # in offset order, each once


def test_a_running_query_picks_up_new_records_and_new_topics(
    broker: EmbeddedBroker, registered: Any, tmp_path: Path
) -> None:
    existing, later = unique("running"), unique("running-later")
    broker.create_topics([existing], partitions=2)
    got: list[Row] = []

    def collect(frame: Any, batch_id: int) -> None:
        rows = frame.selectExpr(
            "topic",
            "partition",
            "offset",
            "key",
            "value",
            "unix_millis(timestamp) AS ts",
            "timestampType",
        ).collect()
        got.extend((r[0], r[1], r[2], _bytes(r[3]), _bytes(r[4]), r[5], r[6]) for r in rows)

    query = (
        registered.readStream.format(SOURCE_NAME)
        .options(**options(broker, [existing, later]))
        .load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )

    def wait_for(count: int) -> None:
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            assert query.exception() is None
            time.sleep(0.1)
        time.sleep(1.0)  # a few more micro-batches: nothing is read twice

    try:
        sent = produce(broker, [(existing, i % 2, None, b"first") for i in range(20)])
        wait_for(len(sent))
        broker.create_topics([later])
        sent += produce(broker, [(later, 0, b"k", b"second") for _ in range(7)])
        sent += produce(broker, [(existing, i % 2, None, b"third") for i in range(9)])
        wait_for(len(sent))
    finally:
        query.stop()
    assert ordered(got) == ordered(sent)


# --------------------------------------------------------------------------- the reader


def reader_for(source_options: dict[str, str]) -> KafkaStreamReader:
    source = KafkaSource(source_options)
    source.schema()  # checks the options, as Spark does when the stream is made
    reader = source.streamReader(SCHEMA)  # (the reader reads its columns from the options)
    assert isinstance(reader, KafkaStreamReader)
    return reader


def read_all(reader: KafkaStreamReader, start: dict[str, int], end: dict[str, int]) -> list[Row]:
    rows: list[Row] = []
    for part in reader.partitions(start, end):
        for batch in reader.read(part):
            columns = batch.to_pydict()
            stamps = [int(ts.timestamp() * 1000) for ts in columns["timestamp"]]
            rows += zip(
                columns["topic"],
                columns["partition"],
                columns["offset"],
                columns["key"],
                columns["value"],
                stamps,
                columns["timestampType"],
                strict=True,
            )
    return rows


def test_missing_topics_and_new_partitions_start_at_their_beginning(
    broker: EmbeddedBroker,
) -> None:
    existing, later = unique("existing"), unique("later")
    broker.create_topics([existing])
    reader = reader_for(options(broker, [existing, later]))
    try:
        start = reader.initialOffset()
        assert start == {f"{existing}:0": 0}
        assert reader.latestOffset(start, ReadAllAvailable()) == start  # no failure
        assert reader.consecutive_failures == 0

        broker.create_topics([later], partitions=2)
        sent = produce(broker, [(later, i % 2, None, b"x") for i in range(6)])
        registered = reader.latestOffset(start, ReadAllAvailable())
        assert registered == {**start, f"{later}:0": 0, f"{later}:1": 0}
        assert reader.partitions(start, registered) == []
        end = reader.latestOffset(registered, ReadAllAvailable())
        assert end == {**start, f"{later}:0": 3, f"{later}:1": 3}
        assert ordered(read_all(reader, registered, end)) == ordered(sent)
        assert reader.reportLatestOffset() == end
    finally:
        reader.stop()


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_a_topic_written_compressed_is_planned_and_read(broker: EmbeddedBroker, codec: str) -> None:
    """Producers elsewhere compress (librdkafka and the Java client offer all four): the
    driver's look at the last records of each partition (the true end) must decode the
    batch, or planning fails every trigger and the query stands still."""
    from confluent_kafka import Producer

    topic = unique(f"compressed-{codec}")
    broker.create_topics([topic], partitions=2)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "compression.type": codec,
            "linger.ms": 100,
        }
    )
    values = [json.dumps({"n": i, "pad": "x" * 200}).encode() for i in range(40)]
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % 2)
    assert producer.flush(10) == 0
    reader = reader_for(options(broker, [topic]))
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())
        assert reader.consecutive_failures == 0
        assert end == {f"{topic}:0": 20, f"{topic}:1": 20}
        read = read_all(reader, start, end)
        assert sorted(_bytes(row[4]) or b"" for row in read) == sorted(values)
    finally:
        reader.stop()


def test_read_limits(broker: EmbeddedBroker) -> None:
    topic = unique("limits")
    broker.create_topics([topic], partitions=2)
    produce(broker, [(topic, i % 2, None, b"x") for i in range(40)])
    reader = reader_for(options(broker, [topic], maxEventsPerPartition="7"))
    try:
        start = reader.initialOffset()
        assert reader.getDefaultReadLimit() == ReadMaxRows(7)
        assert reader.latestOffset(start, ReadMaxRows(7)) == {f"{topic}:0": 7, f"{topic}:1": 7}
        assert reader.latestOffset(start, ReadMaxRows(3)) == {f"{topic}:0": 3, f"{topic}:1": 3}
        everything = reader.latestOffset(start, ReadAllAvailable())
        assert everything == {f"{topic}:0": 20, f"{topic}:1": 20}
        parts = reader.partitions(start, everything)
        assert parts == [
            KafkaInputPartition(topic, 0, 0, 20),
            KafkaInputPartition(topic, 1, 0, 20),
        ]
    finally:
        reader.stop()

    # A total limit too: 7 + 7 to read, 10 in all: 10 x 7 / 14 = 5 each.
    reader = reader_for(
        options(broker, [topic], maxEventsPerPartition="7", maxOffsetsPerTrigger="10")
    )
    try:
        start = reader.initialOffset()
        assert reader.latestOffset(start, ReadMaxRows(7)) == {f"{topic}:0": 5, f"{topic}:1": 5}
        everything = reader.latestOffset(start, ReadAllAvailable())
        assert everything == {f"{topic}:0": 20, f"{topic}:1": 20}
    finally:
        reader.stop()


def test_a_capped_batch_stops_every_topic_at_the_same_event_time(broker: EmbeddedBroker) -> None:
    """A backlog read in capped batches keeps its event-time order across topics
    (kafka_source.event_time): the sparse controller topic is not read ahead of the
    fetches. Elections at 200, 300 and 400; fetches every 10 ms from 100 to 390."""
    controller, fetches = unique("controller"), unique("fetches")
    broker.create_topics([controller, fetches])
    produce(
        broker,
        [(controller, 0, None, b'{"ts":%d}' % ts) for ts in (100, 200, 300, 400)]
        + [(fetches, 0, None, b'{"ts":%d}' % (100 + 10 * i)) for i in range(30)],
    )
    c, f = f"{controller}:0", f"{fetches}:0"
    reader = reader_for(options(broker, [controller, fetches], maxEventsPerPartition="10"))
    try:
        start = reader.initialOffset()
        assert start == {c: 0, f: 0}
        # Cap 10: the fetches stop before 200, so does the controller topic (ts 100 only):
        # 11 of the 14 events the cap allows. Filled (event_time.fill): fetches to 220
        # would read 15; to 210 (ts < 220) 14, the election at 200 with them.
        first = reader.latestOffset(start, ReadMaxRows(10))
        assert first == {c: 2, f: 12}
        # 220..310 and the election at 300 (ts < 320) are 11 of 12; one fetch more fills it.
        second = reader.latestOffset(first, ReadMaxRows(10))
        assert second == {c: 3, f: 23}
        third = reader.latestOffset(second, ReadMaxRows(10))  # nothing cut: all the rest
        assert third == {c: 4, f: 30}
        # The first batch: the controller events at 100 and 200, the fetches 100..210.
        values = sorted(row[4] or b"" for row in read_all(reader, start, first))
        expected = [
            b'{"ts":100}',
            b'{"ts":200}',
            *(b'{"ts":%d}' % (100 + 10 * i) for i in range(12)),
        ]
        assert values == sorted(expected)
    finally:
        reader.stop()


def test_a_routing_reader_gives_routed_rows_and_keeps_the_raw_value_of_dead_letters(
    broker: EmbeddedBroker,
) -> None:
    """``routeToShards``: the reader decodes and routes (16 shards). Expected by hand:
    crc32("orders:3") % 16 == 12 (``state.sharding.shard_of``); a dead letter goes to
    shard 0 with its raw text; the one part of a LeaderAndIsr goes to its owner, counted,
    with its raw text."""
    controller, fetches = unique("ctl"), unique("fetch")
    broker.create_topics([controller, fetches])
    fetch = (
        b'{"ts":1000,"topic":"orders","partition":3,"leader":1,"follower":2,'
        b'"leader_epoch":4,"fetch_offset":100,"leader_leo":120,"high_watermark":100}'
    )
    election = (
        b'{"type":"LeaderAndIsr","ts":900,"topic":"orders","partition":3,"leader":1,'
        b'"leader_epoch":4,"isr":[1,2],"replicas":[1,2],"partition_epoch":7}'
    )
    produce(
        broker,
        [
            (fetches, 0, None, fetch),
            (fetches, 0, None, b'{"ts": 5'),
            (controller, 0, None, election),
        ],
    )
    route = json.dumps(
        {"shards": 16, "sources": {controller: "controller-events", fetches: "fetch-responses"}}
    )
    source = KafkaSource(options(broker, [controller, fetches], routeToShards=route))
    assert "kind string" in str(source.schema())
    reader = reader_for(options(broker, [controller, fetches], routeToShards=route))
    try:
        start = {f"{controller}:0": 0, f"{fetches}:0": 0}
        end = reader.latestOffset(start, ReadAllAvailable())
        rows = [
            row
            for part in reader.partitions(start, end)
            for batch in reader.read(part)
            for row in batch.to_pylist()
        ]
    finally:
        reader.stop()
    by_kind = {row["kind"]: row for row in rows}
    assert sorted(row["kind"] for row in rows) == ["controller", "dead", "fetches"]
    pack = by_kind["fetches"]  # the shard's fetches, packed (streaming.job.routing.pack_fetches)
    assert (pack["shard"], pack["ts"]) == (12, 1000)
    assert pa.ipc.open_stream(pack["event"]).read_all().to_pylist() == [
        {
            "ts": 1000,
            "src_topic": fetches,
            "src_partition": 0,
            "src_offset": 0,
            "src_row": None,  # a JSON record, not a row of a fetch pack
            "topic": "orders",
            "partition": 3,
            "leader": 1,
            "follower": 2,
            "leader_epoch": 4,
            "fetch_offset": 100,
            "leader_leo": 120,
            "high_watermark": 100,
            "error": "NONE",
        }
    ]
    dead = by_kind["dead"]
    assert (dead["shard"], dead["src_offset"], dead["source"], dead["value"], dead["reason"]) == (
        0,
        1,
        "fetch-responses",
        '{"ts": 5',
        "invalid_json",
    )
    part = by_kind["controller"]
    assert (part["shard"], part["ts"], part["counted"], part["value"], part["source"]) == (
        12,
        900,
        True,
        election.decode(),
        "controller-events",
    )


def test_a_broker_that_is_down_gives_no_new_data_and_no_error(tmp_path: Path) -> None:
    with EmbeddedBroker() as down:  # a free port, nothing listening
        closed = down.bootstrap_servers
    status_file = tmp_path / "checkpoint" / "source-status.json"
    reader = reader_for(
        {
            "kafka.bootstrap.servers": closed,
            "subscribe": "t",
            "retryBackoffMs": "10",
            "retryBackoffMaxMs": "25",
            "kafkaOptions": json.dumps({"request_timeout_ms": 500, "bootstrap_timeout_ms": 200}),
            "statusFile": str(status_file),
        }
    )
    waits: list[float] = []
    reader._sleep = waits.append
    start = {"t:0": 5, "t:1": 7}
    began = time.monotonic()
    try:
        for _ in range(3):
            assert reader.latestOffset(start, ReadAllAvailable()) == start
    finally:
        reader.stop()
    assert time.monotonic() - began < 10
    assert reader.consecutive_failures == 3
    assert reader.last_error is not None
    assert waits == [0.01, 0.02, 0.025]
    # Reported where the driver's exporter can read it (the reader's process is not the
    # driver's).
    status = json.loads(status_file.read_text())
    assert (status["consecutive_failures"], status["failures_total"]) == (3, 3)
    assert status["last_success_at"] is None
    assert status["last_error"] == reader.last_error


def test_the_reader_recovers_when_the_broker_comes_back(tmp_path: Path) -> None:
    with EmbeddedBroker() as own:
        own.start()
        own.create_topics(["t"])
        produce(own, [("t", 0, None, b"x") for _ in range(5)])
        reader = reader_for(
            {
                **options(own, ["t"]),
                "retryBackoffMs": "10",
                "kafkaOptions": json.dumps(
                    {"request_timeout_ms": 1000, "bootstrap_timeout_ms": 500}
                ),
            }
        )
        reader._sleep = lambda seconds: None
        try:
            start = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
            assert start == {"t:0": 5}
            own.stop()
            assert reader.latestOffset(start, ReadAllAvailable()) == start
            assert reader.consecutive_failures == 1
            # The broker comes back, empty (memory storage): the topic is re-created, so the
            # offsets went back and the reader starts over from the beginning.
            own.start()
            own.create_topics(["t"])
            sent = produce(own, [("t", 0, None, b"again") for _ in range(2)])
            deadline = time.monotonic() + 20
            restarted = reader.latestOffset(start, ReadAllAvailable())
            while restarted == start and time.monotonic() < deadline:
                restarted = reader.latestOffset(start, ReadAllAvailable())
            assert restarted == {"t:0": 0}
            assert reader.consecutive_failures == 0
            assert reader.last_error is None
            end = reader.latestOffset(restarted, ReadAllAvailable())
            assert end == {"t:0": 2}
            assert read_all(reader, restarted, end) == sent
        finally:
            reader.stop()


def test_a_poll_of_large_records_is_read_in_batches_within_the_byte_budget(
    broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = unique("large")
    broker.create_topics([topic])
    values = [bytes([65 + i % 26]) * (100 + i) for i in range(20)]  # 100 to 119 bytes
    sent = produce(broker, [(topic, 0, None, value) for value in values], linger_ms=500)
    monkeypatch.setattr(partition_reader, "READ_BATCH_BYTES", 250)
    settings = SourceSettings.from_options(options(broker, [topic]))
    batches = list(read_partition(settings, KafkaInputPartition(topic, 0, 0, 20)))
    read = [value for batch in batches for value in batch.column("value").to_pylist()]
    assert read == values  # every record once, in order
    offsets = [offset for batch in batches for offset in batch.column("offset").to_pylist()]
    assert offsets == [row[2] for row in sent] == list(range(20))
    # 100 to 119 bytes a value, at most 250 a batch: two records a batch (three would be
    # more than 300), so at least ten batches, however the polls fell
    sizes = [sum(map(len, batch.column("value").to_pylist())) for batch in batches]
    assert all(size <= 250 for size in sizes), sizes
    assert len(batches) >= 10


def test_a_read_that_makes_no_progress_raises(broker: EmbeddedBroker) -> None:
    topic = unique("stuck")
    broker.create_topics([topic])
    produce(broker, [(topic, 0, None, b"x") for _ in range(3)])
    settings = SourceSettings.from_options(options(broker, [topic], readTimeoutMs="1000"))
    batches: Iterator[Any] = read_partition(settings, KafkaInputPartition(topic, 0, 0, 10))
    began = time.monotonic()
    with pytest.raises(RuntimeError, match="no progress at offset 3"):
        for _ in batches:
            pass
    assert time.monotonic() - began < 15


# --------------------------------------------------------------------------- options


def test_options_from_the_configuration() -> None:
    config = load_config(
        None,
        {
            "kafka.bootstrap_servers": "b1:9093,b2:9093",
            "kafka.security_protocol": "SASL_SSL",
            "kafka.sasl_mechanism": "SCRAM-SHA-512",
            "kafka.sasl_username": "isrwatch",
            "kafka.sasl_password": "s3cret-pw",
            "kafka.ssl_cafile": "/etc/ca.pem",
            "kafka.starting_offsets": "earliest",
            "kafka.max_events_per_partition_per_batch": 500,
            "kafka.retry_backoff_ms": 200,
            "kafka.retry_backoff_max_ms": 4000,
        },
        environ={},
    )
    made = kafka_source_options(config, ["controller-events", "fetch-responses"])
    assert {k: v for k, v in made.items() if k != "kafkaOptions"} == {
        "kafka.bootstrap.servers": "b1:9093,b2:9093",
        "subscribe": "controller-events,fetch-responses",
        "startingOffsets": "earliest",
        "maxEventsPerPartition": "500",
        "retryBackoffMs": "200",
        "retryBackoffMaxMs": "4000",
    }
    client = json.loads(made["kafkaOptions"])
    assert "bootstrap_servers" not in client
    assert client["sasl_plain_password"] == "s3cret-pw"
    assert client["security_protocol"] == "SASL_SSL"
    assert client["ssl_cafile"] == "/etc/ca.pem"

    settings = SourceSettings.from_options(made)
    assert settings.bootstrap_servers == ("b1:9093", "b2:9093")
    assert settings.topics == ("controller-events", "fetch-responses")
    assert settings.max_events_per_partition == 500
    assert (settings.retry_backoff_ms, settings.retry_backoff_max_ms) == (200, 4000)
    assert "s3cret" not in repr(settings)
    assert "s3cret" not in json.dumps(redacted_options(made))
    assert settings.route_shards is None
    assert settings.max_offsets_per_trigger is None
    limited = load_config(None, {"kafka.max_records_per_batch": 250_000}, environ={})
    made = kafka_source_options(limited, ["fetch-responses"])
    assert made["maxOffsetsPerTrigger"] == "250000"
    assert SourceSettings.from_options(made).max_offsets_per_trigger == 250_000

    sources = {
        "controller-events": Source.CONTROLLER_EVENTS,
        "fetch-responses": Source.FETCH_RESPONSES,
    }
    routed = kafka_source_options(config, ["controller-events", "fetch-responses"], route=sources)
    assert json.loads(routed["routeToShards"]) == {
        "shards": 64,  # streaming.state_shards' default
        "sources": {"controller-events": "controller-events", "fetch-responses": "fetch-responses"},
    }
    routing = SourceSettings.from_options(routed)
    assert (routing.route_shards, dict(routing.route_sources)) == (64, sources)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"subscribe": ""}, "subscribe"),
        ({"startingOffsets": "middle"}, "startingOffsets"),
        ({"maxEventsPerPartition": "0"}, "maxEventsPerPartition"),
        ({"maxOffsetsPerTrigger": "-5"}, "maxOffsetsPerTrigger"),
        ({"kafkaOptions": "{not json"}, "kafkaOptions"),
        ({"kafkaOptions": '{"bootstrap_servers": ["x:1"]}'}, "bootstrap_servers"),
        ({"kafkaOptions": '{"no_such_setting": 1}'}, "no_such_setting"),
        ({"retryBackoffMs": "100", "retryBackoffMaxMs": "10"}, "retryBackoffMaxMs"),
        ({"routeToShards": "{not json"}, "routeToShards"),
        ({"routeToShards": '{"shards": 0, "sources": {"t": "fetch-responses"}}'}, "routeToShards"),
        ({"routeToShards": '{"shards": 4, "sources": {"u": "fetch-responses"}}'}, "routeToShards"),
        ({"routeToShards": '{"shards": 4, "sources": {"t": "no-such-source"}}'}, "routeToShards"),
    ],
)
def test_bad_options_are_named(bad: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SourceSettings.from_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t", **bad})
