"""A fault-injecting TCP proxy on loopback: a broker outage seen from its clients (the
fault campaign), and a broker cut from its peers (``isrwatch lab fault cut``).

Clients connect to the proxy; it connects each of them to the upstream (the broker) and
copies bytes both ways, unless its mode says otherwise:

* ``PASS``: forward everything;
* ``REFUSE``: the listening socket is closed (a client's connect is refused) and every
  open connection is closed with a reset;
* ``HANG``: connections are accepted and kept open, but nothing is forwarded either way
  (a broker that stopped answering, or a black-holed network);
* ``DROP``: requests are forwarded, but a response is cut: its first bytes are sent to
  the client, then the connection is reset (a broker or link dying mid-response).

The proxy runs its own asyncio loop in a daemon thread, so a synchronous campaign drives
it with :meth:`FaultProxy.set_mode`. It is protocol-blind: a Kafka client sees the
broker's advertised address, so the broker must advertise the proxy's (``EmbeddedBroker``
``advertised_port``) for every connection to go through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from concurrent.futures import Future
from enum import StrEnum

__all__ = ["DROP_AFTER_BYTES", "FaultProxy", "ProxyMode"]

DROP_AFTER_BYTES = 7
"""How much of a response ``DROP`` forwards before the reset: the 4-byte length prefix
and part of the correlation id, so the client has started to read a response."""

_READ_SIZE = 65536


class ProxyMode(StrEnum):
    PASS = "pass"
    REFUSE = "refuse"
    HANG = "hang"
    DROP = "drop"


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a dead peer's kernel answers."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FaultProxy:
    """Listens on ``host:port`` (0: a free port) and forwards to ``upstream``."""

    def __init__(self, upstream: tuple[str, int], host: str = "127.0.0.1", port: int = 0) -> None:
        self.upstream = upstream
        self.host = host
        self.port = port
        self._mode = ProxyMode.PASS
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, daemon=True, name="fault-proxy"
        )
        self._server: asyncio.Server | None = None
        self._connections: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter | None]] = set()
        self._mode_changed: asyncio.Event | None = None
        self.connections_accepted = 0
        self.responses_cut = 0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def mode(self) -> ProxyMode:
        return self._mode

    # ------------------------------------------------------------ synchronous API

    def start(self) -> FaultProxy:
        self._thread.start()
        self._call(self._listen()).result(10)
        return self

    def set_mode(self, mode: ProxyMode) -> None:
        """Switch mode; returns once open connections and the listener obey it."""
        self._call(self._switch(mode)).result(10)

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            self._call(self._shutdown()).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _call(self, coroutine: object) -> Future[None]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)  # type: ignore[arg-type]

    # ------------------------------------------------------------ the loop's side

    async def _listen(self) -> None:
        self._mode_changed = asyncio.Event()
        self._server = await asyncio.start_server(
            self._accept, self.host, self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _switch(self, mode: ProxyMode) -> None:
        previous, self._mode = self._mode, mode
        assert self._mode_changed is not None
        self._mode_changed.set()  # wake hanging copies: they re-read the mode
        self._mode_changed = asyncio.Event()
        if mode is ProxyMode.REFUSE:
            if self._server is not None:
                self._server.close()
                await self._server.wait_closed()
                self._server = None
            for client, upstream in list(self._connections):
                _reset(client)
                if upstream is not None:
                    _reset(upstream)
            self._connections.clear()
        elif previous is ProxyMode.REFUSE and self._server is None:
            await self._listen()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for client, upstream in list(self._connections):
            _reset(client)
            if upstream is not None:
                _reset(upstream)
        self._connections.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections_accepted += 1
        if self._mode is ProxyMode.REFUSE:  # accepted in the instant before the close
            _reset(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            _reset(writer)
            return
        pair = (writer, up_writer)
        self._connections.add(pair)
        try:
            await asyncio.gather(
                self._copy(reader, up_writer, response=False),
                self._copy(up_reader, writer, response=True),
            )
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._connections.discard(pair)
            _reset(writer)
            _reset(up_writer)

    async def _copy(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, response: bool
    ) -> None:
        while True:
            data = await reader.read(_READ_SIZE)
            if not data:
                raise ConnectionResetError("peer closed")
            while self._mode is ProxyMode.HANG:  # hold the bytes until the mode changes
                assert self._mode_changed is not None
                await self._mode_changed.wait()
            if self._mode is ProxyMode.REFUSE:
                raise ConnectionResetError("refusing")
            if response and self._mode is ProxyMode.DROP:
                writer.write(data[:DROP_AFTER_BYTES])
                with contextlib.suppress(OSError):
                    await writer.drain()
                self.responses_cut += 1
                raise ConnectionResetError("response cut")
            writer.write(data)
            await writer.drain()
