"""Simulator scenarios: a cluster, its topics and a timeline of things that happen to it.

Scenarios are YAML files in ``conf/scenarios/`` (``isrwatch simulate --scenario NAME``)
or any path. ``--param dotted.key=value`` overrides one setting (``cluster.brokers=50``,
``topics.0.partitions=2000``); problems are reported as ``source: dotted.key: why``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    ValidationError,
    model_validator,
)

from streaming.config import CONFIG_DIR_VARIABLE

_STRICT = ConfigDict(extra="forbid", frozen=True)


class ScenarioError(Exception):
    """The scenario is unusable; the message lists every problem, one per line."""


class PropagationMode(StrEnum):
    ZK = "zk"
    KRAFT = "kraft"


class TopicSpec(BaseModel):
    """Topics to create; with ``count`` > 1, ``name`` is a format string of ``{i}``."""

    model_config = _STRICT
    name: str = Field(min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._{}-]+$")
    count: PositiveInt = 1
    partitions: PositiveInt = Field(default=6, le=100_000)
    replication_factor: PositiveInt = 3
    min_insync_replicas: PositiveInt = 1
    produce_rate: NonNegativeFloat = 100.0  # records per second per partition
    initial_offset: NonNegativeInt = 0  # log end offset of every replica at start
    # kafka-topics --replica-assignment: one replica list per partition, preferred leader
    # first; replaces partitions and replication_factor
    replica_assignment: list[list[PositiveInt]] | None = None

    def names(self) -> list[str]:
        if self.count == 1:
            return [self.name.format(i=0) if "{i}" in self.name else self.name]
        return [self.name.format(i=i) for i in range(self.count)]

    @model_validator(mode="before")
    @classmethod
    def _sizes_from_assignment(cls, data: Any) -> Any:
        assignment = data.get("replica_assignment") if isinstance(data, dict) else None
        if isinstance(assignment, list) and assignment and isinstance(assignment[0], list):
            sizes = {len(replicas) if isinstance(replicas, list) else -1 for replicas in assignment}
            if len(sizes) != 1:
                raise ValueError("replica_assignment needs partitions of one replication factor")
            return {**data, "partitions": len(assignment), "replication_factor": sizes.pop()}
        return data

    @model_validator(mode="after")
    def _count_needs_template(self) -> TopicSpec:
        if self.count > 1 and "{i}" not in self.name:
            raise ValueError("a topic spec with count > 1 needs '{i}' in its name")
        if any(len(set(replicas)) != len(replicas) for replicas in self.replica_assignment or []):
            raise ValueError("replica_assignment lists a broker twice for one partition")
        if self.min_insync_replicas > self.replication_factor:
            raise ValueError("min_insync_replicas cannot exceed replication_factor")
        return self


class ClusterSpec(BaseModel):
    model_config = _STRICT
    brokers: PositiveInt = Field(default=3, le=10_000)
    controller: NonNegativeInt = 1  # broker id of the first controller (ids are 1..brokers)
    controller_epoch: NonNegativeInt = 1
    replica_lag_time_max_ms: PositiveInt = 30_000  # T of every broker...
    lag_time_max_ms_by_broker: dict[int, PositiveInt] = Field(default_factory=dict)  # ...or this
    propagation: PropagationMode = PropagationMode.ZK
    propagation_tick_ms: PositiveInt = 2_500  # isr-change-propagation task period (zk)
    propagation_blackout_ms: PositiveInt = 5_000  # quiet time before propagating (zk)
    propagation_max_delay_ms: PositiveInt = 60_000  # propagate anyway after this (zk)
    kraft_apply_ms: tuple[NonNegativeInt, NonNegativeInt] = (20, 400)  # brokers replay (kraft)
    # collect admin's polls: DescribeQuorum's report (kraft), the brokers that answered (zk);
    # the older name is still read
    admin_poll_interval_ms: PositiveInt = Field(
        default=1_000,
        validation_alias=AliasChoices("admin_poll_interval_ms", "kraft_progress_interval_ms"),
    )
    session_timeout_ms: PositiveInt = 6_000  # until the controller sees a dead broker
    registration_ms: NonNegativeInt = 300  # from broker start to the controller's BrokerChange
    controller_delay_ms: tuple[NonNegativeInt, NonNegativeInt] = (20, 300)  # to UpdateMetadata
    update_metadata_jitter_ms: NonNegativeInt = 50  # spread of its arrival across brokers


class FetchSpec(BaseModel):
    model_config = _STRICT
    wait_max_ms: PositiveInt = 500  # replica.fetch.wait.max.ms: a leader holds an empty fetch
    max_records: PositiveInt = 50_000  # per partition per fetch (replica.fetch.max.bytes)
    round_trip_ms: tuple[NonNegativeInt, NonNegativeInt] = (2, 20)  # response to next request
    produce_interval_ms: PositiveInt = 100  # producers append in batches this often
    record_bytes: PositiveInt = 200


class _Action(BaseModel):
    model_config = _STRICT
    at_s: NonNegativeFloat
    repeat_every_s: NonNegativeFloat | None = None
    repeat_count: PositiveInt = 1


class SlowFollower(_Action):
    """``broker`` fetches slowly (from ``leader`` only, if set): it waits ``fetch_delay_ms``
    before each fetch (a long one is a stall: GC pause, network trouble) and takes at most
    ``max_records`` per partition per fetch (disk or network bound: it cannot keep up)."""

    action: Literal["slow_follower"]
    broker: PositiveInt
    leader: PositiveInt | None = None
    fetch_delay_ms: NonNegativeInt = 0
    max_records: PositiveInt | None = None
    duration_s: NonNegativeFloat | None = None  # then back to normal


class CrashBroker(_Action):
    action: Literal["crash_broker"]
    broker: PositiveInt


class RestartBroker(_Action):
    action: Literal["restart_broker"]
    broker: PositiveInt


class BounceBroker(_Action):
    """Crash and restart within the session timeout: the controller sees a bounce."""

    action: Literal["bounce_broker"]
    broker: PositiveInt
    down_ms: PositiveInt = 2_000


class ControlledShutdown(_Action):
    """A clean stop (kafka-server-stop, a rolling restart): the controller moves the
    broker's leaderships to other ISR members and takes it out of every ISR while it is
    still registered (KafkaController.doControlledShutdown), then it exits and its
    registration goes at once; it starts again after ``down_ms`` (never if null)."""

    action: Literal["controlled_shutdown"]
    broker: PositiveInt
    exit_after_ms: NonNegativeInt = 500
    down_ms: PositiveInt | None = 10_000


class ControllerFailover(_Action):
    action: Literal["controller_failover"]
    to: PositiveInt
    zombie_events: bool = False  # the old controller sends a decision after losing its epoch


class PreferredElection(_Action):
    action: Literal["preferred_election"]


class CreateTopic(_Action):
    action: Literal["create_topic"]
    topic: TopicSpec


class DeleteTopic(_Action):
    action: Literal["delete_topic"]
    topic: str


class StuckLeader(_Action):
    """The leader's ISR updates fail (ZooKeeper write / AlterPartition): it never shrinks."""

    action: Literal["stuck_leader"]
    broker: PositiveInt
    duration_s: NonNegativeFloat | None = None


class SlowController(_Action):
    """The controller takes this long to send UpdateMetadata after a change."""

    action: Literal["slow_controller"]
    delay_ms: NonNegativeInt
    duration_s: NonNegativeFloat | None = None


class ProduceRate(_Action):
    action: Literal["produce_rate"]
    topic: str
    rate: NonNegativeFloat


Action = Annotated[
    SlowFollower
    | CrashBroker
    | RestartBroker
    | BounceBroker
    | ControlledShutdown
    | ControllerFailover
    | PreferredElection
    | CreateTopic
    | DeleteTopic
    | StuckLeader
    | SlowController
    | ProduceRate,
    Field(discriminator="action"),
]


class Scenario(BaseModel):
    model_config = _STRICT
    name: str = "scenario"
    description: str = ""
    duration_s: PositiveInt = 300
    start_ms: PositiveInt | None = None  # simulated epoch ms at start; default: now
    cluster: ClusterSpec = ClusterSpec()
    fetch: FetchSpec = FetchSpec()
    topics: list[TopicSpec] = Field(default_factory=list)
    timeline: list[Action] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        brokers = self.cluster.brokers
        problems = []
        if not 1 <= self.cluster.controller <= brokers:
            problems.append(f"cluster.controller {self.cluster.controller} is not a broker")
        for spec in self.topics:
            if spec.replication_factor > brokers:
                problems.append(f"topic {spec.name}: replication_factor exceeds {brokers}")
            for replicas in spec.replica_assignment or []:
                if not all(1 <= r <= brokers for r in replicas):
                    problems.append(f"topic {spec.name}: replica_assignment names no broker")
        for i, action in enumerate(self.timeline):
            for field in ("broker", "leader", "to"):
                value = getattr(action, field, None)
                if value is not None and not 1 <= value <= brokers:
                    problems.append(f"timeline.{i}.{field}: no broker {value} (1..{brokers})")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def lag_time_max_ms(self, broker: int) -> int:
        return self.cluster.lag_time_max_ms_by_broker.get(
            broker, self.cluster.replica_lag_time_max_ms
        )


def scenario_dir() -> Path:
    """``$ISRWATCH_CONF_DIR/scenarios`` if that variable is set, else the repository's."""
    conf = os.environ.get(CONFIG_DIR_VARIABLE)
    base = Path(conf) if conf else Path(__file__).resolve().parents[3] / "conf"
    return base / "scenarios"


def scenario_names() -> list[str]:
    return sorted(path.stem for path in scenario_dir().glob("*.yaml"))


def scenario_path(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    return scenario_dir() / f"{name_or_path}.yaml"


def load_scenario(name_or_path: str, overrides: Mapping[str, object] | None = None) -> Scenario:
    """Read, override and validate a scenario; ScenarioError says what is wrong and where."""
    path = scenario_path(name_or_path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        known = ", ".join(scenario_names())
        raise ScenarioError(f"{path}: no such scenario (known: {known})") from None
    except yaml.YAMLError as error:
        raise ScenarioError(f"{path}: invalid YAML: {error}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: a scenario is a mapping")
    data.setdefault("name", path.stem)
    for key, value in (overrides or {}).items():
        _set_dotted(data, key, value, path)
    try:
        return Scenario.model_validate(data)
    except ValidationError as error:
        lines = [
            f"{path}: {'.'.join(str(p) for p in problem['loc']) or '(scenario)'}: {problem['msg']}"
            for problem in error.errors()
        ]
        raise ScenarioError("\n".join(lines)) from None


def _set_dotted(data: dict[str, Any], key: str, value: object, path: Path) -> None:
    node: Any = data
    parts = key.split(".")
    for part in parts[:-1]:
        node = _child(node, part, key, path)
    last = parts[-1]
    if isinstance(node, list):
        node[_index(node, last, key, path)] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise ScenarioError(f"{path}: {key}: cannot set inside a {type(node).__name__}")


def _child(node: Any, part: str, key: str, path: Path) -> Any:
    if isinstance(node, list):
        return node[_index(node, part, key, path)]
    if isinstance(node, dict):
        return node.setdefault(part, {})
    raise ScenarioError(f"{path}: {key}: cannot descend into a {type(node).__name__}")


def _index(node: list[Any], part: str, key: str, path: Path) -> int:
    if not part.isdigit() or int(part) >= len(node):
        raise ScenarioError(f"{path}: {key}: {part!r} is not an index of a {len(node)}-item list")
    return int(part)
