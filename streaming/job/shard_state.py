"""The stateful step of the job: one call per state shard per micro-batch.

It is what ``applyInPandasWithState`` runs, written over plain pandas and bytes so that
it is tested without Spark. Per call it:

1. restores the shard's ``ReplicationModel`` (``streaming.job.state_format`` in the group state);
2. reads the fetch packs (routing sends a shard its fetches packed) as columns, and
   orders them with the controller parts (``streaming.job.shard_events``); dead-letters
   late events (older than the shard's event-time watermark: the largest event time seen
   minus ``watermark_delay_ms``) and duplicate controller events;
3. applies the rest in event-time order (ties: Kafka topic, partition, offset, row of
   the pack);
4. evaluates every partition of the shard at ``now`` = the largest event time seen in
   the whole stream (Spark's watermark carries it, see ``clock_delay_ms``);
5. emits the health record of every healthy partition whose health changed (a tombstone
   for a partition that is gone), the dead letters (the record as it arrived, its reason,
   keyed by its Kafka coordinates: docs/event-contract.md#dead-letters), and one stats
   row: counters, gauges and the records of the unhealthy partitions, changed or not.
   The driver gives those their causes (``streaming.job.attribution``) and writes the
   changed ones, so that each record crosses Spark once and is encoded once.

Groups time out after every batch, so a shard with no new events is still evaluated:
a follower that stops fetching moves through LAGGING and SHRINK_ELIGIBLE by time alone.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from state import (
    BOOL,
    WIRE_COLUMNS,
    ApplyReport,
    HealthFrame,
    ReplicationModel,
    Shard,
    encode_record,
    fragile_entries,
    health_signatures,
    shape_of_model,
)
from state.events import DeadLetterReason, Source
from state.settings import RuleSettings
from streaming.job import shard_stats
from streaming.job.routing import DEAD, FETCH, conform
from streaming.job.shard_events import ShardEvents
from streaming.job.shard_gauges import broker_gauges, topic_gauges
from streaming.job.shard_snapshot import SIGNATURES
from streaming.job.shard_snapshot import ShardSnapshot as ShardSnapshot  # re-exported: its old home
from streaming.job.shard_stats import IsrTransitionCount, ShardStats, UnhealthyPartition
from streaming.job.state_format import legacy_signatures, read_snapshot, write_snapshot

HEALTH = "health"
TOMBSTONE = "tombstone"
STATS = "stats"

OUTPUT_SCHEMA = (
    "kind string, key string, value string, src_topic string, src_partition int, src_offset long"
)
OUTPUT_COLUMNS = [part.strip().split(" ")[0] for part in OUTPUT_SCHEMA.split(",")]
STATE_SCHEMA = "snapshot binary"

CLOCK_DELAY_MS = 30 * 24 * 3600 * 1000
"""Delay of Spark's own watermark. The job gives Spark a month so that Spark drops no
row as late (it would drop it silently); lateness is judged here, with the configured
delay, so that late events are counted and dead-lettered. Spark's watermark plus this
delay is then the largest event time of the previous batches in the whole stream."""


@dataclass(frozen=True)
class ShardJobSettings:
    rules: RuleSettings
    shards: int
    watermark_delay_ms: int
    snapshot_when_idle: bool = False  # --available-now: full snapshot in the flush batch


def restore_snapshot(stored: bytes, rules: RuleSettings) -> ShardSnapshot:
    """A shard's snapshot from Spark's group state, judged by this run's rules (a restart
    may change them; a snapshot of an older release kept the settings it was made with).
    Any format this release reads (``streaming.job.state_format``): a pickle of an earlier
    release is read once, and the batch writes it back in the current format."""
    with cyclic_gc_paused():  # a container per row, no cycles (see cyclic_gc_paused)
        return read_snapshot(stored, rules)


def save_snapshot(snapshot: ShardSnapshot) -> bytes:
    """What the group state keeps of a shard (``streaming.job.state_format``)."""
    with cyclic_gc_paused():
        return write_snapshot(snapshot)


def make_shard_function(
    settings: ShardJobSettings,
) -> Callable[[tuple[Any, ...], Iterator[pd.DataFrame], Any], Iterator[pd.DataFrame]]:
    """The function for ``applyInPandasWithState`` (group key: the shard index)."""

    def update(
        key: tuple[Any, ...], batches: Iterator[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        shard = int(key[0])
        snapshot = (
            restore_snapshot(state.get[0], settings.rules)
            if state.exists
            else ShardSnapshot(ReplicationModel(settings.rules, Shard(shard, settings.shards)))
        )
        watermark = state.getCurrentWatermarkMs()
        stream_clock = watermark + CLOCK_DELAY_MS if watermark > 0 else -1
        frames = [frame for frame in batches if len(frame)]
        rows = pd.concat(frames, ignore_index=True) if frames else None
        output = process(snapshot, rows, stream_clock, settings)
        state.update((save_snapshot(snapshot),))
        state.setTimeoutDuration(1)  # be called again next batch, events or not
        yield output

    return update


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Python's cycle collector off for a block that makes ~10^5 containers (a struct per
    record and follower) and leaves no cycles: each full collection would walk every live
    object, the shard's whole state included (a third of a batch's CPU when every
    partition changes, ``bench/batch_bench.py``). Reference counting still frees them."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def process(
    snapshot: ShardSnapshot,
    rows: pd.DataFrame | None,
    stream_clock_ms: int,
    settings: ShardJobSettings,
) -> pd.DataFrame:
    """One micro-batch of one shard: the body of the state function (see module doc)."""
    with cyclic_gc_paused():
        return _process(snapshot, rows, stream_clock_ms, settings)


def _process(
    snapshot: ShardSnapshot,
    rows: pd.DataFrame | None,
    stream_clock_ms: int,
    settings: ShardJobSettings,
) -> pd.DataFrame:
    out: list[dict[str, object]] = []
    report = ApplyReport()
    late = duplicates = 0
    if rows is not None:
        events = ShardEvents.of(rows)
        out += dead_letter_rows(events.dead)
        watermark = max(snapshot.clock_ms, stream_clock_ms) - settings.watermark_delay_ms
        is_late = events.ts < watermark
        # Every fetch counts here; of a controller event, the one part routing marked.
        counts = events.counts
        letters = _dead_letters(
            events,
            is_late & counts,
            DeadLetterReason.LATE,
            f"event time older than the watermark {watermark}",
        )
        late = len(letters)
        out += letters
        events = events.kept(~is_late)
        keep = _first_sightings(snapshot, events, watermark)
        letters = _dead_letters(
            events,
            ~keep & counts[~is_late],
            DeadLetterReason.DUPLICATE,
            "same controller event seen before",
        )
        duplicates = len(letters)
        out += letters
        events = events.kept(keep)
        report = snapshot.model.apply(events.model_input())
        snapshot.applied_total.update(report.applied)
        snapshot.fetch_error_responses_total += report.fetch_error_responses
        rejected = events.rows_at(list(report.rejected_ids))
        for row, reason in zip(rejected, report.rejected_reasons, strict=True):
            out.append(dead_letter_row(row, reason, "not applied"))
        if len(events):
            snapshot.clock_ms = max(snapshot.clock_ms, int(events.ts.max()))
    now = max(snapshot.clock_ms, stream_clock_ms)
    frame = snapshot.model.evaluate(now) if now >= 0 else None
    unhealthy: list[UnhealthyPartition] = []
    if frame is not None:
        idle = rows is None
        keys = [
            f"{topic}:{partition}"
            for topic, partition in zip(frame.topic, frame.partition.tolist(), strict=True)
        ]
        signatures = health_signatures(frame).tolist()
        changed = _changed(
            snapshot, frame, keys, signatures, full=settings.snapshot_when_idle and idle
        )
        unhealthy_rows = frame.unhealthy()
        out += _health_rows(frame, keys, changed & ~unhealthy_rows)
        out += [
            {"kind": TOMBSTONE, "key": key, "value": None}
            for key in sorted(snapshot.signatures.keys() - set(keys))  # partitions gone
        ]
        unhealthy = _unhealthy_partitions(frame, unhealthy_rows, changed)
        snapshot.signatures = dict(zip(keys, signatures, strict=True))
        snapshot.signature_scheme = SIGNATURES
    out.append(_stats_row(snapshot, frame, unhealthy, report, late, duplicates, now))
    return conform(pd.DataFrame(out, columns=OUTPUT_COLUMNS), OUTPUT_SCHEMA)


def _dead_letters(
    events: ShardEvents, which: BOOL, reason: DeadLetterReason, detail: str
) -> list[dict[str, object]]:
    """The dead letters of the events ``which`` marks, all for ``reason``."""
    return [
        dead_letter_row(row, reason, detail)
        for row in events.rows_at(np.flatnonzero(which).tolist())
    ]


def _first_sightings(snapshot: ShardSnapshot, events: ShardEvents, watermark: int) -> BOOL:
    """Controller events not seen before (within the watermark); fetches always pass.

    A producer that retries without idempotence writes the same controller event twice;
    applying an IsrChange twice would count the shrink twice. (A repeated fetch response
    changes no state: the fetch rule is idempotent.) Routing gives every part of an
    event the digest of its record; an epoch carrier has none.
    """
    seen = snapshot.seen_controller_events
    for digest, ts in list(seen.items()):
        if ts < watermark:
            del seen[digest]
    keep = np.ones(len(events), dtype=np.bool_)
    (digests, has_digest), times = events.digests, events.ts
    for i in np.flatnonzero(has_digest).tolist():
        digest = int(digests[i])
        if digest in seen:
            keep[i] = False
        else:
            seen[digest] = int(times[i])
    return keep


def _changed(
    snapshot: ShardSnapshot,
    frame: HealthFrame,
    keys: list[str],
    signatures: list[int],
    *,
    full: bool,
) -> BOOL:
    """The partitions whose health changed since the signatures kept (all with ``full``)."""
    if full:
        return np.ones(len(frame), dtype=np.bool_)
    kept = snapshot.signatures
    compared = signatures if snapshot.signature_scheme == SIGNATURES else legacy_signatures(frame)
    return np.fromiter(
        (kept.get(key) != signature for key, signature in zip(keys, compared, strict=True)),
        np.bool_,
        len(frame),
    )


def raw_text(row: pd.Series) -> str:
    """The record a dead letter holds: its raw text where it travelled (controller
    events, invalid records); a fetch travels as columns, rendered back as JSON."""
    if row["kind"] != FETCH:
        return str(row["value"])
    fields = {
        name: (int(row[name]) if name not in ("topic", "error") else row[name])
        for name in WIRE_COLUMNS
    }
    return json.dumps(fields, separators=(",", ":"))


MAX_DEAD_LETTER_RAW = 65_536
"""Characters of a record's raw text a dead letter holds. A dead letter must fit Kafka's
default 1 MB record: even at 12 bytes a character (``json.dumps`` escapes a character
outside the BMP as two ``\\uXXXX``) this is 786,432 bytes; the sink's producer refuses a
larger record, which would fail its batch again at every retry."""


def dead_letter_row(row: pd.Series, reason: DeadLetterReason, detail: str) -> dict[str, object]:
    """A dead letter, keyed by the Kafka coordinates of the record it holds, and the row
    of a fetch pack when it is one (docs/event-contract.md#dead-letters)."""
    topic, partition, offset = row["src_topic"], int(row["src_partition"]), int(row["src_offset"])
    pack_row = row.get("src_row")
    raw = raw_text(row)
    letter: dict[str, object] = {
        "source": row["source"] if row["kind"] != FETCH else Source.FETCH_RESPONSES.value,
        "reason": reason.value,
        "detail": detail,
        "raw": raw[:MAX_DEAD_LETTER_RAW],
        "topic": topic,
        "partition": partition,
        "offset": offset,
    }
    key = f"{topic}:{partition}:{offset}"
    if pack_row is not None and not pd.isna(pack_row):
        letter["row"] = int(pack_row)
        key += f":{int(pack_row)}"
    if len(raw) > MAX_DEAD_LETTER_RAW:
        letter["raw_length"] = len(raw)  # the record's length; ``raw`` is its beginning
    return {
        "kind": DEAD,
        "key": key,
        "value": json.dumps(letter),
        "src_topic": topic,
        "src_partition": partition,
        "src_offset": offset,
    }


def dead_letter_rows(rows: pd.DataFrame) -> list[dict[str, object]]:
    return [
        dead_letter_row(row, DeadLetterReason(row["reason"]), str(row["detail"]))
        for _, row in rows.iterrows()
    ]


def _health_rows(frame: HealthFrame, keys: list[str], written: BOOL) -> list[dict[str, object]]:
    """The records of the ``written`` partitions, as the topic carries them: healthy
    partitions, so they have no cause and the driver writes them as they are."""
    positions = np.flatnonzero(written).tolist()
    return [
        {"kind": HEALTH, "key": keys[i], "value": encode_record(record).decode()}
        for i, record in zip(positions, frame.records_at(positions), strict=True)
    ]


def _unhealthy_partitions(
    frame: HealthFrame, unhealthy_rows: BOOL, changed: BOOL
) -> list[UnhealthyPartition]:
    """The unhealthy partitions' records, for the driver to give them causes, and the
    leader's T, which the record leaves out and the metrics draw the shrink thresholds
    with."""
    positions = np.flatnonzero(unhealthy_rows).tolist()
    return [
        UnhealthyPartition(record=record, replica_lag_time_max_ms=lag_time_max, changed=changed_now)
        for record, lag_time_max, changed_now in zip(
            frame.records_at(positions),
            frame.lag_time_max_ms[positions].tolist(),
            changed[positions].tolist(),
            strict=True,
        )
    ]


def _stats_row(
    snapshot: ShardSnapshot,
    frame: HealthFrame | None,
    unhealthy: list[UnhealthyPartition],
    report: ApplyReport,
    late: int,
    duplicates: int,
    now: int,
) -> dict[str, object]:
    """Counters of this batch and gauges of the shard now, for the driver (ShardStats)."""
    shard = snapshot.model.shard.index if snapshot.model.shard else 0
    rules = snapshot.model.settings
    whole = frame is not None and len(frame) > 0
    stats = ShardStats(
        shard=shard,
        applied=dict(report.applied),
        applied_total=dict(snapshot.applied_total),
        fetch_error_responses=report.fetch_error_responses,
        fetch_error_responses_total=snapshot.fetch_error_responses_total,
        rejected={r.value: n for r, n in report.rejections_by_reason().items()},
        late=late,
        duplicates=duplicates,
        isr_transitions=[
            IsrTransitionCount(t.topic, t.leader, t.kind.value, t.by_controller)
            for t in report.isr_transitions
        ],
        propagation_delays_ms=report.propagation_delays_ms,
        bounced_brokers=report.bounced_brokers,
        clock_ms=snapshot.clock_ms,
        now_ms=now,
        partitions=0 if frame is None else len(frame),
        topics=topic_gauges(frame) if frame is not None and whole else {},
        brokers=broker_gauges(frame) if frame is not None and whole else {},
        unhealthy=unhealthy,
        cause_shape=shape_of_model(frame, snapshot.model).to_json()
        if frame is not None and whole
        else None,
        fragile=fragile_entries(frame) if frame is not None and whole else [],
        flapping=snapshot.model.flaps.recent(now, rules.flapping_window_ms),
    )
    return {"kind": STATS, "key": str(shard), "value": shard_stats.encode(stats)}
