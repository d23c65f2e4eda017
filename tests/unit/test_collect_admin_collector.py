"""streaming.feeds.collectors.admin_collector and admin_source's response reading (no broker)."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from streaming.feeds.collectors.admin_collector import AdminCollector
from streaming.feeds.collectors.admin_poller import ClusterSnapshot, PartitionInfo
from streaming.feeds.collectors.admin_source import _config_values, _partitions
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.wire import InputRecord


class Snapshots:
    def __init__(self, snapshots: Sequence[ClusterSnapshot | Exception]) -> None:
        self._items = list(snapshots)
        self.closed = False

    def snapshot(self) -> ClusterSnapshot:
        item = self._items.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    def close(self) -> None:
        self.closed = True


class Capture:
    def __init__(self, fail: int = 0) -> None:
        self.events: list[InputRecord] = []
        self.fail = fail

    def publish(self, events: Sequence[InputRecord]) -> None:
        if self.fail:
            self.fail -= 1
            raise ConnectionError("broker down")
        self.events += events

    def close(self) -> None:
        pass


def snapshot(ts: int, isr: tuple[int, ...]) -> ClusterSnapshot:
    return ClusterSnapshot(
        ts=ts,
        controller_id=1,
        controller_epoch=None,
        brokers=(1, 2),
        partitions={"t": {0: PartitionInfo(1, 3, (1, 2), isr)}},
    )


def metrics() -> CollectorMetrics:
    return CollectorMetrics("admin", CollectorRegistry())


def test_failed_publish_diffs_again_against_the_same_snapshot(tmp_path: Path) -> None:
    state = tmp_path / "admin.json"
    source = Snapshots([snapshot(1, (1, 2)), snapshot(2, (1,)), snapshot(3, (1,))])
    capture = Capture()
    made = AdminCollector(source, capture, metrics(), state, fetch_responses=False)
    made.poll_once()
    capture.fail = 1
    with pytest.raises(ConnectionError):
        made.poll_once()
    made.poll_once()  # the ISR change from (1, 2) is found again
    changes = [e.value for e in capture.events if e.event_type == "IsrChange"]
    assert [(c["ts"], c["old_isr"], c["new_isr"]) for c in changes] == [(3, [1, 2], [1])]
    saved = json.loads(state.read_text())
    assert saved["snapshot"]["ts"] == 3


def test_restart_from_the_state_file(tmp_path: Path) -> None:
    state = tmp_path / "admin.json"
    first = AdminCollector(
        Snapshots([snapshot(1, (1, 2))]), Capture(), metrics(), state, fetch_responses=False
    )
    first.poll_once()
    capture = Capture()
    second = AdminCollector(
        Snapshots([snapshot(2, (1, 2)), snapshot(3, (2,))]),
        capture,
        metrics(),
        state,
        fetch_responses=False,
    )
    second.poll_once()
    assert capture.events == []  # nothing changed since the saved snapshot
    second.poll_once()
    assert [e.event_type for e in capture.events] == ["IsrChange"]


def test_run_survives_failed_polls_and_counts_them() -> None:
    source = Snapshots([TimeoutError("no answer"), snapshot(1, (1,))])
    capture, m = Capture(), metrics()
    made = AdminCollector(source, capture, m, None, fetch_responses=False)
    stop = threading.Event()
    polls: list[int] = []

    def on_poll(published: int) -> None:
        polls.append(published)
        stop.set()

    made.run(interval_ms=1, stop=stop, on_poll=on_poll)
    assert polls == [len(capture.events)]
    assert polls[0] > 0
    r = m.registry
    assert (
        r.get_sample_value(
            "isrwatch_collect_poll_failures_total", {"collector": "admin", "stage": "snapshot"}
        )
        == 1
    )
    assert r.get_sample_value("isrwatch_collect_polls_total", {"collector": "admin"}) == 1
    assert r.get_sample_value("isrwatch_collect_admin_partitions") == 1
    made.close()
    assert source.closed


def test_once_raises_a_failed_poll() -> None:
    made = AdminCollector(Snapshots([TimeoutError("no answer")]), Capture(), metrics(), None)
    with pytest.raises(TimeoutError):
        made.run(interval_ms=1, stop=threading.Event(), once=True)


def test_metadata_response_reading() -> None:
    topics = [
        {
            "error_code": 0,
            "name": "t",
            "partitions": [
                {
                    "error_code": 0,
                    "partition_index": 0,
                    "leader_id": 1,
                    "leader_epoch": 4,
                    "replica_nodes": [1, 2],
                    "isr_nodes": [1],
                },
                {
                    "error_code": 9,
                    "partition_index": 1,
                    "leader_id": -1,
                    "leader_epoch": -1,
                    "replica_nodes": [2],
                    "isr_nodes": [],
                },
                {
                    "error_code": 3,
                    "partition_index": 2,
                    "leader_id": 1,
                    "leader_epoch": 1,
                    "replica_nodes": [1],
                    "isr_nodes": [1],
                },
            ],
        },
        {"error_code": 3, "name": "gone", "partitions": []},
    ]
    assert _partitions(topics) == {
        "t": {
            0: PartitionInfo(1, 4, (1, 2), (1,)),
            1: PartitionInfo(-1, None, (2,), ()),
        }
    }


def test_config_values() -> None:
    found: dict[str, dict[str, Any]] = {
        "t": {"min.insync.replicas": {"value": "2", "config_source": "DEFAULT_CONFIG"}},
        "u": {"min.insync.replicas": {"value": None}},
        "v": {},
    }
    assert _config_values(found, "min.insync.replicas") == {"t": 2}
