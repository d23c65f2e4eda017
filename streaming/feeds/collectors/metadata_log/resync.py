"""The events that take a monitor from one metadata image to another.

Used where the log itself is not read record by record: at a start from a snapshot
(from nothing to the snapshot's image) and when the offset to resume from was deleted
(from the saved image to the newest snapshot's). Every partition whose state differs
gets a ``LeaderAndIsr`` with its whole state, as after a controller failover; the
epochs are the snapshot's own, so the job fences nothing it should not.
"""

from __future__ import annotations

from typing import Any

from state.events import Source
from streaming.feeds.collectors.metadata_log.image import MetadataImage
from streaming.feeds.wire import InputRecord, partition_key, split_created


def image_events(
    old: MetadataImage, new: MetadataImage, *, ts: int, epoch: int, offset: int
) -> list[InputRecord]:
    common: dict[str, Any] = {"ts": ts, "controller_epoch": epoch, "metadata_offset": offset}
    if new.controller_id is not None and new.controller_epoch == epoch:
        common["controller_id"] = new.controller_id
    key = str(common.get("controller_id", -1))
    out: list[InputRecord] = []

    def event(body: dict[str, Any], event_key: str = key) -> None:
        out.append(InputRecord(Source.CONTROLLER_EVENTS, event_key, {**body, **common}))

    before, after = old.topic_partitions(), new.topic_partitions()
    deleted = sorted(set(before) - set(after))
    if deleted:
        event({"type": "TopicChange", "created": {}, "deleted": deleted})
    created = {
        topic: {str(p): list(s.replicas) for p, s in sorted(parts.items())
                if p not in before.get(topic, {})}
        for topic, parts in sorted(after.items())
    }  # fmt: skip
    for part in split_created({t: c for t, c in created.items() if c}):
        if part:
            event({"type": "TopicChange", "created": part, "deleted": []})
    for topic, parts in sorted(after.items()):
        for partition, state in sorted(parts.items()):
            if before.get(topic, {}).get(partition) == state:
                continue
            event({
                "type": "LeaderAndIsr", "topic": topic, "partition": partition,
                "leader": state.leader, "leader_epoch": state.leader_epoch,
                "isr": list(state.isr), "replicas": list(state.replicas),
                "partition_epoch": state.partition_epoch,
            }, partition_key(topic, partition))  # fmt: skip
    live = new.live_brokers()
    if live != old.live_brokers():
        event({"type": "BrokerChange", "live": [{"id": b, "epoch": e} for b, e in live.items()]})
    old_min_isr = old.min_insync_replicas()
    for topic, value in new.min_insync_replicas().items():
        if old_min_isr.get(topic) != value:
            event({"type": "TopicConfig", "topic": topic, "min_insync_replicas": value})
    old_lag = old.replica_lag_time_max_ms()
    for broker, lag in new.replica_lag_time_max_ms().items():
        if old_lag.get(broker) != lag:
            event({"type": "BrokerConfig", "broker": broker, "replica_lag_time_max_ms": lag},
                  str(broker))  # fmt: skip
    return out
