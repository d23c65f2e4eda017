"""streaming.feeds.collectors.admin_wire: Metadata and ListOffsets as columns, on the bytes
Kafka 4.1.1 wrote (tests/unit/data/admin_answers, README there)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kafka.protocol.api_header import ResponseHeader
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.frame import KafkaBytes
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from streaming.feeds.collectors.admin_poller import PartitionInfo
from streaming.feeds.collectors.admin_source import _partitions
from streaming.feeds.collectors.admin_wire import (
    LatestOffsets,
    ListOffsetsLatest,
    MalformedAnswerError,
    MetadataOfAllTopics,
    RawRequest,
)
from streaming.feeds.collectors.polled_partitions import PolledPartitions

DATA = Path(__file__).parent / "data" / "admin_answers"
ANSWERS = sorted(DATA.glob("list-offsets-v10-*.bin"))
RECORDS = {
    ("orders", 0): 17,
    ("orders", 1): 17,
    ("orders", 2): 16,
    ("clicks", 0): 4,
    ("clicks", 1): 3,
}


def buffer(data: bytes) -> KafkaBytes:
    """An answer as kafka-python's parser hands it over."""
    held = KafkaBytes(len(data))
    held.write(data)
    held.seek(0)
    return held


def read(request: RawRequest, version: int, data: bytes) -> Any:
    """``data`` through the reader kafka-python's parser gets for ``request``: the
    header, then the body."""
    request.API_VERSION = version
    request.with_header(correlation_id=7, client_id="test")
    assert request.header is not None
    reader = request.header.get_response_class()
    held = buffer(data)
    reader.parse_header(held)  # the correlation id the poll had: kafka-python checks it
    return reader.decode(held)


def kafka_pythons(response: Any, version: int, data: bytes) -> Any:
    held = buffer(data)
    response[version].parse_header(held)
    return response[version].decode(held)


def test_metadata_reads_every_partition_in_order() -> None:
    answer = read(MetadataOfAllTopics(), 13, (DATA / "metadata-v13.bin").read_bytes())
    assert answer.controller_id == 3
    assert answer.error_code == 0
    assert answer.partitions.topics == ("clicks", "orders")
    assert dict(answer.partitions.items()) == {
        "clicks": {
            0: PartitionInfo(3, 0, (3, 1, 2), (3, 1, 2)),
            1: PartitionInfo(1, 0, (1, 2, 3), (1, 2, 3)),
        },
        "orders": {
            0: PartitionInfo(1, 0, (1, 2, 3), (1, 2, 3)),
            1: PartitionInfo(2, 0, (2, 3, 1), (2, 3, 1)),
            2: PartitionInfo(3, 0, (3, 1, 2), (3, 1, 2)),
        },
    }
    # rows sorted by topic, then partition (Kafka sent clicks 1 before 0, orders 1, 2, 0)
    assert answer.partitions.partition.tolist() == [0, 1, 0, 1, 2]


def test_metadata_reads_as_kafka_python_does() -> None:
    data = (DATA / "metadata-v13.bin").read_bytes()
    theirs = kafka_pythons(MetadataResponse, 13, data)
    ours = read(MetadataOfAllTopics(), 13, data)
    assert ours.partitions == PolledPartitions.of(_partitions(theirs.to_dict()["topics"]))
    assert ours.controller_id == theirs.controller_id
    assert ours.throttle_time_ms == theirs.throttle_time_ms


@pytest.mark.parametrize("path", ANSWERS, ids=[path.name for path in ANSWERS])
def test_list_offsets_reads_every_partition(path: Path) -> None:
    data = path.read_bytes()
    ours: LatestOffsets = read(
        ListOffsetsLatest(empty_table(), np.zeros(0, np.int64), -2), 10, data
    )
    read_back = [
        (ours.topics[t], p, e, o)
        for t, p, e, o in zip(
            ours.topic.tolist(),
            ours.partition.tolist(),
            ours.error.tolist(),
            ours.offset.tolist(),
            strict=True,
        )
    ]
    assert read_back  # each broker answered for one partition at least
    assert all(e == 0 and o == RECORDS[(t, p)] for t, p, e, o in read_back)
    theirs = kafka_pythons(ListOffsetsResponse, 10, data)
    assert read_back == [
        (topic.name, p.partition_index, p.error_code, p.offset)
        for topic in theirs.topics
        for p in topic.partitions
    ]


@pytest.mark.parametrize(
    "path", [DATA / "metadata-v13.bin", ANSWERS[-1]], ids=["metadata", "list-offsets"]
)
def test_an_answer_cut_short_is_refused(path: Path) -> None:
    data = path.read_bytes()
    request: RawRequest = (
        MetadataOfAllTopics()
        if "metadata" in path.name
        else ListOffsetsLatest(empty_table(), np.zeros(0, np.int64), -2)
    )
    version = 13 if "metadata" in path.name else 10
    header = len(ResponseHeader(correlation_id=7).encode(flexible=True))
    for end in range(header + 1, len(data) - 1, 7):
        with pytest.raises(MalformedAnswerError):
            read(request, version, data[:end])


def table() -> PolledPartitions:
    return PolledPartitions.of(
        {
            "clicks": {
                0: PartitionInfo(3, 0, (3, 1, 2), (3, 1, 2)),
                1: PartitionInfo(1, 0, (1, 2, 3), (1,)),
            },
            "orders": {
                0: PartitionInfo(1, 4, (1, 2, 3), (1, 2, 3)),
                1: PartitionInfo(2, 0, (2, 3, 1), (2, 3, 1)),
                2: PartitionInfo(3, 0, (3, 1, 2), (3, 1, 2)),
            },
        }
    )


def empty_table() -> PolledPartitions:
    return PolledPartitions.of({})


@pytest.mark.parametrize("version", [6, 9, 10])
def test_list_offsets_request_as_kafka_python_reads_it(version: int) -> None:
    request = ListOffsetsLatest(table(), np.array([0, 2, 4]), -2)  # clicks 0, orders 0 and 2
    request.API_VERSION = version
    request.with_header(correlation_id=11, client_id="isrwatch")
    framed = request.encode(header=True, framed=True)
    assert int.from_bytes(framed[:4], "big") == len(framed) - 4
    body = request.body(version)
    decoded = ListOffsetsRequest[version].decode(body)
    assert decoded.replica_id == -2
    assert decoded.isolation_level == 0
    assert [
        (t.name, [(p.partition_index, p.current_leader_epoch, p.timestamp) for p in t.partitions])
        for t in decoded.topics
    ] == [("clicks", [(0, -1, -1)]), ("orders", [(0, -1, -1), (2, -1, -1)])]
    assert framed.endswith(body)


@pytest.mark.parametrize("version", [12, 13])
def test_metadata_request_asks_for_every_topic(version: int) -> None:
    decoded = MetadataRequest[version].decode(MetadataOfAllTopics().body(version))
    assert decoded.topics is None
    assert decoded.allow_auto_topic_creation is False


def test_changed_rows_are_those_whose_leader_epoch_replicas_or_isr_differ() -> None:
    before = table()
    after = PolledPartitions.of(
        {
            "clicks": {
                0: PartitionInfo(3, 0, (3, 1, 2), (3, 1)),
                1: PartitionInfo(1, 0, (1, 2, 3), (1,)),
            },
            "orders": {
                0: PartitionInfo(1, 4, (1, 2, 3), (1, 2, 3)),
                1: PartitionInfo(2, 0, (2, 3, 1), (2, 1, 3)),  # the same ISR, in another order
                2: PartitionInfo(1, 1, (3, 1, 2), (3, 1, 2)),
            },
        }
    )
    assert after.same_partitions(before)
    assert after.changed_rows(before).tolist() == [0, 3, 4]
    assert after != before
    assert table() == before


CONFIGS = sorted(DATA.glob("describe-configs-v4-*.bin"))


def test_config_values_read_as_kafka_python_reads_them() -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResourceType
    from kafka.protocol.admin import DescribeConfigsResponse

    from streaming.feeds.collectors.admin_source import _config_entries, _config_values

    answers = [kafka_pythons(DescribeConfigsResponse, 4, path.read_bytes()) for path in CONFIGS]
    theirs = KafkaAdminClient._describe_configs_process_responses(answers, "all")
    topics = _config_entries(answers, ConfigResourceType.TOPIC)
    brokers = _config_entries(answers, ConfigResourceType.BROKER)
    assert _config_values(topics, "min.insync.replicas") == {"orders": 1, "clicks": 1}
    assert _config_values(brokers, "replica.lag.time.max.ms") == {
        "1": 10000,
        "2": 10000,
        "3": 10000,
    }
    assert _config_values(brokers, "controller.quorum.fetch.timeout.ms") == {
        "1": 2000,
        "2": 2000,
        "3": 2000,
    }
    for kind, found in (("topic", topics), ("broker", brokers)):
        for name in ("min.insync.replicas", "replica.lag.time.max.ms"):
            assert _config_values(found, name) == _config_values(theirs.get(kind, {}), name)


@pytest.mark.parametrize("path", ANSWERS, ids=[path.name for path in ANSWERS])
def test_kafka_pythons_answer_gives_the_same_columns(path: Path) -> None:
    """A cluster without ListOffsets 6 is asked with kafka-python's classes: its decoded
    answer, as columns (``_latest_of``), lands on the same rows with the same offsets."""
    from streaming.feeds.collectors.admin_source import _answered_rows, _latest_of, _row_keys

    data = path.read_bytes()
    ours = read(ListOffsetsLatest(empty_table(), np.zeros(0, np.int64), -2), 10, data)
    theirs = _latest_of(kafka_pythons(ListOffsetsResponse, 10, data))
    polled = table()
    keys = _row_keys(polled)
    rows, offsets = _answered_rows(polled, keys, ours)
    assert [rows.tolist(), offsets.tolist()] == [
        part.tolist() for part in _answered_rows(polled, keys, theirs)
    ]
    topic = polled.topic_of_row()
    assert {
        (polled.topics[topic[row]], int(polled.partition[row])): offset
        for row, offset in zip(rows.tolist(), offsets.tolist(), strict=True)
    } == {
        tp: RECORDS[tp]
        for tp in zip(
            [ours.topics[t] for t in ours.topic.tolist()], ours.partition.tolist(), strict=True
        )
    }
