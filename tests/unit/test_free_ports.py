"""streaming.tools.embedded_broker.free_ports: the ports a lab of many listeners gets."""

from __future__ import annotations

from streaming.tools.embedded_broker import bindable, free_ports


def test_the_ports_are_distinct_and_free() -> None:
    # a 6-broker lab with ZooKeeper: 4 ports a node
    ports = free_ports(28)
    assert len(set(ports)) == 28
    assert all(bindable(port) for port in ports)
