"""A real Apache Kafka cluster on loopback: its nodes, its faults and ``cluster.json``.

Every JVM is a child of the process that made the ``LabCluster``, in a process group of
its own, and is told by the kernel to terminate when that process dies
(``PR_SET_PDEATHSIG``): Ctrl-C, the end of ``--seconds`` or a crash leave no broker
behind. ``isrwatch lab fault`` from another process does not touch the brokers itself: it
hands its request to the lab through ``FaultDesk`` (``faults.py``), and the lab acts.

KRaft clusters are combined nodes (``process.roles=broker,controller``), all voters, the
storage formatted by Kafka's own ``kafka.tools.StorageTool``. ZooKeeper-mode clusters
(3.9) run ZooKeeper's own server (``QuorumPeerMain``) from the same jars.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from streaming.tools.embedded_broker import (
    accepts_connections,
    bindable,
    free_ports,
    output_tail,
    parent_death_signal,
    terminate_process_group,
)
from streaming.tools.fault_proxy import FaultProxy, ProxyMode
from streaming.tools.lab.distribution import (
    KafkaLine,
    LabError,
    Mode,
    ensure_installed,
    java_executable,
)
from streaming.tools.lab.node_config import (
    DEFAULT_LAG_TIME_MAX_MS,
    ClientListener,
    ConsoleLayout,
    NodeLayout,
    kafka_log_config,
    render_properties,
    server_properties,
    zookeeper_log_config,
    zookeeper_properties,
)

__all__ = ["BrokerFault", "LabCluster", "read_cluster_file"]

log = logging.getLogger(__name__)

CLUSTER_FILE = "cluster.json"
START_TIMEOUT_S = 180.0
DEFAULT_HEAP_MB = 512  # a dozen partitions; thousands of replicas a broker need more
# UTC: the log lines' stamps carry no zone, and collect.logs reads them in UTC by default.
JVM_OPTIONS = (
    "-Xms128m",
    "-XX:+UseSerialGC",
    "-Djava.awt.headless=true",
    "-Duser.timezone=UTC",
)
# The line each mode's broker logs once it serves requests (KafkaRaftServer.startup,
# 4.1.1; KafkaServer.startup, 3.9.1).
_STARTED = {
    Mode.KRAFT: "Kafka Server started",
    Mode.ZOOKEEPER: "started (kafka.server.KafkaServer)",
}
_PORTS_PER_NODE = 4


class BrokerFault:
    """What ``isrwatch lab fault`` can do to one broker."""

    PAUSE = "pause"  # SIGSTOP: a hung JVM (no heartbeat, no fetch, no answer)
    RESUME = "resume"  # SIGCONT
    KILL = "kill"  # SIGKILL: a crash
    STOP = "stop"  # SIGTERM: a controlled shutdown
    START = "start"  # start a stopped or killed broker again, same ports and data
    CUT = "cut"  # followers can no longer fetch from it (its REPLICATION listener hangs)
    HEAL = "heal"  # undo a cut

    ALL = (PAUSE, RESUME, KILL, STOP, START, CUT, HEAL)


@dataclass
class _Node:
    layout: NodeLayout
    command: list[str]
    proxy: FaultProxy | None = None
    process: subprocess.Popen[bytes] | None = None
    output: IO[bytes] | None = None
    paused: bool = False


@dataclass
class LabCluster:
    """A cluster of ``brokers`` nodes of ``kafka`` under ``workdir``."""

    kafka: KafkaLine
    brokers: int
    workdir: Path
    elr: bool = True
    lag_time_max_ms: int = DEFAULT_LAG_TIME_MAX_MS
    port_base: int | None = None  # None: ports the OS picks
    consoles: tuple[ConsoleLayout, ...] = ()  # more layouts each broker writes (node_config)
    client: ClientListener | None = None  # None: a PLAINTEXT listener for clients
    heap_mb: int = DEFAULT_HEAP_MB  # each broker's -Xmx
    _nodes: dict[int, _Node] = field(default_factory=dict, init=False)
    _zookeeper: _Node | None = field(default=None, init=False)
    _zookeeper_port: int | None = field(default=None, init=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, init=False)

    def __post_init__(self) -> None:
        if self.brokers < 1:
            raise LabError("--brokers must be at least 1")
        if not self.elr and self.kafka.mode is not Mode.KRAFT:
            raise LabError("--elr off applies to KRaft clusters (Kafka 4.1) only")

    # ---- life cycle -----------------------------------------------------------------

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Install the jars if needed, lay out and format every node, start them all
        (combined KRaft nodes wait for each other) and wait until each serves."""
        ensure_installed(self.kafka)
        self.workdir.mkdir(parents=True, exist_ok=True)
        ports = self._allocate_ports()
        java = java_executable()
        layouts = [
            NodeLayout(
                node_id=node_id,
                home=self.workdir / f"broker-{node_id}",
                client_port=ports[node_id][0],
                replication_port=ports[node_id][1],
                replication_advertised_port=ports[node_id][2],
                controller_port=ports[node_id][3] if self.kafka.mode is Mode.KRAFT else None,
            )
            for node_id in range(1, self.brokers + 1)
        ]
        voters = (
            {node_id: node_ports[3] for node_id, node_ports in ports.items() if node_id > 0}
            if self.kafka.mode is Mode.KRAFT
            else None
        )
        log_config = self.workdir / (
            "log4j2.properties" if self.kafka.log4j2 else "log4j.properties"
        )
        log_config.write_text(kafka_log_config(self.kafka.log4j2, self.consoles), encoding="utf-8")
        if self.kafka.mode is Mode.ZOOKEEPER:
            self._start_zookeeper(java, ports[0][0], timeout_s)
        for layout in layouts:
            for directory in (layout.logs, layout.data):
                directory.mkdir(parents=True, exist_ok=True)
            properties = server_properties(
                layout,
                voters=voters,
                zookeeper_port=self._zookeeper_port,
                brokers=self.brokers,
                lag_time_max_ms=self.lag_time_max_ms,
                client=self.client,
            )
            layout.properties_file.write_text(render_properties(properties), encoding="utf-8")
            command = [
                java,
                f"-Xmx{self.heap_mb}m",
                *JVM_OPTIONS,
                f"-Dkafka.logs.dir={layout.logs}",
                _log_config_option(self.kafka.log4j2, log_config),
                "-cp",
                self.kafka.classpath(),
                "kafka.Kafka",
                str(layout.properties_file),
            ]
            proxy = FaultProxy(
                ("127.0.0.1", layout.replication_port), port=layout.replication_advertised_port
            )
            self._nodes[layout.node_id] = _Node(layout, command, proxy.start())
        if self.kafka.mode is Mode.KRAFT:
            self._format(java)
        started_from = self._server_log_sizes(list(self._nodes))
        for node_id in self._nodes:
            self._spawn(node_id)
        self._wait_started(started_from, timeout_s)
        self.write_cluster_file()

    def stop(self) -> None:
        """Stop every JVM (resumed first if paused, so that SIGTERM is handled) and every
        proxy. Safe to call more than once."""
        with self._lock:
            for node in self._nodes.values():
                if node.process is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(node.process.pid, signal.SIGCONT)
                    terminate_process_group(node.process)
                    node.process = None
                if node.output is not None:
                    node.output.close()
                    node.output = None
                if node.proxy is not None:
                    node.proxy.stop()
                    node.proxy = None
            if self._zookeeper is not None and self._zookeeper.process is not None:
                terminate_process_group(self._zookeeper.process)
                self._zookeeper.process = None

    def __enter__(self) -> LabCluster:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    # ---- what scripts and the view need -----------------------------------------------

    @property
    def node_ids(self) -> list[int]:
        return sorted(self._nodes)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(
            f"127.0.0.1:{node.layout.client_port}" for _, node in sorted(self._nodes.items())
        )

    def layout(self, node_id: int) -> NodeLayout:
        return self._node(node_id).layout

    def running(self, node_id: int) -> bool:
        process = self._node(node_id).process
        return process is not None and process.poll() is None

    def active_controller(self) -> int | None:
        """The active controller: KRaft, the leader of the highest epoch any running node
        recorded in its ``quorum-state`` file; ZooKeeper mode, the controller the
        brokers' metadata names."""
        if self.kafka.mode is Mode.KRAFT:
            best: tuple[int, int] | None = None
            for node_id, node in self._nodes.items():
                if not self.running(node_id):
                    continue
                state_file = node.layout.metadata / "__cluster_metadata-0" / "quorum-state"
                with contextlib.suppress(OSError, ValueError):
                    state = json.loads(state_file.read_text(encoding="utf-8"))
                    leader, epoch = state.get("leaderId", -1), state.get("leaderEpoch", -1)
                    if leader >= 0 and (best is None or epoch > best[0]):
                        best = (epoch, leader)
            return None if best is None else best[1]
        from kafka import KafkaAdminClient

        try:
            admin = KafkaAdminClient(
                bootstrap_servers=self.bootstrap_servers, request_timeout_ms=5000
            )
        except Exception:
            return None
        try:
            controller = admin.describe_cluster().get("controller_id")
        except Exception:  # a broker going away; old brokers' DescribeCluster (2.8 to 3.x)
            return None
        finally:
            admin.close()
        return int(controller) if controller is not None and controller >= 0 else None

    def describe(self) -> dict[str, Any]:
        """``cluster.json``: what a script needs to act on the cluster."""
        brokers = []
        for node_id, node in sorted(self._nodes.items()):
            layout = node.layout
            process = node.process
            brokers.append(
                {
                    "id": node_id,
                    "pid": process.pid if process is not None and process.poll() is None else None,
                    "port": layout.client_port,
                    "replication_port": layout.replication_advertised_port,
                    "log_files": [str(path) for path in layout.log_files()],
                    "data_dir": str(layout.data),
                    **(
                        {"metadata_dir": str(layout.metadata)}
                        if self.kafka.mode is Mode.KRAFT
                        else {}
                    ),
                    "properties": str(layout.properties_file),
                    "paused": node.paused,
                    "cut": node.proxy is not None and node.proxy.mode is not ProxyMode.PASS,
                }
            )
        return {
            "bootstrap": self.bootstrap_servers,
            "kafka_version": self.kafka.version,
            "mode": self.kafka.mode.value,
            "elr": self.elr if self.kafka.mode is Mode.KRAFT else None,
            "replica_lag_time_max_ms": self.lag_time_max_ms,
            "controller": self.active_controller(),
            "zookeeper": (
                f"127.0.0.1:{self._zookeeper_port}" if self._zookeeper_port is not None else None
            ),
            "java": java_executable(),
            "classpath": self.kafka.classpath(),
            "brokers": brokers,
        }

    def write_cluster_file(self) -> Path:
        path = self.workdir / CLUSTER_FILE
        staging = path.with_suffix(".json.tmp")
        staging.write_text(json.dumps(self.describe(), indent=2) + "\n", encoding="utf-8")
        staging.replace(path)
        return path

    # ---- faults ----------------------------------------------------------------------

    def apply(self, fault: str, node_id: int, timeout_s: float = START_TIMEOUT_S) -> str:
        """Do ``fault`` (a ``BrokerFault``) to broker ``node_id``; returns what was done."""
        with self._lock:
            node = self._node(node_id)
            process = node.process
            alive = process is not None and process.poll() is None
            if fault in (BrokerFault.PAUSE, BrokerFault.RESUME, BrokerFault.KILL, BrokerFault.STOP):
                if not alive or process is None:
                    raise LabError(f"broker {node_id} is not running: `lab fault start` it first")
                if fault == BrokerFault.PAUSE:
                    os.killpg(process.pid, signal.SIGSTOP)
                    _wait_all_threads_stopped(process.pid, timeout_s)
                    node.paused = True
                elif fault == BrokerFault.RESUME:
                    os.killpg(process.pid, signal.SIGCONT)
                    node.paused = False
                elif fault == BrokerFault.KILL:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                    node.paused = False
                else:
                    os.killpg(process.pid, signal.SIGCONT)
                    node.paused = False
                    os.killpg(process.pid, signal.SIGTERM)
                    try:
                        process.wait(timeout=timeout_s)
                    except subprocess.TimeoutExpired as error:
                        raise LabError(
                            f"broker {node_id} did not finish its controlled shutdown in "
                            f"{timeout_s:.0f} s; see {node.layout.logs / 'server.log'}"
                        ) from error
            elif fault == BrokerFault.START:
                if alive:
                    raise LabError(f"broker {node_id} is running already")
                started_from = self._server_log_sizes([node_id])
                self._spawn(node_id)
                self._wait_started(started_from, timeout_s)
            elif fault in (BrokerFault.CUT, BrokerFault.HEAL):
                if node.proxy is None:
                    raise LabError("the cluster is stopped")
                node.proxy.set_mode(ProxyMode.HANG if fault == BrokerFault.CUT else ProxyMode.PASS)
            else:
                raise LabError(f"unknown fault {fault!r}; one of {', '.join(BrokerFault.ALL)}")
        self.write_cluster_file()
        return f"{fault} broker {node_id}"

    # ---- inside --------------------------------------------------------------------

    def _node(self, node_id: int) -> _Node:
        try:
            return self._nodes[node_id]
        except KeyError:
            raise LabError(
                f"there is no broker {node_id}; the cluster has brokers {self.node_ids}"
            ) from None

    def _allocate_ports(self) -> dict[int, tuple[int, ...]]:
        """Ports per node id (0: ZooKeeper), checked free. With ``port_base`` P, node n
        uses P + 4n .. P + 4n + 3 and ZooKeeper P."""
        if self.port_base is None:
            free = iter(free_ports(_PORTS_PER_NODE * (self.brokers + 1)))
            return {
                node_id: tuple(next(free) for _ in range(_PORTS_PER_NODE))
                for node_id in range(self.brokers + 1)
            }
        ports = {
            node_id: tuple(
                self.port_base + _PORTS_PER_NODE * node_id + offset
                for offset in range(_PORTS_PER_NODE)
            )
            for node_id in range(self.brokers + 1)
        }
        for node_id, node_ports in ports.items():
            for port in node_ports:
                if accepts_connections("127.0.0.1", port) or not bindable(port):
                    who = "ZooKeeper" if node_id == 0 else f"broker {node_id}"
                    raise LabError(
                        f"port {port} (for {who}) is taken by another process: stop it, or "
                        f"choose another --port-base (the lab uses {self.port_base} to "
                        f"{self.port_base + _PORTS_PER_NODE * (self.brokers + 1) - 1})"
                    )
        return ports

    def _format(self, java: str) -> None:
        cluster_id = _random_cluster_id()
        features = [] if self.elr else ["--feature", "eligible.leader.replicas.version=0"]
        for node in self._nodes.values():
            done = subprocess.run(
                [
                    java,
                    "-Xmx256m",
                    "-cp",
                    self.kafka.classpath(),
                    "kafka.tools.StorageTool",
                    "format",
                    "--cluster-id",
                    cluster_id,
                    "--config",
                    str(node.layout.properties_file),
                    *features,
                    *(self.client.format_arguments() if self.client else []),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                raise LabError(
                    f"kafka.tools.StorageTool could not format broker {node.layout.node_id}'s "
                    f"storage: {(done.stdout + done.stderr).strip()[-2000:]}"
                )

    def _start_zookeeper(self, java: str, port: int, timeout_s: float) -> None:
        home = self.workdir / "zookeeper"
        (home / "data").mkdir(parents=True, exist_ok=True)
        (home / "logs").mkdir(parents=True, exist_ok=True)
        properties = home / "zookeeper.properties"
        properties.write_text(
            render_properties(zookeeper_properties(home / "data", port)), encoding="utf-8"
        )
        log_config = home / "log4j.properties"
        log_config.write_text(zookeeper_log_config(), encoding="utf-8")
        command = [
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            f"-Dzookeeper.log.dir={home / 'logs'}",
            f"-Dlog4j.configuration=file:{log_config}",
            "-cp",
            self.kafka.classpath(),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(properties),
        ]
        layout = NodeLayout(0, home, port, port, port, None)
        self._zookeeper = _Node(layout, command)
        self._zookeeper_port = port
        self._launch(self._zookeeper)
        deadline = time.monotonic() + timeout_s
        while not accepts_connections("127.0.0.1", port):
            process = self._zookeeper.process
            if process is None or process.poll() is not None:
                raise LabError(
                    "ZooKeeper did not start: see "
                    f"{home / 'logs' / 'zookeeper.log'} and {home / 'stdout.log'}:\n"
                    + output_tail(self._zookeeper.output, 1500)
                )
            if time.monotonic() > deadline:
                raise LabError(f"ZooKeeper did not listen on {port} in {timeout_s:.0f} s")
            time.sleep(0.2)

    def _spawn(self, node_id: int) -> None:
        self._launch(self._node(node_id))

    def _launch(self, node: _Node) -> None:
        if node.output is None:
            node.output = (node.layout.home / "stdout.log").open("ab+")
        node.process = subprocess.Popen(
            node.command,
            cwd=node.layout.home,
            stdin=subprocess.DEVNULL,
            stdout=node.output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=parent_death_signal(),
        )
        node.paused = False

    def _server_log_sizes(self, node_ids: list[int]) -> dict[int, int]:
        """Where each node's ``server.log`` ends now: a restarted broker appends to its
        old log, and only what the new start writes says it has started."""
        sizes = {}
        for node_id in node_ids:
            path = self._nodes[node_id].layout.logs / "server.log"
            sizes[node_id] = path.stat().st_size if path.exists() else 0
        return sizes

    def _wait_started(self, offsets: dict[int, int], timeout_s: float) -> None:
        """Wait until every node of ``offsets`` logs that it started, past its offset."""
        marker = _STARTED[self.kafka.mode]
        waiting = set(offsets)
        deadline = time.monotonic() + timeout_s
        while waiting:
            for node_id in sorted(waiting):
                node = self._nodes[node_id]
                server_log = node.layout.logs / "server.log"
                if _logged_since(server_log, marker, offsets, node_id):
                    waiting.discard(node_id)
                    continue
                process = node.process
                if process is None or process.poll() is not None:
                    raise LabError(_start_failure(node_id, node, server_log))
            if waiting and time.monotonic() > deadline:
                first = min(waiting)
                raise LabError(
                    f"broker {first} did not start in {timeout_s:.0f} s: see "
                    f"{self._nodes[first].layout.logs / 'server.log'}"
                )
            if waiting:
                time.sleep(0.2)


def _wait_all_threads_stopped(pid: int, timeout_s: float) -> None:
    """Return once every thread of process ``pid`` is stopped (``/proc/PID/task/*/stat``
    state ``T``), so that a paused broker answers nothing sent after the pause.

    ``kill`` returns before the stop is done: Linux hands SIGSTOP to one thread, which
    stops the others only once it runs. On a busy 2-core CI machine the JVM's request
    handlers answered a DescribeCluster sent after ``kill`` had returned (the admin
    collector's describing-broker test, 2026-11-28). Where there is no ``/proc``, the
    signal is all there is to go on."""
    tasks = Path(f"/proc/{pid}/task")
    if not tasks.is_dir():
        return
    deadline = time.monotonic() + timeout_s
    while True:
        states = []
        for stat in tasks.glob("*/stat"):
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
        # T: stopped by a signal; t: stopped by a tracer; Z/X: a thread that is exiting
        if all(state in "TtZX" for state in states):
            return
        if time.monotonic() > deadline:
            raise LabError(f"process {pid} did not stop within {timeout_s:.0f} s of SIGSTOP")
        time.sleep(0.001)


def _logged_since(path: Path, marker: str, offsets: dict[int, int], node_id: int) -> bool:
    """Whether ``path`` has gained a line containing ``marker`` past ``offsets[node_id]``,
    which moves on to what was read (a line cut by the read is read again next time)."""
    if not path.exists():
        return False
    with path.open("rb") as file:
        file.seek(offsets[node_id])
        data = file.read()
    complete = data[: data.rfind(b"\n") + 1]
    offsets[node_id] += len(complete)
    return marker.encode() in complete


def _start_failure(node_id: int, node: _Node, server_log: Path) -> str:
    tail = output_tail(node.output, 1500).strip()
    server_tail = ""
    with contextlib.suppress(OSError):
        server_tail = "\n".join(server_log.read_text(errors="replace").splitlines()[-8:])
    text = tail + "\n" + server_tail
    hint = ""
    if "Address already in use" in text:
        hint = " A port it needs is taken: stop what holds it, or choose --port-base."
    elif "UnsupportedClassVersionError" in text:
        hint = " This Java is too old for this Kafka: use Java 17 (JAVA_HOME)."
    elif "ClassNotFoundException" in text or "NoClassDefFoundError" in text:
        hint = " Jars are missing from the cache: run `make kafka`."
    return (
        f"broker {node_id} exited while starting; its log: {server_log}, its output: "
        f"{node.layout.home / 'stdout.log'}.{hint}\n{tail[-1500:]}"
    )


def _log_config_option(log4j2: bool, path: Path) -> str:
    if log4j2:
        return f"-Dlog4j2.configurationFile={path}"
    return f"-Dlog4j.configuration=file:{path}"


def _random_cluster_id() -> str:
    """A cluster id as ``StorageTool random-uuid`` makes one: 16 random bytes, URL-safe
    base64 without padding, never starting with '-' (Kafka's ``Uuid.randomUuid`` avoids
    ids a command line would read as an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


def read_cluster_file(workdir: Path) -> dict[str, Any]:
    path = workdir / CLUSTER_FILE
    try:
        described: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LabError(f"no lab cluster in {workdir}: {path} does not exist") from None
    return described
