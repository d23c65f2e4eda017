"""``isrwatch check restart``: the rule on hand-built partitions, the simulator's clusters,
the command (file input, --wait, exit codes) and the exporter's /check/restart."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from state import HealthRecord, IsrAtRisk, encode_record
from state.health_record import StatusName
from state.restart_check import breakage, check_restart, fragile_entries
from state.settings import RuleSettings
from streaming.cli import main
from streaming.feeds.simulator import ClusterSimulator, load_scenario
from streaming.job.exporter_http import ExporterServer
from streaming.job.metrics import HealthExporter
from streaming.tools.embedded_broker import free_port
from streaming.tools.replay import replay
from tests.unit.builders import apply, fetch, leader_and_isr, model, partition_health
from tests.unit.test_causes_simulated import simulate_model
from tests.unit.test_metrics import shard_stats

START_MS = 1_700_000_000_000


def record(
    isr: list[int],
    minimum: int,
    statuses: dict[int, StatusName] | None = None,
    leader: int = 1,
    partition: int = 0,
    silent_since: int | None = None,
) -> HealthRecord:
    return partition_health(
        statuses or {},
        topic="t",
        partition=partition,
        leader=leader,
        isr=isr,
        replicas=sorted({leader, *isr, *(statuses or {})}),
        min_insync_replicas=minimum,
        leader_silent_since_ms=silent_since,
    )


@pytest.mark.parametrize(
    ("partition", "stop", "becomes", "after"),
    [
        # ISR of 3, min 2: one stop leaves 2, enough
        (record([1, 2, 3], 2, {2: "IN_SYNC", 3: "IN_SYNC"}), 3, None, None),
        # a LAGGING follower is still there
        (record([1, 2, 3], 2, {2: "LAGGING", 3: "IN_SYNC"}), 3, None, None),
        # a SHRINK_ELIGIBLE follower is as good as gone: [1, 3] - 3 = [1] < 2
        (record([1, 2, 3], 2, {2: "SHRINK_ELIGIBLE", 3: "IN_SYNC"}), 3, "under_min_isr", [1]),
        # at min ISR (3 of min 3): any member's stop puts it under
        (record([1, 2, 3], 3, {2: "IN_SYNC", 3: "IN_SYNC"}), 2, "under_min_isr", [1, 3]),
        # the leader is the last one standing once the overdue follower goes: offline
        (record([1, 2], 1, {2: "SHRINK_OVERDUE"}), 1, "offline", []),
        # an ISR of 1 with min 1: stopping it leaves nobody to elect
        (record([2], 1, {3: "OUT_OF_SYNC"}, leader=2), 2, "offline", []),
        # a broker outside the ISR changes nothing
        (record([2], 1, {3: "OUT_OF_SYNC"}, leader=2), 3, None, None),
        # already gone from the ISR (about to be shrunk): stopping it changes nothing
        (record([1, 2], 2, {2: "SHRINK_OVERDUE"}), 2, None, None),
        # a silent leader (docs/domain.md#silent-leader) is fenced, or back to remove its
        # followers behind it: [1, 2, 3] counts as [2] (3 is LAGGING, 100 behind), and
        # stopping 2 leaves nobody to elect
        (record([1, 2, 3], 1, {2: "IN_SYNC", 3: "LAGGING"}, silent_since=1), 2, "offline", []),
        # ... and with both followers at its log end, as [2, 3]: one stop leaves one (the
        # first case, heard of: [1, 2] is enough)
        (
            record([1, 2, 3], 2, {2: "IN_SYNC", 3: "IN_SYNC"}, silent_since=1),
            3,
            "under_min_isr",
            [2],
        ),
    ],
)
def test_what_stopping_a_broker_does_to_a_partition(
    partition: HealthRecord, stop: int, becomes: str | None, after: list[int] | None
) -> None:
    found = breakage(IsrAtRisk.of(partition), stop)
    if becomes is None:
        assert found is None
    else:
        assert found is not None
        assert (found.becomes, found.isr_after) == (becomes, after)


def replayed(
    scenario: str, at_s: int, overrides: dict[str, object] | None = None
) -> list[HealthRecord]:
    sim = ClusterSimulator(load_scenario(scenario, overrides), seed=7, start_ms=START_MS)
    lines = [
        json.dumps({"source": r.source.value, "value": r.value})
        for r in sim.events(START_MS + at_s * 1000)
    ]
    return replay(lines, RuleSettings(), None).records


def test_after_a_crash_every_partition_left_with_the_stopped_broker_breaks() -> None:
    # broker-crash-and-bounce at 28 s: broker 2 crashed at 20 s and the controller dropped it
    # at 26 s. orders and payments (3 replicas, min ISR 2) that had a replica on broker 2
    # are at ISR 2: stopping broker 3 puts those with a replica on 3 under min ISR. logs
    # (2 replicas, min 1) and audit (on exactly 2 and 3) with replicas on 2 and 3 are down
    # to [3]: stopping it makes them offline.
    records = replayed("broker-crash-and-bounce", 28)
    expected = {}
    for r in records:
        if {2, 3} <= set(r.replicas):
            expected[(r.topic, r.partition)] = (
                "offline" if len(r.replicas) == 2 else "under_min_isr"
            )
    assert {"audit", "logs", "orders"} <= {topic for topic, _ in expected}
    result = check_restart(map(IsrAtRisk.of, records), 3)
    assert not result.safe
    assert {(b.topic, b.partition): b.becomes for b in result.would_break} == expected


def test_the_slow_broker_is_safe_to_restart_its_peers_are_not() -> None:
    # slow-follower at 70 s: broker 3, slow since 15 s, was dropped by 15 + 45 = 60 s from
    # the ISR of every partition it follows. Those (3 replicas, min ISR 2) have ISR 2 and
    # every member of theirs is critical; the partitions broker 3 leads keep a full ISR
    # (a leader never drops itself), where one stop leaves 2: enough.
    records = replayed("slow-follower", 70)
    assert check_restart(map(IsrAtRisk.of, records), 3).safe
    followed_by_3 = [r for r in records if 3 in r.replicas and r.leader != 3]
    for broker in (1, 2, 4):
        broken = check_restart(map(IsrAtRisk.of, records), broker).would_break
        expected = {(r.topic, r.partition) for r in followed_by_3 if broker in r.replicas}
        assert {(b.topic, b.partition) for b in broken} == expected
        assert {b.becomes for b in broken} == {"under_min_isr"}
    assert followed_by_3


def write(path: Path, records: list[HealthRecord]) -> None:
    path.write_text("".join(encode_record(r).decode() + "\n" for r in records))


def test_command_reads_a_file_prints_json_and_exits_by_the_answer(tmp_path: Path) -> None:
    health = tmp_path / "health.jsonl"
    write(health, replayed("slow-follower", 70))
    runner = CliRunner()
    safe = runner.invoke(main, ["check", "restart", "--broker", "3", "--from", str(health)])
    assert safe.exit_code == 0, safe.output
    assert json.loads(safe.output)["safe"] is True
    unsafe = runner.invoke(main, ["check", "restart", "--broker", "1", "--from", str(health)])
    assert unsafe.exit_code == 1
    answer = json.loads(unsafe.output)
    assert answer["safe"] is False
    first = answer["would_break"][0]
    assert first["becomes"] == "under_min_isr"
    assert 1 in first["isr"]
    assert 1 not in first["isr_after"]
    missing = runner.invoke(
        main, ["check", "restart", "--broker", "1", "--from", str(tmp_path / "nope.jsonl")]
    )
    assert missing.exit_code == 2


def test_the_last_record_of_a_partition_wins_in_a_file(tmp_path: Path) -> None:
    health = tmp_path / "health.jsonl"
    broken = record([1, 2], 2, {2: "IN_SYNC"})
    healed = record([1, 2, 3], 2, {2: "IN_SYNC", 3: "IN_SYNC"})
    write(health, [broken, healed])
    result = CliRunner().invoke(main, ["check", "restart", "--broker", "1", "--from", str(health)])
    assert result.exit_code == 0


def test_wait_blocks_until_safe_or_times_out(tmp_path: Path) -> None:
    health = tmp_path / "health.jsonl"
    write(health, [record([1, 2], 2, {2: "IN_SYNC"})])
    runner = CliRunner()
    args = ["check", "restart", "--broker", "1", "--from", str(health), "--wait"]
    timed_out = runner.invoke(main, [*args, "--timeout", "0.5"])
    assert timed_out.exit_code == 1
    # broker 3 rejoins (the job appends the partition's new health) while we wait
    threading.Timer(
        1.0, write, (health, [record([1, 2, 3], 2, {2: "IN_SYNC", 3: "IN_SYNC"})])
    ).start()
    started = time.monotonic()
    waited = runner.invoke(main, [*args, "--timeout", "30"])
    assert waited.exit_code == 0
    assert time.monotonic() - started >= 1.0


def get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def test_the_exporter_answers_over_http_from_the_shards_fragile_partitions() -> None:
    exporter = HealthExporter()
    server = ExporterServer(exporter)
    port = free_port()
    server.serve("127.0.0.1", port)
    base = f"http://127.0.0.1:{port}"
    try:
        assert get(f"{base}/check/restart?broker=1")[0] == 503  # no batch yet
        fragile = [IsrAtRisk.of(record([1, 2], 2, leader=1, partition=p)) for p in range(2)]
        exporter.record_batch(
            [shard_stats(0, fragile=fragile[:1]), shard_stats(1, fragile=fragile[1:])], {}, 0.1
        )
        status, body = get(f"{base}/check/restart?broker=2")
        assert status == 409
        assert body["safe"] is False
        assert [(b["partition"], b["becomes"]) for b in body["would_break"]] == [
            (0, "under_min_isr"),
            (1, "under_min_isr"),
        ]
        status, body = get(f"{base}/check/restart?broker=3")
        assert (status, body["safe"], body["fragile_partitions"]) == (200, True, 2)
        assert get(f"{base}/check/restart")[0] == 400
        with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
            assert b"isrwatch_partitions" in response.read()
    finally:
        server.close()


@pytest.mark.parametrize(
    ("scenario", "at_s"),
    [("broker-crash-and-bounce", 28), ("slow-follower", 50), ("stuck-leader", 70)],
)
def test_the_fragile_partitions_a_shard_reports_give_the_whole_answer(
    scenario: str, at_s: int
) -> None:
    """The exporter answers from the fragile partitions only: the same breakages as from
    every record, for every broker (SHRINK_ELIGIBLE at 50 s, SHRINK_OVERDUE at 70 s)."""
    model, now = simulate_model(scenario, at_s)
    frame = model.evaluate(now)
    records = list(frame.records())
    entries = fragile_entries(frame)
    assert 0 < len(entries) < len(records)
    for broker in range(1, load_scenario(scenario).cluster.brokers + 1):
        assert (
            check_restart(entries, broker).would_break
            == check_restart(map(IsrAtRisk.of, records), broker).would_break
        )


def test_a_silent_leaders_partition_gives_the_same_answer_from_the_shard() -> None:
    """docs/domain.md#silent-leader: leader 1 of a partition (ISR [1, 2, 3], min 2) has
    not been heard of since 1 000; follower 2 is one record behind. The shard's fragile
    entry and the record give the same answer: any stop of 3 leaves [3] - 3, offline."""
    m = model(replica_lag_time_max_ms=10_000, min_insync_replicas=2)
    apply(
        m,
        leader_and_isr(0),
        fetch(1_000, follower=3, offset=500, leader_leo=500),
        fetch(1_000, follower=2, offset=499, leader_leo=500),
    )
    frame = m.evaluate(20_000)
    (silent,) = frame.records()
    assert silent.leader_silent_since_ms == 1_000
    entries = fragile_entries(frame)
    assert [(e.remaining_isr, e.min_insync_replicas) for e in entries] == [([3], 2)]
    for broker in (1, 2, 3):
        assert (
            check_restart(entries, broker).would_break
            == check_restart([IsrAtRisk.of(silent)], broker).would_break
        )
    assert check_restart(entries, 3).would_break[0].becomes == "offline"
