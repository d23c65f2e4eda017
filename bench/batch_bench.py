"""CPU of one micro-batch's fixed costs at 100,000 partitions: the stateful step of every
shard and the driver's sink, next to the per-partition reference measured in the same run.

    python bench/batch_bench.py [--partitions 100000] [--shards 16] [--no-broker]

The costs that do not depend on the input rate: each shard evaluates all its partitions
every batch, decides which health records changed, writes those and reports its
statistics; the driver attributes causes over every shard's report and writes the
records to Kafka. Two batches, from the same state (every follower caught up):

* (a) 50,000 fetch responses in which few partitions' health changes;
* (b) a fetch response on every partition, 20 s later, behind the leader: every follower
  turns LAGGING, so every partition's health changes and every partition is unhealthy.

``reference`` is the code before ``state.health_signature`` (kept below, as it was): a
signature per partition (repr + blake2b), ``HealthFrame.record`` per partition, gauges
counted with Counters, ``json`` per record on the driver and kafka-python's
``KafkaProducer.send`` per record. ``now`` is this release's code on the same state and
events. Both must give the same output (checked: health records field for field, stats,
and the sink's records byte for byte). Printed: CPU seconds (``time.process_time``) summed
over the shards, and the sink's. The Kafka write goes to the embedded broker (both
producers, same records) unless ``--no-broker``; then a producer that drops records.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]

from state import (
    UNKNOWN_OFFSET,
    FollowerStatus,
    HealthFrame,
    HealthRecord,
    LagTimeUnknown,
    MetadataState,
    ReplicationModel,
    Shard,
    caught_up_known,
    shard_of,
    time_or_none,
    with_causes,
)
from state.events import LeaderAndIsr
from state.settings import RuleSettings
from streaming.job import shard_state
from streaming.job.attribution import CauseAnnotator, attribute_shards
from streaming.job.metrics import HealthExporter
from streaming.job.routing import (
    FETCH,
    ROUTED_ARROW_SCHEMA,
    _pandas_type,  # the frames Spark hands the state function
)
from streaming.job.shard_state import (
    HEALTH,
    STATS,
    TOMBSTONE,
    ShardJobSettings,
    ShardSnapshot,
    legacy_health_signature,
    process,
)
from streaming.job.shard_stats import BrokerGauges, ShardStats, TopicGauges, decode
from streaming.job.sinks import BatchSink

T0 = 1_700_000_000_000
TOPICS = 100
Partition = tuple[str, int, int]  # topic, partition, leader (followers: the next two)


# ----------------------------------------------------------------------------- input


def partitions_of(total: int, shard: Shard) -> list[Partition]:
    per = max(1, total // TOPICS)
    out = []
    for i in range(total):
        topic, number = f"topic-{i // per:03d}", i % per
        if shard_of(topic, number, shard.count) == shard.index:
            out.append((topic, number, i % 6))
    return out


def elected(parts: list[Partition], shard: Shard) -> ShardSnapshot:
    """A shard's snapshot after one LeaderAndIsr per partition (3 replicas, all in sync)."""
    model = ReplicationModel(RuleSettings(), shard)
    events = []
    for i, (topic, number, leader) in enumerate(parts):
        replicas = (leader, (leader + 1) % 6, (leader + 2) % 6)
        events.append(
            (
                i,
                LeaderAndIsr(
                    ts=T0,
                    topic=topic,
                    partition=number,
                    leader=leader,
                    leader_epoch=0,
                    isr=replicas,
                    replicas=replicas,
                    partition_epoch=0,
                ),
            )
        )
    model.apply(events)
    return ShardSnapshot(model)


def fetches(
    parts: list[Partition],
    picks: np.ndarray,
    follower: np.ndarray,
    ts: np.ndarray,
    leo: int,
    offset: int,
) -> pd.DataFrame:
    """Routed fetch rows, as the state function gets them from Spark."""
    count = len(picks)
    leaders = np.asarray([p[2] for p in parts], dtype=np.int64)[picks]
    columns: dict[str, Any] = {
        "shard": np.zeros(count, np.int32),
        "kind": [FETCH] * count,
        "ts": ts,
        "src_topic": ["fetch-responses"] * count,
        "src_partition": np.zeros(count, np.int32),
        "src_offset": np.arange(count),
        "topic": [parts[i][0] for i in picks.tolist()],
        "partition": np.asarray([parts[i][1] for i in picks.tolist()], dtype=np.int64),
        "leader": leaders,
        "follower": (leaders + follower) % 6,
        "leader_epoch": np.zeros(count, np.int64),
        "fetch_offset": np.full(count, offset),
        "leader_leo": np.full(count, leo),
        "high_watermark": np.full(count, offset),
        "error": ["NONE"] * count,
    }
    arrays = [
        pa.array(columns[f.name], f.type) if f.name in columns else pa.nulls(count, f.type)
        for f in ROUTED_ARROW_SCHEMA
    ]
    batch = pa.RecordBatch.from_arrays(arrays, schema=ROUTED_ARROW_SCHEMA)
    frame: pd.DataFrame = batch.to_pandas(types_mapper=_pandas_type)
    return frame


def warm_rows(parts: list[Partition]) -> pd.DataFrame:
    """Every follower at the leader's LEO at T0 + 15 s (1 % of them at T0 + 1 s)."""
    n = len(parts)
    every = np.concatenate([np.arange(n), np.arange(n)])
    ts = np.full(2 * n, T0 + 15_000, dtype=np.int64)
    ts[: n // 100] = T0 + 1_000
    follower = np.repeat([1, 2], n)
    return fetches(parts, every, follower, ts, 1_000, 1_000)


def batch_a(parts: list[Partition], count: int) -> tuple[pd.DataFrame, int]:
    """``count`` followers caught up again 1.5 s later: only the 1 % left behind can
    change."""
    rng = np.random.default_rng(1)
    picks = rng.integers(0, len(parts), count)
    now = T0 + 16_500
    ts = np.full(count, now, dtype=np.int64)
    return fetches(parts, picks, rng.integers(1, 3, count), ts, 2_000, 2_000), now


def batch_b(parts: list[Partition]) -> tuple[pd.DataFrame, int]:
    """20 s later, a fetch on every partition behind its leader: every follower LAGGING."""
    count = len(parts)
    picks = np.arange(count) % len(parts)
    now = T0 + 35_000
    ts = np.full(count, now, dtype=np.int64)
    return fetches(parts, picks, np.ones(count, np.int64), ts, 5_000, 1_500), now


# ------------------------------------------- the reference: the code before this release


def reference_record(frame: HealthFrame, i: int) -> HealthRecord:
    """``HealthFrame.record`` as it was: one partition at a time."""
    leader_leo = int(frame.leader_leo[i])
    caught_up = caught_up_known(frame.follower_last_caught_up_ms[i])
    followers = []
    for k in np.flatnonzero(frame.follower_status[i] >= 0).tolist():
        status = FollowerStatus(int(frame.follower_status[i, k]))
        offset = int(frame.follower_fetch_offset[i, k])
        lag_known = bool(frame.follower_lag_time_known[i, k])
        follower: HealthRecord = {
            "broker": int(frame.follower_broker[i, k]),
            "in_isr": bool(frame.follower_in_isr[i, k]),
            "fetch_offset": None if offset == UNKNOWN_OFFSET else offset,
            "last_caught_up_ms": time_or_none(frame.follower_last_caught_up_ms[i, k], caught_up[k]),
            "lag_time_ms": time_or_none(frame.follower_lag_time_ms[i, k], lag_known),
            "lag_time_unknown": None if lag_known else LagTimeUnknown.NEVER_CAUGHT_UP.value,
            "lag_messages": None if offset == UNKNOWN_OFFSET else max(0, leader_leo - offset),
            "status": status.name,
        }
        if status in (FollowerStatus.SHRINK_ELIGIBLE, FollowerStatus.SHRINK_OVERDUE):
            follower["shrink_by_ms"] = time_or_none(
                frame.follower_shrink_by_ms[i, k], frame.follower_shrink_by_known[i, k]
            )
        followers.append(follower)
    return {
        "topic": frame.topic[i],
        "partition": int(frame.partition[i]),
        "as_of_ms": frame.as_of_ms,
        "leader": int(frame.leader[i]),
        "leader_epoch": int(frame.leader_epoch[i]),
        "replicas": list(frame.replicas[i]),
        "isr": list(frame.isr[i]),
        "min_insync_replicas": int(frame.min_insync_replicas[i]),
        "high_watermark": int(frame.high_watermark[i]),
        "leader_leo": leader_leo,
        "under_replicated": bool(frame.under_replicated[i]),
        "under_min_isr": bool(frame.under_min_isr[i]),
        "at_min_isr": bool(frame.at_min_isr[i]),
        "offline": bool(frame.offline[i]),
        "predicted_under_replicated": bool(frame.predicted_under_replicated[i]),
        "followers": followers,
        "metadata": {
            "stale_brokers": frame.stale_brokers[i],
            "state": MetadataState(int(frame.metadata_state[i])).name,
            "blackout_earliest_ms": frame.blackout_earliest_ms[i],
            "blackout_latest_ms": frame.blackout_latest_ms[i],
        },
    }


def reference_health_rows(
    snapshot: ShardSnapshot, frame: HealthFrame, _records: Any, *, full: bool
) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    current: dict[str, int] = {}
    for i in range(len(frame)):
        key = f"{frame.topic[i]}:{int(frame.partition[i])}"
        signature = legacy_health_signature(frame, i)
        current[key] = signature
        if full or snapshot.signatures.get(key) != signature:
            text = json.dumps(reference_record(frame, i))
            out.append({"kind": HEALTH, "key": key, "value": text})
    for key in snapshot.signatures.keys() - current.keys():
        out.append({"kind": TOMBSTONE, "key": key, "value": None})
    snapshot.signatures = current
    return out


def reference_broker_gauges(frame: HealthFrame) -> dict[str, BrokerGauges]:
    followers: dict[str, Counter[str]] = {}
    leads: dict[str, Counter[str]] = {}
    statuses = frame.follower_status
    hosted = statuses >= 0
    for broker, status in zip(
        frame.follower_broker[hosted].tolist(), statuses[hosted].tolist(), strict=True
    ):
        followers.setdefault(str(broker), Counter())[FollowerStatus(int(status)).name] += 1
    conditions = {
        "partitions": np.ones(len(frame), dtype=np.bool_),
        "under_replicated": frame.under_replicated,
        "under_min_isr": frame.under_min_isr,
        "offline": frame.offline,
        "predicted_under_replicated": frame.predicted_under_replicated,
    }
    for condition, mask in conditions.items():
        for leader, count in Counter(frame.leader[mask].tolist()).items():
            leads.setdefault(str(leader), Counter())[condition] = count
    return {
        broker: BrokerGauges(
            followers=dict(followers.get(broker, {})), leads=dict(leads.get(broker, {}))
        )
        for broker in followers.keys() | leads.keys()
    }


def reference_topic_gauges(frame: HealthFrame) -> dict[str, TopicGauges]:
    gauges: dict[str, TopicGauges] = {}
    topics = np.asarray(frame.topic, dtype=object)
    for topic in sorted(set(frame.topic)):
        mine = topics == topic
        statuses = frame.follower_status[mine]
        counts = Counter(FollowerStatus(int(s)).name for s in statuses[statuses >= 0].tolist())
        metadata = frame.metadata_state[mine]
        gauges[topic] = TopicGauges(
            partitions=int(mine.sum()),
            under_replicated=int(frame.under_replicated[mine].sum()),
            under_min_isr=int(frame.under_min_isr[mine].sum()),
            at_min_isr=int(frame.at_min_isr[mine].sum()),
            offline=int(frame.offline[mine].sum()),
            predicted_under_replicated=int(frame.predicted_under_replicated[mine].sum()),
            followers=dict(counts),
            metadata_stale_expected=int((metadata == MetadataState.STALE_EXPECTED).sum()),
            metadata_stale_overdue=int((metadata == MetadataState.STALE_OVERDUE).sum()),
        )
    return gauges


class _ReferenceRecords:
    """The shard's records, one ``reference_record`` call per use (as before)."""

    def __init__(self, frame: HealthFrame | None) -> None:
        self.frame = frame

    def at(self, positions: Sequence[int]) -> list[HealthRecord]:
        assert self.frame is not None
        return [reference_record(self.frame, i) for i in positions]


@contextmanager
def reference_shards() -> Iterator[None]:
    """``shard_state.process`` with the per-partition code of the release before."""
    replaced = {
        "_health_rows": reference_health_rows,
        "_Records": _ReferenceRecords,
        "_broker_gauges": reference_broker_gauges,
        "_topic_gauges": reference_topic_gauges,
    }
    kept = {name: getattr(shard_state, name) for name in replaced}
    for name, function in replaced.items():
        setattr(shard_state, name, function)
    try:
        yield
    finally:
        for name, function in kept.items():
            setattr(shard_state, name, function)


def reference_process(
    snapshot: ShardSnapshot, rows: pd.DataFrame, clock: int, settings: ShardJobSettings
) -> pd.DataFrame:
    """``process`` as it was: with Python's cycle collector on."""
    frame: pd.DataFrame = shard_state._process(snapshot, rows, clock, settings)
    return frame


class ReferenceAnnotator(CauseAnnotator):
    """``CauseAnnotator.annotate`` as it was: json per record, JSON text signatures."""

    def annotate(self, health: pd.DataFrame, stats: Sequence[ShardStats]) -> Any:
        reported, attribution = attribute_shards(stats)
        records = [{k: v for k, v in r.items() if k != "replica_lag_time_max_ms"} for r in reported]
        causes = attribution.causes_by_partition()
        written: dict[str, str] = self.__dict__.setdefault("_reference_written", {})
        out_keys: list[str] = []
        out_kinds: list[str] = []
        out_values: list[str | None] = []

        def emit(key: str, record: Mapping[str, Any]) -> None:
            annotated = with_causes(record, causes.get((record["topic"], record["partition"])))
            out_keys.append(key)
            out_kinds.append(HEALTH)
            out_values.append(json.dumps(annotated))
            if annotated["cause"] is None:
                written.pop(key, None)
            else:
                written[key] = _text_signature(annotated)

        for kind, key, value in zip(health["kind"], health["key"], health["value"], strict=True):
            if kind == TOMBSTONE:
                out_keys.append(key)
                out_kinds.append(TOMBSTONE)
                out_values.append(None)
                written.pop(key, None)
            else:
                emit(key, json.loads(value))
        seen = set(out_keys)
        for record in records:
            key = f"{record['topic']}:{record['partition']}"
            if key in seen:
                continue
            annotated = with_causes(record, causes.get((record["topic"], record["partition"])))
            if written.get(key) != _text_signature(annotated):
                emit(key, record)
        frame = pd.DataFrame({"kind": out_kinds, "key": out_keys, "value": out_values})
        return frame, attribution


def _text_signature(record: Mapping[str, Any]) -> str:
    followers = [(f["broker"], f["cause"]) for f in record["followers"]]
    return json.dumps([record["cause"], followers], sort_keys=True)


REFERENCE_FLUSH_TIMEOUT_S = 900
"""The sink waited 60 s; kafka-python needed more than that for 100,000 records on a
loaded machine (load average 22), which failed the batch: the bench waits longer."""


class ReferenceSink(BatchSink):
    """The sink as it was: kafka-python, one ``send`` (and one future) per record; the
    cycle collector on."""

    def write(self, batch_id: int, rows: pd.DataFrame, started: float) -> None:
        self._write(batch_id, rows, started)

    def _send(self, health: pd.DataFrame, dead: pd.DataFrame) -> None:
        if self._producer_factory is None or (health.empty and dead.empty):
            return
        if self._producer is None:
            self._producer = self._producer_factory()
        producer: Any = self._producer
        futures = [
            producer.send(topic, key=key.encode(), value=None if value is None else value.encode())
            for topic, frame in ((self.health_topic, health), (self.dead_letter_topic, dead))
            for key, value in zip(frame["key"], frame["value"], strict=True)
        ]
        producer.flush(timeout=REFERENCE_FLUSH_TIMEOUT_S)
        for future in futures:
            future.get(timeout=0)

    def close(self) -> None:
        if self._producer is not None:
            producer: Any = self._producer
            producer.close(timeout=10)
            self._producer = None


class _Dropped:
    def get(self, timeout: float = 0) -> None:
        return None


class DroppingProducer:
    """Takes records and drops them (both producers' interfaces): the sink's CPU alone."""

    def send(self, topic: str, key: bytes, value: bytes | None) -> _Dropped:
        return _Dropped()

    def produce(self, topic: str, key: bytes, value: bytes | None, on_delivery: Any) -> None:
        pass

    def flush(self, timeout: float = 0) -> int:
        return 0

    def close(self, timeout: float = 0) -> None:
        pass


# ------------------------------------------------------------------------------- run


def cpu(action: Callable[[], Any]) -> tuple[float, Any]:
    started = time.process_time()
    result = action()
    return time.process_time() - started, result


def comparable(output: pd.DataFrame) -> tuple[dict[str, Any], list[ShardStats]]:
    """A shard output's health records (parsed: the shard's text is for the driver only)
    and tombstones by key, and its stats."""
    rows = output[output["kind"].isin([HEALTH, TOMBSTONE])]
    records = {
        key: None if value is None else json.loads(value)
        for key, value in zip(rows["key"], rows["value"], strict=True)
    }
    return records, [decode(v) for v in output[output["kind"] == STATS]["value"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--no-broker", action="store_true", help="drop records, no Kafka")
    args = parser.parse_args()
    print(
        f"batch bench: {args.partitions:,} partitions x 3 replicas in {args.shards} state "
        f"shards; load average {os.getloadavg()[0]:.1f}"
    )
    settings = ShardJobSettings(RuleSettings(), args.shards, 60_000)
    started = time.process_time()
    shards = []
    for index in range(args.shards):
        shard = Shard(index, args.shards)
        parts = partitions_of(args.partitions, shard)
        snapshot = elected(parts, shard)
        warm = warm_rows(parts)
        pickled = pickle.dumps(snapshot)
        process(snapshot, warm, -1, settings)
        reference = pickle.loads(pickled)
        with reference_shards():
            process(reference, warm, -1, settings)
        shards.append((parts, pickle.dumps(snapshot), pickle.dumps(reference)))
    print(f"  setup (elections, first batch): {time.process_time() - started:.1f} s CPU")

    outputs: dict[str, list[pd.DataFrame]] = {}
    print("\n  stateful step, CPU s per batch summed over the shards   reference      now")
    share = partial(batch_a, count=50_000 // args.shards)  # 50,000 in all
    for name, make in (
        ("(a) 50,000 fetches, few changes", share),
        ("(b) every partition changes", batch_b),
    ):
        spent = {"reference": 0.0, "now": 0.0}
        outs: dict[str, list[pd.DataFrame]] = {"reference": [], "now": []}
        for parts, now_state, reference_state in shards:
            rows, clock = make(parts)
            now, reference = pickle.loads(now_state), pickle.loads(reference_state)
            used, out = cpu(lambda: process(now, rows, clock, settings))  # noqa: B023
            spent["now"] += used
            outs["now"].append(out)
            with reference_shards():
                used, out = cpu(lambda: reference_process(reference, rows, clock, settings))  # noqa: B023
            spent["reference"] += used
            outs["reference"].append(out)
        same = all(
            comparable(a) == comparable(b)
            for a, b in zip(outs["now"], outs["reference"], strict=True)
        )
        written = sum(int((o["kind"] == HEALTH).sum()) for o in outs["now"])
        print(
            f"  {name:38s} {spent['reference']:8.2f} {spent['now']:8.2f}  "
            f"x{spent['reference'] / spent['now']:.1f}; {written:,} records; "
            f"same output: {'yes' if same else 'NO'}"
        )
        outputs[name] = outs["now"]

    sink_bench(outputs, not args.no_broker)


def sink_bench(outputs: dict[str, list[pd.DataFrame]], with_broker: bool) -> None:
    broker: Any = None
    dropping: dict[str, Callable[[], Any]] = {
        "reference": DroppingProducer,
        "now": DroppingProducer,
    }
    factories = dropping
    if with_broker:
        from kafka import KafkaProducer

        from streaming.config import KafkaSettings
        from streaming.job.sinks import kafka_producer
        from streaming.tools.embedded_broker import EmbeddedBroker

        broker = EmbeddedBroker().start()
        broker.create_topics(["partition-health", "dead-letters"])
        servers = broker.bootstrap_servers
        factories = {
            "reference": lambda: KafkaProducer(bootstrap_servers=servers, acks="all", linger_ms=20),
            "now": lambda: kafka_producer(KafkaSettings(bootstrap_servers=servers)),
        }
    where = "the embedded broker" if with_broker else "a producer that drops them"
    print(f"\n  sink (driver), CPU s per batch, records written to {where}")
    print(f"  {'':38s} {'reference':>9s} {'now':>8s}")
    try:
        for name, shard_outputs in outputs.items():
            batch = pd.concat(shard_outputs, ignore_index=True)
            spent: dict[str, float] = {}
            wall: dict[str, float] = {}
            written: dict[str, list[str | None]] = {}
            for side, kind in (("reference", ReferenceSink), ("now", BatchSink)):
                sink = kind(factories[side], "partition-health", "dead-letters", HealthExporter())
                if side == "reference":
                    sink.causes = ReferenceAnnotator()
                kept = sink.causes.annotate

                def keep(
                    health: pd.DataFrame,
                    stats: Sequence[ShardStats],
                    side: str = side,
                    kept: Any = kept,
                    written: dict[str, Any] = written,
                ) -> Any:
                    annotated, attribution = kept(health, stats)
                    written[side] = list(annotated["value"])
                    return annotated, attribution

                sink.causes.annotate = keep  # type: ignore[method-assign]
                started = time.monotonic()
                spent[side], _ = cpu(lambda: sink.write(0, batch, time.monotonic()))  # noqa: B023
                wall[side] = time.monotonic() - started
                sink.close()
            same = written["now"] == written["reference"]
            records = len(written["now"])
            print(
                f"  {name:38s} {spent['reference']:9.2f} {spent['now']:8.2f}  "
                f"(wall {wall['reference']:.1f} / {wall['now']:.1f} s); "
                f"{records:,} records; same bytes: {'yes' if same else 'NO'}"
            )
    finally:
        if broker is not None:
            broker.stop()
    print(f"  load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
