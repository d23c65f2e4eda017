"""The scenario's timeline: each action, at its time, done to the simulated cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streaming.feeds.simulator.scenario import (
    Action,
    BounceBroker,
    ControlledShutdown,
    ControllerFailover,
    CrashBroker,
    CreateTopic,
    DeleteTopic,
    PreferredElection,
    ProduceRate,
    RestartBroker,
    SlowController,
    SlowFollower,
    StuckLeader,
)

if TYPE_CHECKING:
    from streaming.feeds.simulator.cluster import ClusterSimulator

__all__ = ["Timeline"]


class Timeline:
    """Schedules the scenario's actions (with their repetitions) and carries them out."""

    def __init__(self, cluster: ClusterSimulator) -> None:
        self._cluster = cluster
        self._loop = cluster.loop

    def start(self, start_ms: int) -> None:
        for action in self._loop.scenario.timeline:
            for k in range(action.repeat_count):
                offset_s = action.at_s + k * (action.repeat_every_s or 0)
                self._loop.schedule(start_ms + round(offset_s * 1000), self._act, action)

    def _later(self, duration_s: float) -> int:
        return self._loop.now + round(duration_s * 1000)

    def _act(self, action: Action) -> None:
        self._loop.truth.add(
            self._loop.now,
            "action",
            action=action.action,
            **action.model_dump(exclude={"action", "at_s"}, exclude_none=True),
        )
        cluster = self._cluster
        brokers = cluster.broker_tasks
        match action:
            case SlowFollower():
                slowness = (action.fetch_delay_ms, action.max_records)
                self._slow_follower(action.broker, action.leader, slowness)
                if action.duration_s is not None:
                    self._loop.schedule(
                        self._later(action.duration_s),
                        self._slow_follower,
                        action.broker,
                        action.leader,
                        None,
                    )
            case CrashBroker():
                brokers.crash(action.broker)
            case RestartBroker():
                brokers.restart(action.broker)
            case ControlledShutdown():
                cluster.controller.controlled_shutdown(action.broker, action.exit_after_ms)
                if action.down_ms is not None:
                    self._loop.schedule(
                        self._loop.now + action.exit_after_ms + action.down_ms,
                        brokers.restart,
                        action.broker,
                    )
            case BounceBroker():
                brokers.crash(action.broker)
                self._loop.schedule(self._loop.now + action.down_ms, brokers.restart, action.broker)
            case ControllerFailover():
                cluster.controller.move_to(action.to, action.zombie_events)
            case PreferredElection():
                cluster.controller.preferred_election()
            case CreateTopic():
                cluster.controller.create_topics([action.topic])
            case DeleteTopic():
                cluster.controller.delete_topic(action.topic)
            case StuckLeader():
                self._set_stuck(action.broker, True)
                if action.duration_s is not None:
                    self._loop.schedule(
                        self._later(action.duration_s), self._set_stuck, action.broker, False
                    )
            case SlowController():
                cluster.controller.delay_ms = action.delay_ms
                if action.duration_s is not None:
                    self._loop.schedule(self._later(action.duration_s), self._controller_recovers)
            case ProduceRate():
                for (topic, _), p in cluster.partitions.items():
                    if topic == action.topic:
                        p.produce_rate = action.rate

    def _slow_follower(
        self, broker_id: int, leader: int | None, slowness: tuple[int, int | None] | None
    ) -> None:
        broker = self._cluster.brokers[broker_id]
        if slowness is None:
            broker.slowness.pop(leader, None)
            self._cluster.fetchers.refetch(broker_id, leader)
        else:
            broker.slowness[leader] = slowness

    def _set_stuck(self, broker_id: int, stuck: bool) -> None:
        """A leader whose ISR updates fail: it never shrinks (nor expands) its ISR."""
        self._cluster.brokers[broker_id].stuck = stuck

    def _controller_recovers(self) -> None:
        self._cluster.controller.delay_ms = None
