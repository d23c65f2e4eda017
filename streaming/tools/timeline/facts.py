"""The facts of an incident's timeline, derived from what the monitor said over time.

The input is one time-ordered stream of three kinds of items:

* health records (the job's ``partition-health`` records, or the model's own evaluation of
  a replayed capture): what the monitor said about a partition at ``as_of_ms``. Records
  form a change stream: a partition's health holds until its next record;
* ISR changes (:class:`IsrChange`), exact when they come from a capture (the time of the
  leader's ``IsrChange`` or the controller's ``LeaderAndIsr``); without a capture they are
  inferred from two consecutive records of a partition whose ISR differs, at the later
  record's time;
* propagations (:class:`Propagation`): an ISR change reached every live broker's metadata
  cache. From a capture, exact (the ``UpdateMetadata`` that made the last live cache agree)
  with the window the monitor predicted just before; without one, inferred from a
  partition's metadata state going back to ``CONSISTENT``.

``builder.TimelineBuilder`` folds the stream into a :class:`Timeline`: per follower its
status spans and the episodes it spent away from ``IN_SYNC``; the shrinks Kafka made and
whether and when the monitor predicted them; overdue shrinks; propagations against their
predicted windows; offline, under-min-ISR and under-replicated periods; causes where the
records carry them. Nothing here reads files or draws: the renderers take a
:class:`Timeline`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from state import Cause, FollowerStatus, HealthRecord

IN_SYNC = FollowerStatus.IN_SYNC.name
LAGGING = FollowerStatus.LAGGING.name
SHRINK_ELIGIBLE = FollowerStatus.SHRINK_ELIGIBLE.name
SHRINK_OVERDUE = FollowerStatus.SHRINK_OVERDUE.name
OFFLINE = FollowerStatus.OFFLINE.name
CONSISTENT = "CONSISTENT"
STALE_OVERDUE = "STALE_OVERDUE"

PREDICTING = (SHRINK_ELIGIBLE, SHRINK_OVERDUE)
"""Statuses in which the monitor says Kafka is about to shrink (or should have)."""

PARTITION_FLAGS = ("offline", "under_min_isr", "under_replicated")
"""The partition conditions whose periods the timeline keeps, worst first."""

FollowerKey = tuple[str, int, int]  # topic, partition, follower broker
PartitionKey = tuple[str, int]


@dataclass(frozen=True)
class IsrChange:
    """A partition's ISR went from ``old`` to ``new`` at ``ts``.

    ``deadlines_ms`` holds, for each removed follower, the last ms Kafka's rule let it stay
    (``max(last caught up + 1.5 T, entered + T / 2)``) as the monitor had it just before.
    """

    ts: int
    topic: str
    partition: int
    leader: int
    old: tuple[int, ...]
    new: tuple[int, ...]
    by_controller: bool | None  # None: not known (inferred from health records)
    exact: bool
    deadlines_ms: dict[int, int] = field(default_factory=dict)

    @property
    def removed(self) -> tuple[int, ...]:
        return tuple(b for b in self.old if b not in self.new)

    @property
    def added(self) -> tuple[int, ...]:
        return tuple(b for b in self.new if b not in self.old)


@dataclass(frozen=True)
class Propagation:
    """Every live broker's cache took the partition's ISR change (made at ``changed_ms``) at
    ``observed_ms``; ``earliest_ms``/``latest_ms``: the blackout window the monitor predicted
    (Kafka propagates strictly after the earliest and by the latest)."""

    ts: int  # = observed_ms: the item's place in the stream
    topic: str
    partition: int
    changed_ms: int | None
    earliest_ms: int | None
    latest_ms: int | None
    exact: bool


@dataclass(frozen=True)
class EvaluatedHealth:
    """A health record the timeline's own model made (a replayed capture), with T of the
    partition's leader, which the record leaves out."""

    record: HealthRecord
    lag_time_max_ms: int


TimelineItem = HealthRecord | EvaluatedHealth | IsrChange | Propagation


def item_time(item: TimelineItem) -> int:
    if isinstance(item, IsrChange | Propagation):
        return item.ts
    if isinstance(item, EvaluatedHealth):
        return item.record.as_of_ms
    return item.as_of_ms


@dataclass(frozen=True)
class StatusSpan:
    start_ms: int
    end_ms: int
    status: str


@dataclass
class FollowerEpisode:
    """One stretch a follower spent away from ``IN_SYNC``."""

    topic: str
    partition: int
    broker: int
    leader: int
    start_ms: int  # first seen not IN_SYNC (or removed from the ISR)
    lag_time_max_ms: int  # T of its leader
    behind_since_ms: int | None = None  # its last caught-up time when first seen behind
    first_lagging_ms: int | None = None
    predicted_ms: int | None = None  # first seen SHRINK_ELIGIBLE or SHRINK_OVERDUE
    overdue_ms: int | None = None  # first seen SHRINK_OVERDUE
    removed_ms: int | None = None
    rejoined_ms: int | None = None
    end_ms: int | None = None  # seen IN_SYNC again; None: not within the range
    worst: str = IN_SYNC
    cause: Cause | None = None

    @property
    def key(self) -> FollowerKey:
        return (self.topic, self.partition, self.broker)

    @property
    def eligible_from_ms(self) -> int | None:
        """Kafka may shrink it from here on: ``lag > T``."""
        return None if self.behind_since_ms is None else self.behind_since_ms + self.lag_time_max_ms

    @property
    def deadline_ms(self) -> int | None:
        """Kafka's isr-expiration task must have removed it by here: ``lag = 1.5 T``."""
        if self.behind_since_ms is None:
            return None
        return self.behind_since_ms + (3 * self.lag_time_max_ms) // 2


@dataclass(frozen=True)
class Shrink:
    """Kafka removed ``follower`` from the ISR at ``ts``; what the monitor said before."""

    ts: int
    topic: str
    partition: int
    leader: int
    follower: int
    by_controller: bool | None
    exact: bool
    predicted_ms: int | None  # first evaluation saying SHRINK_ELIGIBLE/OVERDUE in this stint
    deadline_ms: int | None

    @property
    def lead_ms(self) -> int | None:
        """How long before Kafka acted the monitor predicted it."""
        return None if self.predicted_ms is None else self.ts - self.predicted_ms

    @property
    def late_by_ms(self) -> int:
        """How long past its deadline the leader acted (0: on time). The deadline is the
        leader's isr-expiration rule; the controller removes a dead broker's replicas when it
        sees the broker gone, on no such deadline."""
        if self.deadline_ms is None or self.by_controller is True:
            return 0
        return max(0, self.ts - self.deadline_ms)


@dataclass
class OverdueShrink:
    """A follower Kafka should have removed by ``deadline_ms`` and had not, first seen
    ``SHRINK_OVERDUE`` at ``seen_ms``; resolved by a removal or by catching up."""

    topic: str
    partition: int
    leader: int
    follower: int
    deadline_ms: int
    seen_ms: int
    resolved_ms: int | None = None
    resolution: str | None = None  # "removed" | "caught up"; None: still overdue at the end
    cause: Cause | None = None

    def overdue_by_ms(self, end_ms: int) -> int:
        return (self.resolved_ms if self.resolved_ms is not None else end_ms) - self.deadline_ms


@dataclass
class MetadataBlackout:
    """A partition's change not yet in every live broker's cache, from ``changed_ms`` (or
    first seen stale) to ``observed_ms``, against the predicted window."""

    topic: str
    partition: int
    changed_ms: int
    earliest_ms: int | None
    latest_ms: int | None
    observed_ms: int | None = None  # None: still stale at the end of the range
    exact: bool = False
    overdue_seen_ms: int | None = None  # first seen STALE_OVERDUE
    stale_brokers: tuple[int, ...] = ()

    def late_by_ms(self, slack_ms: int, end_ms: int) -> int:
        """How long after ``latest + slack`` the caches agreed (0: within the window)."""
        if self.latest_ms is None:
            return 0
        observed = self.observed_ms if self.observed_ms is not None else end_ms
        return max(0, observed - (self.latest_ms + slack_ms))


@dataclass
class PartitionPeriod:
    """A partition ``kind`` (offline, under_min_isr, under_replicated) from start to end."""

    kind: str
    topic: str
    partition: int
    start_ms: int
    end_ms: int | None = None  # None: still so at the end of the range
    cause: Cause | None = None

    def duration_ms(self, end_ms: int) -> int:
        return (self.end_ms if self.end_ms is not None else end_ms) - self.start_ms


@dataclass(frozen=True)
class TimelineFilter:
    """Keep only these topics, partitions, brokers (empty: all)."""

    topics: frozenset[str] = frozenset()
    partitions: frozenset[int] = frozenset()
    brokers: frozenset[int] = frozenset()

    def keeps_partition(self, topic: str, partition: int, replicas: Iterable[int]) -> bool:
        if self.topics and topic not in self.topics:
            return False
        if self.partitions and partition not in self.partitions:
            return False
        return not self.brokers or bool(self.brokers & set(replicas))

    def keeps_follower(self, broker: int) -> bool:
        return not self.brokers or broker in self.brokers


@dataclass
class Timeline:
    """Everything the renderers draw and write, for ``start_ms <= t <= end_ms``."""

    start_ms: int
    end_ms: int
    lag_time_max_ms: int  # T when nothing more precise is known
    overdue_slack_ms: int
    lanes: dict[FollowerKey, list[StatusSpan]]
    leaders: dict[PartitionKey, int]  # the latest leader seen
    episodes: list[FollowerEpisode]
    shrinks: list[Shrink]
    overdue: list[OverdueShrink]
    isr_changes: list[IsrChange]
    blackouts: list[MetadataBlackout]
    periods: list[PartitionPeriod]
    notes: list[str] = field(default_factory=list)  # where the facts came from, caveats

    @property
    def brokers(self) -> list[int]:
        return sorted({key[2] for key in self.lanes})
