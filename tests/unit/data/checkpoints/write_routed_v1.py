"""Write the routed-v1 checkpoint fixture with the code of the release that wrote it.

Run from a checkout of that release (commit 544a4fd), with this file and a capture::

    git worktree add /tmp/isrwatch-544a4fd 544a4fd && cd /tmp/isrwatch-544a4fd
    make .venv/.installed
    .venv/bin/isrwatch simulate --scenario isr-churn-storm --seconds 20 --seed 1 \\
        --start-ms 1700000000000 --out /tmp/capture.jsonl
    .venv/bin/python <this repo>/tests/unit/data/checkpoints/write_routed_v1.py \\
        /tmp/capture.jsonl <this repo>/tests/unit/data/checkpoints/routed-v1

It imports ``streaming`` and ``state`` from the working directory (the old release):
the first FIRST_PART records of the capture go through that release's routing and stateful step,
shard by shard, and each ``ShardSnapshot`` is pickled as its job stored it in Spark's
group state. Every ERROR_EVERY-th fetch response is given an error code, so that the
fixture holds error responses (the old release counted them in ``applied_total``).
"""

from __future__ import annotations

import gzip
import json
import pickle
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))

from capture_records import envelopes, kafka_records
from streaming.routing import route
from streaming.shard_state import ShardJobSettings, ShardSnapshot, process

from state.events import Source
from state.model import ReplicationModel
from state.settings import RuleSettings
from state.sharding import Shard

SHARDS = 3
WATERMARK_DELAY_MS = 60_000
FIRST_PART = 3000  # records: the storm's first ISR changes are before, the rest after


def main(capture: Path, out: Path) -> None:
    records = envelopes(capture)
    half = FIRST_PART
    settings = ShardJobSettings(RuleSettings(), SHARDS, WATERMARK_DELAY_MS)
    routed = route(
        kafka_records(records[:half], {s.value: 0 for s in Source}),
        {s.value: s for s in Source},
        SHARDS,
    )
    out.mkdir(parents=True, exist_ok=True)
    for shard in range(SHARDS):
        snapshot = ShardSnapshot(ReplicationModel(settings.rules, Shard(shard, SHARDS)))
        process(snapshot, routed[routed["shard"] == shard], -1, settings)
        pickled = pickle.dumps(snapshot, protocol=pickle.HIGHEST_PROTOCOL)  # as its job did
        (out / f"shard-{shard}.pickle").write_bytes(pickled)
    with gzip.open(out / "capture.jsonl.gz", "wt", encoding="utf-8") as written:
        written.writelines(json.dumps(envelope) + "\n" for envelope in records)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    manifest = {
        "commit": commit,
        "shards": SHARDS,
        "first_part": half,
        "watermark_delay_ms": WATERMARK_DELAY_MS,
        "stream_clock_ms": int(routed["ts"].max()),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
