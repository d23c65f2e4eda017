"""The ``streaming`` section: the Spark Structured Streaming query."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field, NonNegativeInt, PositiveInt

from streaming.config.field_types import FROZEN, NonEmptyStr

__all__ = ["StateStore", "StreamingSettings"]


class StateStore(StrEnum):
    """Spark's state store provider."""

    ROCKSDB = "rocksdb"
    HDFS = "hdfs"


class StreamingSettings(BaseModel):
    """The Spark Structured Streaming query."""

    model_config = FROZEN

    state_shards: PositiveInt = Field(
        default=64, description="number of state groups partitions are hashed into"
    )
    trigger_interval_ms: PositiveInt = Field(
        default=5000, description="micro-batch trigger interval, ms"
    )
    watermark_delay_ms: NonNegativeInt = Field(
        default=60000, description="event-time watermark delay (late data tolerated), ms"
    )
    checkpoint_location: NonEmptyStr = Field(
        default=".isrwatch/checkpoint", description="checkpoint directory (path or URI)"
    )
    state_store: StateStore = Field(
        default=StateStore.ROCKSDB, description="state store provider: rocksdb or hdfs"
    )
    spark_master: NonEmptyStr = Field(
        default="local[2]", description="Spark master URL used when the job creates its session"
    )
    shuffle_partitions: PositiveInt = Field(default=4, description="spark.sql.shuffle.partitions")
    health_out: NonEmptyStr | None = Field(
        default=None, description="also write health records as JSON lines to this path; none: off"
    )
