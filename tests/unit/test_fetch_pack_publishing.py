"""What ``collect admin`` and the simulator send to Kafka: fetch packs
(``state.fetch_pack``, the shipped default) keyed by the leader that served their
fetches, or with ``topics.fetch_responses_form: json`` one JSON record per fetch;
the time range a reader reads of a pack for its event-time alignment; and the
collectors' contract check of a poll's fetch responses, in bulk.

A fake Kafka producer stands in for the broker (no cluster in unit tests)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pytest
from prometheus_client import CollectorRegistry

from state import parse_json_line
from state.events import ControllerChange, DeadLetter, FetchResponse, Source
from state.fetch_decoder import DecodedFetches
from state.fetch_pack import (
    decode_fetch_pack,
    encode_fetch_pack,
    framed_pack,
    is_fetch_pack,
    pack_time_range,
)
from streaming.config import FetchResponsesForm, IsrwatchConfig
from streaming.feeds import wire
from streaming.feeds.collectors.admin_collector import AdminCollector
from streaming.feeds.collectors.admin_poller import ClusterSnapshot, PartitionInfo
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.collectors.sending import checked
from streaming.feeds.publisher import KafkaPublisher, publish_all
from streaming.feeds.simulator import ClusterSimulator, load_scenario
from streaming.feeds.wire import InputRecord, kafka_records
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
