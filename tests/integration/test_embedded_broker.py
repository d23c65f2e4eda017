"""streaming.tools.embedded_broker: Tansu started, answering, stopped, port released."""

from __future__ import annotations

import os
import socket
import uuid

import pytest
from kafka import KafkaAdminClient

from streaming.tools.embedded_broker import EmbeddedBroker

pytestmark = pytest.mark.integration


def _refused(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return False
    except OSError:
        return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_start_answers_metadata_and_stop_releases_the_port() -> None:
    broker = EmbeddedBroker().start()
    host, port = broker.bootstrap_servers.split(":")
    assert host == "127.0.0.1"
    pid = broker.pid
    assert pid is not None
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, bootstrap_timeout_ms=5000)
    admin.describe_topics([])
    admin.close()
    broker.stop()
    broker.stop()  # idempotent
    assert not broker.running
    assert not _alive(pid)
    assert _refused(host, int(port))
    # The port is free again: a new broker listens on it.
    with EmbeddedBroker(port=int(port)) as again:
        again.start()
        again.create_topics(["after-restart"])
        assert not _refused(host, int(port))
    assert _refused(host, int(port))


def test_context_manager_stops_the_broker() -> None:
    with EmbeddedBroker() as broker:
        broker.start()
        pid = broker.pid
        assert pid is not None
        assert _alive(pid)
    assert not _alive(pid)


def test_create_topics_is_idempotent(broker: EmbeddedBroker) -> None:
    name = f"idempotent-{uuid.uuid4().hex[:8]}"
    broker.create_topics([name], partitions=3)
    broker.create_topics([name, name], partitions=3)
    broker.create_topics([name], partitions=1)  # an existing topic is left as it is
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        (described,) = admin.describe_topics([name])
    finally:
        admin.close()
    assert described["error_code"] == 0
    assert len(described["partitions"]) == 3


def test_a_port_in_use_fails_fast_with_tansus_output() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        broker = EmbeddedBroker(port=taken.getsockname()[1])
        with pytest.raises(RuntimeError, match="Tansu"):
            broker.start(timeout_s=5)
        assert not broker.running
