"""/metrics renders the unhealthy partitions' series once per batch (streaming.job.rendered_series)
and serves the same samples as the exporter's registry, in both exposition formats."""

from __future__ import annotations

import gzip
import socket
from collections.abc import Iterable
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from streaming.job.exporter_http import ExporterServer
from streaming.job.metrics import HealthExporter
from streaming.tools.embedded_broker import free_port
from tests.unit.test_metrics import shard_stats, unhealthy_record

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
# gauges of the wall clock at the scrape: they differ between two renderings
CLOCKED = {"isrwatch_seconds_since_last_batch", "isrwatch_event_time_lag_seconds"}
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(exporter: HealthExporter, accept: str = "", encoding: str = "") -> tuple[str, bytes]:
    answer: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        answer.update(status=status, headers=dict(headers))

    body = b"".join(
        ExporterServer(exporter).exposition(
            {"HTTP_ACCEPT": accept, "HTTP_ACCEPT_ENCODING": encoding}, start_response
        )
    )
    assert answer["status"] == "200 OK"
    return answer["headers"].get("Content-Encoding", ""), body


def samples(families: Iterable[Any]) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in families
        for s in family.samples
        if s.name not in CLOCKED
    }


def exporter_with(partitions: list[int]) -> HealthExporter:
    exporter = HealthExporter()
    exporter.record_batch(
        [shard_stats(0, unhealthy=[unhealthy_record(p) for p in partitions])], {}, 0.5
    )
    return exporter


def test_served_samples_are_the_registrys_in_text_format() -> None:
    exporter = exporter_with([0, 1])
    _, body = scrape(exporter)
    # ISR-change counters show a new series at 0 for one scrape: render the registry
    # first for both to see the counts
    served = samples(text_string_to_metric_families(body.decode()))
    registry = samples(text_string_to_metric_families(generate_latest(exporter.registry).decode()))
    assert served.keys() == registry.keys()
    assert {k: v for k, v in served.items() if k[0] != "isrwatch_isr_changes_total"} == {
        k: v for k, v in registry.items() if k[0] != "isrwatch_isr_changes_total"
    }
    # the per-partition series are there: 2 partitions, one lagging follower each
    assert (
        served[
            (
                "isrwatch_follower_status",
                (
                    ("broker", "3"),
                    ("leader", "1"),
                    ("partition", "1"),
                    ("status", "SHRINK_ELIGIBLE"),
                    ("topic", "orders"),
                ),
            )
        ]
        == 1.0
    )


def test_the_unhealthy_series_are_rendered_once_per_batch() -> None:
    exporter = exporter_with([0, 1])
    rendered = exporter.unhealthy_rendered
    for _ in range(5):
        scrape(exporter)
    assert rendered.renderings == 1
    exporter.record_batch([shard_stats(0, unhealthy=[unhealthy_record(7)])], {}, 0.5)
    _, body = scrape(exporter)
    scrape(exporter)
    assert rendered.renderings == 2
    partitions = {
        s.labels["partition"]
        for f in text_string_to_metric_families(body.decode())
        if f.name == "isrwatch_partition_high_watermark"
        for s in f.samples
    }
    assert partitions == {"7"}  # the new batch's, not the cached ones of the batch before


def test_openmetrics_has_one_eof_at_the_end_and_the_same_samples() -> None:
    exporter = exporter_with([0, 1, 2])
    _, body = scrape(exporter, OPENMETRICS)
    text = body.decode()
    assert text.endswith("# EOF\n")
    assert text.count("# EOF") == 1
    parsed = samples(openmetrics_families(text))  # type: ignore[no-untyped-call]
    assert len([k for k in parsed if k[0] == "isrwatch_partition_leader_leo"]) == 3


def test_a_gzip_answer_reads_as_the_plain_one() -> None:
    exporter = exporter_with([0, 1])
    _, plain = scrape(exporter)
    encoding, packed = scrape(exporter, encoding="gzip, deflate")
    assert encoding == "gzip"
    unpacked = gzip.decompress(packed)  # both gzip members, one after the other
    text = samples(text_string_to_metric_families(unpacked.decode()))
    assert text.keys() == samples(text_string_to_metric_families(plain.decode())).keys()
    assert exporter.unhealthy_rendered.renderings == 1  # compressed from the same bytes


def test_the_server_queues_a_burst_of_scrapes() -> None:
    # 20 scrapers at once overflowed socketserver's default backlog of 5
    server = ExporterServer(exporter_with([0]))
    server.serve("127.0.0.1", free_port())
    try:
        assert server._server is not None
        assert server._server.request_queue_size == 128
        port = server._server.server_address[1]
        sockets = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(40)]
        for connection in sockets:
            connection.close()
    finally:
        server.close()
