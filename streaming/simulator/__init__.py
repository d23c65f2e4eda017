"""A simulated Kafka cluster producing ``controller-events`` and ``fetch-responses``."""

from streaming.simulator.cluster import ClusterSimulator
from streaming.simulator.ground_truth import GroundTruth
from streaming.simulator.scenario import Scenario, ScenarioError, load_scenario, scenario_names

__all__ = [
    "ClusterSimulator",
    "GroundTruth",
    "Scenario",
    "ScenarioError",
    "load_scenario",
    "scenario_names",
]
