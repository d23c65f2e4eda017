"""The ``metrics`` section: the Prometheus exporter served by the driver."""

from __future__ import annotations

from pydantic import BaseModel, Field

from streaming.config.field_types import FROZEN, NonEmptyStr

__all__ = ["MetricsSettings"]


class MetricsSettings(BaseModel):
    """The Prometheus exporter served by the driver."""

    model_config = FROZEN

    host: NonEmptyStr = Field(default="0.0.0.0", description="address the exporter listens on")
    port: int = Field(default=9464, ge=1, le=65535, description="TCP port of the exporter")
    enabled: bool = Field(default=True, description="serve the Prometheus exporter")
