"""The fuzz campaign's own judge of the input contract (bench/faults/mutations.py), which
decides which fuzzed records the job must dead-letter: it must agree with the schemas'
length bound on replica lists although it cuts long arrays for speed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from faults.mutations import contract_verdict

from state.events import Source


def election(replicas: list[int]) -> bytes:
    return json.dumps(
        {
            "type": "LeaderAndIsr",
            "ts": 1,
            "topic": "t",
            "partition": 0,
            "leader": 0,
            "leader_epoch": 0,
            "isr": [0],
            "replicas": replicas,
            "partition_epoch": 0,
        }
    ).encode()


def test_identical_replica_ids_past_the_bound_are_refused_however_many() -> None:
    assert contract_verdict(Source.CONTROLLER_EVENTS, election([7] * 64))
    assert not contract_verdict(Source.CONTROLLER_EVENTS, election([7] * 65))
    assert not contract_verdict(Source.CONTROLLER_EVENTS, election([7] * 100_000))
    assert not contract_verdict(Source.CONTROLLER_EVENTS, election([-1] * 100_000))
