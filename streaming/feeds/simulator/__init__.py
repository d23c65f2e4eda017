"""A simulated Kafka cluster producing ``controller-events`` and ``fetch-responses``."""

from streaming.feeds.simulator.cluster import ClusterSimulator
from streaming.feeds.simulator.ground_truth import GroundTruth
from streaming.feeds.simulator.scenario import (
    Scenario,
    ScenarioError,
    load_scenario,
    scenario_names,
)

__all__ = [
    "ClusterSimulator",
    "GroundTruth",
    "Scenario",
    "ScenarioError",
    "load_scenario",
    "scenario_names",
]
