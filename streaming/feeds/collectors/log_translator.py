"""Parsed log records -> controller events (docs/event-contract.md), with the memory that needs.

The translator is fed records in event-time order (``log_collector`` merges the files of
one read by time) and returns the events they mean. Its memory is plain JSON
(``state()`` / ``LogTranslator(state)``) and is saved with the file positions, so that
reading the same lines again after a restart gives the same events.

What each record becomes:

* ``Cached leader info`` / ``Deleted partition ... from metadata cache`` lines of one
  UpdateMetadata request (same broker, controller, epoch and correlation id, in a row)
  -> one ``UpdateMetadata`` of that broker (``leader`` -2 for a deleted partition; such a
  line carries no other state, so its epochs are 0 and its lists empty, which the model
  does not read for a deletion). The lines do not list the request's live brokers.
* ``Received LeaderAndIsr request`` -> ``LeaderAndIsr``, once per (leader epoch,
  partition epoch): every replica of the partition logs the same request.
* ``Shrinking/Expanding ISR from A to B`` is the leader's proposal. What makes it a
  change depends on the Kafka version (``CommitLogging``):

  - Kafka 2.4 and later log the commit at INFO: the ISR changes only when ``ISR updated to
    B and (zk)version updated to V`` follows. That line becomes an ``IsrChange`` from A
    to B with ``partition_epoch`` V (no ``leader_epoch``: the line has none, and the model
    then applies it to the current one). Kafka 2.8 and later log no proposal for an
    expansion: the ISR before is then the last one this translator saw for the
    partition (LeaderAndIsr or an earlier commit); when it saw none, the partial
    ``IsrChange`` is sent, without ``old_isr`` (the model's ISR is then the one before:
    docs/event-contract.md).
  - Kafka 0.10 to 2.3 log the commit at TRACE only: the proposal is the change (an
    ``IsrChange`` A to B with no epochs), unless ``Cached zkVersion [V] not equal to that
    in zookeeper, skip updating ISR`` follows for the partition. Kafka writes ZooKeeper
    and logs that line in the same call, so the proposal stands once the logs read have
    moved ``CANCEL_WINDOW_MS`` past it, once another ISR line of the partition comes, or
    when the input ends (``flush``).
  - A wording shared by versions of both kinds (the shrink of 2.2 to 3.5, the expansion
    of 1.0 to 2.7) is decided by the broker's other lines: a commit line
    or a 2.4+ cancel (``Cached zkVersion 7``, no brackets) means 2.4+; a 0.10-2.1 wording,
    a bracketed cancel, or a second proposal for a partition with no commit between means
    2.3 or older. Until then the proposal waits; one still undecided when the input ends
    is dropped (counted ``isr_proposal_unconfirmed``), never guessed.

  A proposal that fails (``skip updating ISR``, ``Failed to alter partition``) becomes
  nothing.
* ``successfully elected as the controller. Epoch incremented to E`` (ZooKeeper) and
  ``Becoming the active controller at epoch E`` (KRaft) -> ``ControllerChange``; a losing
  broker's ``Broker N has been elected as the controller`` -> the partial
  ``ControllerChange`` (no epoch: the line names none).
* ``Partition T-P completed preferred replica leader election. New leader is N`` -> the
  partial ``LeaderAndIsr`` (topic, partition, leader; no epochs, ISR or replicas).
* ``Initialized broker epochs cache`` (a new controller's view, with the real epochs)
  and ``Newly added brokers ... all live brokers: ...`` -> ``BrokerChange``.
* ``New topics: ...`` -> ``TopicChange.created``; ``Deletion of topic X successfully
  completed`` -> ``TopicChange.deleted``.

Broker epochs. The controller logs each broker change with the brokers' real epochs
(``Updated broker epochs cache``, seen on 2.8 and 3.9) right after the broker-change line;
the translator holds a broker-change line ``HOLD_MS`` for it, and sends that one instead.
Without it (older brokers): the broker-change line names new, dead and bounced brokers but
no epochs.
An epoch the translator emits for a broker stays the same until the controller reports
that broker new or bounced; it then becomes the larger of the previous one plus one and
the broker's latest ``czxid (broker epoch)`` seen in a ``Registered broker`` line (on
that broker's own server.log). Epochs from ``Initialized broker epochs cache`` are
Kafka's own. So epochs only grow, and grow exactly when Kafka says a broker came back.

Controller epochs. Events from controller.log carry the epoch of that controller's last
election line, when the translator saw it; UpdateMetadata and LeaderAndIsr carry the
epoch the line names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from state.events import (
    LEADER_DURING_DELETE,
    BrokerChange,
    BrokerRegistration,
    ControllerChange,
    ControllerEvent,
    IsrChange,
    LeaderAndIsr,
    MetadataPartitionState,
    TopicChange,
    UpdateMetadata,
)
from streaming.feeds.collectors.log_lines import Record
from streaming.feeds.collectors.log_messages.controller import (
    BrokerEpochsInitialized,
    BrokerRegistered,
    BrokerSetChanged,
    ControllerElected,
    ControllerSeen,
    PreferredLeaderElected,
    TopicDeleted,
    TopicsCreated,
    TopicsDeleted,
)
from streaming.feeds.collectors.log_messages.isr_changes import (
    CommitLogging,
    IsrCommitted,
    IsrProposal,
    IsrUpdateFailed,
)
from streaming.feeds.collectors.log_messages.state_changes import (
    CachedLeaderInfo,
    DeletedFromCache,
    LeaderAndIsrReceived,
    LeadershipStarted,
    PartitionLeaderChosen,
    PartitionState,
    PartitionStateApplied,
)
from streaming.feeds.wire import MAX_PARTITIONS_PER_EVENT, InputRecord, partition_key
from streaming.feeds.wire_encoding import input_record

STATE_VERSION = 2

HOLD_MS = 1000
"""How long a broker-change line waits for the controller's "Updated broker epochs cache"
line (logged by the same call, right after it)."""

CANCEL_WINDOW_MS = 2000
"""How far a broker's log must move past a Kafka 0.10-2.3 ISR proposal before it stands:
the cancel line is logged by the same call, right after the ZooKeeper write."""


@dataclass(frozen=True, slots=True)
class MetadataUpdate:
    """The cached-partition lines of one UpdateMetadata request on one broker, in a row."""

    ts: int  # the last line's: the request is applied when its last partition is
    broker: int
    controller_id: int
    controller_epoch: int
    correlation_id: int
    states: tuple[PartitionState | tuple[str, int], ...]  # (topic, partition): deleted


TranslatorInput = Record | MetadataUpdate


def group_metadata_updates(records: Iterable[Record]) -> list[TranslatorInput]:
    """Consecutive cache lines of one request -> one ``MetadataUpdate`` (one file's records,
    in file order), of at most ``MAX_PARTITIONS_PER_EVENT`` partitions."""
    out: list[TranslatorInput] = []
    for record in records:
        if not isinstance(record, CachedLeaderInfo | DeletedFromCache):
            out.append(record)
            continue
        entry: PartitionState | tuple[str, int] = (
            record.state
            if isinstance(record, CachedLeaderInfo)
            else (record.topic, record.partition)
        )
        request = (
            record.broker,
            record.controller_id,
            record.controller_epoch,
            record.correlation_id,
        )
        last = out[-1] if out else None
        if (
            isinstance(last, MetadataUpdate)
            and (last.broker, last.controller_id, last.controller_epoch, last.correlation_id)
            == request
            and len(last.states) < MAX_PARTITIONS_PER_EVENT
        ):
            out[-1] = MetadataUpdate(record.ts, *request, (*last.states, entry))
        else:
            out.append(MetadataUpdate(record.ts, *request, (entry,)))
    return out


def input_ts(item: TranslatorInput) -> int:
    return item.ts


class LogTranslator:
    """Records -> events; ``dropped`` counts records that became no event, by reason."""

    def __init__(self, state: Mapping[str, Any] | None = None) -> None:
        state = state or {}
        if state and state.get("version") == 1:
            state = _upgrade_state(state)
        if state and state.get("version") != STATE_VERSION:
            raise ValueError(f"unknown translator state version {state.get('version')!r}")
        # controller id -> epoch of its last election seen
        self._controller_epochs: dict[int, int] = _int_keys(state.get("controller_epochs", {}))
        # "topic:partition" -> [partition_epoch, isr, isr of the version before (or None)]:
        # the last ISR seen (the third item is absent in a state saved before it was kept)
        self._isr: dict[str, list[Any]] = dict(state.get("isr", {}))
        # "broker topic:partition" -> the leader's pending proposal:
        # {"ts", "topic", "partition", "old", "new", "logging"}
        self._pending: dict[str, dict[str, Any]] = dict(state.get("pending", {}))
        # broker -> how it logs ISR commits (a CommitLogging value), once learned
        self._commit_logging: dict[int, str] = {
            int(broker): mode for broker, mode in state.get("commit_logging", {}).items()
        }
        # "topic:partition" -> [leader_epoch, partition_epoch] of the last LeaderAndIsr sent
        self._leader_and_isr: dict[str, list[int]] = dict(state.get("leader_and_isr", {}))
        # "topic:partition" -> partition epoch of the last ISR change sent (a commit line
        # of that version again, or after the leader's applied state said it, is the same
        # change)
        self._isr_sent: dict[str, int] = dict(state.get("isr_sent", {}))
        # "topic:partition" -> [leader_epoch, partition_epoch] of the last partial one sent
        self._leadership: dict[str, list[int]] = dict(state.get("leadership", {}))
        # broker -> epoch sent for its current registration; last epoch of every broker seen
        self._live: dict[int, int] = _int_keys(state.get("live", {}))
        self._last_epoch: dict[int, int] = _int_keys(state.get("last_epoch", {}))
        self._registered: dict[int, int] = _int_keys(state.get("registered", {}))
        # a Raft leader's election waiting to be kept: {"ts", "controller_id", "epoch"}
        self._held_raft_leader: dict[str, Any] | None = state.get("held_raft_leader")
        # topics a KRaft controller's line said deleted (since their last creation seen)
        self._deleted_topics: set[str] = set(state.get("deleted_topics", []))
        # a broker change waiting for the controller's line with the real epochs:
        # {"ts", "controller_id", "live": {broker: epoch}, "renewed": [new or bounced]}
        self._held_broker_change: dict[str, Any] | None = state.get("held_broker_change")
        self.dropped: Counter[str] = Counter()

    def state(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "controller_epochs": _str_keys(self._controller_epochs),
            "isr": dict(self._isr),
            "pending": dict(self._pending),
            "commit_logging": {str(b): m for b, m in sorted(self._commit_logging.items())},
            "leader_and_isr": dict(self._leader_and_isr),
            "leadership": dict(self._leadership),
            "isr_sent": dict(self._isr_sent),
            "live": _str_keys(self._live),
            "last_epoch": _str_keys(self._last_epoch),
            "registered": _str_keys(self._registered),
            "held_broker_change": self._held_broker_change,
            "deleted_topics": sorted(self._deleted_topics),
            "held_raft_leader": self._held_raft_leader,
        }

    def translate(self, items: Iterable[TranslatorInput]) -> list[InputRecord]:
        out: list[InputRecord] = []
        for item in items:
            if isinstance(item, IsrProposal | IsrCommitted | IsrUpdateFailed):
                out += self._isr_record(item)
                continue
            if isinstance(item, PartitionStateApplied):
                state = item.state
                out += self._confirmed_by_state(
                    item.ts,
                    item.broker,
                    state.topic,
                    state.partition,
                    state.leader,
                    state.isr,
                    state.partition_epoch,
                )
            out += self._release_held_before(item.ts)
            out += self._confirm_before(item.ts)
            if isinstance(item, BrokerSetChanged | BrokerEpochsInitialized):
                out += self._broker_record(item)
                continue
            if isinstance(item, LeadershipStarted) and item.isr is not None:
                out += self._confirmed_by_state(
                    item.ts,
                    item.broker,
                    item.topic,
                    item.partition,
                    item.leader,
                    item.isr,
                    item.partition_epoch,
                )
            event = self._translate(item)
            if event is not None:
                out.append(event)
        return out

    def advance(self, log_time: int) -> list[InputRecord]:
        """The brokers' logs have reached ``log_time``: Kafka 0.10-2.3 proposals older
        than ``CANCEL_WINDOW_MS`` stand."""
        return self._release_held_before(log_time) + self._confirm_before(log_time)

    def flush(self) -> list[InputRecord]:
        """The input ended (or stayed idle for a read): every Kafka 0.10-2.3 proposal
        stands; proposals whose broker's version is still unknown are dropped."""
        out = self._release_raft_leader(lambda held: True)
        out += self._release_held(lambda held: True) + self._confirm(lambda pending: True)
        for key in [k for k, p in self._pending.items() if self._mode(p) == CommitLogging.UNKNOWN]:
            del self._pending[key]
            self.dropped["isr_proposal_unconfirmed"] += 1
        return out

    # ------------------------------------------------------------------ ISR lines

    def _mode(self, pending: Mapping[str, Any]) -> CommitLogging:
        if pending["logging"] != CommitLogging.UNKNOWN:
            return CommitLogging(pending["logging"])
        broker = int(pending["broker"])
        return CommitLogging(self._commit_logging.get(broker, CommitLogging.UNKNOWN))

    def _learn_logging(self, broker: int, mode: CommitLogging) -> None:
        if mode != CommitLogging.UNKNOWN:
            self._commit_logging[broker] = mode

    def _confirm_before(self, log_time: int) -> list[InputRecord]:
        """Kafka 0.10-2.3 proposals the logs have moved ``CANCEL_WINDOW_MS`` past stand,
        whether the logs are read in one go or followed (a topic deleted later must not
        take its partitions' standing proposals with it)."""
        return self._confirm(lambda pending: pending["ts"] + CANCEL_WINDOW_MS <= log_time)

    def _confirm(self, due: Any) -> list[InputRecord]:
        out = []
        for key, pending in sorted(self._pending.items(), key=lambda kv: kv[1]["ts"]):
            if self._mode(pending) == CommitLogging.TRACE and due(pending):
                del self._pending[key]
                out.append(self._proposal_change(pending))
        return out

    def _isr_record(self, item: IsrProposal | IsrCommitted | IsrUpdateFailed) -> list[InputRecord]:
        key = f"{item.broker} {partition_key(item.topic, item.partition)}"
        out: list[InputRecord] = []
        if isinstance(item, IsrCommitted):
            self._learn_logging(item.broker, CommitLogging.INFO)
            event = self._isr_change(item)
            return [event] if event is not None else []
        if isinstance(item, IsrUpdateFailed):
            self._learn_logging(item.broker, item.commit_logging)
            if self._pending.pop(key, None) is not None:
                self.dropped["isr_update_failed"] += 1
            return []
        self._learn_logging(item.broker, item.commit_logging)
        previous = self._pending.pop(key, None)
        if previous is not None:
            if self._mode(previous) == CommitLogging.UNKNOWN:
                # a 2.4+ broker logs the commit (or the cancel) before its next proposal
                self._learn_logging(item.broker, CommitLogging.TRACE)
            if self._mode(previous) == CommitLogging.TRACE:
                out.append(self._proposal_change(previous))
            else:
                self.dropped["isr_proposal_superseded"] += 1
        self._pending[key] = {
            "ts": item.ts,
            "broker": item.broker,
            "topic": item.topic,
            "partition": item.partition,
            "old": list(item.old_isr),
            "new": list(item.new_isr),
            "logging": str(item.commit_logging),
        }
        return out

    def _proposal_change(self, pending: Mapping[str, Any]) -> InputRecord:
        """A Kafka 0.10-2.3 proposal that stood: the change itself, with no epochs."""
        topic, partition = str(pending["topic"]), int(pending["partition"])
        key = partition_key(topic, partition)
        known = self._isr.get(key)
        self._isr[key] = [known[0] if known is not None else 0, list(pending["new"])]
        return input_record(
            IsrChange(
                ts=int(pending["ts"]),
                topic=topic,
                partition=partition,
                leader=int(pending["broker"]),
                old_isr=tuple(pending["old"]),
                new_isr=tuple(pending["new"]),
            )
        )

    def _translate(self, item: TranslatorInput) -> InputRecord | None:
        match item:
            case MetadataUpdate():
                return self._update_metadata(item)
            case LeaderAndIsrReceived() | PartitionStateApplied():
                return self._leader_and_isr_event(item)
            case LeadershipStarted() | PartitionLeaderChosen():
                return self._leadership_started(item)
            case ControllerElected():
                return self._controller_elected(item)
            case ControllerSeen():
                # The partial form: the line names no epoch, and the epoch of an election
                # this translator saw may be another one's (docs/event-contract.md).
                return input_record(ControllerChange(ts=item.ts, controller_id=item.controller_id))
            case PreferredLeaderElected():
                # The partial form: the new leader only (no epochs, ISR or replicas).
                return self._controller_event(
                    LeaderAndIsr,
                    item.ts,
                    item.controller_id,
                    topic=item.topic,
                    partition=item.partition,
                    leader=item.leader,
                )
            case BrokerRegistered():
                self._registered[item.broker] = max(
                    self._registered.get(item.broker, 0), item.epoch
                )
                held = self._held_broker_change
                if held is not None and str(item.broker) in held.get("renewed", []):
                    # the broker the held change reports new or bounced logged its epoch
                    epoch = max(held["live"][str(item.broker)], item.epoch)
                    held["live"][str(item.broker)] = epoch
                    self._live[item.broker] = epoch
                    self._last_epoch[item.broker] = max(
                        self._last_epoch.get(item.broker, epoch), epoch
                    )
                return None
            case TopicsCreated():
                self._deleted_topics -= set(item.assignment)
                created = {
                    topic: {p: tuple(replicas) for p, replicas in sorted(parts.items())}
                    for topic, parts in item.assignment.items()
                }
                if not created:
                    return None
                return self._controller_event(
                    TopicChange, item.ts, item.controller_id, created=created
                )
            case TopicDeleted():
                self._forget_topic(item.topic)
                return self._controller_event(
                    TopicChange, item.ts, item.controller_id, deleted=(item.topic,)
                )
            case TopicsDeleted():
                # KRaft 3.0 to 3.4: every controller logs the removal it replays
                topics = tuple(t for t in item.topics if t not in self._deleted_topics)
                if not topics:
                    self.dropped["topic_deletion_seen"] += 1
                    return None
                for topic in topics:
                    self._forget_topic(topic)
                    self._deleted_topics.add(topic)
                return self._controller_event(
                    TopicChange, item.ts, item.controller_id, deleted=topics
                )
        return None  # the records with no event were handled above

    # ------------------------------------------------------------------ per kind

    def _update_metadata(self, item: MetadataUpdate) -> InputRecord:
        partitions = []
        for state in item.states:
            if isinstance(state, PartitionState):
                partitions.append(
                    MetadataPartitionState(
                        topic=state.topic,
                        partition=state.partition,
                        leader=state.leader,
                        leader_epoch=state.leader_epoch,
                        isr=tuple(state.isr),
                        replicas=tuple(state.replicas),
                        offline_replicas=tuple(state.offline_replicas),
                    )
                )
            else:
                topic, partition = state
                partitions.append(
                    MetadataPartitionState(
                        topic=topic,
                        partition=partition,
                        leader=LEADER_DURING_DELETE,
                        leader_epoch=0,
                        isr=(),
                        replicas=(),
                        offline_replicas=(),
                    )
                )
        return input_record(
            UpdateMetadata(
                ts=item.ts,
                controller_id=item.controller_id,
                controller_epoch=item.controller_epoch,
                broker=item.broker,
                partitions=tuple(partitions),
            )
        )

    def _leader_and_isr_event(
        self, item: LeaderAndIsrReceived | PartitionStateApplied
    ) -> InputRecord | None:
        """A full state, once per (leader epoch, partition epoch): every replica logs it.
        A KRaft broker's applied state names no controller (its line has none)."""
        state = item.state
        assert state.partition_epoch is not None  # the parser requires it
        key = partition_key(state.topic, state.partition)
        epochs = [state.leader_epoch, state.partition_epoch]
        sent = self._leader_and_isr.get(key)
        if sent is not None and epochs <= sent:
            self.dropped["leader_and_isr_seen"] += 1
            return None
        self._leader_and_isr[key] = epochs
        self._learn_isr(key, state.partition_epoch, state.isr)
        controller = item if isinstance(item, LeaderAndIsrReceived) else None
        if controller is not None and not controller.replicas_in_order:
            # 0.10: the replicas' order is not stated, and the contract's state fields go
            # together: the partial form (the new leader)
            return self._controller_event(
                LeaderAndIsr,
                item.ts,
                controller.controller_id,
                topic=state.topic,
                partition=state.partition,
                leader=state.leader,
            )
        return input_record(
            LeaderAndIsr(
                ts=item.ts,
                controller_id=controller.controller_id if controller else None,
                controller_epoch=controller.controller_epoch if controller else None,
                topic=state.topic,
                partition=state.partition,
                leader=state.leader,
                leader_epoch=state.leader_epoch,
                isr=tuple(state.isr),
                replicas=tuple(state.replicas),
                partition_epoch=state.partition_epoch,
            )
        )

    def _leadership_started(
        self, item: LeadershipStarted | PartitionLeaderChosen
    ) -> InputRecord | None:
        """The partial LeaderAndIsr (the line names no replicas), once per (leader epoch,
        partition epoch): the controller logs its decision, each replica its own line. The
        leader's line names the ISR, which is learnt."""
        key = partition_key(item.topic, item.partition)
        epochs = [item.leader_epoch, item.partition_epoch]
        seen = self._leadership.get(key)
        if isinstance(item, LeadershipStarted) and item.isr is not None:
            self._learn_isr(key, item.partition_epoch, item.isr)
        if seen is not None and epochs <= seen:
            self.dropped["leadership_seen"] += 1
            return None
        self._leadership[key] = epochs
        controller = item if isinstance(item, PartitionLeaderChosen) else None
        return input_record(
            LeaderAndIsr(
                ts=item.ts,
                controller_id=controller.controller_id if controller else None,
                controller_epoch=controller.controller_epoch if controller else None,
                topic=item.topic,
                partition=item.partition,
                leader=item.leader,
            )
        )

    def _confirmed_by_state(
        self,
        ts: int,
        broker: int,
        topic: str,
        partition: int,
        leader: int,
        isr: tuple[int, ...],
        partition_epoch: int | None,
    ) -> list[InputRecord]:
        """A KRaft leader may apply the metadata record of its own ISR change before the
        AlterPartition response comes back, and then logs no commit line
        (Partition.handleAlterPartitionUpdate ignores a response for a partition epoch it
        already has; seen on 3.3 to 4.1; 3.3 to 3.5 also bump the leader epoch, so the
        leader logs that it starts again as leader): the leader's own state line with the
        proposed ISR is the commit."""
        key = partition_key(topic, partition)
        pending = self._pending.get(f"{broker} {key}")
        if (
            broker != leader
            or pending is None
            or set(pending["new"]) != set(isr)
            or partition_epoch is None
        ):
            return []
        del self._pending[f"{broker} {key}"]
        self._learn_logging(broker, CommitLogging.INFO)
        self._learn_isr(key, partition_epoch, isr)
        self._isr_sent[key] = partition_epoch
        return [
            input_record(
                IsrChange(
                    ts=ts,
                    topic=topic,
                    partition=partition,
                    leader=broker,
                    old_isr=tuple(pending["old"]),
                    new_isr=tuple(isr),
                    partition_epoch=partition_epoch,
                )
            )
        ]

    def _isr_change(self, item: IsrCommitted) -> InputRecord | None:
        key = partition_key(item.topic, item.partition)
        if self._isr_sent.get(key, -1) >= item.partition_epoch:
            self.dropped["isr_update_seen"] += 1  # its leader's applied state said it
            return None
        pending = self._pending.pop(f"{item.broker} {key}", None)
        old = list(pending["old"]) if pending is not None else None
        known = self._isr.get(key)
        if old is None and known is not None:
            # A KRaft follower may apply the new version (and log its state) before the
            # leader logs the AlterPartition response that made it: the ISR before the
            # change is then the one before that version.
            same_version = known[0] == item.partition_epoch and len(known) > 2
            old = list(known[2]) if same_version and known[2] is not None else list(known[1])
        self._learn_isr(key, item.partition_epoch, item.isr)
        if old is not None and set(old) == set(item.isr):
            self.dropped["isr_update_unchanged"] += 1
            return None
        self._isr_sent[key] = item.partition_epoch
        # old None: the partial form (the model's ISR is the old one)
        return input_record(
            IsrChange(
                ts=item.ts,
                topic=item.topic,
                partition=item.partition,
                leader=item.broker,
                new_isr=tuple(item.isr),
                old_isr=None if old is None else tuple(old),
                partition_epoch=item.partition_epoch,
            )
        )

    def _controller_elected(self, item: ControllerElected) -> InputRecord | None:
        """An election, once. A Raft leader's line is held ``CANCEL_WINDOW_MS``: the node
        is the controller once its leadership is committed; the QuorumController's line of
        the same epoch replaces it, a higher epoch from anyone in the meantime means it
        never was (its LeaderChange was never committed)."""
        held = self._held_raft_leader
        if held is not None and (
            item.controller_epoch > held["epoch"]
            or (item.controller_epoch, item.controller_id) == (held["epoch"], held["controller_id"])
        ):
            self._held_raft_leader = None
            if item.controller_epoch > held["epoch"]:
                self.dropped["raft_leader_superseded"] += 1
        if item.raft_leader:
            if self._controller_epochs.get(item.controller_id) != item.controller_epoch:
                self._held_raft_leader = {
                    "ts": item.ts,
                    "controller_id": item.controller_id,
                    "epoch": item.controller_epoch,
                }
            return None
        return self._controller_change(item.ts, item.controller_id, item.controller_epoch)

    def _controller_change(self, ts: int, controller_id: int, epoch: int) -> InputRecord | None:
        if self._controller_epochs.get(controller_id) == epoch:
            self.dropped["controller_election_seen"] += 1
            return None
        self._controller_epochs[controller_id] = epoch
        return input_record(
            ControllerChange(ts=ts, controller_id=controller_id, controller_epoch=epoch)
        )

    def _release_raft_leader(self, due: Any) -> list[InputRecord]:
        held = self._held_raft_leader
        if held is None or not due(held):
            return []
        self._held_raft_leader = None
        event = self._controller_change(
            int(held["ts"]), int(held["controller_id"]), int(held["epoch"])
        )
        return [event] if event is not None else []

    def _broker_record(self, item: BrokerSetChanged | BrokerEpochsInitialized) -> list[InputRecord]:
        """A broker-change line is held: since 2.x the controller logs the same change with
        the brokers' real epochs ("Updated broker epochs cache") right after it, and the
        epochs the translator would guess for a bounced broker can be wrong (its
        "Registered broker" line often comes a few ms later). The held change goes out
        when no such line follows (the logs moved ``HOLD_MS`` past it, another broker
        change, the input ended); a "Registered broker" line of a broker it reports new
        or bounced meanwhile gives that broker's epoch."""
        if isinstance(item, BrokerSetChanged):
            out = self._release_held(lambda held: True)
            self._held_broker_change = {
                "ts": item.ts,
                "controller_id": item.controller_id,
                "live": {str(b): e for b, e in self._broker_set_changed(item).items()},
                "renewed": [str(b) for b in (*item.added, *item.bounced)],
            }
            return out
        held = self._held_broker_change
        out = []
        if held is not None and held["controller_id"] == item.controller_id:
            self._held_broker_change = None
            self.dropped["broker_change_with_epochs_after"] += 1
        else:
            out = self._release_held(lambda held: True)
        self._live = dict(item.epochs)
        for broker, epoch in item.epochs.items():
            self._last_epoch[broker] = max(self._last_epoch.get(broker, epoch), epoch)
        return [*out, self._broker_change(item.ts, item.controller_id)]

    def _release_held_before(self, log_time: int) -> list[InputRecord]:
        out = self._release_raft_leader(lambda held: held["ts"] + CANCEL_WINDOW_MS <= log_time)
        return out + self._release_held(lambda held: held["ts"] + HOLD_MS <= log_time)

    def _release_held(self, due: Any) -> list[InputRecord]:
        held = self._held_broker_change
        if held is None or not due(held):
            return []
        self._held_broker_change = None
        live = {int(b): int(e) for b, e in held["live"].items()}
        return [self._broker_change(int(held["ts"]), int(held["controller_id"]), live)]

    def _broker_set_changed(self, item: BrokerSetChanged) -> dict[int, int]:
        live: dict[int, int] = {}
        for broker in item.live:
            current = self._live.get(broker)
            if current is None or broker in item.added or broker in item.bounced:
                last = self._last_epoch.get(broker)
                epoch = max(last + 1 if last is not None else 0, self._registered.get(broker, 0))
            else:
                epoch = current
            live[broker] = epoch
            self._last_epoch[broker] = max(self._last_epoch.get(broker, epoch), epoch)
        self._live = live
        return live

    def _broker_change(
        self, ts: int, controller_id: int, live_brokers: Mapping[int, int] | None = None
    ) -> InputRecord:
        chosen = self._live if live_brokers is None else live_brokers
        live = tuple(
            BrokerRegistration(id=broker, epoch=epoch) for broker, epoch in sorted(chosen.items())
        )
        return self._controller_event(BrokerChange, ts, controller_id, live=live)

    def _controller_event(
        self, kind: type[ControllerEvent], ts: int, controller_id: int, **fields: Any
    ) -> InputRecord:
        """An event of that controller, with the epoch of its last election seen if any."""
        return input_record(
            kind(
                ts=ts,
                controller_id=controller_id,
                controller_epoch=self._controller_epochs.get(controller_id),
                **fields,
            )
        )

    # ------------------------------------------------------------------ memory

    def _learn_isr(self, key: str, partition_epoch: int, isr: Iterable[int]) -> None:
        known = self._isr.get(key)
        if known is None or partition_epoch > known[0]:
            before = list(known[1]) if known is not None else None
            self._isr[key] = [partition_epoch, list(isr), before]
        elif partition_epoch == known[0]:
            self._isr[key] = [partition_epoch, list(isr), *known[2:]]

    def _forget_topic(self, topic: str) -> None:
        prefix = f"{topic}:"  # topic names have no ':'
        for table in (self._isr, self._leader_and_isr, self._leadership, self._isr_sent):
            for key in [key for key in table if key.startswith(prefix)]:
                del table[key]
        for key in [key for key in self._pending if key.split(" ", 1)[1].startswith(prefix)]:
            del self._pending[key]


def _upgrade_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """Version 1 kept only the ISR before each pending proposal (Kafka 2.4+ semantics)."""
    pending = {}
    for key, old in state.get("pending", {}).items():
        broker, tp = key.split(" ", 1)
        topic, _, partition = tp.rpartition(":")
        pending[key] = {
            "ts": 0,
            "broker": int(broker),
            "topic": topic,
            "partition": int(partition),
            "old": list(old),
            "new": [],
            "logging": str(CommitLogging.INFO),
        }
    return {**state, "version": STATE_VERSION, "pending": pending}


def _int_keys(table: Mapping[str, int]) -> dict[int, int]:
    return {int(key): int(value) for key, value in table.items()}


def _str_keys(table: Mapping[int, int]) -> dict[str, int]:
    return {str(key): value for key, value in sorted(table.items())}
