"""The exporter's HTTP side, served by the driver: ``/metrics`` and ``/check/restart``.

``HealthExporter`` (``streaming.job.metrics``) collects what the shards report and
renders it; ``ExporterServer`` answers HTTP with it: the exposition in the format and
encoding the scraper asks for, and the restart check over the shards' fragile partitions
(``state.restart_check``, the answer ``isrwatch check restart`` gives).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client.exposition import ThreadingWSGIServer, choose_encoder, gzip_accepted

from state import IsrAtRisk, check_restart
from streaming.job.metrics import HealthExporter

SCRAPE_BACKLOG = 128
"""Connections the kernel queues for /metrics before the server accepts them."""


def restart_answer(
    query_string: str, fragile: list[IsrAtRisk] | None
) -> tuple[str, dict[str, Any]]:
    """The HTTP status and JSON body of ``/check/restart?broker=N``, from the shards'
    fragile partitions.

    200 safe, 409 not safe, 400 without a broker id, 503 before the first micro-batch.
    """
    brokers = parse_qs(query_string).get("broker", [])
    if len(brokers) != 1 or not brokers[0].lstrip("-").isdigit():
        return "400 Bad Request", {"error": "give one broker id: /check/restart?broker=N"}
    if fragile is None:
        return "503 Service Unavailable", {"error": "no micro-batch has completed yet"}
    result = check_restart(fragile, int(brokers[0]))
    body = result.to_json()
    # the job's shards report only the partitions one broker's stop could break
    body["fragile_partitions"] = body.pop("partitions_considered")
    return ("200 OK" if result.safe else "409 Conflict"), body


class _QuietHandler(WSGIRequestHandler):
    """No access log line per scrape."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class ExporterServer:
    """Serves an exporter's ``/metrics`` and ``/check/restart`` until :meth:`close`."""

    def __init__(self, exporter: HealthExporter) -> None:
        self.exporter = exporter
        self._server: WSGIServer | None = None

    def serve(self, host: str, port: int) -> None:
        """Serve on ``host:port`` from a thread of its own."""

        class Server(ThreadingWSGIServer):  # IPv4 or IPv6, as the host says
            address_family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
            # the listen backlog: socketserver's 5 made the kernel drop connections when
            # more scrapers than that arrived at once (each then waited for a SYN retry)
            request_queue_size = SCRAPE_BACKLOG

        server = make_server(host, port, self.app, Server, handler_class=_QuietHandler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._server = server

    def app(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        """The WSGI application."""
        if environ.get("PATH_INFO") == "/check/restart":
            fragile = self.exporter.fragile()
            status, body = restart_answer(environ.get("QUERY_STRING", ""), fragile)
            start_response(status, [("Content-Type", "application/json")])
            return [json.dumps(body).encode()]
        return self.exposition(environ, start_response)

    def exposition(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        """``/metrics`` in the format and encoding the request accepts."""
        encoder, content_type = choose_encoder(environ.get("HTTP_ACCEPT", ""))
        compressed = gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING", ""))
        body = self.exporter.render(encoder, content_type, compressed=compressed)
        headers = [("Content-Type", content_type)]
        if compressed:
            headers.append(("Content-Encoding", "gzip"))
        start_response("200 OK", headers)
        return [body]

    def close(self) -> None:
        """Stop serving and release the port (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
