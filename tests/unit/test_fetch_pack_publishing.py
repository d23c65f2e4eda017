"""What ``collect admin`` and the simulator send to Kafka: fetch packs
(``state.fetch_pack``, the shipped default) keyed by the leader that served their
fetches, or with ``topics.fetch_responses_form: json`` one JSON record per fetch;
the time range a reader reads of a pack for its event-time alignment; and the
collectors' contract check of a poll's fetch responses, in bulk.

A fake Kafka producer stands in for the broker (no cluster in unit tests)."""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pytest
from prometheus_client import CollectorRegistry

from state import parse_json_line
from state.events import ControllerChange, DeadLetter, FetchResponse, Source
from state.fetch_decoder import DecodedFetches, refused_fetch_values
from state.fetch_pack import (
    FetchRows,
    decode_fetch_pack,
    encode_fetch_pack,
    framed_pack,
    is_fetch_pack,
    pack_time_range,
)
from streaming.config import FetchResponsesForm, IsrwatchConfig
from streaming.feeds import wire
from streaming.feeds.collectors.admin_collector import AdminCollector
from streaming.feeds.collectors.admin_poller import AdminPoller, ClusterSnapshot, PartitionInfo
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.collectors.sending import checked
from streaming.feeds.publisher import JsonLinesPublisher, KafkaPublisher, publish_all
from streaming.feeds.simulator import ClusterSimulator, load_scenario
from streaming.feeds.wire import InputBatch, InputRecord, kafka_records
from streaming.feeds.wire_encoding import input_record
from tests.simulation import START_MS


class Sent:
    def get(self, timeout: float) -> None:
        pass


class FakeProducer:
    """Keeps what is sent, as (topic, key, value)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, bytes]] = []

    def send(self, topic: str, key: bytes, value: bytes) -> Sent:
        self.sent.append((topic, key.decode("utf-8"), value))
        return Sent()

    def flush(self, timeout: float) -> None:
        pass

    def close(self) -> None:
        pass


class OneSnapshot:
    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self._snapshot = snapshot

    def snapshot(self) -> ClusterSnapshot:
        return self._snapshot

    def close(self) -> None:
        pass


def config(form: FetchResponsesForm | None = None) -> IsrwatchConfig:
    if form is None:
        return IsrwatchConfig()
    return IsrwatchConfig.model_validate({"topics": {"fetch_responses_form": form.value}})


def poll() -> ClusterSnapshot:
    """Two partitions led by broker 1 and one by broker 2, three replicas each."""
    parts = {0: PartitionInfo(1, 4, (1, 2, 3), (1, 2, 3)), 1: PartitionInfo(2, 7, (2, 3, 1), (2,))}
    leos = {("t", 0, 1): 50, ("t", 0, 2): 48, ("t", 0, 3): 50}
    leos |= {("t", 1, 2): 9, ("t", 1, 3): 1, ("t", 1, 1): 0}
    leos |= {("u", 0, 1): 5, ("u", 0, 2): 5, ("u", 0, 3): 4}
    return ClusterSnapshot(
        ts=1_000,
        controller_id=1,
        controller_epoch=3,
        brokers=(1, 2, 3),
        partitions={"t": parts, "u": {0: PartitionInfo(1, 0, (1, 2, 3), (1, 2, 3))}},
        log_end_offsets=leos,
        high_watermarks={("t", 0): 48, ("t", 1): 0, ("u", 0): 4},
        offsets_ts=1_500,
    )


def collect(form: FetchResponsesForm | None) -> list[tuple[str, str, bytes]]:
    producer = FakeProducer()
    publisher = KafkaPublisher(config(form), producer=producer)
    metrics = CollectorMetrics("admin", CollectorRegistry())
    AdminCollector(OneSnapshot(poll()), publisher, metrics, None).poll_once()
    return producer.sent


FACTS = ("partition", "leader", "follower", "leader_epoch", "fetch_offset", "leader_leo")


def rows(decoded: DecodedFetches) -> list[tuple[Any, ...]]:
    return [
        (decoded.topic[i], *(int(decoded.ints[name][i]) for name in FACTS))
        for i in range(len(decoded))
    ]


# The poll's fetch responses by hand: (topic, partition, leader, follower, leader epoch,
# fetch offset, leader's log end offset), each follower of each partition in order.
LED_BY_1 = [("t", 0, 1, 2, 4, 48, 50), ("t", 0, 1, 3, 4, 50, 50)]
LED_BY_1 += [("u", 0, 1, 2, 0, 5, 5), ("u", 0, 1, 3, 0, 4, 5)]
LED_BY_2 = [("t", 1, 2, 3, 7, 1, 9), ("t", 1, 2, 1, 7, 0, 9)]


def test_the_json_form_is_one_record_per_fetch() -> None:
    fetches = [
        (k, v) for topic, k, v in collect(FetchResponsesForm.JSON) if topic == "fetch-responses"
    ]
    assert len(fetches) == 6
    for key, value in fetches:
        fetch = json.loads(value)
        assert key == f"{fetch['topic']}:{fetch['partition']}"


def test_collect_admin_publishes_a_pack_per_leader_keyed_by_it() -> None:
    assert config().topics.fetch_responses_form is FetchResponsesForm.PACKED  # the default
    sent = collect(None)
    controller = [v for topic, _, v in sent if topic == "controller-events"]
    assert controller
    assert all(not is_fetch_pack(v) for v in controller)
    packs = {key: v for topic, key, v in sent if topic == "fetch-responses"}
    assert sorted(packs) == ["1", "2"]
    for key, led in (("1", LED_BY_1), ("2", LED_BY_2)):
        decoded = decode_fetch_pack(packs[key])
        assert isinstance(decoded, DecodedFetches)
        assert not decoded.dead
        assert rows(decoded) == led
        assert set(decoded.ints["ts"].tolist()) == {1_500}
        assert set(decoded.error) == {"NONE"}


def fetch(topic: str, partition: int, leader: int) -> InputRecord:
    value = {"ts": 1, "topic": topic, "partition": partition, "leader": leader, "follower": 9}
    value |= {"leader_epoch": 0, "fetch_offset": 0, "leader_leo": 0, "high_watermark": 0}
    return InputRecord(Source.FETCH_RESPONSES, f"{topic}:{partition}", value)


def test_a_pack_too_long_for_one_record_is_halved(monkeypatch: pytest.MonkeyPatch) -> None:
    records = [fetch("a" * 200, partition, 1) for partition in range(40)]
    one = kafka_records(records, FetchResponsesForm.PACKED)
    assert len(one) == 1
    monkeypatch.setattr(wire, "MAX_PACK_BYTES", len(one[0].value) // 3)
    parts = kafka_records(records, FetchResponsesForm.PACKED)
    assert len(parts) == 4  # halved twice: 4 packs of 10 rows
    assert all(len(part.value) <= wire.MAX_PACK_BYTES for part in parts)
    partitions = []
    for part in parts:
        decoded = decode_fetch_pack(part.value)
        assert isinstance(decoded, DecodedFetches)
        partitions += decoded.ints["partition"].tolist()
    assert partitions == list(range(40))  # in order


def test_at_most_pack_rows_in_a_pack(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "MOST_ROWS_PER_PACK", 3)
    records = [fetch("t", partition, partition % 2) for partition in range(8)]
    packs = kafka_records(records, FetchResponsesForm.PACKED)
    sizes = []
    for pack in packs:
        decoded = decode_fetch_pack(pack.value)
        assert isinstance(decoded, DecodedFetches)
        sizes.append((pack.key, decoded.ints["partition"].tolist()))
    assert sizes == [("0", [0, 2, 4]), ("0", [6]), ("1", [1, 3, 5]), ("1", [7])]


def simulated(count: int) -> Sequence[InputRecord]:
    sim = ClusterSimulator(load_scenario("demo"), seed=5, start_ms=START_MS)
    return list(itertools.islice(sim.events(), count))


def test_the_simulator_publishes_packs_holding_its_fetches_in_order() -> None:
    records = simulated(3_000)
    fetches = [r.value for r in records if r.source is Source.FETCH_RESPONSES]
    producer = FakeProducer()
    publish_all(KafkaPublisher(config(FetchResponsesForm.PACKED), producer=producer), records)
    got: dict[int, list[tuple[Any, ...]]] = {}
    for topic, key, value in producer.sent:
        if topic != "fetch-responses":
            continue
        decoded = decode_fetch_pack(value)
        assert isinstance(decoded, DecodedFetches)
        assert not decoded.dead
        assert set(decoded.ints["leader"].tolist()) == {int(key)}
        got.setdefault(int(key), []).extend(rows(decoded))
    expected: dict[int, list[tuple[Any, ...]]] = {}
    for fetch_value in fetches:
        row = (fetch_value["topic"], *(fetch_value[name] for name in FACTS))
        expected.setdefault(fetch_value["leader"], []).append(row)
    assert got == expected
    assert sum(map(len, got.values())) == len(fetches) > 0
    # one publish (under 25,000 records): one pack a leader, not one a thousand records
    packs = [key for topic, key, _ in producer.sent if topic == "fetch-responses"]
    assert sorted(packs) == sorted(map(str, expected))


def test_a_pack_spans_the_times_of_its_rows() -> None:
    def timed(*times: int | None) -> bytes:
        values = [dict(fetch("t", i, 1).value, ts=ts) for i, ts in enumerate(times)]
        for value in values:
            if value["ts"] is None:
                del value["ts"]
        return framed_pack(pa.RecordBatch.from_pylist(values))

    assert pack_time_range(timed(5, 3, 9)) == (3, 9)
    assert pack_time_range(timed(7, -1, None, 8)) == (7, 8)  # out of range, absent: no time
    assert pack_time_range(timed(-1)) is None
    assert pack_time_range(timed(5, 3)[:-3]) is None  # truncated
    no_ts = framed_pack(pa.RecordBatch.from_pylist([{"topic": "t"}]))
    assert pack_time_range(no_ts) is None


def judged(events: list[InputRecord]) -> tuple[list[InputRecord], dict[str, float]]:
    """What ``checked`` lets through, and what it counted as invalid, by reason."""
    registry = CollectorRegistry()
    kept = checked(events, CollectorMetrics("admin", registry))
    counts = {}
    for reason in ("invalid_value", "wrong_type", "missing_field"):
        labels = {"collector": "admin", "reason": reason}
        counts[reason] = registry.get_sample_value("isrwatch_collect_invalid_events_total", labels)
    return kept, {reason: n for reason, n in counts.items() if n}


def test_the_collectors_check_judges_a_polls_fetches_as_the_parser_does() -> None:
    good, other = fetch("t", 0, 1), fetch("t", 1, 2)

    def changed(**fields: Any) -> InputRecord:
        return InputRecord(good.source, good.key, {**good.value, **fields})

    lagging, nameless = changed(fetch_offset=-1), changed(topic="")
    unsized, nulled = changed(bytes="12"), changed(bytes=None)
    integral, extended = changed(fetch_offset=5.0), changed(rack="r1")
    event = input_record(ControllerChange(ts=1, controller_id=1, controller_epoch=2))
    broken = InputRecord(event.source, event.key, {**event.value, "controller_epoch": -5})
    kept, invalid = judged([good, lagging, event, nameless, broken, unsized, other])
    assert kept == [good, event, other]
    assert invalid == {"invalid_value": 3, "wrong_type": 1}
    kept, invalid = judged([integral, nulled, extended])  # 5.0 is an integer; null is no int
    assert kept == [integral, extended]
    assert invalid == {"wrong_type": 1}


def test_the_writer_never_changes_a_value_to_fit_a_column() -> None:
    good = fetch("t", 0, 1).value
    for odd in ({"fetch_offset": 1.5}, {"bytes": 5.0}, {"error": None}):
        row = {**good, **odd}
        decoded = decode_fetch_pack(encode_fetch_pack([good, row]))
        assert isinstance(decoded, DecodedFetches)
        # a null cell is an absent field: the row is ``good`` then
        present = {name: cell for name, cell in row.items() if cell is not None}
        expected = parse_json_line(Source.FETCH_RESPONSES, present)
        if isinstance(expected, DeadLetter):
            assert [(i, letter.reason) for i, letter in decoded.dead] == [(1, expected.reason)]
        else:
            assert isinstance(expected, FetchResponse)
            assert not decoded.dead
            assert int(decoded.ints["fetch_offset"][1]) == expected.fetch_offset
    with pytest.raises(pa.ArrowTypeError):  # no column holds 1 and True apart
        encode_fetch_pack([good, {**good, "leader": True}])
    error_later = [good, {**good, "error": "NOT_LEADER_OR_FOLLOWER"}]  # not in the first row
    decoded = decode_fetch_pack(encode_fetch_pack(error_later))
    assert isinstance(decoded, DecodedFetches)
    assert decoded.error == ["NONE", "NOT_LEADER_OR_FOLLOWER"]


# ------------------------------------------------ a poll's fetch responses as columns
#
# ``collect admin`` holds a poll's fetch responses as columns (``FetchRows``) from the
# snapshot to the packs: the same records, packs and verdicts as one record a fetch.


class PollOutcome:
    """What one poll of ``collect admin`` published: its count, the fetch-responses
    records (key, value) and the collector's metrics."""

    def __init__(
        self, count: int, sent: list[tuple[str, str, bytes]], registry: CollectorRegistry
    ) -> None:
        self.count = count
        self.fetches = [(key, value) for topic, key, value in sent if topic == "fetch-responses"]
        self.registry = registry

    def counted(self, metric: str, **labels: str) -> float | None:
        value = self.registry.get_sample_value(metric, {"collector": "admin", **labels})
        return None if value is None else float(value)


def published(form: FetchResponsesForm, snapshot: ClusterSnapshot) -> PollOutcome:
    producer = FakeProducer()
    registry = CollectorRegistry()
    metrics = CollectorMetrics("admin", registry)
    collector = AdminCollector(
        OneSnapshot(snapshot), KafkaPublisher(config(form), producer=producer), metrics, None
    )
    count = collector.poll_once()
    return PollOutcome(count, producer.sent, registry)


def value_of(row: tuple[Any, ...], high_watermark: int) -> dict[str, Any]:
    """The JSON value of a row of LED_BY_1 / LED_BY_2 (the contract's field order)."""
    topic, partition, leader, follower, epoch, offset, leader_leo = row
    return {
        "ts": 1_500,
        "topic": topic,
        "partition": partition,
        "leader": leader,
        "follower": follower,
        "leader_epoch": epoch,
        "fetch_offset": offset,
        "leader_leo": leader_leo,
        "high_watermark": high_watermark,
    }


# The poll's high watermarks (poll()), and its fetches in the poller's order: partitions
# by topic and number, followers in replica order.
WATERMARKS = {("t", 0): 48, ("t", 1): 0, ("u", 0): 4}
IN_POLL_ORDER = [*LED_BY_1[:2], *LED_BY_2, *LED_BY_1[2:]]


def test_the_json_form_of_a_poll_is_its_fetches_in_order_as_before() -> None:
    outcome = published(FetchResponsesForm.JSON, poll())
    expected = [
        (f"{row[0]}:{row[1]}", value_of(row, WATERMARKS[(row[0], row[1])])) for row in IN_POLL_ORDER
    ]
    assert [(key, json.loads(value)) for key, value in outcome.fetches] == expected
    # the bytes of wire.encode: compact, the fields in the contract's order
    assert outcome.fetches[0][1] == (
        b'{"ts":1500,"topic":"t","partition":0,"leader":1,"follower":2,"leader_epoch":4,'
        b'"fetch_offset":48,"leader_leo":50,"high_watermark":48}'
    )
    counted = outcome.counted(
        "isrwatch_collect_events_total", source="fetch-responses", type="FetchResponse"
    )
    assert counted == 6
    assert outcome.count == len(AdminPoller().diff(poll()))  # its controller events too


def test_the_dry_run_writes_a_polls_fetches_one_line_each() -> None:
    out = io.StringIO()
    metrics = CollectorMetrics("admin", CollectorRegistry())
    AdminCollector(OneSnapshot(poll()), JsonLinesPublisher(out), metrics, None).poll_once()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    fetches = [line for line in lines if line["source"] == "fetch-responses"]
    assert fetches == [
        {
            "source": "fetch-responses",
            "key": f"{row[0]}:{row[1]}",
            "value": value_of(row, WATERMARKS[(row[0], row[1])]),
        }
        for row in IN_POLL_ORDER
    ]
    assert lines[: len(lines) - 6] == [line for line in lines if line not in fetches]


def test_the_poller_diff_is_its_poll_one_record_each() -> None:
    batch = AdminPoller().poll(poll())
    assert isinstance(batch, InputBatch)
    assert len(batch.fetches) == 6
    assert all(record.source is Source.CONTROLLER_EVENTS for record in batch.records)
    assert list(batch) == AdminPoller().diff(poll())
    assert [(r.key, dict(r.value)) for r in batch[len(batch.records) :]] == [
        (f"{row[0]}:{row[1]}", value_of(row, WATERMARKS[(row[0], row[1])])) for row in IN_POLL_ORDER
    ]


def test_a_polls_columns_are_packed_by_leader_as_its_records_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(wire, "MOST_ROWS_PER_PACK", 3)
    batch = AdminPoller().poll(poll())
    packs = kafka_records(InputBatch([], batch.fetches), FetchResponsesForm.PACKED)
    got = []
    for pack in packs:
        decoded = decode_fetch_pack(pack.value)
        assert isinstance(decoded, DecodedFetches)
        got.append((pack.key, rows(decoded)))
    # leader 1 first (its first row comes first), at most 3 rows a pack, rows in order
    assert got == [("1", LED_BY_1[:3]), ("1", LED_BY_1[3:]), ("2", LED_BY_2)]
    # the same bytes as the same fetches one record each (the simulator's way)
    each = [r for r in batch if r.source is Source.FETCH_RESPONSES]
    one_by_one = kafka_records(each, FetchResponsesForm.PACKED)
    assert [p.value for p in packs] == [p.value for p in one_by_one]


def with_offset(
    snapshot: ClusterSnapshot, replica: tuple[str, int, int], leo: int
) -> ClusterSnapshot:
    return replace(snapshot, log_end_offsets={**snapshot.log_end_offsets, replica: leo})


@pytest.mark.parametrize("form", list(FetchResponsesForm))
def test_an_invalid_row_is_refused_with_its_reason_and_the_rest_published(
    form: FetchResponsesForm, caplog: pytest.LogCaptureFixture
) -> None:
    broken = with_offset(poll(), ("t", 0, 3), -1)  # a follower's log end offset: -1
    outcome = published(form, broken)
    invalid = outcome.counted("isrwatch_collect_invalid_events_total", reason="invalid_value")
    assert invalid == 1
    refused = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(refused) == 1
    assert refused[0].startswith(
        "not sending an event that breaks the contract (invalid_value: fetch_offset must be >= 0): "
    )
    assert json.loads(refused[0].split("): ", 1)[1]) == {
        **value_of(LED_BY_1[1], 48),
        "fetch_offset": -1,
    }
    kept = [row for row in IN_POLL_ORDER if row != LED_BY_1[1]]
    if form is FetchResponsesForm.JSON:
        got = [json.loads(value) for _, value in outcome.fetches]
        assert got == [value_of(row, WATERMARKS[(row[0], row[1])]) for row in kept]
    else:
        by_leader = {}
        for key, value in outcome.fetches:
            decoded = decode_fetch_pack(value)
            assert isinstance(decoded, DecodedFetches)
            assert not decoded.dead
            by_leader[key] = rows(decoded)
        assert by_leader == {"1": [LED_BY_1[0], *LED_BY_1[2:]], "2": LED_BY_2}
    counted = outcome.counted(
        "isrwatch_collect_events_total", source="fetch-responses", type="FetchResponse"
    )
    assert counted == 5


def test_the_columns_check_gives_the_verdicts_of_the_values_check() -> None:
    """``FetchRows.checked`` (a pack's check, on a poll's columns) and the check of the
    same values one record each (``refused_fetch_values``): the same dead letters."""
    good = [value_of(row, 5) for row in IN_POLL_ORDER]
    values = [
        good[0],
        {**good[1], "leader_leo": -3},
        good[2],
        {**good[3], "topic": ""},
        {**good[4], "partition": 1_000_000},
        {**good[5], "ts": 9_000_000_000_000},
    ]
    columns = FetchRows.of_columns(
        **{name: [value[name] for value in values] for name in values[0]}
    )
    kept, dead = columns.checked()
    assert kept.values() == [good[0], good[2]]
    assert dead == sorted(refused_fetch_values(values).items())
    assert [(row, letter.reason.value, letter.detail) for row, letter in dead] == [
        (1, "invalid_value", "leader_leo must be >= 0"),
        (3, "invalid_value", "topic must not be empty"),
        (4, "invalid_value", "partition must be <= 999999"),
        (5, "invalid_value", "ts must be <= 7258118399999"),
    ]
    everyone, none = FetchRows.of_columns(
        **{name: [value[name] for value in good] for name in good[0]}
    ).checked()
    assert (everyone.values(), none) == (good, [])


def test_the_state_keeps_its_partitions_while_only_offsets_move() -> None:
    """The state a restarted collector diffs against: the last snapshot's, whether its
    partitions were made again or kept from the poll before."""
    poller = AdminPoller()
    first = poll()
    poller.diff(first)
    assert poller.state()["snapshot"] == first.to_json()
    moved = replace(with_offset(first, ("t", 0, 2), 50), ts=2_000, offsets_ts=2_500, brokers=(1, 2))
    poller.diff(moved)
    saved = poller.state()
    assert saved["snapshot"] == moved.to_json()
    assert saved["snapshot"]["ts"] == 2_000
    assert saved["snapshot"]["brokers"] == [1, 2]
    shrunk = dict(first.partitions["t"]) | {0: PartitionInfo(1, 4, (1, 2, 3), (1, 2))}
    changed = replace(moved, ts=3_000, partitions={**first.partitions, "t": shrunk})
    events = poller.diff(changed)
    assert [e.event_type for e in events if e.source is Source.CONTROLLER_EVENTS] == ["IsrChange"]
    assert poller.state()["snapshot"]["partitions"] == {
        "t": {"0": [1, 4, [1, 2, 3], [1, 2]], "1": [2, 7, [2, 3, 1], [2]]},
        "u": {"0": [1, 0, [1, 2, 3], [1, 2, 3]]},
    }
    # and a poller started from it diffs on from there
    again = AdminPoller(poller.state())
    assert [e.event_type for e in again.diff(changed) if e.source is Source.CONTROLLER_EVENTS] == []
