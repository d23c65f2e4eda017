"""The gauge families rendered from the shards' latest stats (``ShardStats``): per topic,
per broker, and per unhealthy partition and follower."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from state.metadata_cache import MetadataState
from state.shrink_rule import SHRINK_DEADLINE_FORMULA, FollowerStatus
from streaming.job.shard_stats import ShardStats

PARTITION_FLAGS = (
    "under_replicated",
    "under_min_isr",
    "at_min_isr",
    "offline",
    "offline_unclean_only",
    "high_watermark_frozen",
    "leader_silent",
    "predicted_under_replicated",
)


def topic_families(shards: list[ShardStats]) -> Iterator[Metric]:
    """Per topic: partitions by condition, followers by status, stale metadata."""
    totals: dict[str, Counter[str]] = {}
    followers: Counter[tuple[str, str]] = Counter()
    stale: Counter[tuple[str, str]] = Counter()
    for shard in shards:
        for topic, gauges in shard.topics.items():
            counter = totals.setdefault(topic, Counter())
            counter["partitions"] += gauges.partitions
            for flag in PARTITION_FLAGS:
                counter[flag] += getattr(gauges, flag)
            for status, count in gauges.followers.items():
                followers[(topic, status)] += count
            stale[(topic, "expected")] += gauges.metadata_stale_expected
            stale[(topic, "overdue")] += gauges.metadata_stale_overdue
    partitions = GaugeMetricFamily("isrwatch_partitions", "Partitions monitored", labels=["topic"])
    for topic, counter in sorted(totals.items()):
        partitions.add_metric([topic], counter["partitions"])
    yield partitions
    for flag in PARTITION_FLAGS:
        family = GaugeMetricFamily(
            f"isrwatch_{flag}_partitions",
            f"Partitions {flag.replace('_', ' ')}",
            labels=["topic"],
        )
        for topic, counter in sorted(totals.items()):
            family.add_metric([topic], counter[flag])
        yield family
    by_status = GaugeMetricFamily(
        "isrwatch_followers", "Followers by status", labels=["topic", "status"]
    )
    for (topic, status), count in sorted(followers.items()):
        by_status.add_metric([topic, status], count)
    yield by_status
    metadata = GaugeMetricFamily(
        "isrwatch_metadata_stale_partitions",
        "Partitions whose cached ISR on some live broker lags the controller",
        labels=["topic", "state"],
    )
    for (topic, state), count in sorted(stale.items()):
        metadata.add_metric([topic, state], count)
    yield metadata


def broker_families(shards: list[ShardStats]) -> Iterator[Metric]:
    """Per broker: the followers it hosts by status, the partitions it leads by condition."""
    followers: Counter[tuple[str, str]] = Counter()
    leads: Counter[tuple[str, str]] = Counter()
    for shard in shards:
        for broker, gauges in shard.brokers.items():
            for status, count in gauges.followers.items():
                followers[(broker, status)] += count
            for condition, count in gauges.leads.items():
                leads[(broker, condition)] += count
    by_broker = GaugeMetricFamily(
        "isrwatch_broker_followers",
        "Follower replicas hosted by a broker, by status",
        labels=["broker", "status"],
    )
    for (broker, status), count in sorted(followers.items()):
        by_broker.add_metric([broker, status], count)
    yield by_broker
    led = GaugeMetricFamily(
        "isrwatch_broker_led_partitions",
        "Partitions a broker leads (leader -1: no leader), by condition",
        labels=["broker", "condition"],
    )
    for (broker, condition), count in sorted(leads.items()):
        led.add_metric([broker, condition], count)
    yield led


def unhealthy_families(shards: list[ShardStats]) -> Iterator[Metric]:
    """Per unhealthy partition and per follower not IN_SYNC: series exist only while
    unhealthy, which bounds cardinality on a large cluster."""
    partition_labels = ["topic", "partition"]
    condition = GaugeMetricFamily(
        "isrwatch_partition_condition",
        "1 for each unhealthy condition of a partition (series exist only while it holds)",
        labels=[*partition_labels, "condition"],
    )
    high_watermark = GaugeMetricFamily(
        "isrwatch_partition_high_watermark",
        "High watermark of an unhealthy partition",
        labels=partition_labels,
    )
    leader_leo = GaugeMetricFamily(
        "isrwatch_partition_leader_leo",
        "Leader's log end offset, unhealthy partitions",
        labels=partition_labels,
    )
    lag_time_max = GaugeMetricFamily(
        "isrwatch_partition_replica_lag_time_max_seconds",
        "replica.lag.time.max.ms (T) of the leader of an unhealthy partition: an ISR "
        f"follower lagging more than T is removed by {SHRINK_DEADLINE_FORMULA}",
        labels=partition_labels,
    )
    blackout_earliest = GaugeMetricFamily(
        "isrwatch_partition_blackout_earliest_seconds",
        "Predicted propagation window of a partition with stale metadata: the earliest "
        "time its ISR change can reach the brokers (epoch seconds)",
        labels=partition_labels,
    )
    blackout_latest = GaugeMetricFamily(
        "isrwatch_partition_blackout_latest_seconds",
        "Predicted propagation window of a partition with stale metadata: the latest "
        "time its ISR change should reach the brokers (epoch seconds)",
        labels=partition_labels,
    )
    follower_status = GaugeMetricFamily(
        "isrwatch_follower_status",
        "1 for each follower that is not IN_SYNC, with its status (series exist only "
        "while it is not IN_SYNC)",
        labels=["topic", "partition", "broker", "status", "leader"],
    )
    follower_lag = GaugeMetricFamily(
        "isrwatch_follower_lag_time_seconds",
        "Lag time of a follower that is not IN_SYNC (now - last caught up); no series "
        "while it has not caught up since its leader's election (docs/health-record.md)",
        labels=["topic", "partition", "broker", "status", "leader"],
    )
    follower_messages = GaugeMetricFamily(
        "isrwatch_follower_lag_messages",
        "Messages behind the leader, followers not IN_SYNC",
        labels=["topic", "partition", "broker", "status", "leader"],
    )
    shrink_by = GaugeMetricFamily(
        "isrwatch_follower_shrink_deadline_seconds",
        f"When Kafka will have removed the follower from the ISR ({SHRINK_DEADLINE_FORMULA})",
        labels=["topic", "partition", "broker", "status", "leader"],
    )
    for shard in shards:
        for reported in shard.unhealthy:
            record = reported.record
            topic, partition = record.topic, str(record.partition)
            for flag, holds in record.conditions().items():
                if holds and flag != "at_min_isr":
                    condition.add_metric([topic, partition, flag], 1)
            metadata = record.metadata
            if metadata.state != MetadataState.CONSISTENT.name:
                state = metadata.state.lower()
                condition.add_metric([topic, partition, f"metadata_{state}"], 1)
            if metadata.blackout_earliest_ms is not None:
                blackout_earliest.add_metric(
                    [topic, partition], metadata.blackout_earliest_ms / 1000
                )
            if metadata.blackout_latest_ms is not None:
                blackout_latest.add_metric([topic, partition], metadata.blackout_latest_ms / 1000)
            high_watermark.add_metric([topic, partition], record.high_watermark)
            leader_leo.add_metric([topic, partition], record.leader_leo)
            lag_time_max.add_metric([topic, partition], reported.replica_lag_time_max_ms / 1000)
            for f in record.followers:
                if f.status == FollowerStatus.IN_SYNC.name:
                    continue
                labels = [topic, partition, str(f.broker), f.status, str(record.leader)]
                follower_status.add_metric(labels, 1)
                # null: no time to count from (state.lag_time), so no series at all
                if f.lag_time_ms is not None:
                    follower_lag.add_metric(labels, f.lag_time_ms / 1000)
                if f.lag_messages is not None:
                    follower_messages.add_metric(labels, f.lag_messages)
                if f.shrink_deadline_ms is not None:
                    shrink_by.add_metric(labels, f.shrink_deadline_ms / 1000)
    yield condition
    yield high_watermark
    yield leader_leo
    yield lag_time_max
    yield blackout_earliest
    yield blackout_latest
    yield follower_status
    yield follower_lag
    yield follower_messages
    yield shrink_by
