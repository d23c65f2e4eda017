"""A simulated Kafka cluster producing ``controller-events`` and ``fetch-responses``."""

from streaming.simulator.cluster import ClusterSimulator, SimEvent
from streaming.simulator.ground_truth import GroundTruth
from streaming.simulator.scenario import Scenario, ScenarioError, load_scenario, scenario_names

__all__ = [
    "ClusterSimulator",
    "GroundTruth",
    "Scenario",
    "ScenarioError",
    "SimEvent",
    "load_scenario",
    "scenario_names",
]
