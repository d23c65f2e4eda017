"""The wire form of the job's input: records for its two input topics, with their Kafka
keys (docs/event-contract.md), and the replay file's line.

The collectors and the simulator make ``InputRecord`` values; ``streaming.feeds.publisher``
sends them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from state.events import Source

MAX_PARTITIONS_PER_EVENT = 1000
"""Events that list partitions (UpdateMetadata, TopicChange) are split to stay well under
Kafka's default 1 MB record limit: a controller failover puts every partition of the
cluster in one request."""

_T = TypeVar("_T")
_K = TypeVar("_K")
_V = TypeVar("_V")


@dataclass(frozen=True, slots=True)
class InputRecord:
    """``value`` is the event as JSON-ready data; ``key`` follows docs/event-contract.md: the
    ``"<topic>:<partition>"`` of a per-partition event, else a broker or controller id."""

    source: Source
    key: str
    value: Mapping[str, Any]

    @property
    def ts(self) -> int:
        return int(self.value["ts"])

    @property
    def event_type(self) -> str:
        """The controller event's ``type``, or ``FetchResponse``."""
        if self.source is Source.FETCH_RESPONSES:
            return "FetchResponse"
        return str(self.value.get("type", ""))

    def envelope(self) -> dict[str, Any]:
        """The replay file's line (docs/event-contract.md#replay-contract)."""
        return {"source": self.source.value, "value": dict(self.value)}


def chunks(items: Sequence[_T], size: int) -> list[list[_T]]:
    """``items`` in consecutive lists of at most ``size`` (one empty list if none)."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)] or [[]]


def split_created(
    created: Mapping[str, Mapping[_K, _V]], most: int = MAX_PARTITIONS_PER_EVENT
) -> list[dict[str, dict[_K, _V]]]:
    """A TopicChange's ``created`` map in parts of at most ``most`` partitions each."""
    parts: list[dict[str, dict[_K, _V]]] = []
    size = most
    for topic, partitions in created.items():
        for partition, replicas in partitions.items():
            if size == most:
                parts.append({})
                size = 0
            parts[-1].setdefault(topic, {})[partition] = replicas
            size += 1
    return parts


def partition_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def envelope_line(record: InputRecord) -> str:
    """The replay file's line of ``record`` (docs/event-contract.md#replay-contract)."""
    return json.dumps(record.envelope(), separators=(",", ":"))
