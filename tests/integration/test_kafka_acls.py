"""The ACLs each component needs (docs/security.md#acls), tested on Apache Kafka 4.1 with
the StandardAuthorizer: every component logs in as a principal of its own (SCRAM-SHA-512
over SASL_SSL, users created at format) that holds exactly the ACLs listed for it, and
does its work. An ``admin`` super user creates the topics and the ACLs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka import KafkaConsumer
from kafka.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    KafkaAdminClient,
    ResourcePattern,
    ResourceType,
)

from streaming.config import IsrwatchConfig, load_config
from streaming.tools.lab.cluster import LabCluster
from streaming.tools.lab.distribution import LINES
from streaming.tools.lab.node_config import ClientListener
from tests.integration.certificates import Certificates, make_certificates
from tests.integration.job_process import JobProcess
from tests.integration.kafka_topics import last_per_key, read_topic, replayed
from tests.integration.lab_kafka import create_topics, environment, publish_sample

pytestmark = pytest.mark.integration

ADMIN = "admin"
COMPONENTS = ("job", "publisher", "check-restart", "collect-admin")
# A job's user holding the job's ACLs but Read on fetch-responses.
MISSING_READ = "job-without-fetch-read"
PASSWORDS = {name: f"{name}-pw-0123" for name in (ADMIN, *COMPONENTS, MISSING_READ)}
CLUSTER = "kafka-cluster"  # the one name a CLUSTER resource has


@dataclass(frozen=True)
class Permission:
    resource: ResourceType
    name: str
    operation: ACLOperation

    def acl(self, principal: str) -> ACL:
        return ACL(
            principal=f"User:{principal}",
            host="*",
            operation=self.operation,
            permission_type=ACLPermissionType.ALLOW,
            resource_pattern=ResourcePattern(self.resource, self.name),
        )


def needed(config: IsrwatchConfig) -> dict[str, list[Permission]]:
    """The ACLs of docs/security.md#acls, for ``config``'s topics (Read and Write imply
    Describe)."""
    topics = config.topics
    publish = [
        Permission(ResourceType.TOPIC, topics.controller_events, ACLOperation.WRITE),
        Permission(ResourceType.TOPIC, topics.fetch_responses, ACLOperation.WRITE),
    ]
    return {
        "job": [
            Permission(ResourceType.TOPIC, topics.controller_events, ACLOperation.READ),
            Permission(ResourceType.TOPIC, topics.fetch_responses, ACLOperation.READ),
            Permission(ResourceType.TOPIC, topics.partition_health, ACLOperation.WRITE),
            Permission(ResourceType.TOPIC, topics.dead_letters, ACLOperation.WRITE),
        ],
        "publisher": publish,
        "check-restart": [
            Permission(ResourceType.TOPIC, topics.partition_health, ACLOperation.READ),
        ],
        "collect-admin": [
            Permission(ResourceType.CLUSTER, CLUSTER, ACLOperation.DESCRIBE),
            Permission(ResourceType.CLUSTER, CLUSTER, ACLOperation.DESCRIBE_CONFIGS),
            Permission(ResourceType.TOPIC, "*", ACLOperation.DESCRIBE),
            Permission(ResourceType.TOPIC, "*", ACLOperation.DESCRIBE_CONFIGS),
            *publish,
        ],
    }


@dataclass
class AuthorizedKafka:
    cluster: LabCluster
    certificates: Certificates

    def settings(self, user: str, **overrides: object) -> dict[str, object]:
        return {
            "kafka.bootstrap_servers": self.cluster.bootstrap_servers,
            "kafka.security_protocol": "SASL_SSL",
            "kafka.sasl_mechanism": "SCRAM-SHA-512",
            "kafka.sasl_username": user,
            "kafka.sasl_password": PASSWORDS[user],
            "kafka.ssl_cafile": self.certificates.ca,
            "streaming.trigger_interval_ms": 500,
            "streaming.state_shards": 3,
            "metrics.enabled": "false",
            **overrides,
        }

    def config(self, user: str) -> IsrwatchConfig:
        return load_config(None, self.settings(user), environ={})

    def isrwatch(
        self, user: str, *arguments: str, **overrides: object
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "streaming.cli", *arguments],
            env=environment(self.settings(user, **overrides)),
            capture_output=True,
            text=True,
            timeout=480,
        )


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthorizedKafka]:
    directory = tmp_path_factory.mktemp("kafka")
    certificates = make_certificates(directory / "certificates")
    keystore = directory / "broker-keystore.pem"
    keystore.write_text(certificates.server_key.read_text() + certificates.server_cert.read_text())
    listener = ClientListener(
        "SASL_SSL",
        "SCRAM-SHA-512",
        PASSWORDS,
        keystore=keystore,
        authorizer=True,
        super_users=(ADMIN,),
    )
    cluster = LabCluster(LINES["4.1"], 1, directory / "cluster", client=listener)
    try:
        cluster.start()
        kafka = AuthorizedKafka(cluster, certificates)
        admin_config = kafka.config(ADMIN)
        create_topics(admin_config)
        admin = KafkaAdminClient(**admin_config.kafka.kafka_python_options())
        permissions = needed(admin_config)
        fetch_read = Permission(
            ResourceType.TOPIC, admin_config.topics.fetch_responses, ACLOperation.READ
        )
        permissions[MISSING_READ] = [p for p in permissions["job"] if p != fetch_read]
        assert len(permissions[MISSING_READ]) == len(permissions["job"]) - 1
        acls = [
            permission.acl(component)
            for component, held in permissions.items()
            for permission in held
        ]
        created = admin.create_acls(acls)
        admin.close()
        assert not created["failed"], created["failed"]
        yield kafka
    finally:
        cluster.stop()


def test_each_component_works_with_exactly_its_acls(kafka: AuthorizedKafka, tmp_path: Path) -> None:
    config = kafka.config(ADMIN)
    # The authorizer is on: a principal sees only the topics its ACLs name.
    consumer = KafkaConsumer(**kafka.config("check-restart").kafka.kafka_python_options())
    assert consumer.topics() == {config.topics.partition_health}
    consumer.close()
    publish_sample(kafka.config("publisher"))
    expected = replayed()
    for source_format in ("python", "kafka"):
        done = kafka.isrwatch(
            "job",
            "run",
            "--available-now",
            "--health-out",
            str(tmp_path / f"health-{source_format}.jsonl"),
            **{
                "kafka.source_format": source_format,
                "streaming.checkpoint_location": tmp_path / f"checkpoint-{source_format}",
            },
        )
        assert done.returncode == 0, f"{source_format}: {done.stderr[-4000:]}"
    health = tmp_path / "health-python.jsonl"
    assert last_per_key(read_topic(config, config.topics.partition_health)) == expected

    from_topic = kafka.isrwatch("check-restart", "check", "restart", "--broker", "1")
    from_file = kafka.isrwatch(
        "check-restart", "check", "restart", "--broker", "1", "--from", str(health)
    )
    assert from_topic.returncode in (0, 1), from_topic.stderr[-4000:]
    assert json.loads(from_topic.stdout) == json.loads(from_file.stdout)

    state_file = tmp_path / "collect-admin.json"  # its first poll: everything is new
    polled = kafka.isrwatch(
        "collect-admin", "collect", "admin", "--once", **{"collect.admin.state_file": state_file}
    )
    assert polled.returncode == 0, polled.stderr[-4000:]
    events = [
        json.loads(value)
        for _, value in read_topic(config, config.topics.controller_events)
        if value is not None
    ]
    configs = {e["topic"] for e in events if e.get("type") == "TopicConfig"}
    assert config.topics.partition_health in configs
    assert any(e.get("type") == "BrokerConfig" for e in events)


def test_a_job_missing_read_on_an_input_topic_names_it_and_keeps_trying(
    kafka: AuthorizedKafka, tmp_path: Path
) -> None:
    topic = kafka.config(ADMIN).topics.fetch_responses
    settings = kafka.settings(MISSING_READ)
    del settings["metrics.enabled"]
    job = JobProcess(settings, tmp_path)
    said = (
        f"not authorized to read topic {topic} (TOPIC_AUTHORIZATION_FAILED): the job's "
        f"principal needs Read on Topic:{topic}"
    )
    try:
        deadline = time.monotonic() + 300
        while job.stderr().count(said) < 2 and time.monotonic() < deadline:
            assert job.process.poll() is None, job.stderr()[-4000:]
            time.sleep(1)
        assert job.stderr().count(said) >= 2, job.stderr()[-4000:]  # said, then tried again
        assert job.process.poll() is None
    finally:
        job.stop()
    assert PASSWORDS[MISSING_READ] not in job.stderr()
