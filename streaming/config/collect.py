"""The ``collect`` section: the collectors that feed the input topics from a real cluster."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, BaseModel, Field, PositiveInt

from streaming.config.field_types import FROZEN, NonEmptyStr, Port
from streaming.config.kafka import check_servers

__all__ = [
    "AdminCollectorSettings",
    "CollectSettings",
    "LogCollectorSettings",
    "LogStartPosition",
    "MetadataLogCollectorSettings",
]


class LogStartPosition(StrEnum):
    """Where ``collect logs`` starts reading a file it has no saved position for."""

    BEGINNING = "beginning"
    END = "end"


def _check_time_zone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError("must be an IANA time zone name, such as UTC or Europe/Paris") from None
    return name


TimeZoneName = Annotated[str, AfterValidator(_check_time_zone)]


CUSTOM_GROUPS: Final = frozenset({"time", "level", "logger", "thread", "message"})
"""The named groups a custom log layout may have (the log reader fills an entry's fields
from them: streaming.feeds.collectors.log_layouts)."""


class LayoutError(ValueError):
    """The configured layout cannot be used; the message says why."""


def compile_custom_layout(pattern: str) -> re.Pattern[str]:
    """The configured layout regex, checked: it compiles, names ``time`` and ``message``,
    and names no group the reader does not know."""
    try:
        compiled = re.compile(pattern)
    except re.error as error:
        raise LayoutError(f"collect.logs.layout is not a valid regex: {error}") from None
    names = set(compiled.groupindex)
    missing = {"time", "message"} - names
    if missing:
        raise LayoutError(
            "collect.logs.layout must have the named groups (?P<time>...) and"
            f" (?P<message>...); missing: {', '.join(sorted(missing))}"
        )
    unknown = names - CUSTOM_GROUPS
    if unknown:
        raise LayoutError(
            f"collect.logs.layout has unknown named groups {', '.join(sorted(unknown))};"
            f" allowed: {', '.join(sorted(CUSTOM_GROUPS))}"
        )
    return compiled


def _check_log_layout(pattern: str | None) -> str | None:
    if pattern is not None:
        compile_custom_layout(pattern)  # raises LayoutError (a ValueError) saying why
    return pattern


LogLayoutRegex = Annotated[str | None, AfterValidator(_check_log_layout)]


class LogCollectorSettings(BaseModel):
    """``isrwatch collect logs``: broker log files -> controller-events."""

    model_config = FROZEN

    time_zone: TimeZoneName = Field(
        default="UTC", description="time zone of the brokers' log4j timestamps (IANA name)"
    )
    start_at: LogStartPosition = Field(
        default=LogStartPosition.BEGINNING,
        description="where to start a file with no saved position: beginning or end",
    )
    poll_interval_ms: PositiveInt = Field(
        default=1000,
        description="--follow: longest wait between two reads of the files, ms;"
        " a write to a followed file wakes the reader at once",
    )
    max_read_bytes: PositiveInt = Field(
        default=8 * 1024 * 1024, description="most bytes read from one file in one read"
    )
    state_file: NonEmptyStr = Field(
        default=".isrwatch/collect-logs.json",
        description="resume state: file positions and the translator's memory",
    )
    metrics_port: Port = Field(default=9465, description="TCP port of its Prometheus metrics")
    layout: LogLayoutRegex = Field(
        default=None,
        description="a log layout the collector does not know, as a regex with the named"
        " groups time and message (and optionally level, logger, thread); docs/collectors-logs.md",
    )
    summary_after_lines: PositiveInt = Field(
        default=100,
        description="lines read before the collector says how many it recognised",
    )


class AdminCollectorSettings(BaseModel):
    """``isrwatch collect admin``: a live cluster polled with the admin API."""

    model_config = FROZEN

    bootstrap_servers: Annotated[str, AfterValidator(check_servers)] | None = Field(
        default=None,
        description="the cluster polled, when isrwatch's own topics live on another "
        "cluster (host:port,...; the kafka section's client settings); none: "
        "kafka.bootstrap_servers",
    )
    poll_interval_ms: PositiveInt = Field(
        default=10000, description="time between two polls of the cluster, ms"
    )
    broker_timeout_ms: PositiveInt = Field(
        default=5000,
        description="how long a poll waits for any answer (at most kafka.request_timeout_ms); "
        "a broker slower than that (paused, cut off) gives nothing this poll instead of "
        "stalling it",
    )
    fetch_responses: bool = Field(
        default=True,
        description="derive fetch-responses from per-replica log end offsets (ListOffsets)",
    )
    broker_changes: bool = Field(
        default=True,
        description="emit BrokerChange; off when collect logs reads the controller's log",
    )
    partition_events: bool = Field(
        default=True,
        description="emit TopicChange, LeaderAndIsr and IsrChange; off when collect "
        "metadata-log reads the cluster's metadata log (it has the exact epochs)",
    )
    state_file: NonEmptyStr = Field(
        default=".isrwatch/collect-admin.json",
        description="resume state: the last snapshot and the brokers' epochs",
    )
    metrics_port: Port = Field(default=9466, description="TCP port of its Prometheus metrics")


class MetadataLogCollectorSettings(BaseModel):
    """``isrwatch collect metadata-log``: a KRaft ``__cluster_metadata-0`` directory ->
    controller-events."""

    model_config = FROZEN

    poll_interval_ms: PositiveInt = Field(
        default=1000,
        description="--follow: longest wait between two reads of the log, ms;"
        " a write to a segment wakes the reader at once",
    )
    max_read_bytes: PositiveInt = Field(
        default=8 * 1024 * 1024, description="most bytes read from the log in one read"
    )
    state_file: NonEmptyStr = Field(
        default=".isrwatch/collect-metadata-log.json",
        description="resume state: the next metadata offset and the image replayed up to it",
    )
    metrics_port: Port = Field(default=9467, description="TCP port of its Prometheus metrics")


class CollectSettings(BaseModel):
    """The collectors that feed the input topics from a real cluster."""

    model_config = FROZEN

    metrics_host: NonEmptyStr = Field(
        default="0.0.0.0", description="address the collectors' metrics listen on"
    )
    metrics_enabled: bool = Field(default=True, description="serve the collectors' metrics")
    logs: LogCollectorSettings = Field(
        default_factory=LogCollectorSettings, description="the broker log collector"
    )
    admin: AdminCollectorSettings = Field(
        default_factory=AdminCollectorSettings, description="the admin API collector"
    )
    metadata_log: MetadataLogCollectorSettings = Field(
        default_factory=MetadataLogCollectorSettings,
        description="the KRaft metadata log collector",
    )
