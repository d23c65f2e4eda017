"""The sustained bench's own rules, on hand-computed numbers: when a backlog counts as
growing, what the batch costs say about capacity, the fetch responses it produces on
either wire, and what it overrides of the shipped configuration (the bench itself runs
in tests/integration/test_sustained_bench.py)."""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import pyarrow as pa  # type: ignore[import-untyped]
import pytest

from state import WireFetch
from state.fetch_decoder import DecodedFetches
from state.fetch_pack import decode_fetch_pack
from streaming.config import load_config

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sustained_bench", BENCH / "sustained_bench.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sustained_bench"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def produced_every_second(
    rate: int, seconds: int, backlog_per_s: int
) -> list[tuple[float, int, int]]:
    return [(float(t), rate * t, backlog_per_s * t) for t in range(seconds + 1)]


def test_a_backlog_flat_after_each_batch_has_no_slope(bench: ModuleType) -> None:
    samples = produced_every_second(1000, 30, 0)
    # Just after each batch, 2,000 records remain (produced while it ran): bounded. The
    # end at 5 s is in the first third (the job reaching its pace) and is not fitted.
    ends = [(5.0, 0), (12.0, 10_000), (18.0, 16_000), (24.0, 22_000), (30.0, 28_000)]
    slope, fitted_on = bench.backlog_slope(samples, ends, 0.0, 30.0)
    assert slope == pytest.approx(0.0, abs=1e-6)
    assert fitted_on == "4 batch ends"


def test_a_backlog_left_after_each_batch_that_grows_has_its_slope(bench: ModuleType) -> None:
    samples = produced_every_second(1000, 30, 0)
    # The job takes 500 records a second of the 1,000 produced: backlog 500 t.
    ends = [(12.0, 6000), (20.0, 10_000), (30.0, 15_000)]
    slope, _ = bench.backlog_slope(samples, ends, 0.0, 30.0)
    assert slope == pytest.approx(500.0)


def test_with_fewer_than_two_batch_ends_every_second_is_fitted(bench: ModuleType) -> None:
    samples = produced_every_second(1000, 30, 100)  # backlog 100 t
    slope, fitted_on = bench.backlog_slope(samples, [(25.0, 0)], 0.0, 30.0)
    assert slope == pytest.approx(100.0)
    assert fitted_on.startswith("every second")


def test_too_short_a_phase_has_no_slope(bench: ModuleType) -> None:
    slope, fitted_on = bench.backlog_slope(produced_every_second(1000, 2, 0), [], 0.0, 2.0)
    assert math.isnan(slope)
    assert fitted_on == "too few samples"


def test_core_costs_from_a_fitted_batch_cost(bench: ModuleType) -> None:
    # 2.5 s a batch at 100,000 partitions every 5 s trigger on 2 cores: 2 x 2.5 / 100,000
    # / 5 = 10 us of a core every second per partition; 5 us a row on 2 cores: 10 us an
    # event on one.
    costs = bench.CoreCosts.fitted(2.5, 5e-6, 100_000, 5.0)
    assert costs.per_partition_s == pytest.approx(1e-5)
    assert costs.per_event_s == pytest.approx(1e-5)
    # Polled every 10 s, a partition sends 0.2 events/s: 2 us of a core, plus the 10.
    assert costs.partitions_per_core(10) == pytest.approx(1 / 12e-6)  # 83,333
    assert costs.partitions_per_core(1) == pytest.approx(1 / 30e-6)  # 33,333
    # 1,000,000 partitions polled every 5 s: 1e6 x (10 us + 10 us x 0.4) = 14 cores.
    assert costs.cores(1_000_000, 5) == pytest.approx(14.0)


def test_fetch_values_are_fetch_responses_at_the_leaders_leo(bench: ModuleType) -> None:
    values = bench.fetch_values(1, 3, 1_000)
    # One partition (leader 0, followers 1 and 2): two fetches a round, the LEO grows by
    # 10 a round, 1,000 values a millisecond of event time.
    assert values[0] == (
        b'{"ts":1000,"topic":"topic-0000","partition":0,"leader":0,"follower":1,'
        b'"leader_epoch":0,"fetch_offset":0,"leader_leo":0,"high_watermark":0}'
    )
    assert values[2] == (
        b'{"ts":1000,"topic":"topic-0000","partition":0,"leader":0,"follower":1,'
        b'"leader_epoch":0,"fetch_offset":10,"leader_leo":10,"high_watermark":10}'
    )
    decoded = [msgspec.json.decode(v, type=WireFetch) for v in values]
    assert [f.follower for f in decoded] == [1, 2, 1]


def test_the_packed_wire_sends_what_the_json_wire_sends(bench: ModuleType) -> None:
    bench.check_packs(60)  # asserts, through the job's readers


def test_a_pack_that_differs_from_the_json_wire_is_caught(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    framed = bench.framed_pack

    def one_row_off(batch: Any) -> bytes:
        # The last row's high watermark one past the JSON wire's.
        hw = batch.column("high_watermark").to_pylist()
        hw[-1] += 1
        names = batch.schema.names
        columns = [pa.array(hw) if n == "high_watermark" else batch.column(n) for n in names]
        return bytes(framed(pa.RecordBatch.from_arrays(columns, names=names)))

    monkeypatch.setattr(bench, "framed_pack", one_row_off)
    with pytest.raises(AssertionError, match="packs differ from JSON"):
        bench.check_packs(60)


def test_packs_are_one_leaders_at_most_the_most_rows(bench: ModuleType) -> None:
    sent: list[tuple[bytes, bytes | None, int]] = []

    def collect(_topic: str, value: bytes, key: bytes | None = None, partition: int = 0) -> None:
        sent.append((value, key, partition))

    # 12,000 partitions: 4,000 followers a leader, over the most rows a pack holds; a
    # tick of 9,000 fetches crosses two leaders.
    wire = bench.PackWire(12_000, bench.Probing((), 0), collect, None)
    wire.send("fetches", 9000, 1_700_000_000_000, False)
    rows = [(key, decode_fetch_pack(value)) for value, key, _ in sent]
    sizes = [(key, len(pack)) for key, pack in rows if isinstance(pack, DecodedFetches)]
    assert sizes == [(b"0", 4000), (b"1", 4000), (b"2", 1000)]
    assert wire.i == 9000


def test_the_bench_overrides_only_what_differs_from_the_shipped_configuration(
    bench: ModuleType,
) -> None:
    shipped = load_config(None, {}, environ={})
    args = argparse.Namespace(
        shards=shipped.streaming.state_shards,
        trigger_ms=shipped.streaming.trigger_interval_ms,
        max_per_partition=shipped.kafka.max_events_per_partition_per_batch,
        source_format="python",
        wire="packed",
    )
    assert bench.bench_settings(args) == {"metrics.enabled": False}
    args.shards, args.wire, args.max_per_partition = 16, "json", 2_000_000
    assert bench.bench_settings(args) == {
        "streaming.state_shards": 16,
        "kafka.max_events_per_partition_per_batch": 2_000_000,
        "topics.fetch_responses_form": "json",
        "metrics.enabled": False,
    }
