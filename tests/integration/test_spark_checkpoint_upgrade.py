"""An upgrade as production does it: the job of the working tree restarts on a whole Spark
checkpoint directory that the previous release's job wrote (offsets, commits, metadata,
RocksDB state, the layout file), reads the rest of the input, and ends where an
uninterrupted run ends: nothing lost, nothing counted twice.

The fixture (tests/integration/data/checkpoints/<commit>/, its README) is what that
release's ``run`` wrote over the first part of a simulator capture, with the health
records it wrote then (which the compacted partition-health topic would still hold).
The input is produced again as that release read it (the same keys, so the same
partitions and offsets: the test checks that against the fixture's manifest), followed
by the rest of the capture.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from kafka import KafkaProducer

from state.health_record import encode_record
from state.settings import RuleSettings
from streaming.config import IsrwatchConfig, load_config
from streaming.job.metrics import HealthExporter
from streaming.job.query import run
from streaming.job.shard_state import STATS
from streaming.tools.embedded_broker import EmbeddedBroker
from streaming.tools.replay import replay
from tests.integration.kafka_topics import last_per_key

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parent / "data" / "checkpoints"
RELEASES = ["da501a2", "d402ec7"]
"""The fixtures, oldest first: da501a2 (PySpark 4.3.0, state format 1, routed-v3) and
d402ec7 (the release before the job read fetch packs: state format 2, routed-v3)."""
CAPTURE = Path(__file__).resolve().parents[1] / "unit" / "data" / "checkpoints" / "routed-v1"


def capture() -> list[dict[str, Any]]:
    with gzip.open(CAPTURE / "capture.jsonl.gz", "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def produce(
    bootstrap_servers: str, topics: dict[str, str], envelopes: list[dict[str, Any]]
) -> Counter[str]:
    """Each envelope to its topic keyed by ``topic:partition``, as the fixture's writer
    produced them; the records per ``topic:partition`` the broker acknowledged."""
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=20)
    sent = []
    for envelope in envelopes:
        value = envelope["value"]
        key = f"{value['topic']}:{value.get('partition')}" if "topic" in value else "0"
        sent.append(
            producer.send(
                topics[envelope["source"]], key=key.encode(), value=json.dumps(value).encode()
            )
        )
    producer.flush()
    producer.close()
    return Counter(f"{m.topic}:{m.partition}" for m in (future.get() for future in sent))


class ShardStats:
    """The statistics rows of every batch the job wrote."""

    def __init__(self) -> None:
        self.last: dict[int, dict[str, Any]] = {}
        self.batch_ids: list[int] = []

    def __call__(self, batch_id: int, rows: pd.DataFrame) -> None:
        self.batch_ids.append(batch_id)
        for value in rows[rows["kind"] == STATS]["value"]:
            stats = json.loads(value)
            self.last[stats["shard"]] = stats


def job_config(
    manifest: dict[str, Any], bootstrap_servers: str, checkpoint: Path
) -> IsrwatchConfig:
    """The settings the fixture's job ran with (those its checkpoint binds)."""
    topics = manifest["topics"]
    return load_config(
        None,
        {
            "topics.controller_events": topics["controller-events"],
            "topics.fetch_responses": topics["fetch-responses"],
            "topics.partition_health": topics["partition-health"],
            "topics.dead_letters": topics["dead-letters"],
            "kafka.bootstrap_servers": bootstrap_servers,
            "kafka.source_format": manifest["source_format"],
            "streaming.checkpoint_location": str(checkpoint),
            "streaming.state_store": manifest["state_store"],
            "streaming.trigger_interval_ms": 500,
            "streaming.state_shards": manifest["shards"],
            "metrics.enabled": False,
        },
        environ={},
    )


def health_lines(path: Path) -> list[tuple[str, str | None]]:
    return [
        (f"{r['topic']}:{r['partition']}", json.dumps(r))
        for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())
    ]


@pytest.fixture
def own_broker() -> Iterator[EmbeddedBroker]:
    """A broker of the test's own: each fixture's checkpoint names the same topics, and
    its offsets hold only if they start empty."""
    with EmbeddedBroker() as running:
        running.start()
        yield running


@pytest.mark.parametrize("release", RELEASES)
def test_the_job_resumes_the_previous_releases_checkpoint_and_ends_as_an_uninterrupted_run(
    own_broker: EmbeddedBroker, tmp_path: Path, release: str
) -> None:
    broker = own_broker
    previous_release = DATA / release
    manifest = json.loads((previous_release / "manifest.json").read_text(encoding="utf-8"))
    topics: dict[str, str] = manifest["topics"]
    broker.create_topics([topics["controller-events"]], partitions=1)
    broker.create_topics([topics["fetch-responses"]], partitions=2)
    broker.create_topics([topics["partition-health"], topics["dead-letters"]])
    envelopes = capture()
    first_part = manifest["first_part"]
    before = produce(broker.bootstrap_servers, topics, envelopes[:first_part])
    # the checkpoint's offsets point at the same records as when it was written
    assert dict(before) == manifest["records_per_partition"]
    produce(broker.bootstrap_servers, topics, envelopes[first_part:])

    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(previous_release / "checkpoint", checkpoint)
    config = job_config(manifest, broker.bootstrap_servers, checkpoint)
    health_out = tmp_path / "health.jsonl"
    stats = ShardStats()
    run(
        config, available_now=True, health_out=health_out, exporter=HealthExporter(), on_batch=stats
    )

    # It resumed after the last batch the previous release committed (a run that ignored
    # the checkpoint would start again at batch 0).
    committed = max(
        int(p.name) for p in (previous_release / "checkpoint" / "commits").glob("[0-9]*")
    )
    assert stats.batch_ids
    assert min(stats.batch_ids) == committed + 1

    # Health: what the previous release wrote, then what this one wrote, as compaction
    # keeps them, is what replay gives for the whole capture.
    written = health_lines(previous_release / "health-written.jsonl") + health_lines(health_out)
    with gzip.open(CAPTURE / "capture.jsonl.gz", "rt", encoding="utf-8") as lines:
        expected = {
            f"{r.topic}:{r.partition}": json.loads(encode_record(r))
            for r in replay(lines, RuleSettings(), None).records
        }
    assert last_per_key(written) == expected

    # Totals: every event of the capture applied once, over both releases' runs.
    assert sorted(stats.last) == list(range(manifest["shards"]))
    applied: Counter[str] = Counter()
    for shard in stats.last.values():
        applied.update(shard["applied_total"])
    error_responses = sum(s["fetch_error_responses_total"] for s in stats.last.values())
    fetches = [e["value"] for e in envelopes if e["source"] == "fetch-responses"]
    controller = Counter(e["value"]["type"] for e in envelopes if e["source"] != "fetch-responses")
    assert error_responses == sum(f["error"] != "NONE" for f in fetches)
    assert applied["FetchResponse"] + error_responses == len(fetches)
    assert +Counter({k: v for k, v in applied.items() if k != "FetchResponse"}) == controller
    assert json.loads((checkpoint / "isrwatch-layout.json").read_text())["state_shards"] == 3
