"""A read that Kafka stops answering marks the source down
(streaming.job.kafka_source.partition_reader.ReadStall, read by streaming.job.metrics): the
planner is not called while a batch is stuck reading, so
without it the exporter said the source was up through a whole outage (docs/faults.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from prometheus_client.core import Metric

from streaming.job.kafka_source import KafkaInputPartition, SourceSettings
from streaming.job.kafka_source.partition_reader import ReadStall, read_partition, read_status_dir
from streaming.job.metrics import HealthExporter
from streaming.tools.embedded_broker import free_port


def settings(status: Path, port: int) -> SourceSettings:
    return SourceSettings.from_options(
        {
            "kafka.bootstrap.servers": f"127.0.0.1:{port}",
            "subscribe": "t",
            "statusFile": str(status),
            "readTimeoutMs": "4000",
            "kafkaOptions": json.dumps({"request_timeout_ms": 2000}),
        }
    )


def source_samples(exporter: HealthExporter) -> dict[str, float]:
    families: list[Metric] = list(exporter.collect())
    return {
        sample.name: sample.value
        for family in families
        for sample in family.samples
        if sample.name.startswith("isrwatch_source_")
    }


def test_a_read_against_an_unreachable_broker_reports_its_partition_stalled(
    tmp_path: Path,
) -> None:
    status = tmp_path / "source-status.json"
    reading = read_partition(settings(status, free_port()), KafkaInputPartition("t", 2, 5, 9))
    with pytest.raises(RuntimeError, match="no progress at offset 5"):
        for _ in reading:
            pass
    report = json.loads((read_status_dir(status) / "t-2.json").read_text())
    assert report["stalled_since"] <= time.time()
    assert report["error"]


def test_a_stall_is_removed_once_the_read_progresses(tmp_path: Path) -> None:
    status = tmp_path / "source-status.json"
    stall = ReadStall(settings(status, 1), "t", 0)
    stall.report("Connection refused")
    assert [p.name for p in read_status_dir(status).iterdir()] == ["t-0.json"]
    stall.progressed()
    assert list(read_status_dir(status).iterdir()) == []


def test_the_exporter_says_down_while_a_read_is_stalled_since_the_planners_success(
    tmp_path: Path,
) -> None:
    status = tmp_path / "source-status.json"
    status.write_text(
        json.dumps({"consecutive_failures": 0, "failures_total": 0, "last_success_at": 1_000.0})
    )
    exporter = HealthExporter(source_status=status)
    assert source_samples(exporter)["isrwatch_source_up"] == 1
    reads = read_status_dir(status)
    reads.mkdir()
    (reads / "t-0.json").write_text(json.dumps({"stalled_since": 1_010.0, "error": "x"}))
    (reads / "t-1.json").write_text(json.dumps({"stalled_since": 1_020.0, "error": "x"}))
    (reads / "t-2.json").write_text(json.dumps({"stalled_since": 990.0, "error": "x"}))  # over
    got = source_samples(exporter)
    assert (got["isrwatch_source_up"], got["isrwatch_source_stalled_reads"]) == (0, 2)
    # the planner reaches Kafka after both stalls: they are over, the source is up
    status.write_text(json.dumps({"consecutive_failures": 0, "last_success_at": 1_030.0}))
    got = source_samples(exporter)
    assert (got["isrwatch_source_up"], got["isrwatch_source_stalled_reads"]) == (1, 0)
