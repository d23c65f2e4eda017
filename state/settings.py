"""The settings the replication model needs: Kafka's defaults and the monitor's thresholds.

They are one section (``rules``) of the job's configuration (``streaming.config``); the
model takes only this section, so ``state`` never depends on the job's configuration.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator


class PropagationMode(StrEnum):
    """How ISR changes reach the brokers' metadata caches (docs/domain.md#propagation-window)."""

    ZK = "zk"
    KRAFT = "kraft"


class PropagationSettings(BaseModel):
    """The zk-mode isr-change-propagation timers and the kraft-mode bound."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: PropagationMode = Field(
        default=PropagationMode.ZK,
        description="zk: ISR change notifications with the 5 s / 60 s rule; kraft: metadata log",
    )
    tick_ms: PositiveInt = Field(
        default=2500, description="period of the leader's isr-change-propagation task"
    )
    blackout_ms: PositiveInt = Field(
        default=5000, description="quiet time after the latest ISR change before propagating"
    )
    max_delay_ms: PositiveInt = Field(
        default=60000, description="propagate anyway once the last propagation is this old"
    )
    overdue_slack_ms: int = Field(
        default=2000,
        ge=0,
        description="time allowed to the controller to turn a propagation into UpdateMetadata",
    )
    kraft_propagation_max_ms: PositiveInt = Field(
        default=5000,
        description="kraft mode: longest time brokers may take to replay an ISR change, "
        "where no DescribeQuorum report (MetadataLogProgress) tells",
    )


class RuleSettings(BaseModel):
    """Defaults for what the cluster does not tell, and the monitor's own thresholds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    replica_lag_time_max_ms: PositiveInt = Field(
        default=30000,
        description="replica.lag.time.max.ms of a leader with no BrokerConfig event "
        "(Kafka's default since 2.5; 10000 before)",
    )
    warn_ratio: float = Field(
        default=0.5,
        gt=0.0,
        le=1.0,
        description="a follower is LAGGING once its lag time exceeds warn_ratio x T",
    )
    min_insync_replicas: PositiveInt = Field(
        default=1, description="min.insync.replicas of a topic with no TopicConfig event"
    )
    high_watermark_frozen_under_min_isr: bool = Field(
        default=True,
        description="the leaders run Kafka 3.7 or later, which do not advance the high "
        "watermark while the ISR is under min.insync.replicas (KAFKA-15583): the health "
        "record then says high_watermark_frozen; false for older brokers",
    )
    propagation: PropagationSettings = Field(default_factory=PropagationSettings)
    maintenance_grace_ms: PositiveInt = Field(
        default=300000,
        description="a broker that (re-)registered this recently is catching up after a "
        "planned restart: its replicas' absence from ISRs is expected",
    )
    maintenance_max_shutdown_ms: PositiveInt = Field(
        default=1800000,
        description="a controlled shutdown counts as planned maintenance for at most this long",
    )
    flapping_window_ms: PositiveInt = Field(
        default=600000,
        description="window in which a follower's removals from the ISR are counted (flapping)",
    )
    flapping_min_shrinks: int = Field(
        default=3,
        ge=2,
        description="removals (each followed by a re-add) within the window that make a "
        "follower flapping",
    )

    @model_validator(mode="after")
    def _warn_below_shrink(self) -> RuleSettings:
        if self.warn_ratio * self.replica_lag_time_max_ms < 1:
            raise ValueError("warn_ratio x replica_lag_time_max_ms must be at least 1 ms")
        return self
