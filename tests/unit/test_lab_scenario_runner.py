"""The lab's scenario runner plays its steps at their times after start(), and after the
warm-up when it has one (``isrwatch lab --warm-up``), on a cluster that only records
what it is asked to do."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import cast

from streaming.tools.lab.cluster import BrokerFault, LabCluster
from streaming.tools.lab.scenarios import Role, ScenarioRunner, Step
from tests.unit.waiting import wait_until


@dataclass
class RecordingCluster:
    """What ``resolve`` and ``apply`` need of a cluster: three running brokers, broker 3
    the active controller."""

    node_ids: tuple[int, ...] = (1, 2, 3)
    bootstrap_servers: str = "unused:9092"
    applied: list[tuple[str, int, float]] = field(default_factory=list)

    def active_controller(self) -> int:
        return 3

    def running(self, node: int) -> bool:
        return True

    def apply(self, fault: str, broker: int) -> None:
        self.applied.append((fault, broker, time.monotonic()))


STEPS = (
    Step(0.2, BrokerFault.PAUSE, Role.FOLLOWER, "f"),
    Step(0.4, BrokerFault.RESUME, Role.FOLLOWER, "f"),
)


def play(warm_up_s: float) -> tuple[float, RecordingCluster]:
    cluster = RecordingCluster()
    noted: list[tuple[str, int]] = []
    runner = ScenarioRunner(
        cast(LabCluster, cluster),
        STEPS,
        lambda fault, broker: noted.append((fault, broker)),
        threading.Event(),
        warm_up_s=warm_up_s,
    )
    started = time.monotonic()
    runner.start()
    assert wait_until(lambda: runner.finished, timeout_s=30)
    assert runner.error is None
    assert noted == [(BrokerFault.PAUSE, 2), (BrokerFault.RESUME, 2)]
    return started, cluster


def test_steps_count_from_start_without_a_warm_up() -> None:
    started, cluster = play(0.0)
    # the follower that is not the controller, the same broker for both steps
    assert [(fault, broker) for fault, broker, _ in cluster.applied] == [
        (BrokerFault.PAUSE, 2),
        (BrokerFault.RESUME, 2),
    ]
    assert cluster.applied[0][2] - started >= 0.2
    assert cluster.applied[1][2] - started >= 0.4


def test_steps_count_from_the_end_of_the_warm_up() -> None:
    started, cluster = play(1.5)
    # each step comes at its time after the warm-up, never before it
    assert cluster.applied[0][2] - started >= 1.5 + 0.2
    assert cluster.applied[1][2] - started >= 1.5 + 0.4


def test_a_stop_during_the_warm_up_plays_no_step() -> None:
    cluster = RecordingCluster()
    stop = threading.Event()
    runner = ScenarioRunner(
        cast(LabCluster, cluster), STEPS, lambda fault, broker: None, stop, warm_up_s=30
    )
    runner.start()
    time.sleep(0.3)
    stop.set()
    assert wait_until(lambda: runner.finished, timeout_s=10)
    assert cluster.applied == []
