"""Write the kraft_elr fixture: Apache Kafka 4.1's own metadata log through the life of an
ELR (KIP-966), and Kafka's own decoding of it.

Run from the repository (the lab's jars resolved: ``make kafka``)::

    .venv/bin/python tests/unit/data/kraft_elr/write_fixture.py tests/unit/data/kraft_elr

Five combined KRaft nodes (so that two can be down and the quorum still stands), one
topic ``elr`` of one partition on brokers [4, 5] with ``min.insync.replicas`` 2, ten
records written with ``acks=all``. Then, each step once the controller has written it:

1. broker 5 stops (SIGTERM: a controlled shutdown): the ISR falls under min ISR, to [4];
2. broker 4 stops: the ISR empties, the partition is offline, its ELR holds both;
3. broker 5 starts: the controller elects it from the ELR;
4. ``min.insync.replicas`` becomes 1: the controller writes a ``ClearElrRecord``.

Copied: node 1's ``__cluster_metadata-0`` segment as Kafka wrote it (same file name), and the output of
Kafka's ``kafka.tools.DumpLogSegments --cluster-metadata-decoder`` over it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer  # type: ignore[attr-defined]
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from streaming.jvm_cache import cache_root
from streaming.tools.lab.cluster import BrokerFault, LabCluster
from streaming.tools.lab.distribution import LINES

TOPIC = "elr"
SEGMENT_NAME = "00000000000000000000.log"  # DumpLogSegments reads the offset from it
SEGMENT = f"__cluster_metadata-0/{SEGMENT_NAME}"


def wait_for(what: str, check: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise TimeoutError(what)


def partition_state(admin: AdminClient) -> tuple[int, list[int]]:
    metadata = admin.list_topics(TOPIC, timeout=10)
    partition = metadata.topics[TOPIC].partitions.get(0)
    if partition is None:  # not in the brokers' metadata yet
        return -2, []
    return partition.leader, sorted(partition.isrs)


def main(out: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="kraft-elr-"))
    cluster = LabCluster(kafka=LINES["4.1"], brokers=5, workdir=work)
    with cluster:
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topic = NewTopic(
            TOPIC,
            num_partitions=1,
            replica_assignment=[[4, 5]],
            config={"min.insync.replicas": "2"},
        )
        admin.create_topics([topic])[TOPIC].result(timeout=60)
        wait_for("a leader", lambda: partition_state(admin) == (4, [4, 5]))
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for i in range(10):
            producer.produce(TOPIC, value=f"record {i}".encode())
        producer.flush(30)
        cluster.apply(BrokerFault.STOP, 5)
        wait_for("ISR [4]", lambda: partition_state(admin) == (4, [4]))
        cluster.apply(BrokerFault.STOP, 4)
        wait_for("no leader", lambda: partition_state(admin)[0] == -1)
        cluster.apply(BrokerFault.START, 5)
        wait_for("leader 5", lambda: partition_state(admin)[0] == 5)
        resource = ConfigResource(
            ConfigResource.Type.TOPIC,
            TOPIC,
            incremental_configs=[
                ConfigEntry("min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        admin.incremental_alter_configs([resource])[resource].result(timeout=30)
        time.sleep(3)  # the ClearElrRecord and a few no-ops after it
    out.mkdir(parents=True, exist_ok=True)
    segment = cluster.layout(1).metadata / SEGMENT
    shutil.copyfile(segment, out / SEGMENT_NAME)
    dump = subprocess.run(
        [
            "java",
            "-cp",
            str(cache_root() / "kafka-4.1" / "lib" / "*"),
            "kafka.tools.DumpLogSegments",
            "--cluster-metadata-decoder",
            "--files",
            str(out / SEGMENT_NAME),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    (out / "metadata-dump.txt").write_text(dump.stdout, encoding="utf-8")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
