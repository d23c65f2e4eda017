"""streaming.job.kafka_source.share_out: a micro-batch's total read limit shared out over the
topic-partitions as Spark's Kafka source shares maxOffsetsPerTrigger (rateLimit)."""

from __future__ import annotations

import pytest

from streaming.job.kafka_source import share_out


def test_each_partition_gets_its_share_rounded_down_and_a_tiny_one_gets_one() -> None:
    start = {"t:0": 0, "t:1": 100, "t:2": 0}
    end = {"t:0": 600, "t:1": 400, "t:2": 1}  # 600 + 300 + 1 = 901 records to read
    # 90 x 600 / 901 = 59.9 -> 59; 90 x 300 / 901 = 29.97 -> 29; 90 x 1 / 901 = 0.1 -> 1
    assert share_out(start, end, 90) == {"t:0": 59, "t:1": 129, "t:2": 1}


@pytest.mark.parametrize("limit", [901, 902, 10_000])
def test_a_batch_within_the_limit_is_not_cut(limit: int) -> None:
    start = {"t:0": 0, "t:1": 100, "t:2": 0}
    end = {"t:0": 600, "t:1": 400, "t:2": 1}
    assert share_out(start, end, limit) == end


def test_partitions_with_nothing_to_read_keep_their_end() -> None:
    # t:1 is new (registered at its beginning), t:2 went back (topic re-created), t:3 idle
    start = {"t:0": 0, "t:2": 50, "t:3": 7}
    end = {"t:0": 100, "t:1": 0, "t:2": 0, "t:3": 7}
    # only t:0 reads: 10 x 100 / 100 = 10
    assert share_out(start, end, 10) == {"t:0": 10, "t:1": 0, "t:2": 0, "t:3": 7}


def test_a_limit_of_one_still_reads_one_record_of_every_partition() -> None:
    start = {"t:0": 0, "t:1": 0}
    end = {"t:0": 3, "t:1": 5}
    # 1 x 3 / 8 = 0.375 -> 1; 1 x 5 / 8 = 0.625 -> 1 (Spark's rule: no partition starves)
    assert share_out(start, end, 1) == {"t:0": 1, "t:1": 1}
