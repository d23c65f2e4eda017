"""A discrete-event model of a Kafka cluster that emits what isrwatch consumes.

The simulator does what Kafka does (docs/domain.md), not what the monitor expects: brokers
with epochs and their scheduled tasks, a controller with an epoch, producers appending to
leaders, followers fetching in a loop from each leader (a leader holds an empty fetch up to
``replica.fetch.wait.max.ms``), the leader's ``last_caught_up_ms`` bookkeeping, the
``isr-expiration`` task every T/2 with a random phase per broker, ISR expansion on fetch,
the zk ``isr-change-propagation`` task every 2.5 s with the 5 s / 60 s rule, UpdateMetadata
to every live broker after a change (zk), elections on broker death, bounces, topic creation
and deletion. It records the ground truth (``GroundTruth``) as it goes.

In KRaft mode it emits what ``collect metadata-log`` and ``collect admin`` give for a KRaft
cluster instead of UpdateMetadata: every controller decision is a record of the metadata
log and carries its ``metadata_offset``; each live broker fetches a record
``kraft_apply_ms`` after it is appended, and a ``MetadataLogProgress`` (DescribeQuorum)
reports every broker's log end offset at each ``collect admin`` poll
(``admin_poll_interval_ms``). In ZooKeeper mode each poll gives ``BrokersAnswered``
instead: the listed live brokers that run.

Time is simulated (epoch ms) and the simulation is deterministic for a seed; pacing it
to the wall clock is the publisher's business.

``ClusterSimulator`` holds the cluster's state (brokers, partitions) and wires the parts
that act on it, each named after its Kafka counterpart: ``Controller``, ``MetadataChannel``
(UpdateMetadata, or the KRaft metadata log), ``AdminPolls`` (``collect admin``'s polls),
``ReplicaFetchers``, ``BrokerTasks``, ``Producers`` and the scenario's ``Timeline``, all on
one ``EventLoop``.
"""

from __future__ import annotations

from collections.abc import Iterator

from state.events import BrokerConfig, ControllerChange
from streaming.feeds.simulator.actions import Timeline
from streaming.feeds.simulator.admin_polls import AdminPolls
from streaming.feeds.simulator.broker import BROKER_EPOCH_BASE, Broker, BrokerTasks
from streaming.feeds.simulator.controller import Controller
from streaming.feeds.simulator.event_loop import EventLoop
from streaming.feeds.simulator.fetcher import ReplicaFetchers
from streaming.feeds.simulator.ground_truth import GroundTruth
from streaming.feeds.simulator.metadata import MetadataChannel
from streaming.feeds.simulator.partition import Partition
from streaming.feeds.simulator.producer import Producers
from streaming.feeds.simulator.scenario import Scenario
from streaming.feeds.wire import InputRecord

__all__ = ["ClusterSimulator"]


class ClusterSimulator:
    """Run a scenario: ``events()`` yields records in time order; ``truth`` records facts."""

    def __init__(self, scenario: Scenario, seed: int = 0, start_ms: int | None = None) -> None:
        self.scenario = scenario
        self.seed = seed
        self.start_ms = start_ms if start_ms is not None else (scenario.start_ms or 0)
        if self.start_ms <= 0:
            raise ValueError("start_ms must be a positive epoch time")
        self.loop = EventLoop(scenario, seed, self.start_ms)
        self.brokers = {
            b: Broker(b, BROKER_EPOCH_BASE + b, scenario.lag_time_max_ms(b))
            for b in range(1, scenario.cluster.brokers + 1)
        }
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.controller = Controller(self)
        self.metadata = MetadataChannel(self)
        self.admin_polls = AdminPolls(self)
        self.fetchers = ReplicaFetchers(self)
        self.broker_tasks = BrokerTasks(self)
        self.producers = Producers(self)
        self.timeline = Timeline(self)
        self.loop.schedule(self.start_ms, self._start)

    @property
    def now(self) -> int:
        """The simulated time (epoch ms)."""
        return self.loop.now

    @property
    def truth(self) -> GroundTruth:
        return self.loop.truth

    @property
    def end_ms(self) -> int:
        return self.start_ms + self.scenario.duration_s * 1000

    def events(self, until_ms: int | None = None) -> Iterator[InputRecord]:
        """Advance simulated time to ``until_ms`` (default: the scenario's end)."""
        yield from self.loop.run(self.end_ms if until_ms is None else until_ms)

    def _start(self) -> None:
        controller = self.controller
        controller.event(ControllerChange)
        controller.broker_change()
        for broker in self.brokers.values():
            self.loop.emit(
                BrokerConfig(
                    ts=self.now, broker=broker.id, replica_lag_time_max_ms=broker.lag_time_max_ms
                )
            )
            broker.last_isr_propagation_ms = self.now
            self.broker_tasks.start(broker)
        controller.create_topics(self.scenario.topics)
        self.producers.start()
        self.admin_polls.start()
        self.timeline.start(self.start_ms)
