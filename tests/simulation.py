"""Run a simulated cluster through the monitor's model (``state/``) and keep what it said.

The monitor sees only the simulator's records, parsed as the job parses them; the
simulator's ground truth is what the tests hold the monitor's reports against.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from state import (
    BlackoutWindow,
    FollowerHealth,
    HealthFrame,
    HealthRecord,
    MetadataHealth,
    ReplicationModel,
    parse_json_line,
)
from state.events import DeadLetter, DeadLetterReason, Event, IsrChange, IsrChangePropagation
from state.settings import PropagationMode, PropagationSettings, RuleSettings
from streaming.feeds.simulator import ClusterSimulator, load_scenario

START_MS = 1_700_000_000_000

FollowerKey = tuple[str, int, int]  # topic, partition, follower


@dataclass
class MonitorRun:
    sim: ClusterSimulator
    settings: RuleSettings
    events: int = 0
    rejected: list[tuple[Event, DeadLetterReason]] = field(default_factory=list)
    # periodic evaluations: every status and metadata state seen, and when first
    statuses: Counter[str] = field(default_factory=Counter)
    metadata_states: Counter[str] = field(default_factory=Counter)
    flags: Counter[str] = field(default_factory=Counter)  # partition health flags
    # every STALE_OVERDUE seen: (time, topic-partition, the brokers whose cache is stale)
    stale_overdue: list[tuple[int, tuple[str, int], tuple[int, ...]]] = field(default_factory=list)
    first_seen: dict[tuple[str, FollowerKey | tuple[str, int]], int] = field(default_factory=dict)
    # the removed follower's report just before each shrink was applied: (ts, key) -> record
    before_shrink: dict[tuple[int, FollowerKey], FollowerHealth] = field(default_factory=dict)
    # each propagated partition's metadata just before the propagation: (ts, broker, tp) -> ...
    before_propagation: dict[tuple[int, int, str, int], MetadataHealth] = field(
        default_factory=dict
    )
    # the leader's predicted blackout window just before each propagation: (ts, broker) -> ...
    window_before_propagation: dict[tuple[int, int], BlackoutWindow | None] = field(
        default_factory=dict
    )
    final: list[HealthRecord] = field(default_factory=list)

    def down_at(self, broker: int, ts: int) -> bool:
        """Whether ``broker`` had crashed and not restarted at ``ts`` (ground truth)."""
        down = False
        for fact in self.sim.truth.records:
            if fact["ts"] > ts:
                break
            if fact["kind"] in ("broker_crash", "broker_restart") and fact["broker"] == broker:
                down = fact["kind"] == "broker_crash"
        return down

    def first(self, status: str, key: FollowerKey | tuple[str, int]) -> int | None:
        return self.first_seen.get((status, key))


def by_partition(frame: HealthFrame) -> dict[tuple[str, int], HealthRecord]:
    return {(r.topic, r.partition): r for r in frame.records()}


def run_monitor(
    scenario: str,
    overrides: Mapping[str, object] | None = None,
    *,
    seed: int = 7,
    every_ms: int = 1_000,
) -> MonitorRun:
    """Apply the scenario's records in order; evaluate every ``every_ms`` and at each
    shrink and propagation (with the records before it applied, at its time)."""
    loaded = load_scenario(scenario, overrides)
    sim = ClusterSimulator(loaded, seed=seed, start_ms=START_MS)
    mode = PropagationMode(loaded.cluster.propagation.value)
    settings = RuleSettings(propagation=PropagationSettings(mode=mode))
    model = ReplicationModel(settings)
    run = MonitorRun(sim, settings)
    pending: list[tuple[int, Event]] = []
    by_id: dict[int, Event] = {}

    def flush() -> None:
        report = model.apply(pending)
        for source_id, reason in zip(report.rejected_ids, report.rejected_reasons, strict=True):
            run.rejected.append((by_id[source_id], reason))
        pending.clear()
        by_id.clear()

    def observe(now: int) -> None:
        for record in model.evaluate(now).records():
            tp = (record.topic, record.partition)
            for flag, holds in record.conditions().items():
                if holds:
                    run.flags[flag] += 1
                    run.first_seen.setdefault((flag, tp), now)
            state = record.metadata.state
            run.metadata_states[state] += 1
            run.first_seen.setdefault((state, tp), now)
            if state == "STALE_OVERDUE":
                run.stale_overdue.append((now, tp, tuple(record.metadata.stale_brokers)))
            for follower in record.followers:
                key = (*tp, follower.broker)
                run.statuses[follower.status] += 1
                run.first_seen.setdefault((follower.status, key), now)

    next_check = START_MS + every_ms
    for number, sim_event in enumerate(sim.events()):
        event = parse_json_line(sim_event.source, sim_event.value)
        assert not isinstance(event, DeadLetter), f"simulator broke the contract: {event}"
        run.events += 1
        while event.ts > next_check:
            flush()
            observe(next_check)
            next_check += every_ms
        if (
            isinstance(event, IsrChange)
            and event.old_isr is not None  # the simulator sends the full form
            and set(event.new_isr) < set(event.old_isr)
        ):
            flush()
            record = by_partition(model.evaluate(event.ts))[(event.topic, event.partition)]
            for follower in record.followers:
                if follower.broker in set(event.old_isr) - set(event.new_isr):
                    key = (event.topic, event.partition, follower.broker)
                    run.before_shrink[(event.ts, key)] = follower
        if isinstance(event, IsrChangePropagation):
            flush()
            window = model.windows.window_of(event.broker)
            run.window_before_propagation[(event.ts, event.broker)] = window
            records = by_partition(model.evaluate(event.ts))
            for tp in event.partitions:
                if (tp.topic, tp.partition) in records:
                    metadata = records[(tp.topic, tp.partition)].metadata
                    run.before_propagation[(event.ts, event.broker, tp.topic, tp.partition)] = (
                        metadata
                    )
        pending.append((number, event))
        by_id[number] = event
    flush()
    run.final = list(model.evaluate(sim.end_ms).records())
    return run
