"""``KafkaAdminSource``: ready to ask every broker the cluster says is live
(streaming/feeds/collectors/admin_source.py, ``_know_brokers``), on a stand-in of
kafka-python's connection manager: no broker needed to see what the source asks of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streaming.feeds.collectors.admin_source import KafkaAdminSource


@dataclass
class Cache:
    known: set[int]
    updates: int = 0

    def broker_metadata(self, broker: int) -> object | None:
        return object() if broker in self.known else None

    def request_update(self) -> None:
        self.updates += 1


@dataclass
class Manager:
    cluster: Cache
    delays: dict[int, float]
    reset: list[int] = field(default_factory=list)

    def connection_delay(self, broker: int) -> float:
        return self.delays.get(broker, 0.0)

    def reset_backoff(self, broker: int) -> None:
        self.reset.append(broker)
        self.delays.pop(broker, None)


def source_over(manager: Manager) -> KafkaAdminSource:
    source = KafkaAdminSource.__new__(KafkaAdminSource)  # no client: the stand-in is it
    admin: Any = type("Admin", (), {})()
    admin._manager = manager
    source._admin = admin
    return source


def test_a_live_broker_the_client_does_not_know_refreshes_its_metadata() -> None:
    manager = Manager(Cache(known={1, 2}), delays={})
    source_over(manager)._know_brokers((1, 2, 3))
    assert manager.cluster.updates == 1
    assert manager.reset == []


def test_known_brokers_need_no_refresh() -> None:
    manager = Manager(Cache(known={1, 2, 3}), delays={})
    source_over(manager)._know_brokers((1, 2, 3))
    assert manager.cluster.updates == 0


def test_a_live_broker_the_client_backs_off_from_is_tried_at_once() -> None:
    # broker 2 was down 20 s: the client waits 14 s more before its next attempt
    manager = Manager(Cache(known={1, 2, 3}), delays={2: 14.0})
    source_over(manager)._know_brokers((1, 2, 3))
    assert manager.reset == [2]


def test_a_broker_the_cluster_does_not_list_keeps_its_backoff() -> None:
    manager = Manager(Cache(known={1, 2, 3}), delays={3: 14.0})
    source_over(manager)._know_brokers((1, 2))
    assert manager.reset == []
    assert manager.delays == {3: 14.0}
