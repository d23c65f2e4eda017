"""``collect logs`` says how much of its input it understands: lines read, lines
recognised and one line it did not recognise, in its log within the first
``collect.logs.summary_after_lines`` lines, at the end of ``--dry-run``, and as metrics.

The lines are real ones from the corpus (tests/unit/data/kafka_logs/corpus); the counts
are written by hand from them.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from streaming.cli import main
from streaming.config import LogCollectorSettings
from streaming.feeds.collectors.log_collector import LogCollector
from streaming.feeds.collectors.metrics import CollectorMetrics
from tests.log_corpus import CORPUS_DIR

STRIMZI_LAYOUT = (
    r"(?P<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) (?P<level>[A-Z]+)\s+\[(?P<thread>[^\]]*)\]"
    r" (?P<logger>[\w$.]+):\d+ - (?P<message>.*)"
)


def corpus_lines(tmp_path: Path, name: str) -> Path:
    lines = json.loads((CORPUS_DIR / f"{name}.json").read_text(encoding="utf-8"))["lines"]
    path = tmp_path / f"{name}.log"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


class Nothing:
    def publish(self, events: object) -> None:
        pass

    def close(self) -> None:
        pass


def run(path: Path, **settings: object) -> tuple[LogCollector, CollectorRegistry]:
    registry = CollectorRegistry()
    collector = LogCollector(
        [str(path)],
        LogCollectorSettings(**settings),
        Nothing(),
        CollectorMetrics("logs", registry),
        None,
    )
    collector.run(follow=False, stop=threading.Event())
    return collector, registry


def test_an_unknown_layout_is_reported_within_the_first_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Strimzi issue 11613: a custom log4j2 pattern (level after the time, no brackets)."""
    path = corpus_lines(tmp_path, "strimzi-11613-kafka-4.0-custom-layout")
    with caplog.at_level(logging.INFO, logger="isrwatch.collect.logs"):
        _, registry = run(path, summary_after_lines=3)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # once, after 3 of the 5 lines
    assert "the layout of this log is not understood" in warnings[0]
    expected = (
        "3 lines read, 0 recognised, 0 with a record; 3 not recognised, e.g. '2025-07-03"
        " 10:52:41 INFO  [broker-1-to-controller-forwarding-channel-manager] NetworkClient"
    )
    assert expected in warnings[0]
    labels = {"file": str(path)}
    assert registry.get_sample_value("isrwatch_collect_log_lines_read_total", labels) == 5
    assert registry.get_sample_value("isrwatch_collect_log_lines_unrecognised_total", labels) == 5
    assert registry.get_sample_value("isrwatch_collect_log_lines_recognised_total", labels) is None


def test_the_same_lines_with_their_layout_configured(tmp_path: Path) -> None:
    path = corpus_lines(tmp_path, "strimzi-11613-kafka-4.0-custom-layout")
    collector, registry = run(path, layout=STRIMZI_LAYOUT)
    assert collector.report_all() == [f"{path}: 5 lines read, 5 recognised, 0 with a record"]
    labels = {"file": str(path)}
    assert registry.get_sample_value("isrwatch_collect_log_lines_recognised_total", labels) == 5


def test_stack_traces_count_as_recognised_after_an_entry_only(tmp_path: Path) -> None:
    """librdkafka issue 923: the first line lost its header in the paste; KAFKA-7165: a
    stack trace after an entry, and one line with '*INFO'."""
    cut = corpus_lines(tmp_path, "librdkafka-923-kafka-0.10-controlled-shutdown")
    jira = corpus_lines(tmp_path, "jira-KAFKA-7165-kafka-1.1-anonymised")
    collector, _ = run(cut)
    run_jira, _ = run(jira)
    # line 1: a continuation with nothing above it; line 2: '^C[2016-...' is the broker's
    # entry after the terminal's '^C', read as a nested entry
    assert collector.report_all() == [
        f"{cut}: 3 lines read, 2 recognised, 0 with a record; 1 not recognised, e.g."
        " 'on broker 1: No checkpointed highwatermark is found for partition [vCPE_EVENTS,0]"
        " (kafka.cluster.Partition)'"
    ]
    # 16 lines; ' [2018-07-14 04:38:26,496] *INFO Creating ...' is the one not recognised;
    # the anonymised Partition lines ("...-# broker=1|#* broker=1]") are malformed: no record
    assert run_jira.report_all() == [
        f"{jira}: 16 lines read, 15 recognised, 0 with a record; 1 not recognised, e.g."
        " ' [2018-07-14 04:38:26,496] *INFO Creating /brokers/ids/1* (is it secure? false)"
        " (kafka.zk.KafkaZkClient)'"
    ]


def test_dry_run_ends_with_the_summary(tmp_path: Path) -> None:
    """confluent-kafka-dotnet issue 1460: docker compose output, every line read."""
    path = corpus_lines(tmp_path, "confluent-kafka-dotnet-1460-kafka-2.6-docker-compose")
    result = CliRunner().invoke(main, ["collect", "logs", "--dry-run", str(path)])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["value"]["type"] for line in result.stdout.splitlines()] == [
        "TopicChange"
    ]
    assert result.stderr.splitlines()[-1] == (
        f"summary: {path}: 8 lines read, 8 recognised, 1 with a record"
    )


def test_custom_layout_from_the_command_line(tmp_path: Path) -> None:
    path = corpus_lines(tmp_path, "strimzi-11613-kafka-4.0-custom-layout")
    result = CliRunner().invoke(
        main,
        [
            "collect",
            "logs",
            "--dry-run",
            "--set",
            f"collect.logs.layout={STRIMZI_LAYOUT}",
            str(path),
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[-1] == (
        f"summary: {path}: 5 lines read, 5 recognised, 0 with a record"
    )


def test_a_bad_custom_layout_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    path = corpus_lines(tmp_path, "strimzi-11613-kafka-4.0-custom-layout")
    result = CliRunner().invoke(
        main,
        [
            "collect",
            "logs",
            "--dry-run",
            "--set",
            r"collect.logs.layout=(?P<time>\S+) (.*)",
            str(path),
        ],
    )
    assert result.exit_code == 1
    expected = (
        "collect.logs.layout must have the named groups (?P<time>...) and (?P<message>...);"
        " missing: message"
    )
    assert expected in result.output
