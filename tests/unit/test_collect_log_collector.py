"""streaming.feeds.collectors.log_collector: sample broker logs in, controller events out;
restarts, failed publishes and rotation on real files."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from state import parse_json_line
from state.events import DeadLetter
from streaming.config import LogCollectorSettings
from streaming.feeds.collectors.log_collector import LogCollector
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.wire import InputRecord
from tests.unit.waiting import following, wait_until

DATA = Path(__file__).resolve().parent / "data" / "kafka_logs"
ZK_FILES = ("controller.log", "state-change.log", "server.log")


def ms(text: str, offset_hours: int = 0) -> int:
    moment = datetime.fromisoformat(text).replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000) - offset_hours * 3_600_000


class Capture:
    """A publisher that keeps what it is given; ``fail`` makes the next calls raise."""

    def __init__(self) -> None:
        self.batches: list[list[InputRecord]] = []
        self.fail = 0
        self.closed = False

    def publish(self, events: Sequence[InputRecord]) -> None:
        if self.fail:
            self.fail -= 1
            raise ConnectionError("broker down")
        for event in events:  # every event follows the contract
            assert not isinstance(parse_json_line(event.source, dict(event.value)), DeadLetter)
        self.batches.append(list(events))

    def close(self) -> None:
        self.closed = True

    @property
    def values(self) -> list[dict[str, Any]]:
        return [dict(e.value) for batch in self.batches for e in batch]

    @property
    def keys(self) -> list[str]:
        return [e.key for batch in self.batches for e in batch]


def collector(
    paths: Sequence[Path], state_file: Path | None, publisher: Capture, **settings: Any
) -> tuple[LogCollector, CollectorMetrics]:
    metrics = CollectorMetrics("logs", CollectorRegistry())
    made = LogCollector(
        [str(p) for p in paths], LogCollectorSettings(**settings), publisher, metrics, state_file
    )
    return made, metrics


def read_all(made: LogCollector) -> None:
    while made.read_once()[0]:
        pass


def sample(value: CollectorRegistry, name: str, labels: dict[str, str]) -> float:
    found = value.get_sample_value(name, labels)
    return 0.0 if found is None else found


# --------------------------------------------------------------------------- samples


def zk_expected(hours: int = 0) -> list[dict[str, Any]]:
    """Written from tests/unit/data/kafka_logs/zk, line by line."""

    def t(text: str) -> int:
        return ms(text, hours)

    payments = {"topic": "payments"}
    return [
        {
            "type": "ControllerChange",
            "ts": t("2024-03-11 10:00:00.100"),
            "controller_id": 1,
            "controller_epoch": 7,
        },
        {
            "type": "BrokerChange",
            "ts": t("2024-03-11 10:00:00.180"),
            "controller_id": 1,
            "controller_epoch": 7,
            "live": [
                {"id": 1, "epoch": 4294967320},
                {"id": 2, "epoch": 4294967345},
                {"id": 3, "epoch": 4294967371},
            ],
        },
        {
            "type": "TopicChange",
            "ts": t("2024-03-11 10:00:05.000"),
            "controller_id": 1,
            "controller_epoch": 7,
            "created": {"payments": {"0": [1, 2, 3], "1": [2, 3, 1]}},
            "deleted": [],
        },
        {
            "type": "LeaderAndIsr",
            "ts": t("2024-03-11 10:00:05.120"),
            **payments,
            "partition": 0,
            "leader": 1,
            "leader_epoch": 0,
            "isr": [1, 2, 3],
            "replicas": [1, 2, 3],
            "partition_epoch": 0,
            "controller_id": 1,
            "controller_epoch": 7,
        },
        {
            "type": "LeaderAndIsr",
            "ts": t("2024-03-11 10:00:05.121"),
            **payments,
            "partition": 1,
            "leader": 2,
            "leader_epoch": 0,
            "isr": [2, 3, 1],
            "replicas": [2, 3, 1],
            "partition_epoch": 0,
            "controller_id": 1,
            "controller_epoch": 7,
        },
        {
            "type": "UpdateMetadata",
            "ts": t("2024-03-11 10:00:05.181"),
            "broker": 2,
            "controller_id": 1,
            "controller_epoch": 7,
            "partitions": [
                {
                    **payments,
                    "partition": 0,
                    "leader": 1,
                    "leader_epoch": 0,
                    "isr": [1, 2, 3],
                    "replicas": [1, 2, 3],
                    "offline_replicas": [],
                },
                {
                    **payments,
                    "partition": 1,
                    "leader": 2,
                    "leader_epoch": 0,
                    "isr": [2, 3, 1],
                    "replicas": [2, 3, 1],
                    "offline_replicas": [],
                },
            ],
        },
        {
            "type": "IsrChange",
            "ts": t("2024-03-11 10:01:10.512"),
            **payments,
            "partition": 1,
            "leader": 2,
            "old_isr": [2, 3, 1],
            "new_isr": [2, 1],
            "partition_epoch": 1,
        },
        {
            "type": "UpdateMetadata",
            "ts": t("2024-03-11 10:01:10.600"),
            "broker": 2,
            "controller_id": 1,
            "controller_epoch": 7,
            "partitions": [
                {
                    **payments,
                    "partition": 1,
                    "leader": 2,
                    "leader_epoch": 0,
                    "isr": [2, 1],
                    "replicas": [2, 3, 1],
                    "offline_replicas": [],
                }
            ],
        },
        {
            "type": "IsrChange",
            "ts": t("2024-03-11 10:01:40.031"),
            **payments,
            "partition": 1,
            "leader": 2,
            "old_isr": [2, 1],
            "new_isr": [2, 1, 3],
            "partition_epoch": 2,
        },
        {
            "type": "LeaderAndIsr",
            "ts": t("2024-03-11 10:03:00.040"),
            **payments,
            "partition": 0,
            "leader": 1,
            "leader_epoch": 1,
            "isr": [1, 2],
            "replicas": [1, 2, 3],
            "partition_epoch": 3,
            "controller_id": 1,
            "controller_epoch": 7,
        },
        # broker 3 deleted, then added again (epoch + 1), then 2 bounced: its new czxid. A
        # broker-change line waits HOLD_MS (1 s) for the controller's "Updated broker epochs
        # cache" line, so the line 40 ms after it goes out first.
        {
            "type": "BrokerChange",
            "ts": t("2024-03-11 10:03:00.000"),
            "controller_id": 1,
            "controller_epoch": 7,
            "live": [{"id": 1, "epoch": 4294967320}, {"id": 2, "epoch": 4294967345}],
        },
        {
            "type": "BrokerChange",
            "ts": t("2024-03-11 10:04:00.000"),
            "controller_id": 1,
            "controller_epoch": 7,
            "live": [
                {"id": 1, "epoch": 4294967320},
                {"id": 2, "epoch": 4294967345},
                {"id": 3, "epoch": 4294967372},
            ],
        },
        {
            "type": "BrokerChange",
            "ts": t("2024-03-11 10:05:00.000"),
            "controller_id": 1,
            "controller_epoch": 7,
            "live": [
                {"id": 1, "epoch": 4294967320},
                {"id": 2, "epoch": 4294967502},
                {"id": 3, "epoch": 4294967372},
            ],
        },
        {
            "type": "TopicChange",
            "ts": t("2024-03-11 10:07:00.000"),
            "controller_id": 1,
            "controller_epoch": 7,
            "created": {},
            "deleted": ["payments"],
        },
        {
            "type": "UpdateMetadata",
            "ts": t("2024-03-11 10:07:00.011"),
            "broker": 2,
            "controller_id": 1,
            "controller_epoch": 7,
            "partitions": [
                {
                    **payments,
                    "partition": p,
                    "leader": -2,
                    "leader_epoch": 0,
                    "isr": [],
                    "replicas": [],
                    "offline_replicas": [],
                }
                for p in (0, 1)
            ],
        },
    ]


def test_zookeeper_cluster_sample(tmp_path: Path) -> None:
    capture = Capture()
    made, metrics = collector([DATA / "zk" / name for name in ZK_FILES], None, capture)
    read_all(made)
    assert capture.values == zk_expected()
    assert capture.keys[:6] == ["1", "1", "1", "payments:0", "payments:1", "2"]
    r = metrics.registry
    assert (
        sample(
            r, "isrwatch_collect_log_unparseable_lines_total", {"reason": "malformed_broker_change"}
        )
        == 1
    )
    assert (
        sample(
            r,
            "isrwatch_collect_log_unparseable_lines_total",
            {"reason": "malformed_cached_leader_info"},
        )
        == 1
    )
    controller_log = str(DATA / "zk" / "controller.log")
    assert (
        sample(
            r,
            "isrwatch_collect_log_lines_total",
            {"file": controller_log, "result": "continuation"},
        )
        == 3
    )
    assert (
        sample(r, "isrwatch_collect_log_records_dropped_total", {"reason": "leader_and_isr_seen"})
        == 1
    )
    assert (
        sample(r, "isrwatch_collect_log_records_dropped_total", {"reason": "isr_update_failed"})
        == 1
    )
    assert (
        sample(
            r,
            "isrwatch_collect_events_total",
            {"collector": "logs", "source": "controller-events", "type": "BrokerChange"},
        )
        == 4
    )


def test_time_zone_of_the_logs(tmp_path: Path) -> None:
    capture = Capture()
    made, _ = collector(
        [DATA / "zk" / name for name in ZK_FILES], None, capture, time_zone="Europe/Paris"
    )
    read_all(made)
    assert capture.values == zk_expected(hours=1)  # CET, UTC+1 in March before the switch


def test_kraft_sample() -> None:
    capture = Capture()
    made, metrics = collector([DATA / "kraft" / "server.log"], None, capture)
    read_all(made)
    inventory = {"topic": "inventory", "leader": 1}
    assert capture.values == [
        {
            "type": "ControllerChange",
            "ts": ms("2024-05-02 08:15:00.000"),
            "controller_id": 1,
            "controller_epoch": 5,
        },
        {
            # "Leader inventory-0 ... starts at leader epoch 4 ...": the partial form
            "type": "LeaderAndIsr",
            "ts": ms("2024-05-02 08:15:01.250"),
            **inventory,
            "partition": 0,
        },
        {
            "type": "IsrChange",
            "ts": ms("2024-05-02 08:16:40.140"),
            **inventory,
            "partition": 0,
            "old_isr": [1, 2, 3],
            "new_isr": [1, 2],
            "partition_epoch": 9,
        },
        {
            "type": "IsrChange",
            "ts": ms("2024-05-02 08:17:02.300"),
            **inventory,
            "partition": 0,
            "old_isr": [1, 2],
            "new_isr": [1, 2, 3],
            "partition_epoch": 10,
        },
        {
            "type": "IsrChange",
            "ts": ms("2024-05-02 08:17:30.020"),
            **inventory,
            "partition": 1,
            "old_isr": [1, 3],
            "new_isr": [1],
            "partition_epoch": 4,
        },
        # A commit with no ISR before it in the log: the partial form, without old_isr.
        {
            "type": "IsrChange",
            "ts": ms("2024-05-02 08:18:30.000"),
            **inventory,
            "partition": 3,
            "new_isr": [1, 2, 3],
            "partition_epoch": 12,
        },
        {
            "type": "ControllerChange",
            "ts": ms("2024-05-02 08:19:00.000"),
            "controller_id": 1,
            "controller_epoch": 7,
        },
    ]
    dropped = {
        reason: sample(
            metrics.registry, "isrwatch_collect_log_records_dropped_total", {"reason": reason}
        )
        for reason in ("isr_update_failed",)
    }
    assert dropped == {"isr_update_failed": 1}


# --------------------------------------------------------------------------- restarts


def copy_sample(tmp_path: Path) -> list[Path]:
    paths = []
    for name in ZK_FILES:
        paths.append(tmp_path / name)
        shutil.copy(DATA / "zk" / name, paths[-1])
    return paths


def test_restart_resumes_with_no_duplicates_and_nothing_skipped(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    whole = [path.read_text().splitlines(keepends=True) for path in copy_sample(logs)]
    paths = [logs / name for name in ZK_FILES]
    for path, lines in zip(paths, whole, strict=True):
        path.write_text("".join(lines[: len(lines) // 2]))
    state = tmp_path / "state.json"
    first = Capture()
    made, _ = collector(paths, state, first)
    read_all(made)
    made.close()
    assert first.closed
    assert state.exists()
    for path, lines in zip(paths, whole, strict=True):
        with path.open("a") as out:
            out.write("".join(lines[len(lines) // 2 :]))
    second = Capture()
    resumed, _ = collector(paths, state, second)
    read_all(resumed)
    assert len(first.values) > 0
    assert len(second.values) > 0

    # events of one read are in time order; the split reads differ only in that order
    def key(value: dict[str, Any]) -> tuple[int, str]:
        return value["ts"], value["type"]

    assert sorted(first.values + second.values, key=key) == sorted(zk_expected(), key=key)
    third = Capture()
    again, _ = collector(paths, state, third)
    read_all(again)
    assert third.values == []


def test_failed_publish_reads_the_same_lines_again(tmp_path: Path) -> None:
    paths = copy_sample(tmp_path)
    state = tmp_path / "state.json"
    capture = Capture()
    capture.fail = 1
    made, _metrics = collector(paths, state, capture)
    with pytest.raises(ConnectionError):
        made.read_once()
    assert not state.exists()
    read_all(made)
    assert capture.values == zk_expected()


def test_a_crash_after_publishing_sends_identical_events(tmp_path: Path) -> None:
    """Published but not saved (the process died in between): the same events again,
    which the job drops as duplicates."""
    paths = copy_sample(tmp_path)
    state = tmp_path / "state.json"
    before = Capture()
    made, _ = collector(paths, state, before)
    made._commit = lambda: None  # type: ignore[method-assign]  # the crash: nothing saved
    made.read_once()
    after = Capture()
    restarted, _ = collector(paths, state, after)
    read_all(restarted)
    assert after.values == before.values == zk_expected()


def test_follow_across_a_rotation(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    lines = (DATA / "zk" / "server.log").read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:4]))  # up to the first commit
    state = tmp_path / "state.json"
    capture = Capture()
    made, metrics = collector([log], state, capture)
    made.read_once()
    log.rename(tmp_path / "server.log.2024-03-11-10")
    log.write_text("".join(lines[4:]))
    made.read_once()
    assert [(v["old_isr"], v["new_isr"]) for v in capture.values] == [
        ([2, 3, 1], [2, 1]),
        ([2, 1], [2, 1, 3]),
    ]
    assert (
        sample(
            metrics.registry,
            "isrwatch_collect_log_file_changes_total",
            {"file": str(log), "change": "rotated"},
        )
        == 1
    )


def test_following_reads_a_line_when_kafka_writes_it(tmp_path: Path) -> None:
    """With an hour's poll interval, only the write itself can wake the collector; the
    state file beside the log, written after each read, must not wake it in a loop."""
    log = tmp_path / "server.log"
    lines = (DATA / "zk" / "server.log").read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:4]))  # up to the first commit
    capture = Capture()
    made, metrics = collector([log], tmp_path / "logs.json", capture, poll_interval_ms=3_600_000)
    with following(made):
        assert wait_until(lambda: len(capture.values) == 1)
        with log.open("a") as out:
            out.write("".join(lines[4:]))
        assert wait_until(lambda: len(capture.values) == 2)
    assert [(v["old_isr"], v["new_isr"]) for v in capture.values] == [
        ([2, 3, 1], [2, 1]),
        ([2, 1], [2, 1, 3]),
    ]
    woken = sample(
        metrics.registry,
        "isrwatch_collect_reads_woken_total",
        {"collector": "logs", "by": "file_change"},
    )
    assert 1 <= woken <= 3  # the append, perhaps seen in parts; never the state file


def test_without_a_state_file_nothing_is_written(tmp_path: Path) -> None:
    paths = copy_sample(tmp_path)
    made, _ = collector(paths, None, Capture())
    read_all(made)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(ZK_FILES)


def test_a_broken_state_file_is_refused(tmp_path: Path) -> None:
    from streaming.feeds.collectors.state_file import StateFileError

    state = tmp_path / "state.json"
    state.write_text("{not json")
    with pytest.raises(StateFileError, match="not a collector state"):
        collector(copy_sample(tmp_path), state, Capture())


# --------------------------------------------------------------------------- Kafka 0.10-2.3

# Lines written here in the wording of Kafka 1.0-2.1's kafka.cluster.Partition (INFO
# proposal; the commit is logged at TRACE only, the cancel at INFO by the same call).
PROPOSAL = (
    "[2019-01-01 10:00:00,000] INFO [Partition t-3 broker=1] Shrinking ISR from 1,2,3"
    " to 1,2 (kafka.cluster.Partition)\n"
)
CANCEL = (
    "[2019-01-01 10:00:00,004] INFO [Partition t-3 broker=1] Cached zkVersion [7] not"
    " equal to that in zookeeper, skip updating ISR (kafka.cluster.Partition)\n"
)
LATER = "[2019-01-01 10:00:05,000] INFO Other broker (kafka.server.KafkaServer)\n"


def test_a_proposal_waits_for_its_own_file_not_for_the_file_ahead(tmp_path: Path) -> None:
    """Broker 1's first read stops at max_read_bytes right after a proposal (the budget
    holds one line, not two); broker 2's log is 5 s ahead (past CANCEL_WINDOW_MS). The
    cancel, in broker 1's next read, must still undo the proposal: no IsrChange, one
    isr_update_failed. (Taking the time of the file ahead confirmed the proposal.)"""
    one, two = tmp_path / "broker-1.log", tmp_path / "broker-2.log"
    one.write_text(PROPOSAL + CANCEL)
    two.write_text(LATER)
    capture = Capture()
    made, metrics = collector([one, two], None, capture, max_read_bytes=len(CANCEL))
    assert made.read_once()[0] == 2  # the proposal, and broker 2's line 5 s later
    read_all(made)
    made.read_once()  # nothing new: the input ends for now (flush)
    assert [v for v in capture.values if v["type"] == "IsrChange"] == []
    assert (
        sample(
            metrics.registry,
            "isrwatch_collect_log_records_dropped_total",
            {"reason": "isr_update_failed"},
        )
        == 1
    )
