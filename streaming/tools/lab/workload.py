"""The lab's topics and the producers that keep them busy.

Kafka's leader removes a follower only while the partition takes writes: a follower is in
sync if its log end offset equals the leader's, so on an idle partition a dead follower
stays in the ISR until the controller fences its broker (``ReplicaState.java`` 4.1.1,
``Replica.scala`` 3.9.1). Hence three topics:

* ``orders``: written with ``acks=all``: under min ISR the leader refuses the writes
  (``NOT_ENOUGH_REPLICAS``), which the producer counts;
* ``clicks``: written with ``acks=1``: under min ISR the writes are appended, but since
  Kafka 3.7 (KAFKA-15583) the high watermark does not move, so consumers do not see them;
* ``idle``: never written: only fencing removes its followers;
* ``pairs``: written with ``acks=1``, replication factor 2 and ``min.insync.replicas`` 1,
  as many clusters keep their less precious topics: one follower per partition, whose
  silence cannot tell a stopped follower from a hung leader by the partition alone
  (docs/domain.md#silent-leader).

Each has one partition per broker; the first three have replication factor min(3,
brokers) and ``min.insync.replicas`` min(2, brokers).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CHURN_TOPIC",
    "LAB_TOPICS",
    "Workload",
    "create_churn_topic",
    "create_topics",
    "delete_churn_topic",
    "reassign_churn_topic",
]


@dataclass(frozen=True)
class LabTopic:
    name: str
    acks: str | None  # None: not written
    replication_factor: int = 3
    min_insync_replicas: int = 2

    def replicas_on(self, brokers: int) -> int:
        """Its replication factor on a cluster of ``brokers``."""
        return min(self.replication_factor, brokers)

    def min_insync_replicas_on(self, brokers: int) -> int:
        """Its ``min.insync.replicas`` on a cluster of ``brokers``."""
        return min(self.min_insync_replicas, self.replicas_on(brokers))


LAB_TOPICS = (
    LabTopic("orders", "all"),
    LabTopic("clicks", "1"),
    LabTopic("idle", None),
    LabTopic("pairs", "1", replication_factor=2, min_insync_replicas=1),
)
RECORDS_PER_SECOND_PER_PARTITION = 20


def create_topics(bootstrap: str, brokers: int, timeout_s: float = 60.0) -> None:
    """Create the lab's topics (and wait until every partition has a leader)."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [
            NewTopic(
                topic.name,
                num_partitions=brokers,
                replication_factor=topic.replicas_on(brokers),
                config={"min.insync.replicas": str(topic.min_insync_replicas_on(brokers))},
            )
            for topic in LAB_TOPICS
        ],
        operation_timeout=timeout_s,
    )
    for future in futures.values():
        future.result(timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        metadata = admin.list_topics(timeout=10)
        partitions = [
            partition
            for topic in LAB_TOPICS
            if topic.name in metadata.topics
            for partition in metadata.topics[topic.name].partitions.values()
        ]
        if len(partitions) == brokers * len(LAB_TOPICS) and all(p.leader >= 0 for p in partitions):
            return
        time.sleep(0.2)
    raise TimeoutError(f"the lab's topics had no leader for every partition in {timeout_s} s")


@dataclass
class Workload:
    """One producer thread per written topic, ``rate`` records a second per partition."""

    bootstrap: str
    partitions: int
    rate: int = RECORDS_PER_SECOND_PER_PARTITION
    delivered: Counter[str] = field(default_factory=Counter)
    failed: Counter[tuple[str, str]] = field(default_factory=Counter)  # (topic, error)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Workload:
        for topic in LAB_TOPICS:
            if topic.acks is None:
                continue
            thread = threading.Thread(
                target=self._produce, args=(topic,), name=f"producer {topic.name}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def summary(self) -> str:
        with self._lock:
            parts = [
                f"{topic} {count} delivered" for topic, count in sorted(self.delivered.items())
            ]
            parts += [
                f"{topic} {count} refused ({error})"
                for (topic, error), count in sorted(self.failed.items())
            ]
        return ", ".join(parts) or "nothing produced"

    def _produce(self, topic: LabTopic) -> None:
        from confluent_kafka import Producer

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": topic.acks,
                "linger.ms": 5,
                # a paused leader must not stall the loop for long: give up on a record
                # after 30 s and count it
                "message.timeout.ms": 30_000,
                "enable.idempotence": False,
            }
        )

        def delivered(error: Any, _message: Any) -> None:
            with self._lock:
                if error is None:
                    self.delivered[topic.name] += 1
                else:
                    self.failed[(topic.name, error.name())] += 1

        period = 1.0 / self.rate
        next_at = time.monotonic()
        sequence = 0
        try:
            while not self._stop.is_set():
                for partition in range(self.partitions):
                    try:
                        producer.produce(
                            topic.name,
                            value=b"%d" % sequence,
                            partition=partition,
                            on_delivery=delivered,
                        )
                    except BufferError:
                        with self._lock:
                            self.failed[(topic.name, "local queue full")] += 1
                    sequence += 1
                producer.poll(0)
                next_at += period
                self._stop.wait(max(0.0, next_at - time.monotonic()))
        finally:
            producer.flush(5)


CHURN_TOPIC = "moving"
"""The topic-lifecycle scenario's topic: created during the watch with replicas [1, 2],
moved to [2, 3] (broker 3 copies the log, then 1 leaves: Kafka's adding and removing
replicas), then deleted."""
CHURN_FIRST = (1, 2)
CHURN_MOVED = (2, 3)


def create_churn_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(CHURN_TOPIC, num_partitions=1, replica_assignment=[list(CHURN_FIRST)])],
        operation_timeout=30,
    )
    for future in futures.values():
        future.result(timeout=60)
    producer_config = {"bootstrap.servers": bootstrap, "acks": "all"}
    from confluent_kafka import Producer

    producer = Producer(producer_config)
    for i in range(2000):  # something for the new replica to copy
        producer.produce(CHURN_TOPIC, value=b"%d" % i, partition=0)
    producer.flush(30)


def reassign_churn_topic(bootstrap: str) -> None:
    from kafka import KafkaAdminClient, TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        refused = admin.alter_partition_reassignments(
            {TopicPartition(CHURN_TOPIC, 0): list(CHURN_MOVED)}
        )
    finally:
        admin.close()
    errors = {str(tp): error for tp, error in refused.items() if error is not None}
    if errors:
        raise RuntimeError(f"Kafka refused the reassignment: {errors}")


def delete_churn_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the answer comes
    for future in admin.delete_topics([CHURN_TOPIC], operation_timeout=30).values():
        future.result(timeout=60)
