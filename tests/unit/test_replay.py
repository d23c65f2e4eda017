"""``isrwatch replay`` on the shipped capture, checked against its story, by hand.

conf/samples/incident.jsonl (times below are ms after B = 1 700 000 000 000):
* brokers 1-3, T = 30 000 everywhere; orders-0 (leader 1, replicas [1, 2, 3]),
  orders-1 (leader 2, [2, 3, 1]), payments-0 (leader 3, replicas [1, 3, 2],
  min.insync.replicas 2), all elected at 100 with epoch 0 and the full ISR.
* The leader LEO of orders-* is t / 10 (payments: t / 20). Follower f fetches at
  5 000 k + 1 000 + 100 f with the leader's LEO as of its previous fetch.
* orders-0 follower 3 slows down from 10 000: its last caught-up fetch is at 6 300, so it is
  out of sync after 36 300 and must be removed by 6 300 + 45 000 = 51 300. Leader 1 shrinks
  the ISR to [1, 2] at 45 000 and propagates at 52 500 (window: a = c = 45 000, p unknown
  -> (50 000, 52 500]); UpdateMetadata reaches brokers 1, 2, 3 at 52 620 / 640 / 660.
* Follower 3 catches up; leader 1 expands the ISR at 65 000 (p = 52 500 -> window
  (70 000, 72 500]) and propagates at 72 500.
* Preferred leader election of payments-0 at 80 050: leader 1, epoch 1. The old leader
  still serves one fetch of epoch 0 (ts 80 200), which is stale.
* orders-0 follower 2 stops fetching after its fetch at 76 200 (caught up at 71 200).
* orders-1 follower 1 stops after 56 100 (caught up at 51 100); leader 2 shrinks the ISR
  to [2, 3] at 96 000, never having propagated before: window (101 000, 103 500].
* The last event is at 96 300.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from state import FollowerHealth, HealthRecord, MetadataHealth, decode_record
from state.settings import RuleSettings
from streaming.cli import main
from streaming.tools.replay import replay

SAMPLE = Path(__file__).resolve().parents[2] / "conf" / "samples" / "incident.jsonl"
B = 1_700_000_000_000


def records_at(until: int | None) -> dict[str, HealthRecord]:
    with SAMPLE.open() as lines:
        result = replay(lines, RuleSettings(), None if until is None else B + until)
    return {f"{r.topic}-{r.partition}": r for r in result.records}


def follower(record: HealthRecord, broker: int) -> FollowerHealth:
    return next(f for f in record.followers if f.broker == broker)


def test_slow_follower_is_predicted_before_the_shrink() -> None:
    orders0 = records_at(40_000)["orders-0"]
    slow = follower(orders0, 3)
    assert slow.status == "SHRINK_ELIGIBLE"
    assert slow.last_caught_up_ms == B + 6_300
    assert slow.lag_time_ms == 33_700
    assert slow.shrink_by_ms == B + 51_300
    assert orders0.predicted_under_replicated is True
    assert orders0.under_replicated is False


def test_shrink_then_propagation_window_then_consistent() -> None:
    after_shrink = records_at(50_000)["orders-0"]
    assert after_shrink.isr == [1, 2]
    assert after_shrink.under_replicated is True
    assert follower(after_shrink, 3).status == "OUT_OF_SYNC"
    assert after_shrink.metadata == MetadataHealth(
        stale_brokers=[1, 2, 3],
        state="STALE_EXPECTED",
        blackout_earliest_ms=B + 50_000,
        blackout_latest_ms=B + 52_500,
    )
    mid_update = records_at(52_630)["orders-0"].metadata
    assert (mid_update.stale_brokers, mid_update.state) == ([2, 3], "STALE_EXPECTED")
    assert records_at(53_000)["orders-0"].metadata.state == "CONSISTENT"


def test_expansion_uses_the_learnt_last_propagation() -> None:
    orders0 = records_at(66_000)["orders-0"]
    assert orders0.isr == [1, 2, 3]
    assert orders0.under_replicated is False
    meta = orders0.metadata
    assert (meta.blackout_earliest_ms, meta.blackout_latest_ms) == (B + 70_000, B + 72_500)


def test_leader_change_resets_the_followers() -> None:
    payments = records_at(80_060)["payments-0"]
    assert (payments.leader, payments.leader_epoch) == (1, 1)
    for broker in (3, 2):
        f = follower(payments, broker)
        assert (f.fetch_offset, f.last_caught_up_ms, f.status) == (
            None,
            B + 80_050,
            "IN_SYNC",
        )


def test_end_of_capture() -> None:
    records = records_at(None)
    assert list(records) == ["orders-0", "orders-1", "payments-0"]
    assert {r.as_of_ms for r in records.values()} == {B + 96_300}
    quiet = follower(records["orders-0"], 2)
    assert (quiet.status, quiet.lag_time_ms) == ("LAGGING", 25_100)
    orders1 = records["orders-1"]
    assert (orders1.isr, orders1.under_replicated) == ([2, 3], True)
    assert follower(orders1, 1).status == "OUT_OF_SYNC"  # 5 110 below the HW 9 130
    assert orders1.metadata == MetadataHealth(
        stale_brokers=[1, 2, 3],
        state="STALE_EXPECTED",
        blackout_earliest_ms=B + 101_000,
        blackout_latest_ms=B + 103_500,
    )
    payments = records["payments-0"]
    assert (payments.under_min_isr, payments.at_min_isr) == (False, False)


def test_cli_prints_sorted_records_and_counts_dead_letters(tmp_path: Path) -> None:
    dead = tmp_path / "dead.jsonl"
    runner = CliRunner()
    result = runner.invoke(main, ["replay", str(SAMPLE), "--dead-letters", str(dead)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["topic"], r["partition"]) for r in lines] == [
        ("orders", 0),
        ("orders", 1),
        ("payments", 0),
    ]
    assert "1 dead letters (stale_leader_epoch: 1)" in result.stderr
    (letter,) = [json.loads(line) for line in dead.read_text().splitlines()]
    assert (letter["source"], letter["reason"]) == ("fetch-responses", "stale_leader_epoch")
    assert json.loads(letter["raw"])["value"]["ts"] == B + 80_200


def test_bad_lines_are_dead_letters_and_replay_goes_on(tmp_path: Path) -> None:
    capture = tmp_path / "bad.jsonl"
    good = SAMPLE.read_text().splitlines()[:12]
    capture.write_text(
        "\n".join(
            [
                "not json",
                '{"source": "elsewhere", "value": {}}',
                '{"value": {}}',
                '{"source": "fetch-responses", "value": {"ts": "soon", "topic": "orders", '
                '"partition": 0, "leader": 1, "follower": 2, "leader_epoch": 0, "fetch_offset": 1, '
                '"leader_leo": 1, "high_watermark": 1}}',
                *good,
            ]
        )
        + "\n"
    )
    with capture.open() as lines:
        result = replay(lines, RuleSettings(), None)
    assert [(line, d.reason.value) for line, d in result.dead_letters] == [
        (1, "invalid_json"),
        (2, "invalid_value"),
        (3, "missing_field"),
        (4, "wrong_type"),
    ]
    assert result.events == 12
    assert len(result.records) == 3


def test_cli_settings_override_file_and_environment(tmp_path: Path) -> None:
    # orders-0 follower 2 at the end: lag 25 100 with T = 30 000 (the brokers' BrokerConfig).
    config = tmp_path / "isrwatch.yaml"
    config.write_text("rules:\n  warn_ratio: 0.2\n")  # LAGGING beyond 6 000
    runner = CliRunner()
    args = ["replay", str(SAMPLE), "--config", str(config)]
    env = {"ISRWATCH_RULES__WARN_RATIO": "0.9"}  # beats the file: LAGGING beyond 27 000
    statuses = []
    for extra in ([], ["--set", "rules.warn_ratio=0.5"]):  # the flag beats both: 15 000
        result = runner.invoke(main, [*args, *extra], env=env)
        assert result.exit_code == 0, result.output
        orders0 = decode_record(result.stdout.splitlines()[0])
        statuses.append(follower(orders0, 2).status)
    assert statuses == ["IN_SYNC", "LAGGING"]


def test_cli_rejects_a_bad_setting_naming_it() -> None:
    result = CliRunner().invoke(main, ["replay", str(SAMPLE), "--set", "rules.warn_ratio=-1"])
    assert result.exit_code == 1
    assert "command line: rules.warn_ratio: must be greater than 0" in result.stderr
