"""Named sequences of faults on the lab's cluster (``isrwatch lab --scenario NAME``).

A step names a role, not a broker id: which broker is the active controller, or leads a
partition, is known only once the cluster runs. A role is resolved when its first step
comes, and the step's label keeps the broker for the later steps (the broker paused is
the broker resumed). With KRaft, the active controller is never the broker a step picks
unless the role is ``controller``: pausing it would stop every decision of the cluster,
not show the fault the scenario is about.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from streaming.tools.lab.cluster import BrokerFault, LabCluster
from streaming.tools.lab.distribution import LabError
from streaming.tools.lab.workload import (
    CHURN_TOPIC,
    create_churn_topic,
    delete_churn_topic,
    reassign_churn_topic,
)

__all__ = ["SCENARIOS", "Role", "ScenarioRunner", "Step", "scenario"]


class Role:
    FOLLOWER = "follower"  # a broker following partitions others lead, not the controller
    LEADER = "leader"  # the leader of orders-0, or of some partition, not the controller
    CONTROLLER = "controller"  # the active controller
    EVERY_BROKER = "every broker"  # a rolling restart: the controller last


ROLLING_RESTART = "rolling-restart"
"""A step that stops and starts every broker in turn, each stop gated by ``isrwatch check
restart --wait``: what an operator's rollout does."""
ROLLING_PAUSE_S = 10.0  # after a broker's start, before asking about the next one
CREATE_TOPIC = "create-topic"
REASSIGN = "reassign"
DELETE_TOPIC = "delete-topic"
TOPIC_ACTIONS = {
    CREATE_TOPIC: create_churn_topic,
    REASSIGN: reassign_churn_topic,
    DELETE_TOPIC: delete_churn_topic,
}
"""Steps on the churn topic rather than on a broker (``workload.CHURN_TOPIC``)."""


@dataclass(frozen=True)
class Step:
    at_s: float  # seconds after the lab's first micro-batch (and its warm-up)
    fault: str  # a BrokerFault
    role: str  # a Role
    label: str  # steps with one label act on one broker


def _down_and_up(down: str, up: str, role: str, at_s: float, for_s: float) -> tuple[Step, ...]:
    return (Step(at_s, down, role, role), Step(at_s + for_s, up, role, role))


SCENARIOS: dict[str, tuple[Step, ...]] = {
    "none": (),
    # The leader's rule on written partitions, within (T, 1.5 T] of the follower's last
    # catch-up; the controller's fence after the session timeout (2 T here) on the idle
    # topic's partitions, which no leader shrinks.
    "paused-follower": _down_and_up(
        BrokerFault.PAUSE, BrokerFault.RESUME, Role.FOLLOWER, at_s=5, for_s=30
    ),
    # The leader's rule twice on the same leaders, each pause past 1.5 T (15 s at the
    # bench's T of 10 s) and short of the fence (2 T): the first shrinks teach each
    # leader's isr-expiration runs, and the second are predicted to the run (shrink_at_ms).
    "paused-twice": (
        *_down_and_up(BrokerFault.PAUSE, BrokerFault.RESUME, Role.FOLLOWER, 5, 17),
        *_down_and_up(BrokerFault.PAUSE, BrokerFault.RESUME, Role.FOLLOWER, 40, 17),
    ),
    "leader-killed": _down_and_up(BrokerFault.KILL, BrokerFault.START, Role.LEADER, 5, 30),
    "controlled-shutdown": _down_and_up(BrokerFault.STOP, BrokerFault.START, Role.LEADER, 5, 30),
    "inter-broker-cut": _down_and_up(BrokerFault.CUT, BrokerFault.HEAL, Role.LEADER, 5, 30),
    "short-bounce": _down_and_up(BrokerFault.KILL, BrokerFault.START, Role.FOLLOWER, 5, 0),
    "controller-failover": _down_and_up(
        BrokerFault.KILL, BrokerFault.START, Role.CONTROLLER, 5, 30
    ),
    "rolling-restart": (Step(5, ROLLING_RESTART, Role.EVERY_BROKER, "all"),),
    "topic-lifecycle": (
        Step(5, CREATE_TOPIC, Role.EVERY_BROKER, CHURN_TOPIC),
        Step(15, REASSIGN, Role.EVERY_BROKER, CHURN_TOPIC),
        Step(40, DELETE_TOPIC, Role.EVERY_BROKER, CHURN_TOPIC),
    ),
    # The suite's short run: the leader's rule and the fence, then an election.
    "pause-then-election": (
        *_down_and_up(BrokerFault.PAUSE, BrokerFault.RESUME, Role.FOLLOWER, 3, 20),
        *_down_and_up(BrokerFault.KILL, BrokerFault.START, Role.LEADER, 30, 10),
    ),
    "tour": (
        *_down_and_up(BrokerFault.PAUSE, BrokerFault.RESUME, Role.FOLLOWER, 10, 30),
        *_down_and_up(BrokerFault.KILL, BrokerFault.START, Role.LEADER, 70, 25),
        *_down_and_up(BrokerFault.STOP, BrokerFault.START, Role.FOLLOWER, 130, 25),
    ),
}


def scenario(name: str) -> tuple[Step, ...]:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise LabError(f"unknown scenario {name!r}; one of {', '.join(SCENARIOS)}") from None


def resolve(cluster: LabCluster, role: str) -> int:
    """The broker that plays ``role`` now."""
    controller = cluster.active_controller()
    running = [node for node in cluster.node_ids if cluster.running(node)]
    if role == Role.CONTROLLER:
        if controller is None:
            raise LabError("no active controller is known")
        return controller
    candidates = [node for node in running if node != controller] or running
    if not candidates:
        raise LabError("no broker is running")
    if role == Role.LEADER:
        leaders = _leaders(cluster.bootstrap_servers)
        for node in [leaders.get(("orders", 0)), *sorted(set(leaders.values()))]:
            if node in candidates:
                return node
    return max(candidates)


def _leaders(bootstrap: str) -> dict[tuple[str, int], int]:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {
        (name, partition.id): partition.leader
        for name, topic in metadata.topics.items()
        for partition in topic.partitions.values()
        if partition.leader >= 0
    }


RestartCheck = Callable[[int], tuple[bool, str]]
"""``isrwatch check restart --wait --broker N``: (safe, what it printed)."""


@dataclass
class ScenarioRunner:
    """Plays ``steps`` on ``cluster`` from ``start()``, in a daemon thread. A rolling
    restart asks ``check_restart`` before each stop and writes each gate's outcome to
    ``restarts`` (one JSON object per line: the scoreboard reads it)."""

    cluster: LabCluster
    steps: tuple[Step, ...]
    on_fault: Callable[[str, int], None]
    stop_event: threading.Event
    check_restart: RestartCheck | None = None
    restarts: Path | None = None
    warm_up_s: float = 0.0  # the steps count from this long after start()

    def __post_init__(self) -> None:
        self.error: BaseException | None = None
        self.finished_at: float | None = None  # time.monotonic() when the last step was done
        self._thread = threading.Thread(target=self._play, name="lab scenario", daemon=True)

    def start(self) -> ScenarioRunner:
        self._thread.start()
        return self

    @property
    def finished(self) -> bool:
        return not self._thread.is_alive()

    def _play(self) -> None:
        started = time.monotonic() + self.warm_up_s
        brokers: dict[str, int] = {}
        try:
            for step in sorted(self.steps, key=lambda s: s.at_s):
                if self.stop_event.wait(max(0.0, started + step.at_s - time.monotonic())):
                    return
                if step.fault == ROLLING_RESTART:
                    self._roll()
                    continue
                if step.fault in TOPIC_ACTIONS:
                    TOPIC_ACTIONS[step.fault](self.cluster.bootstrap_servers)
                    self.on_fault(step.fault, -1)
                    continue
                broker = brokers.setdefault(step.label, resolve(self.cluster, step.role))
                self.cluster.apply(step.fault, broker)
                self.on_fault(step.fault, broker)
            self.finished_at = time.monotonic()
        except BaseException as error:
            self.error = error

    def _roll(self) -> None:
        if self.check_restart is None or self.restarts is None:
            raise LabError("a rolling restart needs the restart check and its record file")
        controller = self.cluster.active_controller()
        order = sorted(self.cluster.node_ids, key=lambda node: (node == controller, node))
        for broker in order:
            asked_ms = _now_ms()
            safe, said = self.check_restart(broker)
            gate: dict[str, object] = {
                "broker": broker,
                "asked_ms": asked_ms,
                "answered_ms": _now_ms(),
                "safe": safe,
                "check": said,
            }
            if safe:
                self.cluster.apply(BrokerFault.STOP, broker)
                gate["stopped_ms"] = _now_ms()
                self.on_fault(BrokerFault.STOP, broker)
                self.cluster.apply(BrokerFault.START, broker)
                gate["started_ms"] = _now_ms()
                self.on_fault(BrokerFault.START, broker)
            with self.restarts.open("a", encoding="utf-8") as out:
                out.write(json.dumps(gate) + "\n")
            if self.stop_event.wait(ROLLING_PAUSE_S):
                return


def _now_ms() -> int:
    return int(time.time() * 1000)
