"""The checks after a fault: compare what the job wrote and counted with what was produced.

* **applied totals**: the job's checkpointed ``isrwatch_state_events_applied`` by event
  type equal replay's applied counts over the same records: an event counted less is
  lost, counted more is doubled.
* **health**: the ``partition-health`` topic read as compaction keeps it (the latest
  record per key) equals replay's records. At-least-once sinks may write a record again
  when a batch is re-run after a crash; a record whose key and value repeat the previous
  record of that key is such a re-write (harmless under compaction) and is counted as a
  duplicate, not judged.
* **dead letters**: after dedup by key (the source record's ``topic:partition:offset``)
  the topic holds exactly one letter per malformed or rejected record, with the expected
  reason; extra copies of a key are at-least-once re-writes, counted as duplicates.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from faults.load import Produced
from state import encode_record
from state.settings import RuleSettings
from streaming.tools.replay import replay


@dataclass
class Expected:
    """What the job must end with, from the produced records."""

    applied: Counter[str]
    health: dict[str, dict[str, Any]]
    dead_letters: dict[str, str]  # source coordinates -> reason
    produced: int


def expected_from(produced: Sequence[Produced]) -> Expected:
    valid = [p for p in produced if p.planned.line is not None]
    result = replay((p.planned.line or "" for p in valid), RuleSettings(), None)
    letters = {
        p.coordinates: p.planned.expected_reason or "" for p in produced if p.planned.line is None
    }
    for line, letter in result.dead_letters:
        letters[valid[line - 1].coordinates] = letter.reason.value
    health = {r.key: json.loads(encode_record(r)) for r in result.records}
    return Expected(Counter(result.report.applied), health, letters, len(produced))


def read_topic(
    bootstrap_servers: str,
    topic: str,
    quiet_s: float = 3.0,
) -> list[tuple[str, bytes | None]]:
    """Every record of ``topic`` from the beginning as (key, value), until quiet."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": "fault-campaign",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        partitions = sorted(metadata.topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])  # 0: the beginning
        records: list[tuple[str, bytes | None]] = []
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < quiet_s:
            for message in consumer.consume(10_000, timeout=0.5):
                if message.error() is None:
                    idle_since = time.monotonic()
                    key = message.key()
                    records.append((key.decode() if key else "", message.value()))
        return records
    finally:
        consumer.close()


@dataclass
class Comparison:
    checks: list[tuple[str, bool, str]] = field(default_factory=list)
    events_lost: int = 0
    events_doubled: int = 0
    health_rewrites: int = 0
    dead_letter_duplicates: int = 0

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.checks.append((name, ok, detail))

    @property
    def passed(self) -> bool:
        return all(ok for _, ok, _ in self.checks)


def compare_outputs(
    comparison: Comparison,
    expected: Expected,
    applied: dict[str, int],
    bootstrap_servers: str,
    health_topic: str,
    dead_letter_topic: str,
    rewrites_before: int = 0,
) -> None:
    """The checks every fault ends with: the applied totals, the health topic and the
    dead-letter topic against what replay expects (``rewrites_before``: compare_health)."""
    compare_applied(comparison, expected, applied)
    compare_health(
        comparison, expected, read_topic(bootstrap_servers, health_topic), rewrites_before
    )
    compare_dead_letters(comparison, expected, read_topic(bootstrap_servers, dead_letter_topic))


def compare_applied(comparison: Comparison, expected: Expected, applied: dict[str, int]) -> None:
    lost = sum(max(0, n - applied.get(t, 0)) for t, n in expected.applied.items())
    doubled = sum(max(0, n - expected.applied.get(t, 0)) for t, n in applied.items())
    comparison.events_lost += lost
    comparison.events_doubled += doubled
    total = sum(expected.applied.values())
    comparison.check(
        "applied totals equal replay's",
        lost == doubled == 0,
        f"{sum(applied.values())} applied by the job, {total} by replay "
        f"({expected.produced} records produced); lost {lost}, doubled {doubled}",
    )


def compare_health(
    comparison: Comparison,
    expected: Expected,
    written: list[tuple[str, bytes | None]],
    rewrites_before: int,
) -> None:
    """``rewrites_before``: how many of ``written`` the continuous job wrote (the final
    available-now snapshot that follows rewrites every partition on purpose)."""
    latest: dict[str, Any] = {}
    previous: dict[str, bytes | None] = {}
    rewrites = 0
    for index, (key, raw) in enumerate(written):
        if index < rewrites_before and key in previous and previous[key] == raw:
            rewrites += 1
        previous[key] = raw
        latest[key] = json.loads(raw) if raw is not None else None
    missing = sorted(expected.health.keys() - latest.keys())
    extra = sorted(k for k in latest.keys() - expected.health.keys() if latest[k] is not None)
    differ = sorted(
        k for k in expected.health.keys() & latest.keys() if latest[k] != expected.health[k]
    )
    comparison.health_rewrites += rewrites
    comparison.check(
        "partition-health (latest per key) equals replay",
        not missing and not extra and not differ,
        f"{len(expected.health)} partitions; missing {len(missing)}, extra {len(extra)}, "
        f"different {len(differ)} {differ[:3]}; {len(written)} records written, "
        f"{rewrites} re-writes of the previous record of their key",
    )


def compare_dead_letters(
    comparison: Comparison, expected: Expected, written: list[tuple[str, bytes | None]]
) -> None:
    copies: Counter[str] = Counter()
    reasons: dict[str, set[str]] = {}
    for key, raw in written:
        copies[key] += 1
        letter = json.loads(raw) if raw is not None else {}
        reasons.setdefault(key, set()).add(str(letter.get("reason")))
    missing = sorted(expected.dead_letters.keys() - copies.keys())
    extra = sorted(copies.keys() - expected.dead_letters.keys())
    wrong = sorted(
        k
        for k in expected.dead_letters.keys() & copies.keys()
        if reasons[k] != {expected.dead_letters[k]}
    )
    duplicates = sum(copies.values()) - len(copies)
    comparison.dead_letter_duplicates += duplicates
    comparison.events_lost += len(missing)
    comparison.check(
        "dead letters: one per malformed or rejected record (after dedup by key)",
        not missing and not extra and not wrong,
        f"{len(expected.dead_letters)} expected; missing {len(missing)} {missing[:3]}, "
        f"unexpected {len(extra)} {extra[:3]}, wrong reason {len(wrong)} {wrong[:3]}; "
        f"{sum(copies.values())} written, {duplicates} duplicate copies",
    )
