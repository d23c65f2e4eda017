"""Record batches of ``__cluster_metadata`` -> the contract's controller events.

``MetadataReplayer`` keeps a ``MetadataImage`` and, for each batch in offset order,
replays its records and says what changed, stamped with the batch's append time, the
quorum epoch that wrote it (the controller epoch of KRaft) and the quorum leader (the
active controller), plus ``metadata_offset``, the offset of the record the event comes
from (a field the job may use to tell which brokers have applied it):

* a ``LeaderChangeMessage`` control record -> ``ControllerChange``;
* new partitions (``PartitionRecord``) -> one ``TopicChange`` (created) for the batch,
  then a ``LeaderAndIsr`` per partition;
* a ``PartitionChangeRecord`` -> ``IsrChange`` (with leader epoch and partition epoch)
  when only the ISR changed, as after an ``AlterPartition`` of the leader; else
  ``LeaderAndIsr`` with the whole new state (a new leader or leader epoch, new replicas,
  or a change isrwatch does not follow, such as directories, which still moves the
  partition epoch);
* ``RemoveTopicRecord`` -> ``TopicChange`` (deleted);
* ``ClearElrRecord`` (4.0+) -> ``ClearElr`` of its topic (of every topic when it names
  none); the ELR and last known ELR of a partition (record version 2) ride on its
  ``LeaderAndIsr`` and ``IsrChange`` events;
* broker records -> ``BrokerChange`` when the set of unfenced brokers or their epochs
  changed at the end of the batch;
* ``ConfigRecord`` -> ``TopicConfig`` / ``BrokerConfig`` when a topic's effective
  ``min.insync.replicas`` or a broker's ``replica.lag.time.max.ms`` changed.

Records inside a metadata transaction (``BeginTransactionRecord`` ..
``EndTransactionRecord``, Kafka 3.6+) take effect together at its end, as brokers apply
them; an ``AbortTransactionRecord`` drops them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from state.events import (
    BrokerChange,
    BrokerConfig,
    BrokerRegistration,
    ClearElr,
    ControllerChange,
    ControllerEvent,
    IsrChange,
    LeaderAndIsr,
    TopicChange,
    TopicConfig,
)
from streaming.feeds.collectors.metadata_log.image import BrokerState, MetadataImage, PartitionState
from streaming.feeds.collectors.metadata_log.records import (
    CONTROL_LEADER_CHANGE,
    MetadataRecord,
    decode_leader_change,
    decode_metadata_value,
)
from streaming.feeds.collectors.metadata_log.segments import Batch
from streaming.feeds.collectors.metadata_log.wire import DecodeError
from streaming.feeds.wire import InputRecord, split_created
from streaming.feeds.wire_encoding import input_record


class RecordType(IntEnum):
    """Metadata record type ids (the schemas' ``apiKey``) that the replay acts on."""

    REGISTER_BROKER = 0
    UNREGISTER_BROKER = 1
    TOPIC = 2
    PARTITION = 3
    CONFIG = 4
    PARTITION_CHANGE = 5
    FENCE_BROKER = 7
    UNFENCE_BROKER = 8
    REMOVE_TOPIC = 9
    FEATURE_LEVEL = 12
    BROKER_REGISTRATION_CHANGE = 17
    BEGIN_TRANSACTION = 23
    END_TRANSACTION = 24
    ABORT_TRANSACTION = 25
    CLEAR_ELR = 28


FENCED = 1
UNFENCED = -1


@dataclass
class _Unit:
    """The records that take effect together: one batch, or one metadata transaction."""

    image_before: MetadataImage | None  # kept for an abort (transactions only)
    live_before: dict[int, int]
    min_isr_before: dict[str, int]
    lag_before: dict[int, int]
    created: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    events: list[InputRecord] = field(default_factory=list)
    broker_offset: int | None = None  # of its last broker record
    config_offset: int | None = None  # of its last config, topic or broker record
    first: tuple[int, int, int] | None = None  # (ts, epoch, offset) of its first batch


class MetadataReplayer:
    """Replays batches in offset order; ``records`` counts records by
    ``"<name> v<version>"``, ``dropped`` what could not be turned into events, by reason."""

    def __init__(self, image: MetadataImage | None = None) -> None:
        self.image = image or MetadataImage()
        self.records: Counter[str] = Counter()
        self.dropped: Counter[str] = Counter()
        self._unit: _Unit | None = None
        self._in_transaction = False

    @property
    def in_transaction(self) -> bool:
        return self._in_transaction

    def stable_image(self) -> MetadataImage:
        """The image outside any open transaction: as it was when the transaction began."""
        if self._in_transaction and self._unit is not None and self._unit.image_before is not None:
            return self._unit.image_before
        return self.image

    # ------------------------------------------------------------------ batches

    def replay(self, batch: Batch) -> list[InputRecord]:
        """The events of ``batch`` (none while a transaction is open)."""
        if batch.is_control:
            return self._control(batch)
        unit = self._open(batch)
        for record in batch.records:
            if record.value is None:
                self.dropped["record_without_value"] += 1
                continue
            try:
                decoded = decode_metadata_value(record.value)
            except DecodeError:
                self.dropped["undecodable_record"] += 1
                continue
            self.records[f"{decoded.name} v{decoded.version}"] += 1
            self._apply(decoded, batch, record.offset, unit)
            unit = self._open(batch)  # the same unit, or a new one after an abort
        if self._in_transaction:
            return []
        return self._close()

    def _control(self, batch: Batch) -> list[InputRecord]:
        out: list[InputRecord] = []
        for record in batch.records:
            if record.key is None or len(record.key) < 4:
                self.dropped["control_record_without_key"] += 1
                continue
            control_type = int.from_bytes(record.key[2:4], "big", signed=True)
            if control_type != CONTROL_LEADER_CHANGE or record.value is None:
                self.records[f"control:{control_type}"] += 1
                continue
            try:
                message = decode_leader_change(record.value)
            except DecodeError:
                self.dropped["undecodable_record"] += 1
                continue
            self.records[f"{message.name} v{message.version}"] += 1
            leader = int(message.fields["LeaderId"])
            self.image.controller_id = leader if leader >= 0 else None
            self.image.controller_epoch = batch.epoch
            if leader >= 0:
                out.append(
                    input_record(
                        ControllerChange(
                            ts=batch.append_ms,
                            controller_id=leader,
                            controller_epoch=batch.epoch,
                            metadata_offset=record.offset,
                        )
                    )
                )
        return out

    # ------------------------------------------------------------------ units

    def _open(self, batch: Batch) -> _Unit:
        if self._unit is None:
            image = self.image
            self._unit = _Unit(
                None,
                image.live_brokers(),
                image.min_insync_replicas(),
                image.replica_lag_time_max_ms(),
            )
        if self._unit.first is None:
            self._unit.first = (batch.append_ms, batch.epoch, batch.base_offset)
        return self._unit

    def _close(self) -> list[InputRecord]:
        unit, self._unit = self._unit, None
        if unit is None or unit.first is None:
            return []
        ts, epoch, offset = unit.first
        out: list[InputRecord] = []
        for part in split_created(unit.created) if unit.created else []:
            out.append(self._event(TopicChange, ts, epoch, offset, created=part))
        live = self.image.live_brokers()
        if live != unit.live_before:
            registrations = tuple(BrokerRegistration(id=b, epoch=e) for b, e in live.items())
            at = unit.broker_offset or offset
            out.append(self._event(BrokerChange, ts, epoch, at, live=registrations))
        out += unit.events
        if unit.config_offset is not None:
            at = unit.config_offset
            for topic, value in self.image.min_insync_replicas().items():
                if unit.min_isr_before.get(topic) != value:
                    out.append(
                        self._event(
                            TopicConfig, ts, epoch, at, topic=topic, min_insync_replicas=value
                        )
                    )
            for broker, lag in self.image.replica_lag_time_max_ms().items():
                if unit.lag_before.get(broker) != lag:
                    out.append(
                        self._event(
                            BrokerConfig, ts, epoch, at, broker=broker, replica_lag_time_max_ms=lag
                        )
                    )
        return out

    def _event(
        self, kind: type[ControllerEvent], ts: int, epoch: int, offset: int, **fields: Any
    ) -> InputRecord:
        """An event of the record at ``offset``, written in quorum epoch ``epoch``: it
        names the quorum leader only when the image knows the leader of that epoch."""
        controller = self.image.controller_id
        if self.image.controller_epoch != epoch:
            controller = None
        return input_record(
            kind(
                ts=ts,
                controller_id=controller,
                controller_epoch=epoch,
                metadata_offset=offset,
                **fields,
            )
        )

    # ------------------------------------------------------------------ records

    def _apply(self, record: MetadataRecord, batch: Batch, offset: int, unit: _Unit) -> None:
        f = record.fields
        image = self.image
        ts, epoch = batch.append_ms, batch.epoch
        match record.type_id:
            case RecordType.TOPIC:
                image.topic_names[f["TopicId"]] = f["Name"]
                unit.config_offset = offset  # the cluster default may now apply to it
            case RecordType.PARTITION:
                topic_id, partition, state = image.replay_partition(f, record.version)
                name = image.topic_names.get(topic_id)
                if name is None:
                    self.dropped["partition_of_unknown_topic"] += 1
                    return
                unit.created.setdefault(name, {})[partition] = tuple(state.replicas)
                unit.events.append(self._leader_and_isr(ts, epoch, offset, name, partition, state))
            case RecordType.PARTITION_CHANGE:
                change = image.replay_partition_change(f)
                name = image.topic_names.get(f["TopicId"])
                if change is None or name is None:
                    self.dropped["change_of_unknown_partition"] += 1
                    return
                before, after = change
                unit.events.append(
                    self._partition_change(ts, epoch, offset, name, f["PartitionId"], before, after)
                )
            case RecordType.REMOVE_TOPIC:
                name = image.remove_topic(f["TopicId"])
                if name is None:
                    self.dropped["removal_of_unknown_topic"] += 1
                    return
                unit.created.pop(name, None)
                unit.events.append(self._event(TopicChange, ts, epoch, offset, deleted=(name,)))
            case RecordType.REGISTER_BROKER:
                image.brokers[f["BrokerId"]] = BrokerState(
                    f["BrokerEpoch"], bool(f["Fenced"]), bool(f["InControlledShutdown"])
                )
                unit.config_offset = unit.broker_offset = offset
            case RecordType.UNREGISTER_BROKER:
                image.brokers.pop(f["BrokerId"], None)
                unit.broker_offset = offset
            case RecordType.FENCE_BROKER | RecordType.UNFENCE_BROKER:
                broker = image.brokers.get(f["Id"])
                if broker is not None:
                    broker.fenced = record.type_id == RecordType.FENCE_BROKER
                unit.broker_offset = offset
            case RecordType.BROKER_REGISTRATION_CHANGE:
                broker = image.brokers.get(f["BrokerId"])
                if broker is not None:
                    if f["Fenced"] == FENCED:
                        broker.fenced = True
                    elif f["Fenced"] == UNFENCED:
                        broker.fenced = False
                    if f["InControlledShutdown"] == 1:
                        broker.in_controlled_shutdown = True
                unit.broker_offset = offset
            case RecordType.CONFIG:
                image.set_config(f["ResourceType"], f["ResourceName"], f["Name"], f["Value"])
                unit.config_offset = offset
            case RecordType.CLEAR_ELR:
                image.clear_elr(f["TopicName"])
                topic = f["TopicName"] or None  # empty: every topic
                unit.events.append(self._event(ClearElr, ts, epoch, offset, topic=topic))
            case RecordType.FEATURE_LEVEL:
                image.features[f["Name"]] = f["FeatureLevel"]
            case RecordType.BEGIN_TRANSACTION:
                unit.image_before = image.copy()
                self._in_transaction = True
            case RecordType.END_TRANSACTION:
                self._in_transaction = False
            case RecordType.ABORT_TRANSACTION:
                self._in_transaction = False
                if unit.image_before is not None:
                    self.image = unit.image_before
                self.dropped["aborted_transaction"] += len(unit.events)
                self._unit = None

    def _leader_and_isr(
        self, ts: int, epoch: int, offset: int, topic: str, partition: int, state: PartitionState
    ) -> InputRecord:
        return self._event(
            LeaderAndIsr,
            ts,
            epoch,
            offset,
            topic=topic,
            partition=partition,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            isr=tuple(state.isr),
            replicas=tuple(state.replicas),
            partition_epoch=state.partition_epoch,
            **_eligible_leaders(state),
        )

    def _partition_change(
        self,
        ts: int,
        epoch: int,
        offset: int,
        topic: str,
        partition: int,
        before: PartitionState,
        after: PartitionState,
    ) -> InputRecord:
        isr_only = (
            after.leader_epoch == before.leader_epoch
            and after.replicas == before.replicas
            and after.isr != before.isr
            and after.leader >= 0
        )
        if not isr_only:
            return self._leader_and_isr(ts, epoch, offset, topic, partition, after)
        return self._event(
            IsrChange,
            ts,
            epoch,
            offset,
            topic=topic,
            partition=partition,
            leader=after.leader,
            old_isr=tuple(before.isr),
            new_isr=tuple(after.isr),
            leader_epoch=after.leader_epoch,
            partition_epoch=after.partition_epoch,
            **_eligible_leaders(after),
        )


def _eligible_leaders(state: PartitionState) -> dict[str, tuple[int, ...] | None]:
    """The ELR fields of an event: both as the image holds them, or neither."""
    if state.elr is None or state.last_known_elr is None:
        return {}
    return {"elr": state.elr, "last_known_elr": state.last_known_elr}
