"""What a state shard reports after each micro-batch: the one form its statistics take
from the shard (``shard_state``) to the sinks, the exporter and the live view.

It crosses Spark as JSON text (the ``value`` of a ``stats`` output row, see
:func:`encode` / :func:`decode`); every reader gets a :class:`ShardStats`.

Counts mean one thing everywhere. Every input event a shard counts has exactly one
outcome: **applied** (it changed, or was checked against, the state), a **fetch error
response** (a valid fetch answered with an error: Kafka's leader keeps no follower state
for it, nor does the model), or a dead letter (rejected, late or duplicate, counted by
reason). ``applied`` never includes error responses; ``*_total`` are the same counts
since the job first started, checkpointed with the state (each event once across
restarts).
"""

from __future__ import annotations

from typing import Any

import msgspec

from state import Flap, HealthRecord, IsrAtRisk


class TopicGauges(msgspec.Struct, frozen=True, kw_only=True):
    """Partitions of one topic in this shard, by condition, now."""

    partitions: int
    under_replicated: int
    under_min_isr: int
    at_min_isr: int
    offline: int
    predicted_under_replicated: int
    followers: dict[str, int]  # follower status name -> replicas
    # Kafka 4.0+ / 3.7+ conditions: 0 in the stats of a release before them
    offline_unclean_only: int = 0
    high_watermark_frozen: int = 0
    # no news of the leader for more than T / 2: 0 in the stats of a release before it
    leader_silent: int = 0
    metadata_stale_expected: int
    metadata_stale_overdue: int


class BrokerGauges(msgspec.Struct, frozen=True, kw_only=True):
    """Per broker: the follower replicas it hosts by status, the partitions it leads by
    condition (``partitions``: all it leads)."""

    followers: dict[str, int]
    leads: dict[str, int]


class IsrTransitionCount(msgspec.Struct, frozen=True, array_like=True):
    """One ISR change applied in this batch (``state.model.IsrTransition``)."""

    topic: str
    leader: int
    kind: str
    by_controller: bool


class UnhealthyPartition(msgspec.Struct, frozen=True, kw_only=True):
    """An unhealthy partition as its shard reports it. The driver gives its record the
    causes found over every shard's report (``streaming.job.attribution``) and writes it
    when ``changed``, or when its causes changed: the shard writes no record of its own
    for it, so the record crosses Spark once."""

    record: HealthRecord  # without causes
    # T of its leader (the broker's replica.lag.time.max.ms): the record leaves it out;
    # the exporter and the live view draw the shrink thresholds with it.
    replica_lag_time_max_ms: int
    changed: bool  # its health changed in this batch (state.health_signature)


class ShardStats(msgspec.Struct, frozen=True, kw_only=True):
    """Counters of one micro-batch and gauges of one shard after it."""

    shard: int
    applied: dict[str, int]  # by event type, this batch
    applied_total: dict[str, int]
    fetch_error_responses: int  # this batch; not in ``applied``
    fetch_error_responses_total: int
    rejected: dict[str, int]  # by dead-letter reason, by the model, this batch
    late: int
    duplicates: int
    isr_transitions: list[IsrTransitionCount]
    propagation_delays_ms: list[int]
    bounced_brokers: list[int]
    clock_ms: int  # the largest event time this shard applied
    now_ms: int  # when its partitions were evaluated
    partitions: int
    topics: dict[str, TopicGauges]
    brokers: dict[str, BrokerGauges]  # key: broker id (-1: no leader)
    unhealthy: list[UnhealthyPartition]
    # The denominators of cause attribution (``state.causes.ClusterShape.to_json``),
    # added up over shards on the driver; None while the shard has no partition.
    cause_shape: dict[str, Any] | None = None
    # What one broker's stop could break (``state.restart_check.fragile_entries``).
    fragile: list[IsrAtRisk] = msgspec.field(default_factory=list)
    # Followers removed from the ISR within the flapping window (``state.flapping``).
    flapping: list[Flap] = msgspec.field(default_factory=list)


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(ShardStats)


def encode(stats: ShardStats) -> str:
    return _ENCODER.encode(stats).decode()


def decode(text: str | bytes) -> ShardStats:
    return _DECODER.decode(text)
