"""The fault campaign's TCP proxy (streaming/tools/fault_proxy.py) in each of its modes, in front of
an echo server on loopback."""

from __future__ import annotations

import socket
import socketserver
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from streaming.tools.fault_proxy import DROP_AFTER_BYTES, FaultProxy, ProxyMode


class Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        try:
            while data := self.request.recv(4096):
                self.request.sendall(data)
        except ConnectionResetError:  # the proxy resets its upstream side in some modes
            pass


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with FaultProxy(("127.0.0.1", server.server_address[1])) as running:
        yield running
    server.shutdown()
    server.server_close()


def connect(proxy: FaultProxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=2)


def exchange(client: socket.socket, payload: bytes) -> bytes:
    client.sendall(payload)
    received = b""
    while len(received) < len(payload):
        chunk = client.recv(4096)
        if not chunk:
            break
        received += chunk
    return received


def read_to_end(client: socket.socket) -> tuple[bytes, str]:
    """Everything the connection delivers, and how it ended: "reset" or "eof"."""
    received = b""
    try:
        while chunk := client.recv(4096):
            received += chunk
    except ConnectionResetError:
        return received, "reset"
    return received, "eof"


def test_pass_forwards_both_ways(proxy: FaultProxy) -> None:
    with connect(proxy) as client:
        assert exchange(client, b"0123456789" * 100) == b"0123456789" * 100


def test_refuse_closes_the_listener_and_resets_open_connections(proxy: FaultProxy) -> None:
    client = connect(proxy)
    assert exchange(client, b"ping") == b"ping"
    proxy.set_mode(ProxyMode.REFUSE)
    with pytest.raises(ConnectionRefusedError):
        connect(proxy)
    assert read_to_end(client) == (b"", "reset")
    client.close()
    proxy.set_mode(ProxyMode.PASS)
    with connect(proxy) as again:
        assert exchange(again, b"back") == b"back"


def test_hang_accepts_and_forwards_nothing_until_it_passes(proxy: FaultProxy) -> None:
    proxy.set_mode(ProxyMode.HANG)
    with connect(proxy) as client:
        client.settimeout(0.5)
        client.sendall(b"held")
        with pytest.raises(TimeoutError):
            client.recv(16)
        proxy.set_mode(ProxyMode.PASS)
        client.settimeout(2)
        assert client.recv(16) == b"held"  # what was held goes through once it passes


def test_drop_cuts_the_response_after_its_first_bytes(proxy: FaultProxy) -> None:
    proxy.set_mode(ProxyMode.DROP)
    with connect(proxy) as client:
        client.sendall(b"abcdefghijklmnopqrstuvwxyz")
        assert read_to_end(client) == (b"abcdefg"[:DROP_AFTER_BYTES], "reset")
    assert proxy.responses_cut == 1
