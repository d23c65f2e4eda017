"""``isrwatch lab fault``: a fault asked of a running lab from another process.

The lab owns its brokers (they die with it) and its fault proxies (threads of it), so a
script does not signal a broker itself: it drops a request file in ``DIR/faults/``, and
the lab's ``FaultDesk`` carries it out on the cluster and writes the outcome beside it.
Requests are carried out one at a time, in the order of their names (a time stamp and
the requesting process id), and each is answered once.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from streaming.tools.lab.cluster import BrokerFault, LabCluster
from streaming.tools.lab.distribution import LabError

__all__ = ["FaultDesk", "request_fault"]

FAULTS_DIR = "faults"
POLL_S = 0.1
ANSWER_TIMEOUT_S = 240.0

OnFault = Callable[[str, int], None]
"""Hears of each fault done: (fault, broker)."""


def _faults_dir(workdir: Path) -> Path:
    return workdir / FAULTS_DIR


class FaultDesk:
    """Carries out the fault requests of ``workdir`` on ``cluster`` while it runs, in a
    daemon thread; ``on_fault`` hears of each one done (the view lists them)."""

    def __init__(self, cluster: LabCluster, workdir: Path, on_fault: OnFault | None = None):
        self._cluster = cluster
        self._directory = _faults_dir(workdir)
        self._directory.mkdir(parents=True, exist_ok=True)
        self._on_fault = on_fault
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="lab fault desk", daemon=True)

    def start(self) -> FaultDesk:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=ANSWER_TIMEOUT_S)

    def _serve(self) -> None:
        while not self._stop.wait(POLL_S):
            for request in sorted(self._directory.glob("*.request.json")):
                self._answer(request)

    def _answer(self, request: Path) -> None:
        answer = request.with_name(request.name.replace(".request.json", ".answer.json"))
        if answer.exists():
            return
        try:
            asked = json.loads(request.read_text(encoding="utf-8"))
            fault, broker = str(asked["fault"]), int(asked["broker"])
            outcome = {"ok": True, "done": self._cluster.apply(fault, broker)}
            if self._on_fault is not None:
                self._on_fault(fault, broker)
        except (LabError, KeyError, ValueError, TypeError) as error:
            outcome = {"ok": False, "error": str(error)}
        outcome["at_ms"] = int(time.time() * 1000)
        staging = answer.with_suffix(".tmp")
        staging.write_text(json.dumps(outcome), encoding="utf-8")
        staging.replace(answer)
        with contextlib.suppress(OSError):
            request.unlink()


def request_fault(
    workdir: Path, fault: str, broker: int, timeout_s: float = ANSWER_TIMEOUT_S
) -> str:
    """Ask the lab running in ``workdir`` for ``fault`` on ``broker`` and wait for its
    answer; returns what was done, raises ``LabError`` with the lab's reason."""
    if fault not in BrokerFault.ALL:
        raise LabError(f"unknown fault {fault!r}; one of {', '.join(BrokerFault.ALL)}")
    directory = _faults_dir(workdir)
    if not (workdir / "cluster.json").exists() or not directory.is_dir():
        raise LabError(f"no lab is running in {workdir} (no cluster.json or faults/ there)")
    name = f"{time.time_ns():020d}-{os.getpid()}"
    request = directory / f"{name}.request.json"
    answer = directory / f"{name}.answer.json"
    staging = directory / f"{name}.tmp"
    staging.write_text(json.dumps({"fault": fault, "broker": broker}), encoding="utf-8")
    staging.replace(request)
    deadline = time.monotonic() + timeout_s
    while not answer.exists():
        if time.monotonic() > deadline:
            with contextlib.suppress(OSError):
                request.unlink()
            raise LabError(
                f"the lab in {workdir} did not answer in {timeout_s:.0f} s: is it running?"
            )
        time.sleep(POLL_S)
    outcome = json.loads(answer.read_text(encoding="utf-8"))
    with contextlib.suppress(OSError):
        answer.unlink()
    if not outcome.get("ok"):
        raise LabError(str(outcome.get("error")))
    return str(outcome["done"])
