"""Cause attribution on the simulator's faults: it must name the broker the simulator's
ground truth says it broke, and a sharded job must attribute as one model does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from state import (
    Attribution,
    ReplicationModel,
    Shard,
    UnhealthyPartitions,
    attribute,
    parse_json_line,
    shape_of_model,
    shard_of,
)
from state.events import DeadLetter, Event, FetchResponse
from state.settings import PropagationMode, PropagationSettings, RuleSettings
from streaming.feeds.simulator import ClusterSimulator, load_scenario
from streaming.job.attribution import attribute_shards
from streaming.job.shard_stats import ShardStats, UnhealthyPartition
from tests.unit.test_metrics import shard_stats

START_MS = 1_700_000_000_000
SHARDS = 3


def attribution_of(model: ReplicationModel, now: int) -> Attribution:
    frame = model.evaluate(now)
    records = list(frame.records())
    unhealthy = [records[i] for i in np.flatnonzero(frame.unhealthy()).tolist()]
    return attribute(UnhealthyPartitions.of(unhealthy), shape_of_model(frame, model))


def shard_report(model: ReplicationModel, now: int) -> ShardStats:
    """What a shard reports to the driver for attribution (shard_state's stats row)."""
    frame = model.evaluate(now)
    return shard_stats(
        0,
        unhealthy=[
            UnhealthyPartition(
                record=frame.record(i),
                replica_lag_time_max_ms=int(frame.lag_time_max_ms[i]),
                changed=True,
            )
            for i in np.flatnonzero(frame.unhealthy()).tolist()
        ],
        cause_shape=shape_of_model(frame, model).to_json(),
    )


def simulated_events(
    scenario: str, at_s: float, overrides: dict[str, object] | None = None
) -> tuple[ClusterSimulator, RuleSettings, list[tuple[int, Event]], int]:
    """The simulator, the rules for its mode, its records up to ``at_s`` parsed, and that time."""
    loaded = load_scenario(scenario, overrides)
    sim = ClusterSimulator(loaded, seed=7, start_ms=START_MS)
    mode = PropagationMode(loaded.cluster.propagation.value)
    now = START_MS + round(at_s * 1000)
    events: list[tuple[int, Event]] = []
    for n, record in enumerate(sim.events(now)):
        event = parse_json_line(record.source, record.value)
        assert not isinstance(event, DeadLetter)
        events.append((n, event))
    return sim, RuleSettings(propagation=PropagationSettings(mode=mode)), events, now


def simulate_model(
    scenario: str, at_s: float, overrides: dict[str, object] | None = None
) -> tuple[ReplicationModel, int]:
    """One model that applied the scenario's records up to ``at_s``, and that time."""
    _, settings, events, now = simulated_events(scenario, at_s, overrides)
    model = ReplicationModel(settings)
    model.apply(events)
    return model, now


def simulate(
    scenario: str, at_s: float, overrides: dict[str, object] | None = None
) -> tuple[Attribution, Attribution, list[dict[str, Any]]]:
    """(one model's attribution, the sharded job's, the ground truth's actions) at ``at_s``."""
    sim, settings, events, now = simulated_events(scenario, at_s, overrides)
    whole = ReplicationModel(settings)
    whole.apply(events)
    shards = [ReplicationModel(settings, Shard(i, SHARDS)) for i in range(SHARDS)]
    for index, model in enumerate(shards):  # the job's routing: fetches to their owner
        model.apply(
            [
                (n, e)
                for n, e in events
                if not isinstance(e, FetchResponse)
                or shard_of(e.topic, e.partition, SHARDS) == index
            ]
        )
    _, sharded = attribute_shards([shard_report(model, now) for model in shards])
    return attribution_of(whole, now), sharded, list(sim.truth.of("action"))


def only(actions: list[dict[str, Any]], field: str) -> int:
    """The one value ``field`` has in every action of the fault."""
    values = {a[field] for a in actions if field in a}
    assert len(values) == 1, values
    return int(values.pop())


def faulty(action: str, field: str = "broker") -> Callable[[list[dict[str, Any]]], int | None]:
    return lambda actions: only([a for a in actions if a["action"] == action], field)


def nobody(_: list[dict[str, Any]]) -> int | None:
    return None


# scenario, overrides, time (s), the kind expected, the broker the ground truth names.
# Times: T = 30 s; a follower slowed at s lags past T by s + 30 and is shrunk by s + 45.
CASES = [
    # broker 3's disk slow from 15 s: LAGGING/SHRINK_ELIGIBLE at 45 s, on all it follows
    ("slow-follower", None, 45, "follower_broker_behind", faulty("slow_follower")),
    # broker 4 slow from 10 s in the demo's tour
    ("demo", None, 30, "follower_broker_behind", faulty("slow_follower")),
    # broker 2 crashed at 20 s, its session expired at 26 s: OFFLINE followers at 28 s
    ("broker-crash-and-bounce", None, 28, "broker_down", faulty("crash_broker")),
    # broker 1 cannot update ISRs: past 10 + 45 s its followers are SHRINK_OVERDUE
    ("stuck-leader", None, 70, "leader_not_shrinking", faulty("stuck_leader")),
    # every leader stuck: overdue under leaders 1, 2 and 4 (broker 3 is the lagging one)
    ("isr-updates-failing", None, 60, "cluster_not_shrinking", nobody),
    # broker 4 cannot fetch from broker 1 (T = 2 s there): behind on what it follows from 1
    ("isr-churn-storm", None, 30, "fetcher_from_leader", faulty("slow_follower")),
    # every follower of broker 1 is slow from it: the leader
    ("slow-leader", None, 40, "leader_slow", faulty("slow_follower", "leader")),
    # broker 3 recovers at 100 s and rejoins; the slow controller's UpdateMetadata (20 s
    # late) has not reached any broker at 115 s, past the propagation window
    (
        "slow-controller",
        {"timeline.1.duration_s": 90, "duration_s": 180},
        115,
        "metadata_not_sent",
        nobody,
    ),
]


@pytest.mark.parametrize(("scenario", "overrides", "at_s", "kind", "responsible"), CASES)
def test_attribution_names_the_fault_the_simulator_injected(
    scenario: str,
    overrides: dict[str, object] | None,
    at_s: float,
    kind: str,
    responsible: Callable[[list[dict[str, Any]]], int | None],
) -> None:
    whole, sharded, actions = simulate(scenario, at_s, overrides)
    expected = (kind, responsible(actions))
    assert whole.partition_cause, "the fault left no unhealthy partition"
    assert {(c.kind, c.broker) for c in whole.partition_cause} == {expected}
    assert {(c.kind, c.broker) for c in whole.follower_cause} <= {expected}
    # the driver, over three shards' reports, says exactly what one model says
    assert sharded.causes_by_partition() == whole.causes_by_partition()
