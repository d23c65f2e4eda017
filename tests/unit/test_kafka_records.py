"""Kafka records as routing reads them (``streaming.job.kafka_records``): each value stays
with its record's coordinates."""

from __future__ import annotations

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pytest

from streaming.job.kafka_records import KafkaRecords


def _batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "key": [b"1", None, b"3"],
            "value": [b"a", None, b"c"],
            "topic": ["fetch-responses", "controller-events", "fetch-responses"],
            "partition": pa.array([0, 1, 2], pa.int32()),
            "offset": [10, 11, 12],
        }
    )


def test_values_leave_the_columns_in_record_order() -> None:
    records = KafkaRecords.of_arrow(_batch())
    assert records.values == [b"a", None, b"c"]
    assert records.coordinates.column_names == ["key", "topic", "partition", "offset"]
    assert len(records) == 3


def test_a_filter_keeps_each_value_with_its_record() -> None:
    records = KafkaRecords.of_arrow(_batch()).filter(np.array([True, False, True]))
    assert records.values == [b"a", b"c"]
    assert records.coordinates.column("offset").to_pylist() == [10, 12]


def test_values_and_records_must_pair_up() -> None:
    with pytest.raises(ValueError, match="2 values for 3 Kafka records"):
        KafkaRecords(_batch().drop_columns(["value"]), [b"a", b"b"])
