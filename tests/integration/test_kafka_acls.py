"""The ACLs each component needs (docs/security.md#acls), tested on Apache Kafka 4.1 with
the StandardAuthorizer: every component logs in as a principal of its own (SCRAM-SHA-512
over SASL_SSL, users created at format) that holds exactly the ACLs listed for it, and
does its work. An ``admin`` super user creates the topics and the ACLs.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    KafkaAdminClient,
    ResourcePattern,
    ResourceType,
)

from streaming.config import IsrwatchConfig, load_config
from streaming.config.topics import TopicSettings
from streaming.feeds.publisher import KafkaPublisher, PublishError
from streaming.tools.embedded_broker import free_port
from streaming.tools.lab.cluster import LabCluster
from streaming.tools.lab.distribution import LINES
from streaming.tools.lab.node_config import ClientListener
from tests.integration.certificates import Certificates, make_certificates
from tests.integration.job_process import JobProcess, connection_errors, scrape
from tests.integration.kafka_topics import last_per_key, read_topic, replayed
from tests.integration.lab_kafka import (
    create_topics,
    environment,
    input_records,
    publish_sample,
)

pytestmark = pytest.mark.integration

ADMIN = "admin"
COMPONENTS = ("job", "publisher", "check-restart", "collect-admin")
CLUSTER = "kafka-cluster"  # the one name a CLUSTER resource has
WAIT_S = 300  # the longest a case waits for what it must see (not a measure: a hang's end)
# The topics' names, known before the cluster is (its users are made at format).
TOPICS = load_config(None, {"kafka.bootstrap_servers": "localhost:9092"}, environ={}).topics


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

    def __str__(self) -> str:
        """As the components name it: ``Write on Topic:partition-health``."""
        operation = "".join(word.title() for word in self.operation.name.split("_"))
        return f"{operation} on {self.resource.name.title()}:{self.name}"


def needed(topics: TopicSettings = TOPICS) -> dict[str, list[Permission]]:
    """The ACLs of docs/security.md#acls, for ``topics`` (Read and Write imply Describe)."""
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


@dataclass(frozen=True)
class Missing:
    """One component's user holding every ACL listed for it but ``permission``."""

    component: str
    index: int  # of the missing permission in needed()[component]
    source_format: str | None = None  # the job's

    @property
    def permission(self) -> Permission:
        return needed()[self.component][self.index]

    @property
    def user(self) -> str:
        return f"{self.component}-without-{self.index}"

    def held(self) -> list[Permission]:
        return [p for i, p in enumerate(needed()[self.component]) if i != self.index]

    def __str__(self) -> str:
        return f"{self.component}{f'-{self.source_format}' if self.source_format else ''}: " + (
            f"no {self.permission}"
        )


def _missing() -> list[Missing]:
    cases = []
    for component, permissions in needed().items():
        for index in range(len(permissions)):
            if component == "collect-admin" and permissions[index] == Permission(
                ResourceType.TOPIC, TOPICS.fetch_responses, ACLOperation.WRITE
            ):
                # It publishes fetch responses of followers, and a one-node cluster has
                # none: its publisher's Write on fetch-responses is the publisher's case.
                continue
            if component != "job":
                cases.append(Missing(component, index))
                continue
            # The sinks (the job's Writes) are the same whatever the source: the Python
            # source only. Reading is each source's own.
            writes = permissions[index].operation is ACLOperation.WRITE
            for source_format in ("python",) if writes else ("python", "kafka"):
                cases.append(Missing(component, index, source_format))
    return cases


MISSING = _missing()
USERS = sorted({ADMIN, *COMPONENTS, *(missing.user for missing in MISSING)})
PASSWORDS = {name: f"{name}-pw-0123" for name in USERS}


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


@contextlib.contextmanager
def authorized_kafka(directory: Path) -> Iterator[AuthorizedKafka]:
    """A one-node Kafka 4.1 with the StandardAuthorizer on its SASL_SSL listener, every
    user of USERS made at format, isrwatch's topics, and each user's ACLs."""
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
        held = {**needed(admin_config.topics), **{m.user: m.held() for m in MISSING}}
        admin = KafkaAdminClient(**admin_config.kafka.kafka_python_options())
        created = admin.create_acls([p.acl(user) for user, ps in held.items() for p in ps])
        admin.close()
        assert not created["failed"], created["failed"]
        publish_sample(kafka.config("publisher"))
        # one record the job dead-letters, so that writing a dead letter is asked too
        producer = KafkaProducer(**admin_config.kafka.kafka_python_options())
        producer.send(admin_config.topics.fetch_responses, key=b"t:0", value=b"not json")
        producer.close()
        yield kafka
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthorizedKafka]:
    with authorized_kafka(tmp_path_factory.mktemp("kafka")) as kafka:
        yield kafka


def test_each_component_works_with_exactly_its_acls(kafka: AuthorizedKafka, tmp_path: Path) -> None:
    config = kafka.config(ADMIN)
    # The authorizer is on: a principal sees only the topics its ACLs name.
    consumer = KafkaConsumer(**kafka.config("check-restart").kafka.kafka_python_options())
    assert consumer.topics() == {config.topics.partition_health}
    consumer.close()
    expected = replayed()  # the sample, published by the publisher's user (the fixture)
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


# ---------------------------------------------------------------- one ACL missing


def said(missing: Missing) -> str:
    """What the component must say (streaming.acl_denial.Denial). For Topic:*, the topic
    it was refused is named, whichever it is."""
    who = {"job": "the job", "publisher": "the publisher", "check-restart": "check restart"}
    if missing.component == "collect-admin":  # its Writes are its publisher's
        writes = missing.permission.operation is ACLOperation.WRITE
        who[missing.component] = "the publisher" if writes else "the collector"
    permission = str(missing.permission).removesuffix("*")
    return f"not authorized: {who[missing.component]}'s principal needs {permission}"


def job_missing(kafka: AuthorizedKafka, missing: Missing, tmp_path: Path) -> None:
    """``isrwatch run`` says the denial on each try, keeps trying, and a refused Read is
    the source's ``authorization`` reason (the job reads from the sample's start)."""
    settings = kafka.settings(missing.user, **{"kafka.source_format": missing.source_format})
    del settings["metrics.enabled"]
    job = JobProcess(settings, tmp_path)
    servers = kafka.cluster.bootstrap_servers
    try:
        if missing.permission.operation is ACLOperation.READ:
            down = job.wait_for(
                "the authorization reason",
                lambda s: connection_errors(s) == {("authorization", servers): 1},
            )
            assert down[("isrwatch_source_up", ())] == 0
        # said, then said again by the next try of the same process
        wait_for_log(job.process, job.stderr, said(missing), times=2)
    finally:
        job.stop()
    assert PASSWORDS[missing.user] not in job.stderr()


def publisher_missing(kafka: AuthorizedKafka, missing: Missing, tmp_path: Path) -> None:
    """The publisher (every collector's) raises the denial, and the next publish is
    tried, and refused, again."""
    publisher = KafkaPublisher(kafka.config(missing.user))
    try:
        for _ in range(2):
            with pytest.raises(PublishError) as refused:
                publisher.publish(input_records())
            assert said(missing) in str(refused.value)
    finally:
        publisher.close()


def check_restart_missing(kafka: AuthorizedKafka, missing: Missing, tmp_path: Path) -> None:
    """A one-shot command: the denial is its error, no traceback."""
    done = kafka.isrwatch(missing.user, "check", "restart", "--broker", "1")
    assert done.returncode == 2, done.stderr[-4000:]
    assert said(missing) in done.stderr, done.stderr[-4000:]  # its JSON error
    assert "Traceback" not in done.stderr
    assert PASSWORDS[missing.user] not in done.stdout + done.stderr


def collect_admin_missing(kafka: AuthorizedKafka, missing: Missing, tmp_path: Path) -> None:
    """``collect admin`` polls on: a refused publish fails the poll (counted, said, tried
    again at the next); a refused request of a poll's optional part is said once and
    counted at every poll, which goes on without it."""
    port = free_port()
    stderr_path = tmp_path / "collect.stderr"
    settings = kafka.settings(
        missing.user,
        **{
            "collect.admin.poll_interval_ms": 500,
            "collect.admin.metrics_port": port,
            "collect.admin.state_file": tmp_path / "collect-admin.json",
        },
    )
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "streaming.cli", "collect", "admin"],
            env=environment(settings),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    api = {
        "Describe on Cluster:kafka-cluster": "describe_quorum",
        "DescribeConfigs on Cluster:kafka-cluster": "describe_broker_configs",
        "DescribeConfigs on Topic:*": "describe_topic_configs",
    }.get(str(missing.permission))

    def said_so_far() -> str:
        return stderr_path.read_text(errors="replace")

    try:
        if missing.permission == Permission(ResourceType.TOPIC, "*", ACLOperation.DESCRIBE):
            # Kafka leaves the topics a principal may not describe out of its Metadata
            # answer, without an error: the collector sees only the input topics (Write
            # implies Describe) and cannot tell. Documented (docs/security.md#acls).
            # at least 1: the gauge is served at 0 before the first poll has set it
            seen = wait_for_sample(
                process, port, "isrwatch_collect_admin_partitions", at_least=1, log=said_so_far
            )
            assert seen == 3  # controller-events (1) and fetch-responses (2) of 5
            return
        if api is None:  # a Write: the poll that publishes fails
            name, labels = "isrwatch_collect_poll_failures_total", {"stage": "publish"}
        else:
            name, labels = "isrwatch_collect_admin_unavailable_total", {"api": api}
        wait_for_sample(process, port, name, labels, at_least=2, log=said_so_far)  # next poll too
        wait_for_log(process, said_so_far, said(missing))
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert PASSWORDS[missing.user] not in stderr_path.read_text(errors="replace")


RUNS = {
    "job": job_missing,
    "publisher": publisher_missing,
    "check-restart": check_restart_missing,
    "collect-admin": collect_admin_missing,
}


@pytest.mark.parametrize("missing", MISSING, ids=str)
def test_a_missing_acl_is_named_and_the_component_keeps_trying(
    kafka: AuthorizedKafka, missing: Missing, tmp_path: Path
) -> None:
    RUNS[missing.component](kafka, missing, tmp_path)


def wait_for_log(
    process: subprocess.Popen[bytes], log: Callable[[], str], words: str, times: int = 1
) -> None:
    """Until ``log()`` says ``words`` ``times`` times; fails if the process exits first."""
    deadline = time.monotonic() + WAIT_S
    while log().count(words) < times:
        assert process.poll() is None, f"exited, having said:\n{log()[-4000:]}"
        assert time.monotonic() < deadline, f"not said {times} times:\n{log()[-4000:]}"
        time.sleep(0.5)


def wait_for_sample(
    process: subprocess.Popen[bytes],
    port: int,
    name: str,
    labels: dict[str, str] | None = None,
    at_least: float = 0,
    log: Callable[[], str] = lambda: "",
) -> float:
    """The first value of ``name{labels}`` at least ``at_least`` that the process's
    /metrics serves; fails if the process exits first, with what it said (``log``)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        assert process.poll() is None, (
            f"the process exited ({process.returncode}), having said:\n{log()[-4000:]}"
        )
        for (found, found_labels), value in scrape(port).items():
            wanted = (labels or {}).items() <= dict(found_labels).items()
            if found == name and wanted and value >= at_least:
                return value
        assert time.monotonic() < deadline, f"no {name}{labels or ''} >= {at_least}"
        time.sleep(0.5)
