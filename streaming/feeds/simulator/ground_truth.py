"""What really happened in a simulated cluster, for checking the monitor against it.

Records are ``{"ts": ms, "kind": ..., ...facts}``; the kinds are

* ``isr_shrink`` / ``shrink_failed`` (a stuck leader tried): ``topic, partition, leader,
  follower, last_caught_up_ms, lag_time_max_ms, deadline_ms`` (Kafka's shrink deadline:
  ``state.shrink_rule.SHRINK_DEADLINE_FORMULA``);
* ``isr_expand``: ``topic, partition, leader, follower, fetch_offset``;
* ``propagation`` (zk task fired): ``broker, changes[{topic, partition, first_change_ms}]``;
* ``update_metadata`` (arrived at a broker): ``broker, partitions[{topic, partition, isr,
  leader}]``;
* ``leader_and_isr`` (controller decision): ``topic, partition, leader, leader_epoch, isr,
  reason``;
* ``broker_crash``, ``broker_restart`` (``broker, epoch``), ``broker_change`` (``dead, new,
  bounced``), ``controller_change``, ``topic_created``, ``topic_deleted``,
  ``zombie_event`` and ``action`` (a timeline entry, with its settings).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, TextIO


class GroundTruth:
    """An append-only log of facts, kept in memory and optionally written as JSON lines."""

    def __init__(self, sink: TextIO | None = None, keep: bool = True) -> None:
        self.records: list[dict[str, Any]] = []
        self._sink = sink
        self._keep = keep

    def write_to(self, sink: TextIO | None, keep: bool = True) -> None:
        self._sink = sink
        self._keep = keep

    def add(self, ts: int, kind: str, **facts: Any) -> None:
        record = {"ts": ts, "kind": kind, **facts}
        if self._keep:
            self.records.append(record)
        if self._sink is not None:
            self._sink.write(json.dumps(record, separators=(",", ":")) + "\n")

    def of(self, kind: str) -> Iterator[dict[str, Any]]:
        return (record for record in self.records if record["kind"] == kind)

    def count(self, kind: str) -> int:
        return sum(1 for _ in self.of(kind))
