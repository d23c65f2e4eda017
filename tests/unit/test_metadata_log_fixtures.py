"""``collect metadata-log`` on metadata logs that real Kafka brokers wrote.

The fixtures live beside the repository (``../shared/kraft-fixtures``), never in it:
each was copied unchanged from a public repository and has an ``EXPECTED.json`` with its
source (URL, commit, blob), what that source states (``partition.metadata`` topic ids,
``quorum-state``, Kafka's own controller log lines) and a reference decoding checked
against the snapshots Kafka wrote. The final state of every partition, and the epochs
after every ``PartitionChangeRecord``, must equal it.
"""

from __future__ import annotations

import ast
import json
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from streaming.feeds.collectors.metadata_log.collector import MetadataLogCollector, load_snapshot
from streaming.feeds.collectors.metadata_log.replay import MetadataReplayer
from streaming.feeds.collectors.metadata_log.segments import Batch, batches_in, snapshots
from streaming.feeds.collectors.metadata_log.wire import uuid_canonical
from streaming.feeds.wire import InputRecord
from tests.unit.metadata_log_reading import collect

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "kraft-fixtures"
LOG = "__cluster_metadata-0/00000000000000000000.log"

if not FIXTURES.is_dir():
    pytest.skip(
        f"the real KRaft fixtures are not here ({FIXTURES} is absent; CI has them beside "
        "the clone): nothing real to decode",
        allow_module_level=True,
    )

NAMES = sorted(p.name for p in FIXTURES.iterdir() if (p / "EXPECTED.json").is_file())


@cache
def expected(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name / "EXPECTED.json").read_text())
    return data


@cache
def collected(name: str) -> tuple[MetadataLogCollector, list[InputRecord]]:
    return collect(FIXTURES / name)


def final_partitions(image_json: dict[str, Any]) -> dict[tuple[str, int], tuple[Any, ...]]:
    return {
        (topic, int(p)): (
            s["leader"],
            s["leaderEpoch"],
            s["isr"],
            s["replicas"],
            s["partitionEpoch"],
        )
        for topic, t in image_json["topics"].items()
        for p, s in t["partitions"].items()
    }


def partitions_of(collector: MetadataLogCollector) -> dict[tuple[str, int], tuple[Any, ...]]:
    return {
        (topic, p): (s.leader, s.leader_epoch, list(s.isr), list(s.replicas), s.partition_epoch)
        for topic, parts in collector.image.topic_partitions().items()
        for p, s in parts.items()
    }


def test_every_fixture_is_here() -> None:
    assert len(NAMES) == 8, NAMES


@pytest.mark.parametrize("name", NAMES)
def test_final_state_of_every_partition(name: str) -> None:
    want = final_partitions(expected(name)["decoded"]["files"][LOG]["replayed_image_at_end"])
    collector, _ = collected(name)
    assert partitions_of(collector) == want
    assert len(want) >= 1


@pytest.mark.parametrize("name", NAMES)
def test_every_partition_change_has_kafkas_epochs(name: str) -> None:
    """One event per PartitionChangeRecord, at its offset and append time, with the ISR,
    leader, leader epoch and partition epoch after the change."""
    timeline = expected(name)["decoded"]["files"][LOG].get("partition_change_timeline")
    if timeline is None:  # the 311-byte file holds no PartitionChangeRecord
        assert name == "codecrafters-kafka-tester-challenge-311"
        return
    columns = timeline["columns"]
    _, events = collected(name)
    by_offset = {
        e.value["metadata_offset"]: e.value
        for e in events
        if e.value["type"] in ("LeaderAndIsr", "IsrChange") and "topic" in e.value
    }
    for row in timeline["rows"]:
        r = dict(zip(columns, row, strict=True))
        event = by_offset[r["offset"]]
        assert (event["topic"], event["partition"], event["ts"]) == (
            r["topic"],
            r["partition"],
            r["timestamp"],
        )
        isr = event["isr"] if event["type"] == "LeaderAndIsr" else event["new_isr"]
        assert (isr, event["leader"], event["leader_epoch"], event["partition_epoch"]) == (
            r["isr_after"],
            r["leader_after"],
            r["leaderEpoch_after"],
            r["partitionEpoch_after"],
        ), r
        if event["type"] == "IsrChange":
            assert event["old_isr"] == r["isr_before"]


def own_log_dirs(name: str) -> list[dict[str, Any]]:
    """The source's broker log dirs whose metadata log is the very file of the fixture."""
    blob = expected(name)["source"]["files"][LOG]["git_blob"]
    dirs: list[dict[str, Any]] = expected(name)["source_statements"]["log_dirs"]
    return [d for d in dirs if d.get("log_git_blob") == blob]


@pytest.mark.parametrize("name", NAMES)
def test_topic_ids_match_the_partition_metadata_files(name: str) -> None:
    """What the source states: the topic id in each topic-partition directory's
    partition.metadata, on every broker whose log this is."""
    collector, _ = collected(name)
    ids = {topic: topic_id for topic_id, topic in collector.image.topic_names.items()}
    checked = 0
    for log_dir in own_log_dirs(name):
        listed = log_dir.get("topic_partition_dirs_topic_id", {})
        if isinstance(listed, str):  # long listings are kept as their Python repr
            listed = ast.literal_eval(listed) if listed.endswith("}") else {}
        for directory, topic_id in listed.items():
            topic = directory.rsplit("-", 1)[0]
            if topic in ids:
                assert ids[topic] == topic_id, directory
                checked += 1
    if name == "codecrafters-kafka-tester-challenge-311":
        # the tester's own assertion: topic foo is bfd99e5e-3235-4552-81f8-d4af1741970c
        assert uuid_canonical(ids["foo"]) == "bfd99e5e-3235-4552-81f8-d4af1741970c"
    else:
        assert checked >= 1


@pytest.mark.parametrize("name", NAMES)
def test_every_record_of_every_type_and_version_is_decoded(name: str) -> None:
    """Counts by record type and version equal the reference decoding's, and nothing was
    left undecoded or dropped."""
    summary = expected(name)["decoded"]["files"][LOG]["summary"]
    want: dict[str, int] = {}
    for key, count in summary["record_versions"].items():
        if key.startswith("control:LEADER_CHANGE"):
            want["LeaderChangeMessage v0"] = count
        elif not key.startswith("control:"):
            type_name, version = key.split(" ")[0], key.split(" ")[1]
            want[f"{type_name.split('(')[0]} {version}"] = count
    collector, _ = collected(name)
    got = {k: v for k, v in collector.records.items() if not k.startswith("control:")}
    assert got == want
    assert not collector.dropped


def test_deleted_topic_is_announced() -> None:
    """ichwansh03: Kafka's controller log prints the RemoveTopicRecord of first_topic."""
    _, events = collected("ichwansh03-kafka-3.9.0-with-controller-log")
    deleted = [
        e.value["deleted"]
        for e in events
        if e.value["type"] == "TopicChange" and e.value["deleted"]
    ]
    assert deleted == [["first_topic"]]


@pytest.mark.parametrize("name", NAMES)
def test_quorum_state_leader_is_the_last_controller_change(name: str) -> None:
    """``quorum-state`` beside the log names the quorum leader and epoch; the last
    ControllerChange must agree wherever the source has a leader (not mid-election)."""
    _, events = collected(name)
    changes = [e.value for e in events if e.value["type"] == "ControllerChange"]
    checked = 0
    for log_dir in own_log_dirs(name):
        state_text = log_dir.get("__cluster_metadata-0/quorum-state")
        if not state_text:
            continue
        state = json.loads(state_text)
        if state.get("leaderId", -1) < 0:
            continue
        assert (changes[-1]["controller_id"], changes[-1]["controller_epoch"]) == (
            state["leaderId"],
            state["leaderEpoch"],
        )
        checked += 1
    # the 311-byte cut has no quorum-state; ftmhxp's shows an election in progress
    no_leader = {"codecrafters-kafka-tester-challenge-311", "ftmhxp-pipeline-cp7.8.0-3brokers"}
    assert checked >= (0 if name in no_leader else 1)


def test_events_follow_the_contract() -> None:
    """The collector's checked() drops contract breakers: none may be dropped."""
    for name in NAMES:
        collector, events = collected(name)
        assert events, name
        assert collector.records  # something was decoded


SNAPSHOT_FIXTURES = [
    "ftmhxp-pipeline-cp7.8.0-3brokers",
    "greenlemonT-kafka-temp-cp7.5.1-3brokers-flapping",
]


def position_of(log: bytes, offset: int) -> int:
    """The byte position of the first batch at or past ``offset``."""
    position = 0
    for end, batch in batches_in(log):
        assert isinstance(batch, Batch)
        if batch.base_offset >= offset:
            return position
        position = end
    return position


@pytest.mark.parametrize("name", SNAPSHOT_FIXTURES)
def test_snapshot_equals_the_log_replayed_to_its_end_offset(name: str) -> None:
    (snapshot,) = snapshots(FIXTURES / name / "__cluster_metadata-0")
    image, _ = load_snapshot(snapshot)
    log = (FIXTURES / name / LOG).read_bytes()
    replayer = MetadataReplayer()
    for _, batch in batches_in(log[: position_of(log, snapshot.end_offset)]):
        assert isinstance(batch, Batch)
        replayer.replay(batch)
    assert image.topic_partitions() == replayer.image.topic_partitions()
    assert image.live_brokers() == replayer.image.live_brokers()


@pytest.mark.parametrize("name", SNAPSHOT_FIXTURES)
def test_start_from_snapshot_after_kafka_deleted_the_old_segment(name: str, tmp_path: Path) -> None:
    """Lay the files out as Kafka leaves them once it deleted the segment a snapshot
    covers: the snapshot, and a segment that begins at its end offset (the same bytes,
    cut at that batch). Starting there ends in the same final state."""
    (snapshot,) = snapshots(FIXTURES / name / "__cluster_metadata-0")
    directory = tmp_path / "__cluster_metadata-0"
    directory.mkdir()
    shutil.copy(snapshot.path, directory / snapshot.path.name)
    log = (FIXTURES / name / LOG).read_bytes()
    segment = directory / f"{snapshot.end_offset:020d}.log"
    segment.write_bytes(log[position_of(log, snapshot.end_offset) :])
    collector, events = collect(tmp_path)
    want = final_partitions(expected(name)["decoded"]["files"][LOG]["replayed_image_at_end"])
    assert partitions_of(collector) == want
    first = events[0].value
    assert first["type"] == "TopicChange"
    assert first["controller_epoch"] == snapshot.epoch
