"""``IsrwatchConfig``: the whole configuration, one section per module of this package."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from state.settings import RuleSettings
from streaming.config.collect import CollectSettings
from streaming.config.kafka import KafkaSettings
from streaming.config.metrics import MetricsSettings
from streaming.config.streaming import StreamingSettings
from streaming.config.topics import TopicSettings

__all__ = ["IsrwatchConfig"]


class IsrwatchConfig(BaseModel):
    """The whole configuration of the job."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    kafka: KafkaSettings = Field(
        default_factory=KafkaSettings, description="Kafka connection and source"
    )
    topics: TopicSettings = Field(default_factory=TopicSettings, description="topic names")
    rules: RuleSettings = Field(
        default_factory=RuleSettings, description="the replication model's settings"
    )
    streaming: StreamingSettings = Field(
        default_factory=StreamingSettings, description="the streaming query"
    )
    metrics: MetricsSettings = Field(
        default_factory=MetricsSettings, description="the Prometheus exporter"
    )
    collect: CollectSettings = Field(
        default_factory=CollectSettings, description="the collectors (isrwatch collect)"
    )
