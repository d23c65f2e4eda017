"""A Spark standalone cluster on loopback, from PySpark's own distribution, for tests.

A master and its workers are separate JVMs started with ``spark-class`` from the pip
package's ``SPARK_HOME`` (``pyspark/bin``), each in a session of its own, with its own
ports, work and log directories. Executors are launched by the workers, so they and their
Python workers stay in a worker's session: ``stop()`` kills every process of every session
it started (by session id, which survives re-parenting when a parent dies first), so
nothing outlives the cluster, whether the test passed or not.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import pyspark

from streaming.tools.embedded_broker import free_port

SPARK_HOME = Path(pyspark.__file__).resolve().parent
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
_STARTUP_S = 90.0


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name ([] if the process is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def session_of(pid: int) -> int | None:
    """The session id of a live process (field 6 of /proc/PID/stat)."""
    fields = _stat(pid)
    return int(fields[3]) if fields and fields[0] != "Z" else None


def parent_of(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[1]) if fields else None


def processes_in_sessions(sessions: set[int]) -> set[int]:
    """Every live process whose session is one of ``sessions``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and session_of(int(entry.name)) in sessions:
            found.add(int(entry.name))
    return found


def command_line(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def kill_sessions(sessions: set[int], timeout_s: float = 15.0) -> set[int]:
    """SIGKILL every process of ``sessions`` until none is left; the survivors, if any."""
    deadline = time.monotonic() + timeout_s
    left = processes_in_sessions(sessions)
    while left and time.monotonic() < deadline:
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
        left = processes_in_sessions(sessions)
    return left


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    port: int
    work_dir: Path

    def executors(self) -> list[int]:
        """Pids of the executor JVMs this worker launched (CoarseGrainedExecutorBackend)."""
        return sorted(
            pid
            for pid in processes_in_sessions({self.process.pid})
            if EXECUTOR_CLASS in command_line(pid)
        )

    def python_workers(self, executor: int) -> list[int]:
        """Pids of the Python daemons an executor started to run its tasks' Python code."""
        return sorted(
            pid
            for pid in processes_in_sessions({self.process.pid})
            if parent_of(pid) == executor and "pyspark.daemon" in command_line(pid)
        )

    def executor_dirs(self) -> list[Path]:
        """The work directories of every executor this worker launched (app-*/<id>)."""
        return sorted(self.work_dir.glob("app-*/*"))


@dataclass
class SparkStandaloneCluster:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each."""

    root: Path
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    environment: dict[str, str] = field(default_factory=dict)
    master_port: int = 0
    master_ui_port: int = 0
    started: list[Worker] = field(default_factory=list)
    _master: subprocess.Popen[bytes] | None = None
    _sessions: set[int] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def env(self) -> dict[str, str]:
        """The daemons' environment: this one (so executors' Python workers import this
        checkout), loopback only, this interpreter for Python, logs under ``root``."""
        return {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(self.root / "local"),
            "SPARK_LOG_DIR": str(self.root / "logs"),
            "SPARK_CONF_DIR": str(self.root / "conf"),
            "PYSPARK_PYTHON": sys.executable,
            **self.environment,
        }

    def _spawn(self, name: str, arguments: list[str]) -> subprocess.Popen[bytes]:
        log = (self.root / "logs" / f"{name}.out").open("wb")
        process = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *arguments],
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=self.root,
        )
        log.close()
        self._sessions.add(process.pid)
        return process

    def start(self) -> SparkStandaloneCluster:
        for sub in ("local", "logs", "conf"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.master_port, self.master_ui_port = free_port(), free_port()
        self._master = self._spawn(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.master_port),
                "--webui-port",
                str(self.master_ui_port),
            ],
        )
        for index in range(self.workers):
            port, work_dir = free_port(), self.root / f"worker-{index}"
            work_dir.mkdir()
            process = self._spawn(
                f"worker-{index}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(free_port()),
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--work-dir",
                    str(work_dir),
                    self.url,
                ],
            )
            self.started.append(Worker(process, port, work_dir))
        self._wait_for_workers()
        return self

    def state(self) -> dict[str, Any]:
        """The master's view (its web UI's JSON): workers, applications."""
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.master_ui_port}/json/", timeout=5
        ) as response:
            state: dict[str, Any] = json.load(response)
        return state

    def _wait_for_workers(self) -> None:
        deadline = time.monotonic() + _STARTUP_S
        while time.monotonic() < deadline:
            for process in [self._master, *(w.process for w in self.started)]:
                if process is not None and process.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited at start:\n{self.logs()}")
            try:
                alive = [w for w in self.state()["workers"] if w["state"] == "ALIVE"]
            except OSError:
                alive = []
            if len(alive) == self.workers:
                return
            time.sleep(0.5)
        raise RuntimeError(f"the workers did not register in {_STARTUP_S} s:\n{self.logs()}")

    def logs(self, tail: int = 3000) -> str:
        """The end of every daemon's and executor's log, for failure messages."""
        parts = []
        for path in sorted(self.root.rglob("*")):
            if path.is_file() and (path.suffix == ".out" or path.name == "stderr"):
                parts.append(
                    f"--- {path.relative_to(self.root)}\n{path.read_text(errors='replace')[-tail:]}"
                )
        return "\n".join(parts)

    def stop(self) -> None:
        """Kill the master, the workers, their executors and Python workers."""
        left = kill_sessions(self._sessions)
        for process in [self._master, *(w.process for w in self.started)]:
            if process is not None:
                process.wait(timeout=10)
        if left:
            raise RuntimeError(f"Spark processes survived SIGKILL: {sorted(left)}")

    def __enter__(self) -> SparkStandaloneCluster:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
