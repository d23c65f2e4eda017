"""A shard's gauges for the metrics, counted from its health frame in a few numpy passes:
per broker, its followers by status and the partitions it leads by condition; per topic,
its partitions by condition and its followers by status."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from state import BOOL, STATUS_NAMES, HealthFrame, MetadataState
from state.partition_health import OfflineRecovery
from streaming.job.shard_stats import BrokerGauges, TopicGauges


def broker_gauges(frame: HealthFrame) -> dict[str, BrokerGauges]:
    """Per broker: its followers by status, and the partitions it leads by condition."""
    statuses = frame.follower_status
    hosted = statuses >= 0
    followers: dict[str, dict[str, int]] = {}
    for (broker, status), count in _counts(frame.follower_broker[hosted], statuses[hosted]):
        followers.setdefault(str(broker), {})[STATUS_NAMES[status]] = count
    conditions = {
        "partitions": np.ones(len(frame), dtype=np.bool_),
        "under_replicated": frame.under_replicated,
        "under_min_isr": frame.under_min_isr,
        "offline": frame.offline,
        "leader_silent": frame.leader_silent,
        "predicted_under_replicated": frame.predicted_under_replicated,
    }
    leads: dict[str, dict[str, int]] = {}
    for condition, mask in conditions.items():
        for (leader,), count in _counts(frame.leader[mask]):
            leads.setdefault(str(leader), {})[condition] = count
    return {
        broker: BrokerGauges(followers=followers.get(broker, {}), leads=leads.get(broker, {}))
        for broker in followers.keys() | leads.keys()
    }


def topic_gauges(frame: HealthFrame) -> dict[str, TopicGauges]:
    """Per topic: its partitions by condition and its followers by status."""
    codes, names = pd.factorize(np.asarray(frame.topic, dtype=object), sort=True)
    topics = len(names)

    def per_topic(mask: BOOL) -> list[int]:
        counts: list[int] = np.bincount(codes[mask], minlength=topics).tolist()
        return counts

    statuses = frame.follower_status
    hosted = statuses >= 0
    followers: list[dict[str, int]] = [{} for _ in range(topics)]
    row_topic = np.broadcast_to(codes[:, None], statuses.shape)
    for (topic, status), count in _counts(row_topic[hosted], statuses[hosted]):
        followers[topic][STATUS_NAMES[status]] = count
    columns = {
        "partitions": per_topic(np.ones(len(frame), dtype=np.bool_)),
        "under_replicated": per_topic(frame.under_replicated),
        "under_min_isr": per_topic(frame.under_min_isr),
        "at_min_isr": per_topic(frame.at_min_isr),
        "offline": per_topic(frame.offline),
        "offline_unclean_only": per_topic(frame.offline_recovery == OfflineRecovery.UNCLEAN_ONLY),
        "high_watermark_frozen": per_topic(frame.high_watermark_frozen),
        "leader_silent": per_topic(frame.leader_silent),
        "predicted_under_replicated": per_topic(frame.predicted_under_replicated),
        "metadata_stale_expected": per_topic(frame.metadata_state == MetadataState.STALE_EXPECTED),
        "metadata_stale_overdue": per_topic(frame.metadata_state == MetadataState.STALE_OVERDUE),
    }
    return {
        str(name): TopicGauges(
            followers=followers[t], **{column: counts[t] for column, counts in columns.items()}
        )
        for t, name in enumerate(names)
    }


def _counts(
    keys: npt.NDArray[Any], statuses: npt.NDArray[Any] | None = None
) -> list[tuple[tuple[int, ...], int]]:
    """Each distinct key (or (key, follower status) pair) and how often it occurs."""
    codes = np.asarray(keys, dtype=np.int64)
    if statuses is not None:  # one sort over int codes: statuses are below len(STATUS_NAMES)
        codes = codes * len(STATUS_NAMES) + statuses.astype(np.int64)
    distinct, counts = np.unique(codes, return_counts=True)
    if statuses is None:
        return [
            ((key,), count) for key, count in zip(distinct.tolist(), counts.tolist(), strict=True)
        ]
    key, status = np.divmod(distinct, len(STATUS_NAMES))
    return [
        ((k, s), count)
        for k, s, count in zip(key.tolist(), status.tolist(), counts.tolist(), strict=True)
    ]
