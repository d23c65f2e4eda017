"""``collect logs`` into the embedded broker, and the streaming job on what it produced:
the job's health records equal ``replay`` of the same events."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from state import encode_record
from state.settings import RuleSettings
from streaming.config import IsrwatchConfig
from streaming.feeds.collectors.log_collector import LogCollector
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.publisher import KafkaPublisher
from streaming.job.metrics import HealthExporter
from streaming.job.query import run
from streaming.tools.embedded_broker import EmbeddedBroker
from streaming.tools.replay import replay
from tests.integration.kafka_topics import PublishedSpy, isolated_job_config

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / "unit" / "data" / "kafka_logs" / "zk"


@pytest.fixture
def job_config(broker: EmbeddedBroker, tmp_path: Path) -> IsrwatchConfig:
    state_file = {"collect.logs.state_file": str(tmp_path / "logs.json")}
    return isolated_job_config(broker, tmp_path, {"streaming.state_shards": 2, **state_file})


def test_collected_logs_drive_the_job_like_replay(
    job_config: IsrwatchConfig, tmp_path: Path
) -> None:
    paths = []
    for name in ("controller.log", "state-change.log", "server.log"):
        kept = [
            line
            for line in (DATA / name).read_text().splitlines(keepends=True)
            if "Deletion of topic" not in line and "Deleted partition" not in line
        ]
        paths.append(tmp_path / name)
        paths[-1].write_text("".join(kept))
    spy = PublishedSpy(KafkaPublisher(job_config))
    collector = LogCollector(
        [str(p) for p in paths],
        job_config.collect.logs,
        spy,
        CollectorMetrics("logs", CollectorRegistry()),
        Path(job_config.collect.logs.state_file),
    )
    collector.run(follow=False, stop=threading.Event())
    collector.close()
    assert len(spy.events) == 13

    health_out = tmp_path / "health.jsonl"
    run(job_config, available_now=True, health_out=health_out, exporter=HealthExporter())
    from_job: dict[str, dict[str, object]] = {}
    for record in map(json.loads, health_out.read_text().splitlines()):
        from_job[f"{record['topic']}:{record['partition']}"] = record

    capture = io.StringIO(
        "".join(
            json.dumps({"source": e.source.value, "value": dict(e.value)}) + "\n"
            for e in spy.events
        )
    )
    replayed = replay(capture, RuleSettings(), None)
    assert not replayed.dead_letters
    expected = {r.key: json.loads(encode_record(r)) for r in replayed.records}
    assert from_job == expected
    assert sorted(expected) == ["payments:0", "payments:1"]
    assert expected["payments:1"]["isr"] == [2, 1, 3]
