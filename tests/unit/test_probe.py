"""``isrwatch probe``: the exec probes judge the streaming query by the job's exporter."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client import start_http_server

from streaming.cli import main
from streaming.job.metrics import HealthExporter
from streaming.tools.embedded_broker import free_port
from streaming.tools.probe import (
    Check,
    ExporterReading,
    ProbeError,
    assess,
    probe_command,
    read_exposition,
)
from tests.unit.test_metrics import shard_stats

HEALTHY = """\
# HELP isrwatch_seconds_since_last_batch Wall time since the last micro-batch ended
# TYPE isrwatch_seconds_since_last_batch gauge
isrwatch_seconds_since_last_batch 4.5
# HELP isrwatch_batch_duration_seconds Wall time of one micro-batch, sinks included
# TYPE isrwatch_batch_duration_seconds histogram
isrwatch_batch_duration_seconds_bucket{le="1.0"} 3.0
isrwatch_batch_duration_seconds_bucket{le="+Inf"} 7.0
isrwatch_batch_duration_seconds_count 7.0
isrwatch_batch_duration_seconds_sum 9.5
# HELP isrwatch_source_up 1 if the Kafka source's last offset request was answered
# TYPE isrwatch_source_up gauge
isrwatch_source_up 1.0
"""


def exposition(since: float, batches: float | None, source_up: float | None) -> str:
    lines = [
        "# TYPE isrwatch_seconds_since_last_batch gauge",
        f"isrwatch_seconds_since_last_batch {since}",
    ]
    if batches is not None:
        lines += [
            "# TYPE isrwatch_batch_duration_seconds histogram",
            f'isrwatch_batch_duration_seconds_bucket{{le="+Inf"}} {batches}',
            f"isrwatch_batch_duration_seconds_count {batches}",
            "isrwatch_batch_duration_seconds_sum 1.0",
        ]
    if source_up is not None:
        lines += ["# TYPE isrwatch_source_up gauge", f"isrwatch_source_up {source_up}"]
    return "\n".join(lines) + "\n"


class TextServer:
    """A real HTTP server on loopback that answers /metrics with the text it holds."""

    def __init__(self) -> None:
        self.text = ""
        self.status = 200
        holder = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = holder.text.encode()
                self.send_response(holder.status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/metrics"


@pytest.fixture
def text_server() -> Iterator[TextServer]:
    server = TextServer()
    server.thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


def probe(url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(probe_command, ["--url", url, *args])
    return result.exit_code, result.output


# ---------------------------------------------------------------- reading and judging


def test_reads_the_three_series_it_judges_by() -> None:
    assert read_exposition(HEALTHY) == ExporterReading(
        seconds_since_last_batch=4.5, batches_completed=7.0, source_up=1.0
    )


def test_a_missing_series_reads_as_none() -> None:
    text = '# TYPE isrwatch_partitions gauge\nisrwatch_partitions{topic="a"} 3\n'
    assert read_exposition(text) == ExporterReading(None, None, None)


def test_text_that_is_not_an_exposition_is_a_probe_error() -> None:
    with pytest.raises(ProbeError, match="not Prometheus text"):
        read_exposition("isrwatch_seconds_since_last_batch not-a-number\n")


@pytest.mark.parametrize(
    ("reading", "check", "expected"),
    [
        (ExporterReading(4.5, 7, 1), Check.LIVE, []),
        (ExporterReading(4.5, 7, 1), Check.READY, []),
        # Liveness needs no completed batch nor source: a long first batch is not a hang.
        (ExporterReading(4.5, 0, None), Check.LIVE, []),
        (ExporterReading(61, 7, 1), Check.LIVE, ["no micro-batch ended for 61 s"]),
        (ExporterReading(60, 7, 1), Check.LIVE, []),  # at the age, not past it
        # Kafka away: no batch can end and a restart cannot help; readiness tells it.
        (ExporterReading(61, 7, 0), Check.LIVE, []),
        (ExporterReading(61, 7, None), Check.LIVE, ["no micro-batch ended for 61 s"]),
        (ExporterReading(61, 7, 1), Check.READY, ["no micro-batch ended for 61 s"]),
        (ExporterReading(None, 7, 1), Check.LIVE, ["not an isrwatch job"]),
        (ExporterReading(4.5, 0, 1), Check.READY, ["no micro-batch has completed"]),
        (ExporterReading(4.5, None, 1), Check.READY, ["no micro-batch has completed"]),
        (ExporterReading(4.5, 7, 0), Check.READY, ["the Kafka source is down"]),
        (ExporterReading(4.5, 7, None), Check.READY, ["isrwatch_source_up missing"]),
        (
            ExporterReading(61, 0, 0),
            Check.READY,
            ["no micro-batch ended", "no micro-batch has completed", "source is down"],
        ),
    ],
)
def test_assess(reading: ExporterReading, check: Check, expected: list[str]) -> None:
    problems = assess(reading, check, max_batch_age_s=60, require_source=True)
    assert len(problems) == len(expected), problems
    for problem, fragment in zip(problems, expected, strict=True):
        assert fragment in problem


def test_ready_without_the_source_requirement_ignores_it() -> None:
    assert assess(ExporterReading(4.5, 7, None), Check.READY, 60, require_source=False) == []
    assert assess(ExporterReading(4.5, 7, 0), Check.READY, 60, require_source=False) == []


# ---------------------------------------------------------------- the command, over HTTP


def test_healthy_job_passes_both_checks(text_server: TextServer) -> None:
    text_server.text = HEALTHY
    code, output = probe(text_server.url, "--check", "live")
    assert (code, output) == (0, "live: ok: last micro-batch ended 4.5 s ago\n")
    code, output = probe(text_server.url, "--check", "ready")
    assert code == 0
    assert output == (
        "ready: ok: last micro-batch ended 4.5 s ago, micro-batches completed: 7, Kafka source up\n"
    )


def test_stuck_query_fails_liveness_with_the_reason(text_server: TextServer) -> None:
    text_server.text = exposition(since=900, batches=40, source_up=1)
    code, output = probe(text_server.url, "--check", "live", "--max-batch-age", "600")
    assert code == 1
    assert output.startswith("live: FAIL: no micro-batch ended for 900 s (more than 600 s)")
    code, _ = probe(text_server.url, "--check", "live", "--max-batch-age", "1000")
    assert code == 0


def test_source_down_fails_readiness_but_not_liveness(text_server: TextServer) -> None:
    text_server.text = exposition(since=2, batches=40, source_up=0)
    assert probe(text_server.url, "--check", "live")[0] == 0
    code, output = probe(text_server.url, "--check", "ready")
    assert code == 1
    assert "the Kafka source is down" in output
    assert probe(text_server.url, "--check", "ready", "--no-require-source")[0] == 0


def test_exporter_answering_an_error_status_fails(text_server: TextServer) -> None:
    text_server.text, text_server.status = "oops", 500
    code, output = probe(text_server.url, "--check", "live")
    assert code == 1
    assert "does not answer" in output


def test_exporter_not_listening_fails() -> None:
    port = free_port()  # nothing listens on it
    code, output = probe(f"http://127.0.0.1:{port}/metrics", "--check", "live")
    assert code == 1
    assert output.startswith(f"live: FAIL: the exporter at http://127.0.0.1:{port}/metrics")


# ---------------------------------------------------------------- against the real exporter


def test_probe_reads_the_real_exporter(tmp_path: Path) -> None:
    status_file = tmp_path / "source-status.json"
    exporter = HealthExporter(source_status=status_file)
    server, _ = start_http_server(0, addr="127.0.0.1", registry=exporter.registry)
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    try:
        assert probe(url, "--check", "live")[0] == 0
        code, output = probe(url, "--check", "ready")
        assert code == 1
        assert "no micro-batch has completed" in output
        assert "isrwatch_source_up missing" in output

        exporter.record_batch([shard_stats(0)], {}, duration_s=0.5)
        status_file.write_text(json.dumps({"consecutive_failures": 0, "failures_total": 0}))
        code, output = probe(url, "--check", "ready")
        assert (code, "micro-batches completed: 1, Kafka source up" in output) == (0, True)

        status_file.write_text(json.dumps({"consecutive_failures": 3, "failures_total": 3}))
        code, output = probe(url, "--check", "ready")
        assert code == 1
        assert "the Kafka source is down" in output
    finally:
        server.shutdown()
        server.server_close()


def test_probe_is_a_command_of_the_isrwatch_cli() -> None:
    result = CliRunner().invoke(main, ["probe", "--help"])
    assert result.exit_code == 0
    assert "--check [live|ready]" in result.output
