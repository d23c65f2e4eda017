"""The events that take a monitor from one metadata image to another.

Used where the log itself is not read record by record: at a start from a snapshot
(from nothing to the snapshot's image) and when the offset to resume from was deleted
(from the saved image to the newest snapshot's). Every partition whose state differs
gets a ``LeaderAndIsr`` with its whole state, as after a controller failover; the
epochs are the snapshot's own, so the job fences nothing it should not.
"""

from __future__ import annotations

from typing import Any

from state.events import (
    BrokerChange,
    BrokerConfig,
    BrokerRegistration,
    ControllerEvent,
    LeaderAndIsr,
    TopicChange,
    TopicConfig,
)
from streaming.feeds.collectors.metadata_log.image import MetadataImage
from streaming.feeds.wire import InputRecord, split_created
from streaming.feeds.wire_encoding import input_record


def image_events(
    old: MetadataImage, new: MetadataImage, *, ts: int, epoch: int, offset: int
) -> list[InputRecord]:
    controller = new.controller_id if new.controller_epoch == epoch else None
    out: list[InputRecord] = []

    def event(kind: type[ControllerEvent], **fields: Any) -> None:
        out.append(
            input_record(
                kind(
                    ts=ts,
                    controller_id=controller,
                    controller_epoch=epoch,
                    metadata_offset=offset,
                    **fields,
                )
            )
        )

    before, after = old.topic_partitions(), new.topic_partitions()
    deleted = tuple(sorted(set(before) - set(after)))
    if deleted:
        event(TopicChange, deleted=deleted)
    created = {
        topic: {p: s.replicas for p, s in sorted(parts.items()) if p not in before.get(topic, {})}
        for topic, parts in sorted(after.items())
    }
    for part in split_created({t: c for t, c in created.items() if c}):
        if part:
            event(TopicChange, created=part)
    for topic, parts in sorted(after.items()):
        for partition, state in sorted(parts.items()):
            if before.get(topic, {}).get(partition) == state:
                continue
            event(
                LeaderAndIsr,
                topic=topic,
                partition=partition,
                leader=state.leader,
                leader_epoch=state.leader_epoch,
                isr=state.isr,
                replicas=state.replicas,
                partition_epoch=state.partition_epoch,
            )
    live = new.live_brokers()
    if live != old.live_brokers():
        event(BrokerChange, live=tuple(BrokerRegistration(id=b, epoch=e) for b, e in live.items()))
    old_min_isr = old.min_insync_replicas()
    for topic, value in new.min_insync_replicas().items():
        if old_min_isr.get(topic) != value:
            event(TopicConfig, topic=topic, min_insync_replicas=value)
    old_lag = old.replica_lag_time_max_ms()
    for broker, lag in new.replica_lag_time_max_ms().items():
        if old_lag.get(broker) != lag:
            event(BrokerConfig, broker=broker, replica_lag_time_max_ms=lag)
    return out
