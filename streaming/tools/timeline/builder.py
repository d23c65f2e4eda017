"""Folding a time-ordered stream of timeline items (health records, ISR changes,
propagations: see ``facts``) into a :class:`~streaming.tools.timeline.facts.Timeline`.

A partition's health holds until its next record, so the builder keeps, per follower and
per partition, what the latest record said and since when; a change of status closes a
span, a record back at ``IN_SYNC`` closes an episode, an ISR change records a shrink with
what the monitor had predicted before it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from state import Cause, FollowerHealth, HealthRecord, MetadataHealth
from state.shrink_rule import STATUS_SEVERITY
from streaming.tools.timeline.facts import (
    CONSISTENT,
    IN_SYNC,
    LAGGING,
    PARTITION_FLAGS,
    PREDICTING,
    SHRINK_OVERDUE,
    STALE_OVERDUE,
    EvaluatedHealth,
    FollowerEpisode,
    FollowerKey,
    IsrChange,
    MetadataBlackout,
    OverdueShrink,
    PartitionKey,
    PartitionPeriod,
    Propagation,
    Shrink,
    StatusSpan,
    Timeline,
    TimelineFilter,
    TimelineItem,
    item_time,
)


@dataclass
class _Follower:
    status: str
    since_ms: int
    in_isr: bool
    following: bool = True  # False once a record lists it no more (it leads, say)
    spans: list[StatusSpan] = field(default_factory=list)
    episode: FollowerEpisode | None = None
    predicted_ms: int | None = None  # in the current ISR stint
    deadline_ms: int | None = None
    overdue: OverdueShrink | None = None


class _Seen(NamedTuple):
    """One follower as one health record describes it."""

    tp: PartitionKey
    leader: int
    broker: int
    status: str
    follower: FollowerHealth
    now: int


@dataclass
class _Partition:
    seen_ms: int
    leader: int
    isr: tuple[int, ...]
    periods: dict[str, PartitionPeriod] = field(default_factory=dict)
    blackout: MetadataBlackout | None = None
    changed_ms: int | None = None  # its latest ISR change
    followers: set[int] = field(default_factory=set)  # as its latest record lists them


class TimelineBuilder:
    """Folds a time-ordered stream of :data:`TimelineItem` into a :class:`Timeline`.

    ``exact_changes``: ISR changes come as :class:`IsrChange` items (a capture was
    replayed), so none is inferred from records.
    """

    def __init__(
        self,
        lag_time_max_ms: int,
        overdue_slack_ms: int,
        *,
        exact_changes: bool = False,
        where: TimelineFilter | None = None,
    ) -> None:
        self.lag_time_max_ms = lag_time_max_ms
        self.overdue_slack_ms = overdue_slack_ms
        self.exact_changes = exact_changes
        self.where = where or TimelineFilter()
        self.first_ms: int | None = None
        self.last_ms: int | None = None
        self._followers: dict[FollowerKey, _Follower] = {}
        self._partitions: dict[PartitionKey, _Partition] = {}
        self._episodes: list[FollowerEpisode] = []
        self._shrinks: list[Shrink] = []
        self._overdue: list[OverdueShrink] = []
        self._changes: list[IsrChange] = []
        self._blackouts: list[MetadataBlackout] = []
        self._periods: list[PartitionPeriod] = []
        self._lag_time_max: dict[PartitionKey, int] = {}

    # ------------------------------------------------------------------ input

    def add_all(self, items: Iterable[TimelineItem]) -> TimelineBuilder:
        for item in items:
            self.add(item)
        return self

    def add(self, item: TimelineItem) -> None:
        ts = item_time(item)
        self.first_ms = ts if self.first_ms is None else min(self.first_ms, ts)
        self.last_ms = ts if self.last_ms is None else max(self.last_ms, ts)
        if isinstance(item, IsrChange):
            self._isr_change(item)
        elif isinstance(item, Propagation):
            self._propagation(item)
        elif isinstance(item, EvaluatedHealth):
            self._record(item.record, item.lag_time_max_ms)
        else:
            self._record(item, None)

    def _record(self, record: HealthRecord, lag_time_max_ms: int | None) -> None:
        topic, number = record.topic, record.partition
        if not self.where.keeps_partition(topic, number, record.replicas):
            return
        now = record.as_of_ms
        tp = (topic, number)
        isr = tuple(record.isr)
        leader = record.leader
        state = self._partitions.get(tp)
        if state is None:
            state = self._partitions[tp] = _Partition(now, leader, isr)
        elif not self.exact_changes and set(isr) != set(state.isr):
            self._isr_change(
                IsrChange(now, topic, number, leader, state.isr, isr, None, exact=False)
            )
        previous_seen = state.seen_ms
        state.seen_ms, state.leader, state.isr = now, leader, isr
        self._partition_periods(state, record, now, record.cause)
        self._metadata(state, tp, record.metadata, now, previous_seen)
        if lag_time_max_ms is not None:
            self._lag_time_max[tp] = lag_time_max_ms
        for follower in record.followers:
            broker = follower.broker
            if self.where.keeps_follower(broker):
                self._follower(tp, leader, broker, follower, now)
        listed = {f.broker for f in record.followers}
        for broker in state.followers - listed:
            self._no_longer_follows((*tp, broker), now)
        state.followers = listed

    def _partition_periods(
        self, state: _Partition, record: HealthRecord, now: int, cause: Cause | None
    ) -> None:
        topic, number = record.topic, record.partition
        conditions = record.conditions()
        for kind in PARTITION_FLAGS:
            period = state.periods.get(kind)
            if conditions[kind]:
                if period is None:
                    period = state.periods[kind] = PartitionPeriod(kind, topic, number, now)
                    self._periods.append(period)
                if period.cause is None and cause:
                    period.cause = cause
            elif period is not None:
                period.end_ms = now
                del state.periods[kind]

    def _metadata(
        self,
        state: _Partition,
        tp: PartitionKey,
        metadata: MetadataHealth,
        now: int,
        previous_seen: int,
    ) -> None:
        status = metadata.state
        blackout = state.blackout
        if status == CONSISTENT:
            if blackout is not None:  # in agreement again without a propagation seen
                blackout.observed_ms = now
                state.blackout = None
            return
        if blackout is None:
            changed = state.changed_ms
            start = changed if changed is not None and changed > previous_seen else now
            blackout = state.blackout = MetadataBlackout(*tp, start, None, None)
            self._blackouts.append(blackout)
        earliest, latest = metadata.blackout_earliest_ms, metadata.blackout_latest_ms
        if latest is not None:
            blackout.earliest_ms, blackout.latest_ms = earliest, latest
        blackout.stale_brokers = tuple(metadata.stale_brokers or blackout.stale_brokers)
        if status == STALE_OVERDUE and blackout.overdue_seen_ms is None:
            blackout.overdue_seen_ms = now

    def _follower(
        self, tp: PartitionKey, leader: int, broker: int, follower: FollowerHealth, now: int
    ) -> None:
        key = (*tp, broker)
        status = follower.status
        in_isr = follower.in_isr
        state = self._followers.get(key)
        if state is None:
            state = self._followers[key] = _Follower(status, now, in_isr)
        elif not state.following:  # a follower again: its lane resumes now
            state.status, state.since_ms, state.following = status, now, True
        elif status != state.status:
            state.spans.append(StatusSpan(state.since_ms, now, state.status))
            state.status, state.since_ms = status, now
        state.in_isr = in_isr
        shrink_by = follower.shrink_deadline_ms
        if in_isr and status in PREDICTING:
            if state.predicted_ms is None:
                state.predicted_ms = now
            if shrink_by is not None:
                state.deadline_ms = shrink_by
        elif status == IN_SYNC or not in_isr:
            state.predicted_ms = None
        seen = _Seen(tp, leader, broker, status, follower, now)
        self._overdue_follower(state, seen)
        self._episode(state, seen)

    def _no_longer_follows(self, key: FollowerKey, now: int) -> None:
        """A replica the partition's records listed as a follower and list no more: it
        became the leader (Kafka's leader is no follower of itself), or left the
        replicas. Its lane and its episode end here, whatever its last status was."""
        state = self._followers.get(key)
        if state is None or not state.following:
            return
        state.spans.append(StatusSpan(state.since_ms, now, state.status))
        state.following, state.predicted_ms = False, None
        if state.episode is not None:
            state.episode.end_ms = now
            state.episode = None

    def _overdue_follower(self, state: _Follower, seen: _Seen) -> None:
        tp, leader, broker, status, follower, now = seen
        open_overdue = state.overdue
        if status == SHRINK_OVERDUE and open_overdue is None:
            deadline = follower.shrink_deadline_ms or now
            state.overdue = OverdueShrink(*tp, leader, broker, deadline, now, cause=follower.cause)
            self._overdue.append(state.overdue)
        elif status != SHRINK_OVERDUE and open_overdue is not None and state.in_isr:
            open_overdue.resolved_ms, open_overdue.resolution = now, "caught up"
            state.overdue = None

    def _episode(self, state: _Follower, seen: _Seen) -> None:
        tp, leader, broker, status, follower, now = seen
        episode = state.episode
        if status == IN_SYNC:
            if episode is not None:
                episode.end_ms = now
                state.episode = None
            return
        if episode is None:
            episode = self._open_episode(state, tp, leader, broker, now)
        last_caught_up = follower.last_caught_up_ms or 0
        if episode.behind_since_ms is None and last_caught_up > 0 and state.in_isr:
            episode.behind_since_ms = last_caught_up
            episode.lag_time_max_ms = self._t_of(tp, follower)
        elif follower.shrink_deadline_ms is not None and tp not in self._lag_time_max:
            episode.lag_time_max_ms = self._t_of(tp, follower)  # a deadline tells T
        if status == LAGGING and episode.first_lagging_ms is None:
            episode.first_lagging_ms = now
        if status in PREDICTING and episode.predicted_ms is None and state.in_isr:
            episode.predicted_ms = now
        if status == SHRINK_OVERDUE and episode.overdue_ms is None:
            episode.overdue_ms = now
        if STATUS_SEVERITY.get(status, 0) > STATUS_SEVERITY.get(episode.worst, 0):
            episode.worst = status
        if episode.cause is None and follower.cause is not None:
            episode.cause = follower.cause

    def _open_episode(
        self, state: _Follower, tp: PartitionKey, leader: int, broker: int, now: int
    ) -> FollowerEpisode:
        t = self._lag_time_max.get(tp, self.lag_time_max_ms)
        episode = state.episode = FollowerEpisode(*tp, broker, leader, now, t)
        self._episodes.append(episode)
        return episode

    def _t_of(self, tp: PartitionKey, follower: FollowerHealth) -> int:
        """T of the partition's leader: given by the capture's model, else read back from
        a deadline (``shrink_by = last caught up + 1.5 T`` when the lag term decides), else
        the configured default."""
        if tp in self._lag_time_max:
            return self._lag_time_max[tp]
        shrink_by, caught_up = follower.shrink_deadline_ms, follower.last_caught_up_ms
        if shrink_by is not None and caught_up:
            return round((shrink_by - caught_up) * 2 / 3)
        return self.lag_time_max_ms

    def _isr_change(self, change: IsrChange) -> None:
        tp = (change.topic, change.partition)
        state = self._partitions.get(tp)
        if state is None:
            if not self.where.keeps_partition(*tp, (*change.old, *change.new)):
                return
            state = self._partitions[tp] = _Partition(change.ts, change.leader, change.new)
        if change.exact:
            state.isr = change.new
        state.changed_ms = change.ts
        self._changes.append(change)
        for broker in change.removed:
            if self.where.keeps_follower(broker):
                self._removed(tp, broker, change)
        for broker in change.added:
            follower = self._followers.get((*tp, broker))
            if follower is not None and follower.episode is not None:
                follower.episode.rejoined_ms = change.ts

    def _removed(self, tp: PartitionKey, broker: int, change: IsrChange) -> None:
        key = (*tp, broker)
        follower = self._followers.get(key)
        if follower is None:
            follower = self._followers[key] = _Follower(IN_SYNC, change.ts, in_isr=False)
        deadline = change.deadlines_ms.get(broker, follower.deadline_ms)
        self._shrinks.append(
            Shrink(
                change.ts,
                *tp,
                change.leader,
                broker,
                change.by_controller,
                change.exact,
                follower.predicted_ms,
                deadline,
            )
        )
        if follower.overdue is not None:
            follower.overdue.resolved_ms, follower.overdue.resolution = change.ts, "removed"
            follower.overdue = None
        episode = follower.episode or self._open_episode(
            follower, tp, change.leader, broker, change.ts
        )
        episode.removed_ms = change.ts
        follower.in_isr = False
        follower.predicted_ms = follower.deadline_ms = None

    def _propagation(self, propagation: Propagation) -> None:
        tp = (propagation.topic, propagation.partition)
        state = self._partitions.get(tp)
        if state is None:
            return  # a partition filtered out, or never reported
        blackout = state.blackout
        if blackout is None:
            changed = propagation.changed_ms
            blackout = MetadataBlackout(
                *tp, changed if changed is not None else propagation.ts, None, None
            )
            self._blackouts.append(blackout)
        if propagation.changed_ms is not None:
            blackout.changed_ms = propagation.changed_ms
        if propagation.latest_ms is not None:
            blackout.earliest_ms, blackout.latest_ms = (
                propagation.earliest_ms,
                propagation.latest_ms,
            )
        blackout.observed_ms, blackout.exact = propagation.ts, propagation.exact
        state.blackout = None

    # ------------------------------------------------------------------ output

    def finish(
        self,
        start_ms: int | None = None,
        end_ms: int | None = None,
        notes: Iterable[str] = (),
    ) -> Timeline:
        """The facts within ``[start_ms, end_ms]`` (default: the items' first and last time);
        what is still going on at the end is left open (``None`` end)."""
        start = start_ms if start_ms is not None else (self.first_ms or 0)
        end = end_ms if end_ms is not None else (self.last_ms or start)
        lanes: dict[FollowerKey, list[StatusSpan]] = {}
        for key in sorted(self._followers):
            follower = self._followers[key]
            spans = list(follower.spans)
            if follower.following:
                spans.append(StatusSpan(follower.since_ms, end, follower.status))
            clipped = list(_clip_spans(spans, start, end))
            if clipped:
                lanes[key] = clipped
        return Timeline(
            start_ms=start,
            end_ms=end,
            lag_time_max_ms=self.lag_time_max_ms,
            overdue_slack_ms=self.overdue_slack_ms,
            lanes=lanes,
            leaders={tp: p.leader for tp, p in sorted(self._partitions.items())},
            episodes=[e for e in self._episodes if _overlaps(e.start_ms, e.end_ms, start, end)],
            shrinks=[s for s in self._shrinks if start <= s.ts <= end],
            overdue=[o for o in self._overdue if _overlaps(o.seen_ms, o.resolved_ms, start, end)],
            isr_changes=[c for c in self._changes if start <= c.ts <= end],
            blackouts=[
                b for b in self._blackouts if _overlaps(b.changed_ms, b.observed_ms, start, end)
            ],
            periods=[p for p in self._periods if _overlaps(p.start_ms, p.end_ms, start, end)],
            notes=list(notes),
        )


def _overlaps(begin: int, finish: int | None, start: int, end: int) -> bool:
    return begin <= end and (finish is None or finish >= start)


def _clip_spans(spans: Iterable[StatusSpan], start: int, end: int) -> Iterator[StatusSpan]:
    for span in spans:
        if span.end_ms < start or span.start_ms > end:
            continue
        clipped = replace(span, start_ms=max(span.start_ms, start), end_ms=min(span.end_ms, end))
        if clipped.end_ms > clipped.start_ms:
            yield clipped
