"""Kafka 4.1.1's own metadata log through the life of an ELR (tests/unit/data/kraft_elr,
written here by Kafka; see its README): ``collect metadata-log`` states the ELR Kafka
committed, and the model's health follows it. Ground truth: Kafka's own decoding of the
log (``DumpLogSegments``), read by the lab's independent reader of that text."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from state.event_parser import parse_record
from state.events import ClearElr, ControllerEvent, IsrChange, LeaderAndIsr, Source
from state.health_record import HealthRecord
from state.model import ReplicationModel
from state.settings import PropagationMode, PropagationSettings, RuleSettings
from streaming.tools.lab.decisions import parse_metadata_dump, read_metadata_log
from tests.unit.metadata_log_reading import collect

DATA = Path(__file__).resolve().parent / "data" / "kraft_elr"
SEGMENT = "00000000000000000000.log"


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> list[ControllerEvent]:
    log_dir = tmp_path_factory.mktemp("metadata") / "__cluster_metadata-0"
    log_dir.mkdir()
    shutil.copyfile(DATA / SEGMENT, log_dir / SEGMENT)
    _, published = collect(log_dir.parent)
    parsed = [
        parse_record(Source.CONTROLLER_EVENTS, json.dumps(e.value).encode()) for e in published
    ]
    assert all(isinstance(event, ControllerEvent) for event in parsed)
    return [event for event in parsed if isinstance(event, ControllerEvent)]


def of_topic(events: list[ControllerEvent]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for e in events:
        if isinstance(e, LeaderAndIsr | IsrChange) and e.topic == "elr":
            isr = e.isr if isinstance(e, LeaderAndIsr) else e.new_isr
            out.append(
                (e.metadata_offset, type(e).__name__, e.leader, isr, e.elr, e.last_known_elr)
            )
        elif isinstance(e, ClearElr):
            out.append((e.metadata_offset, "ClearElr", e.topic))
    return out


def test_the_collector_states_the_elr_kafka_committed(events: list[ControllerEvent]) -> None:
    # By hand, from metadata-dump.txt (the README lists the records)
    assert of_topic(events) == [
        (29, "ClearElr", "elr"),
        (30, "LeaderAndIsr", 4, (4, 5), (), ()),  # v2, no ELR field: an empty one
        # broker 5's controlled shutdown: the controller removed it (its registration
        # change, offset 33, is in the same batch), not leader 4's AlterPartition
        (32, "LeaderAndIsr", 4, (4,), (5,), ()),
        (36, "LeaderAndIsr", -1, (), (4, 5), (4,)),
        (83, "LeaderAndIsr", 5, (5,), (4,), ()),
        (85, "ClearElr", "elr"),
    ]


def health_after(events: list[ControllerEvent], offset: int) -> HealthRecord:
    rules = RuleSettings(propagation=PropagationSettings(mode=PropagationMode.KRAFT))
    model = ReplicationModel(rules)
    taken = [e for e in events if e.metadata_offset is not None and e.metadata_offset <= offset]
    model.apply(enumerate(taken))
    now = max(e.ts for e in taken)
    return next(r for r in model.evaluate(now).records() if r.topic == "elr")


@pytest.mark.parametrize(
    ("offset", "leader", "isr", "elr", "last_known_elr", "recovery", "under_min_isr"),
    [
        (30, 4, [4, 5], [], [], None, False),
        (32, 4, [4], [5], [], None, True),
        (36, -1, [], [4, 5], [4], "ELR", True),  # offline, but broker 4 or 5 brings it back
        (83, 5, [5], [4], [], None, True),
        (85, 5, [5], [], [], None, False),  # min.insync.replicas 1 now
    ],
)
def test_the_models_health_follows_kafka(
    events: list[ControllerEvent],
    offset: int,
    leader: int,
    isr: list[int],
    elr: list[int],
    last_known_elr: list[int],
    recovery: str | None,
    under_min_isr: bool,
) -> None:
    record = health_after(events, offset)
    assert (record.leader, record.isr, record.elr, record.last_known_elr) == (
        leader,
        isr,
        elr,
        last_known_elr,
    )
    assert record.offline_recovery == recovery
    assert record.under_min_isr is under_min_isr
    assert record.high_watermark_frozen is under_min_isr


def test_the_final_state_is_kafkas(events: list[ControllerEvent]) -> None:
    """Against the lab's reader of Kafka's own decoding (DumpLogSegments' text)."""
    truth = read_metadata_log(parse_metadata_dump((DATA / "metadata-dump.txt").read_text()))
    kafka = truth.final_state()[("elr", 0)]
    record = health_after(events, 10**9)
    assert (record.leader, tuple(record.isr)) == (kafka.leader, kafka.isr)
    assert (tuple(record.elr or ()), tuple(record.last_known_elr or ())) == (
        kafka.elr,
        kafka.last_known_elr,
    )
