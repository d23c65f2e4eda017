"""Summarise py-spy's raw (collapsed) stacks: share of samples per process kind and the
functions with the most inclusive and own samples.

    python bench/spy_summary.py profile.txt [--top 30]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("raw")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args(argv)
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    processes: Counter[str] = Counter()
    total = 0
    with open(args.raw, encoding="utf-8") as lines:
        for line in lines:
            stack, _, count_text = line.rstrip("\n").rpartition(" ")
            count = int(count_text)
            frames = stack.split(";")
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
