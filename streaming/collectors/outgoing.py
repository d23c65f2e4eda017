"""One record a collector sends: an event for one input topic, with its Kafka key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from state.events import Source

MAX_PARTITIONS_PER_EVENT = 1000
"""Events that list partitions (UpdateMetadata, TopicChange) are split to stay well under
Kafka's default 1 MB record limit: a controller failover puts every partition of the
cluster in one request."""


@dataclass(frozen=True, slots=True)
class Outgoing:
    """``value`` is the event as JSON-ready data; ``key`` follows events.md: the
    ``"<topic>:<partition>"`` of a per-partition event, else a broker or controller id."""

    source: Source
    key: str
    value: Mapping[str, Any]

    @property
    def event_type(self) -> str:
        """The controller event's ``type``, or ``FetchResponse``."""
        if self.source is Source.FETCH_RESPONSES:
            return "FetchResponse"
        return str(self.value.get("type", ""))


def partition_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"
