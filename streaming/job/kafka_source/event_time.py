"""Aligning a capped micro-batch on event time, so that a backlog read in several batches
is applied in the order one batch would have applied it.

Why. The shard applies a batch's events sorted by event time (``ts``), controller events
before fetches at the same time (``streaming.job.shard_state``). Across batches it cannot
reorder: an election applied in one batch makes a fetch from before it, read in a later
batch, a ``stale_leader_epoch`` dead letter (the leader epoch rule, KIP-101/KIP-320). A
read limit (``maxOffsetsPerPartition``, ``maxOffsetsPerTrigger``) caps Kafka partitions,
not time: the sparse ``controller-events`` partition is read to its end, elections and
all, while each busy ``fetch-responses`` partition gets only its first records.

The rule. When a limit *cuts* a partition (its planned end is before the end available),
the first record it leaves unread has an event time; the batch's **frontier** ``F`` is the
earliest of these over the cut partitions. Every partition, cut or not, then reads only
the records before the first one at or after ``F``: the batch holds exactly the events
with ``ts < F`` (records being in event-time order within a partition), and the next batch
starts at ``F``. Applied batch after batch, that is the order of one batch.

* A partition with nothing cut, or no event time in what is left, sets no frontier; with
  no frontier the plan is kept.
* Where a record has no event time (not JSON, no integer ``ts``: a future dead letter),
  it takes the time of the next record with one; at the end of what was fetched, it has
  none and is read now (its place does not matter to the model).
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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "FIRST_LOOK_BACK",
    "Alignment",
    "RecordTimes",
    "align",
    "cut_partitions",
    "event_time_of",
    "first_at_or_after",
    "frontier",
]


class RecordTimes(Protocol):
    """The event times of a partition's records, as far as they can be fetched."""

    def time_at(self, key: str, offset: int, end: int) -> int | None:
        """The event time of the first record at or after ``offset`` (and before ``end``)
        that has one; None if none has within what one look fetched."""


def event_time_of(value: bytes | None) -> int | None:
    """``ts`` of a record's JSON object value (docs/event-contract.md), or None if the
    value is not a JSON object with an integer ``ts``."""
    if not value:
        return None
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the limit
        return None
    if not isinstance(parsed, dict):
        return None
    ts = parsed.get("ts")
    # bool is an int to Python, not to the contract.
    return ts if isinstance(ts, int) and not isinstance(ts, bool) else None


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
        time
        for key in cut_partitions(start, planned, available)
        if (time := times.time_at(key, planned[key], available[key])) is not None
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
    """The first offset in ``[start, end)`` whose event time is ``time`` or later, ``end``
    if there is none, the records being in event-time order.

    The search gallops back from the end (``FIRST_LOOK_BACK`` records, then twice as far
    each time) until a record is before ``time``, then halves the bracket it found: the
    boundary of a cut partition is usually near its planned end, where this costs one or
    two fetches and a plain binary search over the range would cost log2(range / fetch)."""
    low, high = start, end
    back = FIRST_LOOK_BACK
    while low < high:
        probe = max(low, end - back)
        found = times.time_at(key, probe, end)
        if found is None or found < time:
            low = probe + 1  # the boundary is after the probe
            break
        high = probe  # at or before it
        back *= 2
    while low < high:
        middle = (low + high) // 2
        found = times.time_at(key, middle, end)
        if found is not None and found >= time:
            high = middle
        else:
            low = middle + 1
    return low


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
        ends = dict(planned)
        for key, (first, end) in ranges.items():
            ends[key] = first_at_or_after(times, key, first, end, time)
        if any(ends[key] > first for key, (first, _) in ranges.items()):
            return Alignment(ends, time, widened)
    return Alignment(dict(planned), None)
