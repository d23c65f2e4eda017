"""Write a whole Spark checkpoint directory with the job of the release that is checked out.

The upgrade test (tests/integration/test_checkpoint_upgrade.py) restarts the job of the
working tree on what this wrote. Run it from a checkout of the release, in that
release's own environment (its PySpark), with this file and the capture::

    git worktree add /tmp/isrwatch-release <commit> && cd /tmp/isrwatch-release
    make .venv/.installed
    zcat <this repo>/tests/unit/data/checkpoints/routed-v1/capture.jsonl.gz > /tmp/capture.jsonl
    .venv/bin/python <this repo>/tests/integration/data/checkpoints/write_spark_checkpoint.py \\
        /tmp/capture.jsonl <this repo>/tests/integration/data/checkpoints/<commit>

It imports ``streaming`` from the working directory (the release): on an embedded
broker, it produces the first FIRST_PART envelopes of the capture to topics named by
TOPICS, runs that release's ``streaming.job.query.run`` until it has applied them all
(the Python Data Source, 3 shards, the RocksDB state store), and copies the checkpoint
directory, the health records the job wrote (as the compacted partition-health topic
keeps them), and a manifest (the commit and PySpark that wrote it, what was read).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path.cwd()))

import pyspark
from kafka import KafkaProducer

from streaming.config import load_config
from streaming.job.metrics import HealthExporter
from streaming.job.query import run
from streaming.tools.embedded_broker import EmbeddedBroker

FIRST_PART = 3000  # records: as routed-v1, the storm's first ISR changes before, the rest after
SHARDS = 3
FETCH_PARTITIONS = 2
TOPICS = {
    "controller-events": "controller-events-upgrade",
    "fetch-responses": "fetch-responses-upgrade",
    "partition-health": "partition-health-upgrade",
    "dead-letters": "dead-letters-upgrade",
}
# Where the source publishes its status for the exporter: not part of the checkpoint.
NOT_CHECKPOINT = {"source-status.json"}


def produce(bootstrap_servers: str, envelopes: list[dict[str, Any]]) -> dict[str, int]:
    """Each envelope to its topic, keyed by ``topic:partition`` (Kafka's default
    partitioner, murmur2, puts each key on the same partition every time); how many
    records went to each ``topic:partition``, as the producer's acknowledgements say."""
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=20)
    sent = []
    for envelope in envelopes:
        value = envelope["value"]
        key = f"{value['topic']}:{value.get('partition')}" if "topic" in value else "0"
        topic = TOPICS[envelope["source"]]
        sent.append(producer.send(topic, key=key.encode(), value=json.dumps(value).encode()))
    producer.flush()
    producer.close()
    counts: dict[str, int] = {}
    for future in sent:
        metadata = future.get()
        name = f"{metadata.topic}:{metadata.partition}"
        counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))


def main(capture: Path, out: Path) -> None:
    envelopes = [json.loads(line) for line in capture.read_text(encoding="utf-8").splitlines()]
    work = Path(tempfile.mkdtemp(prefix="isrwatch-checkpoint-"))
    batches: list[Any] = []
    with EmbeddedBroker() as broker:
        broker.start()
        broker.create_topics([TOPICS["controller-events"]], partitions=1)
        broker.create_topics([TOPICS["fetch-responses"]], partitions=FETCH_PARTITIONS)
        broker.create_topics([TOPICS["partition-health"], TOPICS["dead-letters"]])
        produced = produce(broker.bootstrap_servers, envelopes[:FIRST_PART])
        config = load_config(
            None,
            {
                "topics.controller_events": TOPICS["controller-events"],
                "topics.fetch_responses": TOPICS["fetch-responses"],
                "topics.partition_health": TOPICS["partition-health"],
                "topics.dead_letters": TOPICS["dead-letters"],
                "kafka.bootstrap_servers": broker.bootstrap_servers,
                "kafka.source_format": "python",
                "streaming.checkpoint_location": str(work / "checkpoint"),
                "streaming.state_store": "rocksdb",
                "streaming.trigger_interval_ms": 500,
                "streaming.state_shards": SHARDS,
                "metrics.enabled": False,
            },
            environ={},
        )
        run(
            config,
            available_now=True,
            health_out=work / "health.jsonl",
            exporter=HealthExporter(),
            on_batch=lambda batch_id, rows: batches.append(batch_id),
        )
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    shutil.copytree(
        work / "checkpoint",
        out / "checkpoint",
        ignore=lambda _dir, names: [n for n in names if n in NOT_CHECKPOINT],
    )
    shutil.copy(work / "health.jsonl", out / "health-written.jsonl")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    manifest = {
        "commit": commit,
        "pyspark": pyspark.__version__,
        "source_format": "python",
        "state_store": "rocksdb",
        "shards": SHARDS,
        "topics": TOPICS,
        "first_part": FIRST_PART,
        "records_per_partition": produced,
        "batches": len(batches),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    shutil.rmtree(work)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
