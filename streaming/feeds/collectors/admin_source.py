"""One poll of a live cluster with kafka-python's admin client -> a ``ClusterSnapshot``.

Requests, in order: DescribeCluster (controller id, live brokers) and Metadata for all
topics (leader, leader epoch, replicas, ISR) must answer, or the poll fails. Both go to
one broker, the same poll after poll (``describing_broker``), as do the other requests
about the whole cluster (DescribeQuorum, the topics' DescribeConfigs). Each broker
answers them from its own metadata cache, which moves only forward, but two brokers'
caches differ until the controller's update reaches both, and Metadata carries no
partition epoch by which to tell the newer answer. Asked of any broker (kafka-python's
least loaded, chosen at random among the idle), Kafka 3.9's ISR of ``clicks-0`` went
back and forth six times in 18 s of the lab's inter-broker-cut, between a broker the
controller's UpdateMetadata had reached and one it had not, and the collector published
every turn as an ISR change. The collector turns to another broker only when its broker
fails to answer (once per poll, within ``broker_timeout_ms``) or leaves the live set.

The others may be missing; the snapshot then lacks what they give, the gap is counted
per API and logged once:

* DescribeQuorum (KRaft only): the controller epoch (the quorum leader's epoch), and how
  far every replica of the metadata log has fetched (voters and observers: log end
  offset, last caught-up and last fetch times, KIP-836), published as
  ``MetadataLogProgress``;
* DescribeConfigs: ``min.insync.replicas`` of each topic, ``replica.lag.time.max.ms``
  of each broker;
* ListOffsets, latest offset, sent to each broker for the partitions it leads (as the
  debugging replica -2: the log end offset; as a consumer: the high watermark), then for
  the partitions it follows (as -2: that follower's log end offset).

An API a broker says it does not support is not asked again by this process.

Metadata and ListOffsets, whose answers grow with the partitions, are written and read as
columns (``admin_wire``: no Python object per partition) where the cluster speaks their
recent versions (``admin_wire``'s), else with kafka-python's own classes; either way
the snapshot holds the partitions and offsets as columns (``polled_partitions``).

The requests addressed to one broker (DescribeConfigs of that broker, ListOffsets) go out
to every broker at once and are waited for together, until ``broker_timeout_ms``. A
broker that does not answer in time (paused, overloaded, cut off) gives nothing this poll
and is not asked again until the next: its followers' progress is missing from one
snapshot, while every other broker's is there. Asked one after the other, with the
client's 30 s request timeout, one paused broker stalled the whole poll for 30 s per
request (found by the lab's paused-follower scenario on Kafka 4.1.1).

The snapshot names the live brokers that answered every request the poll sent them
(``answered``): every live broker is asked at least its own DescribeConfigs. Published
as ``BrokersAnswered`` where no DescribeQuorum report tells of the brokers (ZooKeeper
mode), it is the model's news that a broker runs (docs/domain.md#silent-leader).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from streaming.acl_denial import (
    CLUSTER_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    Denial,
    DeniedError,
)
from streaming.config import KafkaSettings
from streaming.feeds.collectors.admin_poller import (
    ClusterSnapshot,
    PartitionInfo,
    QuorumReplica,
    QuorumSnapshot,
)
from streaming.feeds.collectors.admin_wire import (
    LatestOffsets,
    ListOffsetsLatest,
    MetadataAnswer,
    MetadataOfAllTopics,
    supported,
)
from streaming.feeds.collectors.polled_partitions import (
    NO_OFFSET,
    PartitionOffsets,
    PolledPartitions,
    ReplicaOffsets,
)

log = logging.getLogger("isrwatch.collect.admin")

DEBUGGING_REPLICA_ID = -2  # ListOffsetsRequest.DEBUGGING_REPLICA_ID: any replica answers
CONSUMER_REPLICA_ID = -1
DEFAULT_BROKER_TIMEOUT_MS = 5000
LATEST_OFFSET = -1
MIN_INSYNC_REPLICAS = "min.insync.replicas"
REPLICA_LAG_TIME_MAX_MS = "replica.lag.time.max.ms"
QUORUM_FETCH_TIMEOUT_MS = "controller.quorum.fetch.timeout.ms"

OnUnavailable = Callable[[str, Exception], None]
COLLECTOR = "the collector"  # whose principal a refused request names (acl_denial)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class KafkaAdminSource:
    """Takes snapshots with one KafkaAdminClient (the job's client settings)."""

    def __init__(
        self,
        kafka: KafkaSettings,
        *,
        offsets: bool = True,
        on_unavailable: OnUnavailable | None = None,
        clock: Callable[[], int] = _now_ms,
        broker_timeout_ms: int = DEFAULT_BROKER_TIMEOUT_MS,
    ) -> None:
        from kafka import KafkaAdminClient

        self._admin: Any = KafkaAdminClient(**kafka.kafka_python_options())
        self._offsets = offsets
        self._broker_timeout_ms = broker_timeout_ms
        self._silent: set[int] = set()  # brokers that did not answer in time this poll
        self._answered: set[int] = set()  # brokers that answered a request this poll
        self._on_unavailable = on_unavailable or (lambda api, error: None)
        self._clock = clock
        self._unsupported: set[str] = set()
        self._fetch_timeout_ms: int | None = None
        self._describing_broker: int | None = None

    @property
    def describing_broker(self) -> int | None:
        """The broker whose metadata cache the last poll described the cluster from
        (DescribeCluster, Metadata, DescribeQuorum, the topics' DescribeConfigs), asked
        again at the next."""
        return self._describing_broker

    def close(self) -> None:
        self._admin.close()

    def snapshot(self) -> ClusterSnapshot:
        ts = self._clock()
        self._silent, self._answered = set(), set()
        cluster = self._described_cluster()
        controller = cluster.get("controller_id")
        brokers = tuple(sorted(int(b["broker_id"]) for b in cluster.get("brokers", [])))
        if self._describing_broker not in brokers:
            self._describing_broker = None  # fenced or gone: its cache is no longer fed
        self._know_brokers(brokers)
        partitions = self._described_partitions()
        snapshot: dict[str, Any] = {}
        quorum = self._optional("describe_quorum", self._described_quorum)
        snapshot["quorum"] = quorum_snapshot(quorum) if quorum else None
        snapshot["controller_epoch"] = snapshot["quorum"].epoch if snapshot["quorum"] else None
        snapshot["min_insync_replicas"] = (
            self._optional("describe_topic_configs", lambda: self._topic_configs(partitions)) or {}
        )
        snapshot["replica_lag_time_max_ms"] = (
            self._optional("describe_broker_configs", lambda: self._broker_configs(brokers)) or {}
        )
        if snapshot["quorum"] is not None and self._fetch_timeout_ms is not None:
            snapshot["quorum"] = replace(
                snapshot["quorum"], fetch_timeout_ms=self._fetch_timeout_ms
            )
        if self._offsets:
            snapshot["offsets_ts"] = self._clock()
            leos, hws = self._log_offsets(partitions, brokers)
            snapshot["log_end_offsets"], snapshot["high_watermarks"] = leos, hws
        answered = self._answered - self._silent
        return ClusterSnapshot(
            ts=ts,
            controller_id=int(controller) if controller is not None and controller >= 0 else None,
            brokers=brokers,
            partitions=partitions,
            answered=tuple(b for b in brokers if b in answered),
            **snapshot,
        )

    def _know_brokers(self, brokers: Iterable[int]) -> None:
        """Make the client ready to ask every broker the cluster says is live (the lab's
        paused follower and killed leader, Kafka 4.1.1):

        * a broker the client's metadata lacks: refresh it. A KRaft Metadata response
          leaves fenced brokers out, so a broker back from a fence is unknown to the cache
          until its next refresh (``metadata_max_age_ms``, 5 minutes), and every request
          for it fails with UnknownBrokerIdError meanwhile;
        * a broker the client is backing off from: try it now. After a broker was down for
          20 s, the client's reconnection backoff had doubled to 14 s, then 28 s (up to
          ``kafka.retry_backoff_max_ms``): the broker's followers went unreported that
          long after it was back, and read as lagging.
        """
        manager = self._admin._manager
        cache = manager.cluster
        if any(cache.broker_metadata(broker) is None for broker in brokers):
            cache.request_update()
        for broker in brokers:
            if manager.connection_delay(broker) > 0:
                manager.reset_backoff(broker)

    def _described_cluster(self) -> dict[str, Any]:
        """DescribeCluster's answer (controller id, live brokers), from the describing
        broker; a cluster older than DescribeCluster (Kafka < 2.8) through kafka-python's
        Metadata-based fallback, from any broker.

        Fenced brokers are left out. Kafka 4.0+ (KIP-1073, DescribeCluster v2) lists them
        too when asked, as kafka-python's ``describe_cluster`` does: Kafka 4.1 listed a
        broker stopped by a controlled shutdown, and the collector took it for live. A
        fenced broker leads nothing and is out of every ISR."""
        from kafka.protocol.admin import DescribeClusterRequest

        if not supported(self._admin._manager, DescribeClusterRequest):
            return dict(self._admin.describe_cluster())
        answer = self._ask_describing_broker(
            "describe_cluster",
            lambda: DescribeClusterRequest(
                include_cluster_authorized_operations=False, include_fenced_brokers=False
            ),
        )
        return dict(_without_error("DescribeCluster", answer).to_dict())

    def _described_quorum(self) -> dict[str, Any]:
        """DescribeQuorum's answer for the metadata log (``__cluster_metadata``-0), from
        the describing broker, which forwards it to the active controller (KRaft; a
        ZooKeeper-mode broker does not know the API)."""
        from kafka.protocol.admin import DescribeQuorumRequest

        topic = DescribeQuorumRequest.TopicData
        answer = self._ask_describing_broker(
            "describe_quorum",
            lambda: DescribeQuorumRequest(
                topics=[
                    topic(
                        topic_name="__cluster_metadata",
                        partitions=[topic.PartitionData(partition_index=0)],
                    )
                ]
            ),
            answered_by_it=False,
        )
        return dict(_without_error("DescribeQuorum", answer).to_dict())

    def _described_partitions(self) -> PolledPartitions:
        """Every topic's partitions (Metadata), as columns, from the describing broker."""
        manager = self._admin._manager
        if not supported(manager, MetadataOfAllTopics):
            return PolledPartitions.of(_partitions(self._admin.describe_topics()))
        # v13: a top-level error fails the whole request (no topic listed), not "every
        # topic deleted"
        answer: MetadataAnswer = _without_error(
            "Metadata", self._ask_describing_broker("metadata", MetadataOfAllTopics)
        )
        return answer.partitions

    def _ask_describing_broker(
        self, api: str, request: Callable[[], Any], *, answered_by_it: bool = True
    ) -> Any:
        """``request()``'s answer from the describing broker. A broker that fails or does
        not answer within ``broker_timeout_ms`` is silent for the rest of the poll, its
        gap reported under ``api``, and the request goes once to another live broker,
        which describes the cluster from then on; if that one fails too, the poll fails.
        A refusal that any broker would give (an API or version it does not support, an
        ACL) is raised at once: the broker answered.

        A request the broker forwards (``answered_by_it`` False: DescribeQuorum, which
        the active controller answers) fails without a hand-over: its timeout says
        nothing of the broker (the lab's 4.1 controller-failover: DescribeQuorum timed
        out while the killed controller was being replaced, and the describing broker,
        running, was skipped for the rest of the poll)."""
        import kafka.errors as errors

        manager = self._admin._manager
        for attempt in (1, 2):
            broker = self._describing_broker
            if broker is None or broker in self._silent:
                broker = self._another_broker()
            asked = request()

            async def ask(node: int | None = broker, sent: Any = asked) -> Any:
                return await manager.send(sent, node_id=node)

            try:
                answer = manager.run(ask)
            except (errors.UnsupportedVersionError, errors.AuthorizationError):
                raise
            except Exception as error:
                if not answered_by_it:
                    raise  # the broker's own state is not known: it stays
                self._describing_broker = None
                if attempt == 2 or broker is None:
                    raise
                self._silent.add(broker)
                self._gap(api, BrokerSilentError(broker, error))
                continue
            self._describing_broker = broker
            if broker is not None:
                self._answered.add(broker)
            return answer
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _another_broker(self) -> int | None:
        """A broker to describe the cluster from: the client's least loaded, unless it
        was silent this poll, then the lowest id of the brokers the client knows that
        was not (None: the client knows none, and sends to a bootstrap server)."""
        manager = self._admin._manager
        chosen = manager.least_loaded_node()
        if isinstance(chosen, int) and chosen not in self._silent:
            return chosen
        known = sorted(
            b.node_id for b in manager.cluster.brokers() if b.node_id not in self._silent
        )
        return known[0] if known else None

    # ------------------------------------------------------------------ optional parts

    def _optional(self, api: str, request: Callable[[], Any]) -> Any:
        if api in self._unsupported:
            return None
        try:
            return request()
        except Exception as error:
            self._gap(api, error)
            return None

    def _gap(self, api: str, error: Exception) -> None:
        import kafka.errors as errors

        if isinstance(error, errors.IncompatibleBrokerVersion | errors.UnsupportedVersionError):
            self._unsupported.add(api)
        if isinstance(error, errors.ClusterAuthorizationFailedError) and api == "describe_quorum":
            # Kafka 4.1 authorizes DescribeQuorum as Describe on the cluster
            error = DeniedError(Denial.on_cluster(COLLECTOR, "Describe"))
        self._on_unavailable(api, error)

    def _topic_configs(self, partitions: Mapping[str, Any]) -> dict[str, int]:
        from kafka.admin import ConfigResource, ConfigResourceType

        if not partitions:
            return {}
        resources = [ConfigResource(ConfigResourceType.TOPIC, topic) for topic in partitions]
        # kafka-python's describe_configs drops each resource's error code: its request and
        # response handling, so that a refused topic is told from one without the value
        response = self._ask_describing_broker(
            "describe_topic_configs", lambda: self._admin._describe_configs_request(resources)
        )
        found = _config_entries([response], ConfigResourceType.TOPIC)
        values = _config_values(found, MIN_INSYNC_REPLICAS)
        missing = set(partitions) - set(values)
        refused = _refused(response, TOPIC_AUTHORIZATION_FAILED)
        if refused:
            self._gap(
                "describe_topic_configs",
                DeniedError(Denial.on_topic(COLLECTOR, "DescribeConfigs", refused[0])),
            )
        elif missing:
            self._gap(
                "describe_topic_configs",
                LookupError(f"no {MIN_INSYNC_REPLICAS} for {len(missing)} topic(s)"),
            )
        return values

    def _broker_configs(self, brokers: Iterable[int]) -> dict[int, int]:
        from kafka.admin import ConfigResource, ConfigResourceType

        resources = [ConfigResource(ConfigResourceType.BROKER, str(b)) for b in brokers]
        if not resources:
            return {}
        # kafka-python's describe_configs asks the brokers one after the other, with no
        # bound but the request timeout: its own request and response handling, sent here
        # to all at once (see the module's docstring)
        answers = self._ask_each(
            "describe_broker_configs",
            [
                (int(resource.name), self._admin._describe_configs_request([resource]))
                for resource in resources
            ],
        )
        responses = [answer for answer in answers if answer is not None]
        found = _config_entries(responses, ConfigResourceType.BROKER)
        values = {int(b): v for b, v in _config_values(found, REPLICA_LAG_TIME_MAX_MS).items()}
        timeouts = _config_values(found, QUORUM_FETCH_TIMEOUT_MS).values()
        self._fetch_timeout_ms = min(timeouts) if timeouts else None
        if any(_refused(answer, CLUSTER_AUTHORIZATION_FAILED) for answer in responses):
            # a broker's configuration is the cluster's resource to Kafka's authorizer
            self._gap(
                "describe_broker_configs",
                DeniedError(Denial.on_cluster(COLLECTOR, "DescribeConfigs")),
            )
        elif len(values) < len(resources):
            missing = len(resources) - len(values)
            self._gap(
                "describe_broker_configs",
                LookupError(f"no {REPLICA_LAG_TIME_MAX_MS} for {missing} broker(s)"),
            )
        return values

    def _log_offsets(
        self, table: PolledPartitions, brokers: Iterable[int]
    ) -> tuple[ReplicaOffsets, PartitionOffsets]:
        leos = np.full(len(table.replicas), NO_OFFSET, np.int64)
        hws = np.full(table.rows, NO_OFFSET, np.int64)
        if "list_offsets" in self._unsupported:
            return ReplicaOffsets(table, leos), PartitionOffsets(table, hws)
        live = sorted(set(brokers))
        row_of_slot = table.row_of_slot()
        follower_slot = table.replicas != table.leader[row_of_slot]
        # each broker's rows: those it leads, then those it follows
        led = {broker: np.flatnonzero(table.leader == broker) for broker in live}
        followed = {
            broker: row_of_slot[follower_slot & (table.replicas == broker)] for broker in live
        }
        raw = supported(self._admin._manager, ListOffsetsLatest)
        keys = _row_keys(table)
        for phase in (led, followed):  # every leader before any follower
            asked = [
                (broker, replica_id)
                for broker in live
                if len(phase[broker])
                for replica_id in (
                    (DEBUGGING_REPLICA_ID, CONSUMER_REPLICA_ID)
                    if phase is led
                    else (DEBUGGING_REPLICA_ID,)
                )
            ]
            answers = self._ask_each(
                "list_offsets",
                [
                    (
                        broker,
                        ListOffsetsLatest(table, phase[broker], replica_id)
                        if raw
                        else _list_offsets_request(
                            _topic_partitions(table, phase[broker]), replica_id
                        ),
                    )
                    for broker, replica_id in asked
                ],
            )
            for (broker, replica_id), answer in zip(asked, answers, strict=True):
                if answer is None:
                    continue
                latest = answer if isinstance(answer, LatestOffsets) else _latest_of(answer)
                rows, offsets = _answered_rows(table, keys, latest)
                if replica_id == DEBUGGING_REPLICA_ID:
                    slots = _slot_of(table, row_of_slot, broker)[rows]
                    held = slots >= 0
                    leos[slots[held]] = offsets[held]
                else:
                    hws[rows] = offsets
        return ReplicaOffsets(table, leos), PartitionOffsets(table, hws)

    def _ask_each(self, api: str, requests: list[tuple[int, Any]]) -> list[Any | None]:
        """Send each (broker, request) at once; each answer, or None for a broker that
        failed or did not answer within ``broker_timeout_ms`` (it is then silent for the
        rest of this poll, and the gap is reported under ``api``)."""
        manager = self._admin._manager  # kafka-python has no public call for a chosen broker
        timeout_s = self._broker_timeout_ms / 1000
        asked = [index for index, (broker, _) in enumerate(requests) if broker not in self._silent]

        async def gather() -> list[Any]:
            deadline = time.monotonic() + timeout_s
            pending: list[Any] = []
            for i in asked:
                try:
                    pending.append(manager.send(requests[i][1], node_id=requests[i][0]))
                except Exception as error:  # e.g. a broker the client's metadata lacks
                    pending.append(error)
            answers: list[Any] = []
            for future in pending:
                if isinstance(future, Exception):
                    answers.append(future)
                    continue
                left_ms = max(1, int((deadline - time.monotonic()) * 1000))
                try:
                    answers.append(await manager.wait_for(future, left_ms))
                except Exception as error:
                    answers.append(error)
            return answers

        results: list[Any | None] = [None] * len(requests)
        for index, answer in zip(asked, manager.run(gather) if asked else [], strict=True):
            if isinstance(answer, Exception):
                broker = requests[index][0]
                self._silent.add(broker)
                self._gap(api, BrokerSilentError(broker, answer))
            else:
                self._answered.add(requests[index][0])
                results[index] = answer
        return results


class BrokerSilentError(Exception):
    """A broker did not answer one request of a poll."""

    def __init__(self, broker: int, cause: Exception) -> None:
        super().__init__(f"broker {broker}: {cause}")
        self.broker = broker
        self.cause = cause


def _without_error(api: str, answer: Any) -> Any:
    """``answer``, unless its top-level error code says the request failed: then that
    error, raised."""
    code = answer.error_code
    if code != 0:
        import kafka.errors as errors

        message = getattr(answer, "error_message", None)
        raise errors.for_code(code)(f"{api}: {message or f'error {code}'}")
    return answer


def _list_offsets_request(tps: list[tuple[str, int]], replica_id: int) -> Any:
    from kafka.protocol.consumer.offsets import ListOffsetsRequest

    topic_type = ListOffsetsRequest.ListOffsetsTopic
    partition_type = topic_type.ListOffsetsPartition
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for topic, partition in tps:
        by_topic[topic].append(partition_type(partition_index=partition, timestamp=LATEST_OFFSET))
    return ListOffsetsRequest(
        replica_id=replica_id,
        isolation_level=0,
        topics=[topic_type(name=name, partitions=parts) for name, parts in by_topic.items()],
    )


def _topic_partitions(table: PolledPartitions, rows: Any) -> list[tuple[str, int]]:
    topic = table.topic_of_row()[rows]
    return [
        (table.topics[t], p)
        for t, p in zip(topic.tolist(), table.partition[rows].tolist(), strict=True)
    ]


def _latest_of(response: Any) -> LatestOffsets:
    """A ListOffsets answer as kafka-python decodes it (a version before 6), as columns."""
    names = [str(topic.name) for topic in response.topics]
    entries = [
        (t, p.partition_index, p.error_code, p.offset)
        for t, topic in enumerate(response.topics)
        for p in topic.partitions
    ]
    topic, partition, error, offset = (
        (np.array(column, np.int64).reshape(-1) for column in zip(*entries, strict=True))
        if entries
        else (np.zeros(0, np.int64) for _ in range(4))
    )
    return LatestOffsets(
        throttle_time_ms=int(getattr(response, "throttle_time_ms", 0) or 0),
        topics=names,
        topic=topic,
        partition=partition,
        error=error,
        offset=offset,
    )


def _row_keys(table: PolledPartitions) -> Any:
    """Each row's (topic, partition) as one int64, ascending as the rows are."""
    return table.topic_of_row() * (1 << 32) + table.partition


def _answered_rows(table: PolledPartitions, keys: Any, latest: LatestOffsets) -> tuple[Any, Any]:
    """The table's rows a ListOffsets answer gave an offset for, and those offsets: the
    partitions without error and with an offset (-1: none, as for a partition of an
    old message format)."""
    index = table.topic_index()
    topic = np.array([index.get(name, -1) for name in latest.topics], np.int64)[latest.topic]
    wanted = (topic >= 0) & (latest.error == 0) & (latest.offset >= 0)
    key = topic * (1 << 32) + latest.partition
    rows = np.minimum(np.searchsorted(keys, key), max(len(keys) - 1, 0))
    wanted &= len(keys) > 0
    if len(keys):
        wanted &= keys[rows] == key
    return rows[wanted], latest.offset[wanted]


def _slot_of(table: PolledPartitions, row_of_slot: Any, broker: int) -> Any:
    """Per row, the slot of ``broker`` among its replicas (-1: not one of them)."""
    slot = np.full(table.rows, -1, np.int64)
    held = np.flatnonzero(table.replicas == broker)
    slot[row_of_slot[held]] = held
    return slot


def _partitions(topics: Iterable[Mapping[str, Any]]) -> dict[str, dict[int, PartitionInfo]]:
    out: dict[str, dict[int, PartitionInfo]] = {}
    for topic in topics:
        if topic.get("error_code", 0) != 0:
            continue
        parts: dict[int, PartitionInfo] = {}
        for p in topic.get("partitions", []):
            if p.get("error_code", 0) not in (0, 9):  # 9 REPLICA_NOT_AVAILABLE: still described
                continue
            epoch = p.get("leader_epoch", -1)
            parts[int(p["partition_index"])] = PartitionInfo(
                leader=int(p["leader_id"]),
                leader_epoch=int(epoch) if epoch is not None and epoch >= 0 else None,
                replicas=tuple(int(r) for r in p.get("replica_nodes", [])),
                isr=tuple(int(r) for r in p.get("isr_nodes", [])),
            )
        out[str(topic["name"])] = parts
    return out


def quorum_snapshot(described: Mapping[str, Any]) -> QuorumSnapshot | None:
    """The ``__cluster_metadata`` partition of a DescribeQuorum answer (the response's
    ``to_dict``), or None if it holds an error or no leader epoch."""
    for topic in described.get("topics", []):
        for partition in topic.get("partitions", []):
            epoch = partition.get("leader_epoch")
            if partition.get("error_code") != 0 or not isinstance(epoch, int) or epoch < 0:
                continue
            replicas = [
                QuorumReplica(
                    broker=int(r["replica_id"]),
                    log_end_offset=int(r["log_end_offset"]),
                    last_caught_up_ms=_known_time(r.get("last_caught_up_timestamp")),
                    last_fetch_ms=_known_time(r.get("last_fetch_timestamp")),
                )
                for r in [*partition.get("current_voters", []), *partition.get("observers", [])]
            ]
            return QuorumSnapshot(
                leader=int(partition.get("leader_id", -1)),
                epoch=epoch,
                high_watermark=int(partition.get("high_watermark", -1)),
                replicas=tuple(sorted(replicas, key=lambda r: r.broker)),
            )
    return None


def _known_time(value: Any) -> int | None:
    """Kafka reports -1 for a time it does not know (a replica that never fetched)."""
    return int(value) if isinstance(value, int) and value >= 0 else None


def _refused(response: Any, error_code: int) -> list[str]:
    """The resources a DescribeConfigs response refused with ``error_code``."""
    return [str(r.resource_name) for r in response.results if r.error_code == error_code]


def _config_entries(responses: Iterable[Any], resource_type: int) -> dict[str, dict[str, Any]]:
    """Each described resource's settings as ``{name: {"value": value}}``, from
    DescribeConfigs answers as kafka-python decodes them. kafka-python's own reading
    (``_describe_configs_process_responses``) makes a dict and enums of each of a broker's
    300-odd settings: a fifth of a steady poll's CPU at 10,000 partitions x 3 (py-spy)."""
    found: dict[str, dict[str, Any]] = {}
    for response in responses:
        for result in response.results:
            if result.resource_type == resource_type:
                found[str(result.resource_name)] = {
                    str(config.name): {"value": config.value} for config in result.configs
                }
    return found


def _config_values(found: Mapping[str, Mapping[str, Any]], name: str) -> dict[str, int]:
    values: dict[str, int] = {}
    for resource, configs in found.items():
        entry = configs.get(name)
        value = entry.get("value") if isinstance(entry, Mapping) else None
        if value is not None and str(value).strip().isdigit():
            values[resource] = int(value)
    return values
