"""``isrwatch collect``: the commands, without a broker (--dry-run)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from streaming.cli import main

DATA = Path(__file__).resolve().parent / "data" / "kafka_logs"


def test_collect_logs_dry_run_prints_replayable_events(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    result = CliRunner().invoke(
        main,
        [
            "collect",
            "logs",
            "--dry-run",
            "--set",
            f"collect.logs.state_file={state}",
            str(DATA / "kraft" / "server.log"),
        ],
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(x["source"], x["key"], x["value"]["type"]) for x in lines] == [
        ("controller-events", "1", "ControllerChange"),
        ("controller-events", "inventory:0", "LeaderAndIsr"),  # partial: "Leader ... starts"
        ("controller-events", "inventory:0", "IsrChange"),
        ("controller-events", "inventory:0", "IsrChange"),
        ("controller-events", "inventory:1", "IsrChange"),
        ("controller-events", "inventory:3", "IsrChange"),  # partial: no ISR before it
        ("controller-events", "1", "ControllerChange"),
    ]
    assert not state.exists()  # a dry run writes no state


def test_collect_logs_dry_run_output_replays(tmp_path: Path) -> None:
    capture = tmp_path / "capture.jsonl"
    zk = [str(DATA / "zk" / name) for name in ("controller.log", "state-change.log")]
    runner = CliRunner()
    result = runner.invoke(main, ["collect", "logs", "--dry-run", *zk])
    assert result.exit_code == 0, result.output
    capture.write_text(result.stdout)
    replayed = runner.invoke(main, ["replay", str(capture), "--until-ms", "1710151560000"])
    assert replayed.exit_code == 0, replayed.output
    records = {
        (r["topic"], r["partition"]): r for r in map(json.loads, replayed.stdout.splitlines())
    }
    assert sorted(records) == [("payments", 0), ("payments", 1)]
    assert records[("payments", 0)]["leader_epoch"] == 1
    assert records[("payments", 0)]["isr"] == [1, 2]
    assert "0 dead letters" in replayed.stderr


def test_collect_logs_rejects_a_bad_time_zone(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        [
            "collect",
            "logs",
            "--dry-run",
            "--set",
            "collect.logs.time_zone=Mars/Olympus",
            str(DATA / "kraft" / "server.log"),
        ],
    )
    assert result.exit_code == 1
    assert "collect.logs.time_zone: must be an IANA time zone name" in result.output


def test_collect_logs_needs_files() -> None:
    result = CliRunner().invoke(main, ["collect", "logs", "--dry-run"])
    assert result.exit_code == 2
    assert "Missing argument 'FILES...'" in result.output


def test_collect_help_lists_both_collectors() -> None:
    result = CliRunner().invoke(main, ["collect", "--help"])
    assert result.exit_code == 0
    assert "logs" in result.output
    assert "admin" in result.output
