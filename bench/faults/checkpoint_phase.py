"""Where a micro-batch is, read from the outside: the checkpoint directory and the output
topics. What Spark writes, in order, for batch N of the job (RocksDB state store):

1. ``offsets/N``: the batch is planned (its source offsets);
2. ``state/0/<p>/<N+1>.zip`` (or ``.changelog``) for every shuffle partition ``p``: each
   state store commits its new version as its task ends;
3. the driver collects the batch's rows and the sinks write them to Kafka
   (``partition-health``, dead letters);
4. ``commits/N``: the batch is done.

A kill is classified by what was on disk just before it:

* ``mid-batch``: ``offsets/N`` and no state of version N+1 from this attempt (reading,
  routing, applying events);
* ``mid-commit``: some but not all state stores committed version N+1 (the state
  store's commit is under way);
* ``mid-sink``: every state store committed N+1 and ``commits/N`` is absent: the driver
  holds the rows and writes them (whether records reached the output topics before the
  kill is told apart by their end offsets, ``sink_started``);
* ``between-batches``: ``commits/N`` written, ``offsets/N+1`` not yet.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

MID_BATCH = "mid-batch"
MID_COMMIT = "mid-commit"
MID_SINK = "mid-sink"
BETWEEN = "between-batches"
PHASES = (MID_BATCH, MID_COMMIT, MID_SINK)

_STATE_VERSION = re.compile(r"^(\d+)\.(zip|changelog)$")


def _latest(directory: Path) -> int | None:
    try:
        ids = [int(p.name) for p in directory.iterdir() if p.name.isdigit()]
    except FileNotFoundError:
        return None
    return max(ids, default=None)


def batch_offsets(checkpoint: Path, batch: int) -> dict[str, int]:
    """The source offsets batch ``batch`` reads up to (``{"topic:partition": offset}``)."""
    try:
        lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
    except FileNotFoundError:
        return {}
    found: dict[str, int] = {}
    for line in lines[2:]:  # v1, the batch's metadata, then one line per source
        parsed = json.loads(line) if line.startswith("{") else {}
        found.update({k: int(v) for k, v in parsed.items() if isinstance(v, int)})
    return found


def committed_offsets(checkpoint: Path) -> dict[str, int]:
    """The source offsets up to which every record is applied and written (the latest
    committed batch's)."""
    committed = _latest(checkpoint / "commits")
    return {} if committed is None else batch_offsets(checkpoint, committed)


def planned_rows(checkpoint: Path, batch: int) -> int:
    """Records batch ``batch`` reads: its end offsets minus the previous batch's."""
    end, start = batch_offsets(checkpoint, batch), batch_offsets(checkpoint, batch - 1)
    return sum(max(0, offset - start.get(key, offset)) for key, offset in end.items())


@dataclass(frozen=True)
class View:
    planned: int | None  # the latest offsets/N
    committed: int | None  # the latest commits/N
    stores_committed: int  # state stores with version planned+1 written since ``since``
    stores: int

    @property
    def phase(self) -> str:
        if self.planned is None or self.committed == self.planned:
            return BETWEEN
        if self.stores_committed == 0:
            return MID_BATCH
        if self.stores_committed < self.stores:
            return MID_COMMIT
        return MID_SINK


def look(checkpoint: Path, stores: int, since: float) -> View:
    """The checkpoint now; state files older than ``since`` (epoch s: the current
    attempt's start) belong to an attempt killed before and do not count."""
    planned = _latest(checkpoint / "offsets")
    committed = _latest(checkpoint / "commits")
    written = 0
    if planned is not None:
        version = planned + 1
        for store in range(stores):
            directory = checkpoint / "state" / "0" / str(store)
            for suffix in ("zip", "changelog"):
                path = directory / f"{version}.{suffix}"
                try:
                    if path.stat().st_mtime >= since:
                        written += 1
                        break
                except FileNotFoundError:
                    continue
    return View(planned, committed, written, stores)
