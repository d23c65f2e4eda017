"""Write a state-format checkpoint fixture with the code of the release that wrote it.

Run from a checkout of that release, with this file and the routed-v1 capture::

    git worktree add /tmp/isrwatch-bbd9956 bbd9956 && cd /tmp/isrwatch-bbd9956
    gunzip -c <this repo>/tests/unit/data/checkpoints/routed-v1/capture.jsonl.gz \\
        > /tmp/capture.jsonl
    <this repo>/.venv/bin/python <this repo>/tests/unit/data/checkpoints/write_state_format.py \\
        /tmp/capture.jsonl <this repo>/tests/unit/data/checkpoints/format-1-bbd9956

It imports ``streaming`` and ``state`` from the working directory (the old release). The
first FIRST_PART records of the capture go through that release's routing and stateful
step, shard by shard, and each ``ShardSnapshot`` is stored as its job stores it in
Spark's group state (``streaming.job.state_format.write_snapshot``). Every
ERROR_EVERY-th fetch response gets an error code, as in the other fixtures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))

from state.events import Source
from state.model import ReplicationModel
from state.settings import RuleSettings
from state.sharding import Shard
from streaming.job.routing import route
from streaming.job.shard_snapshot import ShardSnapshot
from streaming.job.shard_state import ShardJobSettings, process
from streaming.job.state_format import FORMAT_VERSION, write_snapshot

sys.path.insert(0, str(Path(__file__).resolve().parent))
from capture_records import envelopes, kafka_records

SHARDS = 3
WATERMARK_DELAY_MS = 60_000
FIRST_PART = 3000  # records, as in the other fixtures


def main(capture: Path, out: Path) -> None:
    records = envelopes(capture)
    settings = ShardJobSettings(RuleSettings(), SHARDS, WATERMARK_DELAY_MS)
    routed = route(
        kafka_records(records[:FIRST_PART], {s.value: 0 for s in Source}),
        {s.value: s for s in Source},
        SHARDS,
    )
    out.mkdir(parents=True, exist_ok=True)
    clock = -1
    for shard in range(SHARDS):
        snapshot = ShardSnapshot(ReplicationModel(settings.rules, Shard(shard, SHARDS)))
        process(snapshot, routed[routed["shard"] == shard], -1, settings)
        clock = max(clock, snapshot.clock_ms)
        (out / f"shard-{shard}.arrow").write_bytes(write_snapshot(snapshot))
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    manifest = {
        "commit": commit,
        "format_version": FORMAT_VERSION,
        "shards": SHARDS,
        "first_part": FIRST_PART,
        "watermark_delay_ms": WATERMARK_DELAY_MS,
        "stream_clock_ms": clock,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
