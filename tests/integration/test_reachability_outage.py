"""The reachability watch (streaming.job.reachability) against the embedded broker behind
the fault campaign's proxy (streaming/tools/fault_proxy.py): each kind of outage (connections
refused, hanging, cut mid-response) makes ``isrwatch_source_up`` 0 within one trigger,
while the planner's status still says its last call succeeded (a planner that a stuck
batch keeps from being called), and the source is up again once the broker is back.

The one timed assertion is the product's promise, detection within one trigger, judged
on the watch's own clock (when the failing check ended) at the default 5 s trigger:
the rule gives 3.75 s (docs/faults.md gives the figures measured at 1 s).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming.job.metrics import HealthExporter
from streaming.job.reachability import Reachability, ReachabilityWatch, watch_timing
from streaming.tools.embedded_broker import EmbeddedBroker, free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from streaming.tools.fault_proxy import FaultProxy, ProxyMode

pytestmark = pytest.mark.integration

TRIGGER_MS = 5000  # streaming.trigger_interval_ms's default
PATIENCE_S = 60.0  # for the broker to be seen again: not a promise, only "not never"


@pytest.fixture(scope="module")
def proxied() -> Iterator[FaultProxy]:
    port = free_port()
    with (
        FaultProxy(("127.0.0.1", port)) as proxy,
        EmbeddedBroker(port=port, advertised_port=proxy.port) as broker,
    ):
        broker.start()
        yield proxy


def wait_for(watch: ReachabilityWatch, reachable: bool) -> Reachability:
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        state = watch.state
        if state is not None and state.reachable is reachable:
            return state
        time.sleep(0.02)
    raise AssertionError(f"the watch never saw reachable={reachable}: {watch.state}")


def source_up(exporter: HealthExporter) -> float:
    return next(
        sample.value
        for family in exporter.collect()
        for sample in family.samples
        if sample.name == "isrwatch_source_up"
    )


@pytest.mark.parametrize("mode", [ProxyMode.REFUSE, ProxyMode.HANG, ProxyMode.DROP])
def test_an_outage_is_reported_within_one_trigger(
    proxied: FaultProxy, mode: ProxyMode, tmp_path: Path
) -> None:
    status = tmp_path / "source-status.json"
    planner = {"consecutive_failures": 0, "last_success_at": time.time()}  # answered just now
    status.write_text(json.dumps({"bootstrap_servers": [proxied.address], **planner}))
    exporter = HealthExporter(source_status=status)
    watch = ReachabilityWatch(
        {"bootstrap.servers": proxied.address}, watch_timing(TRIGGER_MS, 30000)
    )
    exporter.watch = watch.start()
    try:
        wait_for(watch, reachable=True)
        assert source_up(exporter) == 1
        outage_began = time.time()
        proxied.set_mode(mode)
        down = wait_for(watch, reachable=False)
        assert down.checked_at - outage_began <= TRIGGER_MS / 1000, down
        assert source_up(exporter) == 0
        proxied.set_mode(ProxyMode.PASS)
        wait_for(watch, reachable=True)
        assert source_up(exporter) == 1
    finally:
        proxied.set_mode(ProxyMode.PASS)
        watch.stop()
