"""Summarise py-spy's raw (collapsed) stacks: share of samples per process kind, the
Python workers' samples by stage of the job, and the functions with the most inclusive and
own samples.

    python bench/spy_summary.py profile.txt [--top 30]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

# Where a Python worker's sample belongs: the deepest frame of the stack that names one of
# these (frame text, as py-spy writes it: "function (file:line)"), the first listed first
# among frames at the same depth. The shard step's samples are split once more: those with
# a frame of the model (state/) below it.
SPY_STAGES = (
    ("state: restore the shard's stored state", "restore_snapshot ("),
    ("state: save the shard's state", "save_snapshot ("),
    ("routing: decode, validate, pack per shard", "route_records ("),
    ("source reader: the Kafka records read (confluent-kafka)", "(streaming/job/kafka_source/"),
    ("shard step", "_process (streaming/job/shard_state.py"),
    ("PySpark: Arrow to pandas and back", "serializers.py"),
)
SHARD_STEP = "shard step"
MODEL_FRAME = "(state/"


def stacks(path: str) -> Iterator[tuple[list[str], int]]:
    """Each line of py-spy's raw output: its frames, root first, and its sample count."""
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if count.isdigit():
            yield stack.split(";"), int(count)


def stage_samples(path: str) -> dict[str, int]:
    """Active samples of the Python workers in py-spy's raw output (a stack of frames and
    a count a line), by stage (``SPY_STAGES``); "PySpark worker: other" is the rest of a
    worker's samples, "driver" the profiled root process's (the bench)."""
    found: dict[str, int] = {}
    for frames, count in stacks(path):
        processes = [frame for frame in frames if frame.startswith("process ")]
        if not any("pyspark.worker" in process for process in processes):
            if len(processes) == 1:  # the root process itself, not one it started
                found["driver"] = found.get("driver", 0) + count
            continue
        stage, depth = "PySpark worker: other", -1
        for at in range(len(frames) - 1, -1, -1):
            hit = next((label for label, text in SPY_STAGES if text in frames[at]), None)
            if hit is not None:
                stage, depth = hit, at
                break
        if stage == SHARD_STEP:
            below = any(MODEL_FRAME in frame for frame in frames[depth + 1 :])
            stage = f"{SHARD_STEP}: the model (state/)" if below else f"{SHARD_STEP}: the rest"
        found[stage] = found.get(stage, 0) + count
    return found


def print_stages(path: str, worker_cpu_s: float | None = None, events: int = 0) -> None:
    """The workers' samples by stage; given their CPU and the events, each stage's share
    of it per event."""
    found = stage_samples(path)
    workers = sum(n for stage, n in found.items() if stage != "driver")
    print(f"  py-spy ({path}): {workers:,} active samples of the Python workers")
    for stage, n in sorted(found.items(), key=lambda item: -item[1]):
        if stage == "driver":
            continue
        share = n / workers if workers else 0.0
        per_event = (
            f"  {1e6 * share * worker_cpu_s / events:.2f} us an event"
            if worker_cpu_s is not None and events
            else ""
        )
        print(f"    {stage:48s} {n:7,d}  {100 * share:5.1f} %{per_event}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("raw")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args(argv)
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    processes: Counter[str] = Counter()
    total = 0
    for frames, count in stacks(args.raw):
        total += count
        processes[re.sub(r"\d+", "N", frames[0])[:60]] += count
        names = [re.sub(r" \(.*:\d+\)$", "", f) + _where(f) for f in frames[1:]]
        for name in set(names):
            inclusive[name] += count
        if names:
            own[names[-1]] += count
    print(f"{total} samples")
    for name, count in processes.most_common(10):
        print(f"  {100 * count / total:5.1f} %  {name}")
    print_stages(args.raw)
    print("inclusive:")
    for name, count in inclusive.most_common(args.top):
        print(f"  {100 * count / total:5.1f} %  {name}")
    print("own:")
    for name, count in own.most_common(args.top):
        print(f"  {100 * count / total:5.1f} %  {name}")


def _where(frame: str) -> str:
    found = re.search(r"\(([^()]*?)([^/()]*):\d+\)$", frame)
    return f" [{found.group(2)}]" if found else ""


if __name__ == "__main__":
    main()
