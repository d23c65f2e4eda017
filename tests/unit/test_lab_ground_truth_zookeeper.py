"""streaming.tools.lab.ground_truth on ZooKeeper's own transaction logs, written by the
ZooKeeper servers of two lab runs (tests/unit/data/kafka_logs/generated/<run>/
zookeeper-txn-log: 3.5.9 under Kafka 2.8.2, 3.4.9 under 0.10.2.2; the zeros ZooKeeper
preallocates after the last transaction cut off). The decoded facts are checked against
what Kafka itself logged in the same runs: each broker's "czxid (broker epoch)" and each
controller's "Epoch incremented to" / "incremented epoch to" lines."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from streaming.tools.lab.ground_truth import from_zookeeper_log, zookeeper_transactions

GENERATED = Path(__file__).parent / "data" / "kafka_logs" / "generated"
RUNS = ["2.8-zookeeper", "0.10.2-zookeeper"]


def kafka_lines(run: str) -> list[str]:
    return [
        line
        for path in sorted((GENERATED / run / "logs" / "apache").glob("broker-*/*.log"))
        for line in path.read_text().splitlines()
    ]


@pytest.mark.parametrize("run", RUNS)
def test_the_decoded_log_is_the_committed_ground_truth(run: str) -> None:
    truth = from_zookeeper_log(zookeeper_transactions(GENERATED / run / "zookeeper-txn-log"))
    committed = [
        json.loads(line)
        for line in (GENERATED / run / "ground-truth.jsonl").read_text().splitlines()
    ]
    rows = [{"kind": kind, **item} for kind, items in truth.to_json().items() for item in items]
    assert rows == [row for row in committed if "kind" in row]


def test_broker_epochs_are_the_czxids_kafka_logged() -> None:
    """2.8 brokers log their registration's czxid; each is a registration's zxid."""
    truth = from_zookeeper_log(
        zookeeper_transactions(GENERATED / "2.8-zookeeper" / "zookeeper-txn-log")
    )
    logged = {
        (int(m[1]), int(m[2]))
        for line in kafka_lines("2.8-zookeeper")
        if (m := re.search(r"Registered broker (\d+) .* czxid \(broker epoch\): (\d+)", line))
    }
    assert logged
    assert logged <= {(r.broker, r.epoch) for r in truth.registrations}


@pytest.mark.parametrize(
    ("run", "said"),
    [
        (
            "2.8-zookeeper",
            r"\[Controller id=(\d+)\] \d+ successfully elected as the controller\."
            r" Epoch incremented to (\d+)",
        ),
        ("0.10.2-zookeeper", r"\[Controller (\d+)\]: Controller \d+ incremented epoch to (\d+)"),
    ],
)
def test_elections_are_the_ones_the_controllers_logged(run: str, said: str) -> None:
    truth = from_zookeeper_log(zookeeper_transactions(GENERATED / run / "zookeeper-txn-log"))
    logged = [(int(m[1]), int(m[2])) for line in kafka_lines(run) if (m := re.search(said, line))]
    assert logged
    assert set(logged) == {(e.controller_id, e.controller_epoch) for e in truth.elections}
