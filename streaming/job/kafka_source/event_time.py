"""Aligning a capped micro-batch on event time, so that a backlog read in several batches
is applied in the order one batch would have applied it.

Why. The shard applies a batch's events sorted by event time (``ts``), controller events
before fetches at the same time (``streaming.job.shard_state``). Across batches it cannot
reorder: an election applied in one batch makes a fetch from before it, read in a later
batch, a ``stale_leader_epoch`` dead letter (the leader epoch rule, KIP-101/KIP-320). A
read limit (``maxEventsPerPartition``, ``maxOffsetsPerTrigger``) caps Kafka partitions,
not time: the sparse ``controller-events`` partition is read to its end, elections and
all, while each busy ``fetch-responses`` partition gets only its first records.

The rule. When a limit *cuts* a partition (its planned end is before the end available),
the first record it leaves unread has an event time; the batch's **frontier** ``F`` is the
earliest of these over the cut partitions. Every partition, cut or not, then reads only
the records before the first one at or after ``F``: the batch holds exactly the events
with ``ts < F`` (records being in event-time order within a partition), and the next batch
starts at ``F``. Applied batch after batch, that is the order of one batch.

A fetch pack (docs/event-contract.md#fetch-packs) is one record of many events: its
event times are a span, from its earliest ``ts`` to its latest, and it is read whole or
not at all (a Kafka offset cannot be split). A record is before ``F`` when all of its
span is; one that straddles ``F`` (earliest before, latest at or after) is left unread,
and ``F`` comes down to its earliest time, until no partition's first unread record
straddles: so the batch still holds exactly the events before ``F``. (The collector's
packs hold one poll, a single time, and never straddle.)

Filling the batch (``fill``). The cap gives each partition its share of the batch, but
partitions are uneven in time: a collector keys its packs by leader, so one partition may
carry twice the events a millisecond of another. The frontier is set by the busiest cut
partition, and the quieter ones stop there at a fraction of their cap: with two
partitions twice as busy as two others, an aligned batch holds 3 caps' events where the
cap allows 4, and over a backlog the job sits idle between batches shorter than its
trigger. So the aligned batch is widened: every cut partition's planned records are
scaled by the same factor, the wider plan aligned again, and the widest alignment that
reads no more events (and no more records) than the capped plan is kept. A batch then
holds at most what the cap allowed it in all (the memory it costs is bounded as before),
and the busy partitions read past their cap what the quiet ones leave. Each widening is
an alignment, so the order is that of one batch, whatever is kept.

* A partition with nothing cut, or no event time in what is left, sets no frontier; with
  no frontier the plan is kept.
* Where a record has no event time (not JSON, no integer ``ts``: a future dead letter),
  it takes the time of the next record with one; at the end of what was fetched, it has
  none and is read now (its place does not matter to the model), unless a record before
  it is at or after ``F``: then it waits with that record.
* A run of records sharing one millisecond that is longer than the limit would stop the
  batch at its own start: no partition would move. Then the frontier becomes ``F + 1`` (the
  tied records are read, controller events of that millisecond still unread may come
  after fetches of it), and if even that moves nothing, the plan is kept as capped.
* If the times cannot be fetched, the stream reader keeps the plan as capped and says so
  in its log (``KafkaStreamReader.latestOffset``): a query stalled on a look that gets
  nothing would be worse than a batch out of order.

Kafka's own ListOffsets by timestamp cannot serve here: it searches the record timestamps
the producers set, not ``ts``, and Tansu answers offset 0 whatever the time
(docs/faults.md, backlog). The times come from the records themselves
(``streaming.job.kafka_source.record_times``); this module is the pure part.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from state.fetch_pack import is_fetch_pack, pack_time_range
from streaming.job.kafka_source.planner import records_to_read

__all__ = [
    "FILL_AIM",
    "FILL_ROUNDS",
    "FIRST_LOOK_BACK",
    "FULL_ENOUGH",
    "Alignment",
    "RecordTimes",
    "Span",
    "align",
    "cut_partitions",
    "event_times_of",
    "fill",
    "first_at_or_after",
    "frontier",
]


class Span(NamedTuple):
    """The event times of one record: a JSON record's ``ts`` twice, a pack's earliest
    and latest."""

    earliest: int
    latest: int


class RecordTimes(Protocol):
    """The event times of a partition's records, as far as they can be fetched."""

    def span_at(self, key: str, offset: int, end: int) -> Span | None:
        """The event times of the first record at or after ``offset`` (and before
        ``end``) that has any; None if none has within what one look fetched."""


def event_times_of(value: bytes | None) -> Span | None:
    """The event times of a record: ``ts`` of a JSON object value (docs/event-contract.md),
    the span of a fetch pack's rows (``state.fetch_pack.pack_time_range``); None if the
    value has none (not a JSON object with an integer ``ts``, a pack that cannot be
    read)."""
    if not value:
        return None
    if is_fetch_pack(value):
        span = pack_time_range(value)
        return None if span is None else Span(*span)
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the limit
        return None
    if not isinstance(parsed, dict):
        return None
    ts = parsed.get("ts")
    # bool is an int to Python, not to the contract.
    return Span(ts, ts) if isinstance(ts, int) and not isinstance(ts, bool) else None


def frontier(
    start: Mapping[str, int],
    planned: Mapping[str, int],
    available: Mapping[str, int],
    times: RecordTimes,
) -> int | None:
    """The earliest event time a limit left unread: over the partitions read from ``start``
    whose planned end is before their available end, the time at the planned end. None if
    nothing was cut or what was cut has no event time. (A partition only registered in
    this batch, with no start, is read from the next one: it cuts nothing.)"""
    found = [
        span.earliest
        for key in cut_partitions(start, planned, available)
        if (span := times.span_at(key, planned[key], available[key])) is not None
    ]
    return min(found, default=None)


def cut_partitions(
    start: Mapping[str, int], planned: Mapping[str, int], available: Mapping[str, int]
) -> list[str]:
    """The partitions read from ``start`` whose planned end is before their available end:
    the ones a limit cut."""
    return [
        key
        for key, end in planned.items()
        if key in start and start[key] <= end < available.get(key, end)
    ]


#: How far before the end the search first looks: a capped partition's boundary is most
#: often within its last records, and one fetch (record_times.RECORDS_PER_FETCH) from
#: here covers them.
FIRST_LOOK_BACK = 256


def first_at_or_after(times: RecordTimes, key: str, start: int, end: int, time: int) -> int:
    """The first offset in ``[start, end)`` with an event time ``time`` or later (a pack's
    latest), ``end`` if there is none, the records being in event-time order.

    The search gallops back from the end (``FIRST_LOOK_BACK`` records, then twice as far
    each time) until a record is before ``time``: the boundary of a cut partition is
    usually near its planned end, where this costs one or two fetches. It then narrows
    the bracket it found by interpolation: a partition's event times grow about evenly
    with its offsets, so the offset where ``time`` falls between the bracket's two times
    is most often a fetch or two from the boundary, where halving would take
    log2(bracket / records a fetch brings) fetches (with fetch packs, a fetch brings a
    handful of records, and the next look, just after the first, is often among them).
    Where two steps did not halve the bracket between them (times bunched, as a run of
    one millisecond), the next step halves it: the search takes at most about three times
    a binary search's steps."""
    # Records with no event time take the time of the next record with one; those after
    # the last one (no time up to ``end``: ``span_at`` gives None) are read now, unless a
    # record before them is at or after ``time``. So the search looks for the first offset
    # that is at or after ``time`` or has no time up to the end (the records being in
    # order, every offset after it is too), and if that is the untimed tail, gives ``end``.
    low, high = start, end
    below: tuple[int, int] | None = None  # (offset, latest time) of a record before time
    above: tuple[int, int] | None = None  # (offset, latest time) of one at or after it
    untimed = end  # the lowest offset seen with no time up to the end
    back = FIRST_LOOK_BACK
    while low < high:
        probe = max(low, end - back)
        found = times.span_at(key, probe, end)
        if found is not None and found.latest < time:
            low, below = probe + 1, (probe, found.latest)  # the boundary is after the probe
            break
        high = probe  # at or before it
        if found is None:
            untimed = probe
        else:
            above = (probe, found.latest)
        back *= 2
    widths = [high - low]
    while low < high:
        # Two steps that did not halve the bracket between them: halve it now.
        if len(widths) >= 3 and 2 * widths[-1] > widths[-3]:
            middle = (low + high) // 2
        else:
            middle = _interpolated(low, high, below, above, time)
        found = times.span_at(key, middle, end)
        if found is not None and found.latest < time:
            low, below = middle + 1, (middle, found.latest)
        else:
            high = middle
            if found is None:
                untimed = middle
            else:
                above = (middle, found.latest)
        widths.append(high - low)
    # The boundary is the untimed tail: every timed record is before ``time``.
    return end if low == untimed else low


def _interpolated(
    low: int,
    high: int,
    below: tuple[int, int] | None,
    above: tuple[int, int] | None,
    time: int,
) -> int:
    """The offset in ``[low, high)`` where ``time`` falls on the line between a record
    known before it and one known at or after it; the middle without both."""
    if below is None or above is None or above[1] <= below[1]:
        return (low + high) // 2
    (before, before_time), (after, after_time) = below, above
    guess = before + (time - before_time) * (after - before) // (after_time - before_time)
    return min(max(guess, low), high - 1)


@dataclass(frozen=True)
class Alignment:
    """The aligned ends, the frontier they stop at (None: the plan was kept), and whether
    the frontier had to move past a run of tied records (``F + 1``)."""

    ends: dict[str, int]
    frontier: int | None
    widened: bool = False


def align(
    start: Mapping[str, int],
    planned: Mapping[str, int],
    available: Mapping[str, int],
    times: RecordTimes,
) -> Alignment:
    """``planned`` cut back to the batch's frontier (see the module's docstring).

    ``start`` is where each partition's batch begins, ``planned`` the capped plan,
    ``available`` the end each partition could read to. Partitions without a range in the
    plan (new, going back to their beginning, nothing new) are as planned.
    """
    cut_at = frontier(start, planned, available, times)
    if cut_at is None:
        return Alignment(dict(planned), None)
    ranges = {
        key: (start[key], end) for key, end in planned.items() if key in start and end > start[key]
    }
    for time, widened in ((cut_at, False), (cut_at + 1, True)):
        ends, before = _ends_before(times, planned, ranges, time)
        if any(ends[key] > first for key, (first, _) in ranges.items()):
            return Alignment(ends, before, widened)
    return Alignment(dict(planned), None)


def _ends_before(
    times: RecordTimes,
    planned: Mapping[str, int],
    ranges: Mapping[str, tuple[int, int]],
    time: int,
) -> tuple[dict[str, int], int]:
    """The ends that read exactly the events before a frontier, and that frontier:
    ``time``, or lower where a pack straddles it (the module's docstring). Each round
    lowers it to a record's earliest time, so the rounds end."""
    while True:
        ends = dict(planned)
        for key, (first, end) in ranges.items():
            ends[key] = first_at_or_after(times, key, first, end, time)
        straddling = [
            span.earliest
            for key, (_, end) in ranges.items()
            if ends[key] < end
            and (span := times.span_at(key, ends[key], end)) is not None
            and span.earliest < time
        ]
        if not straddling:
            return ends, time
        time = min(straddling)


#: Widenings ``fill`` tries. Each costs an alignment, a few record fetches a partition
#: (with packs, 0.1 to 0.2 s on the embedded broker), while the job waits on the plan.
FILL_ROUNDS = 4
#: A batch holding this share of the events the capped plan allowed is not widened.
FULL_ENOUGH = 0.95
#: The share a widening aims at: between ``FULL_ENOUGH`` and all, so that a guess a
#: little off either way still lands in it.
FILL_AIM = (FULL_ENOUGH + 1) / 2


def fill(
    start: Mapping[str, int],
    planned: Mapping[str, int],
    available: Mapping[str, int],
    times: RecordTimes,
    events: Callable[[Mapping[str, int]], float],
) -> Alignment:
    """``planned`` aligned (``align``), then widened towards the events the capped plan
    reads (see the module's docstring). ``events(ends)`` counts (or estimates) the events
    between ``start`` and ``ends``; the kept alignment reads at most ``events(planned)``
    events and as many records as ``planned`` does, or it is ``align``'s own.

    The widening scales the cut partitions' planned records. The events a scale brings
    grow about in proportion to it, so the first scale is ``FILL_AIM`` of the budget over
    the aligned batch's events; after one too wide, the next is read off the line through
    the widest kept and the narrowest refused (halfway if that line is flat)."""
    best = align(start, planned, available, times)
    if best.frontier is None:  # nothing cut, or no time to stop at: nothing to widen
        return best
    cut = cut_partitions(start, planned, available)
    budget, record_budget = events(planned), _records(start, planned)
    aim = FILL_AIM * budget
    kept = (1.0, events(best.ends))  # (scale, events) of the widest alignment kept
    refused: tuple[float, float] | None = None  # and of the narrowest refused
    for _ in range(FILL_ROUNDS):
        if kept[1] >= FULL_ENOUGH * budget:
            break
        scale = _next_scale(kept, refused, aim)
        widened = dict(planned)
        for key in cut:
            records = planned[key] - start[key]
            widened[key] = min(available[key], start[key] + math.ceil(records * scale))
        trial = align(start, widened, available, times)
        trial_events = events(trial.ends)
        # A widened plan that ``align`` keeps as it is (no time to stop at) reads more
        # records than ``planned``: the record budget refuses it, so what is kept is
        # aligned.
        if kept[1] < trial_events <= budget and _records(start, trial.ends) <= record_budget:
            best, kept = trial, (scale, trial_events)
        else:
            refused = (scale, trial_events)
    return best


def _next_scale(
    kept: tuple[float, float], refused: tuple[float, float] | None, aim: float
) -> float:
    """The scale expected to bring ``aim`` events, strictly between the widest kept and
    the narrowest refused (``fill``)."""
    low, low_events = kept
    if refused is None:
        return low * aim / max(low_events, 1.0)
    high, high_events = refused
    if high_events > low_events:
        guess = low + (aim - low_events) * (high - low) / (high_events - low_events)
        if low < guess < high:
            return guess
    return (low + high) / 2


def _records(start: Mapping[str, int], ends: Mapping[str, int]) -> int:
    return sum(records_to_read(start, ends).values())
