"""What "a partition's health changed" means, as one 64-bit number per partition.

A shard writes a partition's health record again only when its health changed: its
leader and epoch, replicas and ISR, its flags (a silent leader's among them), each
follower's broker, status and ISR membership, and its metadata state with the stale
brokers and the blackout window.
The clock (``as_of_ms``) and the lag figures (offsets, lag times, deadlines) move on
every batch and are left out, or every record would be written every batch.

:func:`health_signatures` computes the signature of every partition of a
:class:`~state.partition_health.HealthFrame` with numpy, no Python per partition (the
shards evaluate every partition every micro-batch). Each fact is hashed together with
its field and its position in its list (``splitmix64``, a well-mixed 64-bit bijection),
and a partition's signature is the sum of its facts' hashes modulo 2**64. So:

* two partitions with the same facts get the same signature, in any frame (the width of
  the frame's replica columns, or the other partitions, do not enter);
* any difference in a fact, an order or a length changes it (but for a 2**-64 chance).

A follower's position is its rank among the partition's followers, as the record lists
them (replica slots that hold no follower are skipped).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from itertools import chain

import numpy as np
import numpy.typing as npt

from state.arrays import BOOL
from state.partition_health import HealthFrame

U64 = npt.NDArray[np.uint64]


class _Field(IntEnum):
    """The facts of a partition's health; each is hashed with its own tag."""

    LEADER = 1
    LEADER_EPOCH = 2
    UNDER_REPLICATED = 3
    UNDER_MIN_ISR = 4
    AT_MIN_ISR = 5
    OFFLINE = 6
    PREDICTED_UNDER_REPLICATED = 7
    METADATA_STATE = 8
    BLACKOUT_EARLIEST_KNOWN = 9
    BLACKOUT_EARLIEST = 10
    BLACKOUT_LATEST_KNOWN = 11
    BLACKOUT_LATEST = 12
    ISR_LENGTH = 13
    ISR = 14
    REPLICAS_LENGTH = 15
    REPLICAS = 16
    FOLLOWERS = 17
    FOLLOWER_BROKER = 18
    FOLLOWER_STATUS = 19
    FOLLOWER_IN_ISR = 20
    STALE_BROKERS_LENGTH = 21
    STALE_BROKERS = 22
    ELR_LENGTH = 23
    ELR = 24
    LAST_KNOWN_ELR_LENGTH = 25
    LAST_KNOWN_ELR = 26
    LEADER_SILENT = 27


def _mix(values: U64) -> U64:
    """splitmix64's finaliser: a bijection of 64-bit words that spreads every input bit."""
    z = values + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    result: U64 = z ^ (z >> np.uint64(31))
    return result


def _fact_hashes(field: _Field, position: npt.NDArray[np.int64], values: U64) -> U64:
    """The hash of each value as fact ``field`` at ``position`` in its list."""
    tag = (np.uint64(field) << np.uint64(32)) | position.astype(np.uint64)
    return _mix(_mix(values) ^ _mix(tag))


def _words(values: npt.NDArray[np.integer] | BOOL) -> U64:
    """Integers (negative ones included) or flags as 64-bit words."""
    words: U64 = np.ascontiguousarray(values, dtype=np.int64).view(np.uint64)
    return words


def health_signatures(frame: HealthFrame) -> U64:
    """The signature of every partition of ``frame`` (module doc), in frame order."""
    n = len(frame)
    signature = np.zeros(n, dtype=np.uint64)
    first = np.zeros(n, dtype=np.int64)
    scalars: list[tuple[_Field, npt.NDArray[np.integer] | BOOL]] = [
        (_Field.LEADER, frame.leader),
        (_Field.LEADER_EPOCH, frame.leader_epoch),
        (_Field.UNDER_REPLICATED, frame.under_replicated),
        (_Field.UNDER_MIN_ISR, frame.under_min_isr),
        (_Field.AT_MIN_ISR, frame.at_min_isr),
        (_Field.OFFLINE, frame.offline),
        (_Field.PREDICTED_UNDER_REPLICATED, frame.predicted_under_replicated),
        (_Field.METADATA_STATE, frame.metadata_state),
    ]
    for field, column in scalars:
        signature += _fact_hashes(field, first, _words(column))
    for known_field, value_field, times in (
        (_Field.BLACKOUT_EARLIEST_KNOWN, _Field.BLACKOUT_EARLIEST, frame.blackout_earliest_ms),
        (_Field.BLACKOUT_LATEST_KNOWN, _Field.BLACKOUT_LATEST, frame.blackout_latest_ms),
    ):
        known, value = _optional_times(times)
        signature += _fact_hashes(known_field, first, _words(known))
        signature += _fact_hashes(value_field, first, _words(value))
    for length_field, item_field, lists in (
        (_Field.ISR_LENGTH, _Field.ISR, frame.isr),
        (_Field.REPLICAS_LENGTH, _Field.REPLICAS, frame.replicas),
        (_Field.STALE_BROKERS_LENGTH, _Field.STALE_BROKERS, frame.stale_brokers),
    ):
        _add_lists(signature, length_field, item_field, lists)
    _add_followers(signature, frame)
    _add_eligible_leaders(signature, frame)
    # Only a silent leader adds its fact: every other partition keeps the signature it had
    # before isrwatch told silence apart, so an upgrade writes none of those records again.
    silent = np.flatnonzero(frame.leader_silent)
    signature[silent] += _fact_hashes(
        _Field.LEADER_SILENT,
        np.zeros(len(silent), dtype=np.int64),
        _words(frame.leader_silent[silent]),
    )
    return signature


def _add_eligible_leaders(signature: U64, frame: HealthFrame) -> None:
    """Adds the ELR and last known ELR of the partitions that have them stated (Kafka
    4.0+). A partition with none adds nothing: its signature is the one it had before the
    ELR was known to isrwatch, so an upgrade writes none of those records again."""
    stated = [i for i, held in enumerate(frame.eligible_leaders) if held is not None]
    if not stated:
        return
    held = [frame.eligible_leaders[i] for i in stated]
    part = np.zeros(len(stated), dtype=np.uint64)
    _add_lists(part, _Field.ELR_LENGTH, _Field.ELR, [h.elr for h in held if h is not None])
    _add_lists(
        part,
        _Field.LAST_KNOWN_ELR_LENGTH,
        _Field.LAST_KNOWN_ELR,
        [h.last_known_elr for h in held if h is not None],
    )
    signature[np.asarray(stated, dtype=np.int64)] += part


def _optional_times(times: Sequence[int | None]) -> tuple[BOOL, npt.NDArray[np.int64]]:
    """A column of times or None as (known, value with 0 where unknown)."""
    objects = np.asarray(times, dtype=object)
    known: BOOL = np.fromiter((t is not None for t in times), dtype=np.bool_, count=len(times))
    value = np.zeros(len(objects), dtype=np.int64)
    value[known] = objects[known].astype(np.int64)
    return known, value


def _add_lists(
    signature: U64, length_field: _Field, item_field: _Field, lists: Sequence[Sequence[int]]
) -> None:
    """Adds each partition's list of broker ids: its length and each item at its place."""
    n = len(lists)
    lengths = np.fromiter(map(len, lists), dtype=np.int64, count=n)
    signature += _fact_hashes(length_field, np.zeros(n, dtype=np.int64), _words(lengths))
    total = int(lengths.sum())
    if not total:
        return
    items = np.fromiter(chain.from_iterable(lists), dtype=np.int64, count=total)
    owner = np.repeat(np.arange(n), lengths)
    starts = np.cumsum(lengths) - lengths
    position = np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)
    np.add.at(signature, owner, _fact_hashes(item_field, position, _words(items)))


def _add_followers(signature: U64, frame: HealthFrame) -> None:
    """Adds each follower's broker, status and ISR membership at its rank among the
    partition's followers, and how many followers it has."""
    status = frame.follower_status
    present = status >= 0
    n = len(frame)
    count = present.sum(axis=1, dtype=np.int64) if status.ndim == 2 else np.zeros(n, np.int64)
    signature += _fact_hashes(_Field.FOLLOWERS, np.zeros(n, dtype=np.int64), _words(count))
    if not present.any():
        return
    rank = np.cumsum(present, axis=1, dtype=np.int64)[present] - 1
    for field, column in (
        (_Field.FOLLOWER_BROKER, frame.follower_broker),
        (_Field.FOLLOWER_STATUS, status),
        (_Field.FOLLOWER_IN_ISR, frame.follower_in_isr),
    ):
        hashed = np.zeros(status.shape, dtype=np.uint64)
        hashed[present] = _fact_hashes(field, rank, _words(column[present]))
        signature += hashed.sum(axis=1, dtype=np.uint64)
