"""Capture the Metadata, ListOffsets and DescribeConfigs answers of one ``collect admin``
poll of a real Kafka cluster (the lab's: Apache Kafka 4.1.1 from the Maven jars, three
combined KRaft nodes), as the bytes the brokers sent.

    python tests/unit/data/admin_answers/write_fixture.py tests/unit/data/admin_answers

Steps: topics ``orders`` (3 partitions) and ``clicks`` (2), replication factor 3; 50
records to ``orders`` and 7 to ``clicks``, round robin over their partitions (acks=all);
once every replica answers its log end offset, one ``KafkaAdminSource.snapshot()``, each
answer kept as kafka-python's protocol parser received it (response header and body,
without the 4-byte size). Answers are numbered in the order they arrived (the poll's
16: DescribeCluster, Metadata, DescribeQuorum, DescribeConfigs x 4, ListOffsets x 9).
Run with the collector of commit ad04f8f (kafka-python's own requests, the versions it
negotiated with Kafka 4.1.1: Metadata v13, ListOffsets v10, DescribeConfigs v4).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from streaming.config import IsrwatchConfig
from streaming.feeds.collectors.admin_source import KafkaAdminSource
from streaming.tools.lab.cluster import LabCluster
from streaming.tools.lab.distribution import LINES


def main(out: Path) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
    from kafka.protocol.parser import KafkaProtocol

    answers: list[tuple[int, int, bytes]] = []
    process = KafkaProtocol._process_response

    def kept(self: Any, buffer: Any) -> Any:
        header = self.in_flight_requests[0]
        answers.append((header.request_api_key, header.request_api_version, bytes(buffer)))
        buffer.seek(0)
        return process(self, buffer)

    with (
        tempfile.TemporaryDirectory(prefix="admin-answers-") as work,
        LabCluster(LINES["4.1"], 3, Path(work)) as cluster,
    ):
        cluster.start()
        bootstrap = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = [NewTopic("orders", 3, 3), NewTopic("clicks", 2, 3)]
        for future in admin.create_topics(topics).values():
            future.result(timeout=120)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(50):
            producer.produce("orders", value=b"x%d" % i, partition=i % 3)
        for i in range(7):
            producer.produce("clicks", value=b"y%d" % i, partition=i % 2)
        producer.flush(60)
        config = IsrwatchConfig.model_validate({"kafka": {"bootstrap_servers": bootstrap}})
        source = KafkaAdminSource(config.kafka)
        while len(source.snapshot().log_end_offsets) < 15:
            time.sleep(1)
        time.sleep(2)
        KafkaProtocol._process_response = kept
        source.snapshot()
        KafkaProtocol._process_response = process
        source.close()
    for index, (api, version, data) in enumerate(answers):
        if api == 3:
            (out / f"metadata-v{version}.bin").write_bytes(data)
        elif api == 2:
            (out / f"list-offsets-v{version}-{index:02d}.bin").write_bytes(data)
        elif api == 32:
            (out / f"describe-configs-v{version}-{index:02d}.bin").write_bytes(data)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
