"""The job's routing and stateful step, without Spark: the same functions Spark calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from state import HealthRecord, decode_record
from state.events import Source
from state.fetch_pack import encode_fetch_pack
from state.settings import RuleSettings
from streaming.job.attribution import CauseAnnotator
from streaming.job.routing import DEAD, route
from streaming.job.shard_state import (
    HEALTH,
    STATS,
    TOMBSTONE,
    ShardJobSettings,
    ShardSnapshot,
    process,
    restore_snapshot,
)
from streaming.job.sinks import shard_stats_of
from streaming.job.state_format import write_snapshot
from streaming.tools.replay import replay

SAMPLE = Path(__file__).resolve().parents[2] / "conf" / "samples" / "incident.jsonl"
SOURCES = {s.value: s for s in Source}
B = 1_700_000_000_000


def kafka_records(envelopes: list[dict[str, Any]]) -> pd.DataFrame:
    """The records as Spark's Kafka source gives them: one partition per topic."""
    offsets = {s.value: 0 for s in Source}
    rows = []
    for envelope in envelopes:
        topic = envelope["source"]
        value = envelope["value"]
        raw = value if isinstance(value, bytes) else json.dumps(value).encode()
        ts = value.get("ts", 0) if isinstance(value, dict) else 0
        rows.append(
            {
                "key": None,
                "value": raw,
                "topic": topic,
                "partition": 0,
                "offset": offsets[topic],
                "timestamp": pd.Timestamp(ts, unit="ms"),
                "timestampType": 0,
            }
        )
        offsets[topic] += 1
    return pd.DataFrame(rows)


class Job:
    """The stateful step of every shard, with state stored between batches as the job
    stores it in Spark's group state (``streaming.job.state_format``)."""

    def __init__(self, shards: int, snapshot_when_idle: bool = True, **rules: Any) -> None:
        self.settings = ShardJobSettings(RuleSettings(**rules), shards, 60_000, snapshot_when_idle)
        self.states: dict[int, bytes] = {}
        self.stream_clock = -1

    def batch(self, records: pd.DataFrame | None) -> pd.DataFrame:
        routed = route(records, SOURCES, self.settings.shards) if records is not None else None
        outputs = []
        for shard in range(self.settings.shards):
            rows = None if routed is None else routed[routed["shard"] == shard]
            snapshot = (
                restore_snapshot(self.states[shard], self.settings.rules)
                if shard in self.states
                else ShardSnapshot(_model(self.settings, shard))
            )
            outputs.append(
                process(
                    snapshot,
                    rows if rows is not None and len(rows) else None,
                    self.stream_clock,
                    self.settings,
                )
            )
            self.states[shard] = write_snapshot(snapshot)
        if routed is not None and len(routed):
            self.stream_clock = max(self.stream_clock, int(routed["ts"].max()))
        return pd.concat(outputs, ignore_index=True)


def _model(settings: ShardJobSettings, shard: int):  # type: ignore[no-untyped-def]
    from state import ReplicationModel, Shard

    return ReplicationModel(settings.rules, Shard(shard, settings.shards))


def health(output: pd.DataFrame) -> dict[str, HealthRecord]:
    """The record of every partition whose health changed: a healthy one's health row, an
    unhealthy one's record in the stats (the driver writes it, with its causes)."""
    rows = output[output["kind"] == HEALTH]
    records = {
        key: decode_record(value) for key, value in zip(rows["key"], rows["value"], strict=True)
    }
    for stats in shard_stats_of(output):
        records.update((p.record.key, p.record) for p in stats.unhealthy if p.changed)
    return records


def sample_envelopes() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines()]


@pytest.mark.parametrize("shards", [1, 3])
def test_flushed_job_equals_replay(shards: int) -> None:
    envelopes = sample_envelopes()
    with SAMPLE.open() as lines:
        expected = {r.key: r for r in replay(lines, RuleSettings(), None).records}
    job = Job(shards)
    first = job.batch(kafka_records(envelopes[:70]))
    second = job.batch(kafka_records(envelopes[70:]))
    flush = job.batch(None)  # the no-data batch: every shard evaluates at the stream clock
    # the driver attributes causes over every shard's report, as replay does over all
    annotated, _ = CauseAnnotator().annotate(
        flush[flush["kind"].isin([HEALTH, TOMBSTONE])], shard_stats_of(flush)
    )
    assert health(annotated) == expected
    # The story's end: orders-1 (led by broker 2) is under-replicated; broker 2's replica
    # of orders-0 is LAGGING; brokers 1-3 lead 2, 1 and 0 of the 3 partitions.
    brokers = [json.loads(v)["brokers"] for v in flush[flush["kind"] == STATS]["value"]]
    led: dict[tuple[str, str], int] = {}
    hosted: dict[tuple[str, str], int] = {}
    for shard in brokers:
        for broker, gauges in shard.items():
            for condition, count in gauges["leads"].items():
                led[(broker, condition)] = led.get((broker, condition), 0) + count
            for status, count in gauges["followers"].items():
                hosted[(broker, status)] = hosted.get((broker, status), 0) + count
    assert led == {("1", "partitions"): 2, ("2", "partitions"): 1, ("2", "under_replicated"): 1}
    assert hosted[("2", "LAGGING")] == 1
    dead = pd.concat([first, second])
    letters = [json.loads(v) for v in dead[dead["kind"] == DEAD]["value"]]
    assert [(d["source"], d["reason"]) for d in letters] == [
        ("fetch-responses", "stale_leader_epoch")
    ]


def test_only_changed_partitions_are_emitted_while_running() -> None:
    job = Job(2, snapshot_when_idle=False)
    envelopes = sample_envelopes()
    job.batch(kafka_records(envelopes))
    again = job.batch(None)  # nothing happened, the clock did not move
    assert health(again) == {}
    assert (again["kind"] == STATS).sum() == 2


def test_silent_follower_moves_by_time_alone() -> None:
    job = Job(2, snapshot_when_idle=False)
    start = [
        {
            "source": "controller-events",
            "value": {
                "type": "LeaderAndIsr",
                "ts": B,
                "topic": "t",
                "partition": 0,
                "leader": 1,
                "leader_epoch": 0,
                "isr": [1, 2],
                "replicas": [1, 2],
                "partition_epoch": 0,
            },
        },
        {
            "source": "fetch-responses",
            "value": {
                "ts": B + 1_000,
                "topic": "t",
                "partition": 0,
                "leader": 1,
                "follower": 2,
                "leader_epoch": 0,
                "fetch_offset": 10,
                "leader_leo": 20,
                "high_watermark": 10,
            },
        },
    ]
    job.batch(kafka_records(start))
    statuses = []
    for now in (B + 15_001, B + 30_001, B + 45_001):
        job.stream_clock = now  # Spark's watermark moved: events on other partitions
        record = health(job.batch(None)).get("t:0")
        statuses.append(record.followers[0].status if record else None)
    # Follower 2 was caught up at the election (B), as every ISR member then.
    assert statuses == ["LAGGING", "SHRINK_ELIGIBLE", "SHRINK_OVERDUE"]


def leader_and_isr(leader_epoch: int) -> dict[str, Any]:
    """Broker 1 elected leader of t-0 at B + 100 s, replicas and ISR [1, 2]."""
    return {
        "source": "controller-events",
        "value": {
            "type": "LeaderAndIsr",
            "ts": B + 100_000,
            "topic": "t",
            "partition": 0,
            "leader": 1,
            "leader_epoch": leader_epoch,
            "isr": [1, 2],
            "replicas": [1, 2],
            "partition_epoch": 0,
        },
    }


def test_bad_late_and_duplicate_records_are_dead_letters_counted_once() -> None:
    job = Job(3, snapshot_when_idle=False)
    election = leader_and_isr(leader_epoch=0)
    bad = {"source": "fetch-responses", "value": b"{not json"}
    first = job.batch(kafka_records([election, bad]))
    late_fetch = {
        "source": "fetch-responses",
        "value": {
            "ts": B,
            "topic": "t",
            "partition": 0,
            "leader": 1,
            "follower": 2,
            "leader_epoch": 0,
            "fetch_offset": 1,
            "leader_leo": 1,
            "high_watermark": 1,
        },
    }
    second = job.batch(kafka_records([election, late_fetch]))  # election again: a duplicate
    letters = [json.loads(v) for out in (first, second) for v in out[out["kind"] == DEAD]["value"]]
    assert sorted(d["reason"] for d in letters) == ["duplicate", "invalid_json", "late"]
    stats = [json.loads(v) for v in second[second["kind"] == STATS]["value"]]
    assert sum(s["duplicates"] for s in stats) == 1
    assert sum(s["late"] for s in stats) == 1
    assert sum(s["applied"].get("LeaderAndIsr", 0) for s in stats) == 0


def test_each_dead_row_of_a_fetch_pack_is_a_letter_keyed_by_its_row() -> None:
    """A pack is one Kafka record of many fetches: each of its rows that is not applied
    is a dead letter of its own, keyed and marked by its row (docs/event-contract.md),
    whichever step refused it (the pack reader, the watermark, the model)."""
    job = Job(1, snapshot_when_idle=False)
    election = leader_and_isr(leader_epoch=3)
    job.batch(kafka_records([election]))
    fetch = {
        "ts": B + 101_000,
        "topic": "t",
        "partition": 0,
        "leader": 1,
        "follower": 2,
        "leader_epoch": 3,
        "fetch_offset": 1,
        "leader_leo": 1,
        "high_watermark": 1,
    }
    pack = encode_fetch_pack(
        [
            fetch,  # row 0: applied
            {**fetch, "fetch_offset": -5},  # row 1: out of range (the pack reader)
            {**fetch, "ts": B},  # row 2: older than the watermark (the job)
            {**fetch, "leader_epoch": 2},  # row 3: an older epoch (the model)
        ]
    )
    out = job.batch(kafka_records([{"source": "fetch-responses", "value": pack}]))
    dead = out[out["kind"] == DEAD]
    letters = {
        key: json.loads(value) for key, value in zip(dead["key"], dead["value"], strict=True)
    }
    assert {key: (d["reason"], d["row"]) for key, d in letters.items()} == {
        "fetch-responses:0:0:1": ("invalid_value", 1),
        "fetch-responses:0:0:2": ("late", 2),
        "fetch-responses:0:0:3": ("stale_leader_epoch", 3),
    }
    assert json.loads(letters["fetch-responses:0:0:3"]["raw"])["leader_epoch"] == 2


def test_deleted_topic_leaves_a_tombstone() -> None:
    job = Job(1, snapshot_when_idle=False)
    envelopes = sample_envelopes()
    job.batch(kafka_records(envelopes))
    deletion = {
        "source": "controller-events",
        "value": {
            "type": "TopicChange",
            "ts": B + 100_000,
            "created": {},
            "deleted": ["payments"],
        },
    }
    out = job.batch(kafka_records([deletion]))
    assert list(out[out["kind"] == TOMBSTONE]["key"]) == ["payments:0"]


def follower_behind_a_short_t() -> list[dict[str, Any]]:
    """t:0's follower 2 is 12 s behind its leader 1, whose T is 10 s (SHRINK_ELIGIBLE until
    15 s after the election at B); t:1 is in sync (default T)."""
    return [
        {
            "source": "controller-events",
            "value": {
                "type": "BrokerConfig",
                "ts": B,
                "broker": 1,
                "replica_lag_time_max_ms": 10_000,
            },
        },
        {
            "source": "controller-events",
            "value": {
                "type": "LeaderAndIsr",
                "ts": B,
                "topic": "t",
                "partition": 0,
                "leader": 1,
                "leader_epoch": 0,
                "isr": [1, 2],
                "replicas": [1, 2],
                "partition_epoch": 0,
            },
        },
        {
            "source": "controller-events",
            "value": {
                "type": "LeaderAndIsr",
                "ts": B,
                "topic": "t",
                "partition": 1,
                "leader": 2,
                "leader_epoch": 0,
                "isr": [2, 1],
                "replicas": [2, 1],
                "partition_epoch": 0,
            },
        },
        {
            "source": "fetch-responses",
            "value": {
                "ts": B + 12_000,
                "topic": "t",
                "partition": 0,
                "leader": 1,
                "follower": 2,
                "leader_epoch": 0,
                "fetch_offset": 10,
                "leader_leo": 20,
                "high_watermark": 10,
            },
        },
        {
            "source": "fetch-responses",
            "value": {
                "ts": B + 12_000,
                "topic": "t",
                "partition": 1,
                "leader": 2,
                "follower": 1,
                "leader_epoch": 0,
                "fetch_offset": 20,
                "leader_leo": 20,
                "high_watermark": 20,
            },
        },
    ]


def test_unhealthy_partitions_in_the_stats_carry_their_leaders_lag_time_max() -> None:
    job = Job(1, snapshot_when_idle=False)
    events = follower_behind_a_short_t()
    out = job.batch(kafka_records(events))
    (stats,) = shard_stats_of(out)
    # t:0's follower 2 is 12 s behind its leader's T of 10 s; t:1 is in sync (default T).
    assert [(p.record.key, p.replica_lag_time_max_ms) for p in stats.unhealthy] == [("t:0", 10_000)]
    assert stats.unhealthy[0].record.followers[0].status == "SHRINK_ELIGIBLE"
