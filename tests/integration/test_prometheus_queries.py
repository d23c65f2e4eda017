"""Every PromQL expression of the dashboards and alert rules, run by a real Prometheus.

A Prometheus (Debian's package, which .ci/run installs) is started on loopback with a
temporary configuration and storage, and scrapes a running isrwatch exporter fed by the
cluster simulator, one scenario at a time. Every expression (dashboard variables set
through their own queries, as an operator would in Grafana) must run, return a finite
value in the scenarios where it should (EXPECTED), and nothing where it must not (QUIET).

Every scenario runs in this process through the job's own stateful step and sink
(``streaming.job.shard_state`` through ``streaming.job.sinks.BatchSink``, as Spark calls them) to
the real exporter: no Spark, no broker, and each micro-batch waits for two scrapes, so
every state of a scenario reaches Prometheus however slow the machine. One scenario also
runs through ``isrwatch demo`` (broker, Spark job and its exporter, in a subprocess),
where only the states that last are required.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from prometheus_client import start_http_server
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from dashboards.defaults import RULES_FILE
from dashboards.generate import dashboards, render
from dashboards.promql import substitute, variables
from state import ReplicationModel, Shard
from state.events import Source
from state.settings import RuleSettings
from streaming.feeds.simulator.cluster import ClusterSimulator
from streaming.feeds.simulator.scenario import load_scenario
from streaming.job.metrics import HealthExporter
from streaming.job.routing import route
from streaming.job.shard_state import ShardJobSettings, ShardSnapshot, process
from streaming.job.sinks import BatchSink
from streaming.tools.embedded_broker import free_port

pytestmark = pytest.mark.integration

READY_TIMEOUT_S = 60.0
SCRAPE_TIMEOUT_S = 60.0
SCRAPE_INTERVAL = "100ms"
STEP = "0.1"  # range queries see every scrape


# ---------------------------------------------------------------------- Prometheus


@dataclass(frozen=True)
class PrometheusApi:
    url: str

    def _get(self, path: str, params: Iterable[tuple[str, str]]) -> Any:
        query = urllib.parse.urlencode(list(params))
        try:
            with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=30) as response:
                body = json.load(response)
        except urllib.error.HTTPError as error:  # a bad query: 400 with the reason
            body = json.load(error)
        if body.get("status") != "success":
            raise AssertionError(f"{body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self._get("/api/v1/query", [("query", expr)])
        result: list[dict[str, Any]] = data["result"]
        return result

    def query_range(self, expr: str, start: float, end: float) -> list[dict[str, Any]]:
        params = [("query", expr), ("start", f"{start:.3f}"), ("end", f"{end:.3f}"), ("step", STEP)]
        result: list[dict[str, Any]] = self._get("/api/v1/query_range", params)["result"]
        return result

    def label_values(self, selector: str, label: str, start: float, end: float) -> list[str]:
        """What Grafana's ``label_values(selector, label)`` lists over the time range."""
        params = [("match[]", selector), ("start", f"{start:.3f}"), ("end", f"{end:.3f}")]
        series: list[dict[str, str]] = self._get("/api/v1/series", params)
        return sorted({s[label] for s in series if label in s})


@contextmanager
def running_prometheus(workdir: Path, target: str) -> Iterator[PrometheusApi]:
    """A Prometheus on a free loopback port scraping ``target`` as job ``isrwatch``."""
    binary = shutil.which("prometheus")
    assert binary, "prometheus not found: install Debian's prometheus package (.ci/run does)"
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": SCRAPE_INTERVAL, "scrape_timeout": SCRAPE_INTERVAL},
                "scrape_configs": [
                    {"job_name": "isrwatch", "static_configs": [{"targets": [target]}]}
                ],
            }
        )
    )
    port = free_port()
    log_path = workdir / "prometheus.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            assert process.poll() is None, f"prometheus exited: {log_path.read_text()}"
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"prometheus not ready: {log_path.read_text()}"
            time.sleep(0.2)
        yield PrometheusApi(url)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class ScrapeCounter(Collector):
    """Counts the exporter's scrapes (each one collects the registry once)."""

    def __init__(self) -> None:
        self.scrapes = 0
        self._changed = threading.Condition()

    def collect(self) -> Iterator[Metric]:
        with self._changed:
            self.scrapes += 1
            self._changed.notify_all()
        return iter(())

    def wait(self, scrapes: int) -> None:
        """Until ``scrapes`` more scrapes began: the last one saw every earlier update."""
        with self._changed:
            target = self.scrapes + scrapes
            ok = self._changed.wait_for(lambda: self.scrapes >= target, SCRAPE_TIMEOUT_S)
        assert ok, "Prometheus stopped scraping the exporter"


# ---------------------------------------------------------------------- the job


class InProcessJob:
    """The job's routing and stateful step of every shard, as Spark runs them per batch."""

    def __init__(self, shards: int) -> None:
        self.settings = ShardJobSettings(RuleSettings(), shards, watermark_delay_ms=60_000)
        self.snapshots = [
            ShardSnapshot(ReplicationModel(self.settings.rules, Shard(i, shards)))
            for i in range(shards)
        ]
        self.stream_clock = -1
        self.offsets = {s.value: 0 for s in Source}

    def batch(self, envelopes: list[dict[str, Any]]) -> pd.DataFrame:
        """The rows the stateful step hands the sink (health, dead letters, stats)."""
        routed = (
            route(self._records(envelopes), {s.value: s for s in Source}, self.settings.shards)
            if envelopes
            else None
        )
        outputs = []
        for shard, snapshot in enumerate(self.snapshots):
            rows = None if routed is None else routed[routed["shard"] == shard]
            rows = rows if rows is not None and len(rows) else None
            outputs.append(process(snapshot, rows, self.stream_clock, self.settings))
        if routed is not None and routed["ts"].notna().any():
            self.stream_clock = max(self.stream_clock, int(routed["ts"].max()))
        return pd.concat(outputs, ignore_index=True)

    def _records(self, envelopes: list[dict[str, Any]]) -> pd.DataFrame:
        rows = []
        for envelope in envelopes:
            value = envelope["value"]
            raw = value if isinstance(value, bytes) else json.dumps(value).encode()
            rows.append(
                {
                    "topic": envelope["source"],
                    "partition": 0,
                    "offset": self.offsets[envelope["source"]],
                    "value": raw,
                }
            )
            self.offsets[envelope["source"]] += 1
        return pd.DataFrame(rows)


# ---------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Expression:
    name: str  # "dashboard uid / panel title / refId" or "rule AlertName"
    expr: str
    dashboard: str | None = None  # uid of the dashboard whose variables it uses


def dashboard_models() -> dict[str, dict[str, Any]]:
    return {d["uid"]: d for d in (json.loads(render(model)) for model in dashboards())}


def all_expressions() -> list[Expression]:
    found = []
    for uid, dashboard in dashboard_models().items():
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                name = f"{uid} / {panel['title']} / {target['refId']}"
                found.append(Expression(name, target["expr"], uid))
    groups = yaml.safe_load(RULES_FILE.read_text())["groups"]
    found += [Expression(f"rule {r['alert']}", r["expr"]) for g in groups for r in g["rules"]]
    return found


def assignments(
    api: PrometheusApi, dashboard: dict[str, Any], start: float, end: float
) -> list[dict[str, str]]:
    """Every way to set the dashboard's variables, each listed by its own query.

    A multi-value variable takes its "All" value; a single-value one each value its query
    lists (given the variables before it), as an operator picks them in turn.
    """
    found: list[dict[str, str]] = [{}]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        name, extended = variable["name"], []
        for values in found:
            selector, _, label = (
                substitute(variable["query"], values)
                .removeprefix("label_values(")
                .removesuffix(")")
                .rpartition(",")
            )
            if variable.get("includeAll"):
                extended.append({**values, name: variable["allValue"]})
            else:
                listed = api.label_values(selector, label.strip(), start, end)
                extended += [{**values, name: value} for value in listed]
        found = extended
    return found


def has_finite_value(result: list[dict[str, Any]]) -> bool:
    return any(math.isfinite(float(v)) for series in result for _, v in series["values"])


# ---------------------------------------------------------------------- the scenarios


@dataclass(frozen=True)
class Run:
    """One simulator scenario fed to the exporter."""

    scenario: str
    overrides: tuple[tuple[str, object], ...] = ()
    troubles: bool = False
    """Inject the monitor's own troubles: event time an hour behind the wall clock, a
    start without fetch responses, 5% records that are not JSON, the Kafka source failing
    for a while, and at the end the exporter gone (Prometheus' ``up`` 0)."""


RUNS = [
    Run("steady", (("duration_s", 90),), troubles=True),
    Run("slow-follower"),
    # The crash makes partitions offline only if some share no replica with a live broker:
    # the two-replica topic gets one replica.
    Run("broker-crash-and-bounce", (("topics.2.replication_factor", 1),)),
    Run("controller-failover"),
    Run("isr-churn-storm"),
    Run("topic-lifecycle"),
    Run("stuck-leader"),
    Run("slow-controller"),
    Run("rolling-restart"),
]
STEP_MS = 3_000  # simulated time per micro-batch
SEED = 0

UNHEALTHY = {
    "slow-follower",
    "broker-crash-and-bounce",
    "controller-failover",
    "isr-churn-storm",
    "stuck-leader",
    "slow-controller",
}
SHRINKS = {"slow-follower", "isr-churn-storm", "stuck-leader", "slow-controller"}
ISR_CHANGES = {
    "slow-follower",
    "broker-crash-and-bounce",
    "controller-failover",
    "isr-churn-storm",
    "slow-controller",
}
STALE = {"slow-follower", "broker-crash-and-bounce", "isr-churn-storm", "slow-controller"}
URP = ISR_CHANGES
CRASH = {"broker-crash-and-bounce"}
TROUBLES = {"steady"}
PROPAGATED = {"slow-follower", "broker-crash-and-bounce", "controller-failover", "slow-controller"}
"""Where some ISR change is seen reaching every live broker's cache."""
RESTARTS = {"broker-crash-and-bounce", "controller-failover", "rolling-restart"}
"""Where a broker comes back (planned maintenance: catching up within the grace period)."""
FLAPPING = {"isr-churn-storm"}
BROKER_DOWN = {"broker-crash-and-bounce", "controller-failover", "rolling-restart"}

DRILLDOWN = "isrwatch-partition"
OVERVIEW = "isrwatch-overview"
MONITOR = "isrwatch-monitor"
EXPECTED: dict[str, set[str]] = {
    # What a scenario must show; an expression not named here has data in every run.
    f"{OVERVIEW} / Overdue shrinks / A": {"stuck-leader"},  # by-status gauges: no zeros
    f"{OVERVIEW} / Followers not in sync, by status / A": UNHEALTHY,
    f"{OVERVIEW} / Under-replicated by topic / A": URP,
    f"{OVERVIEW} / Under min ISR and offline by topic / A": CRASH,
    f"{OVERVIEW} / Under min ISR and offline by topic / B": CRASH,
    f"{OVERVIEW} / Predicted under-replicated by topic / A": SHRINKS,
    f"{OVERVIEW} / Overdue shrinks by topic / A": {"stuck-leader"},
    f"{OVERVIEW} / Metadata stale by topic / A": STALE,
    f"{OVERVIEW} / ISR shrinks and expands / A": ISR_CHANGES,
    f"{OVERVIEW} / ISR changes by topic / A": ISR_CHANGES,
    f"{OVERVIEW} / ISR changes by leader / A": ISR_CHANGES,
    f"{OVERVIEW} / Observed metadata propagation delay / A": PROPAGATED,
    f"{OVERVIEW} / Observed metadata propagation delay / B": PROPAGATED,
    f"{OVERVIEW} / Followers not in sync, by hosting broker / A": UNHEALTHY,
    f"{OVERVIEW} / Led partitions by condition / A": UNHEALTHY,
    f"{OVERVIEW} / Overdue shrinks by leader / A": {"stuck-leader"},
    f"{OVERVIEW} / Broker bounces / A": CRASH,
    f"{OVERVIEW} / Unhealthy partitions / A": UNHEALTHY,
    f"{OVERVIEW} / Unhealthy partitions by cause / A": UNHEALTHY,
    f"{OVERVIEW} / Causes now / A": UNHEALTHY,
    f"{OVERVIEW} / Causes now / B": UNHEALTHY,
    f"{OVERVIEW} / Causes now / C": UNHEALTHY,
    f"{OVERVIEW} / Brokers in planned maintenance / A": RESTARTS,
    f"{OVERVIEW} / Flapping followers / A": FLAPPING,
    f"{OVERVIEW} / Flapping followers / B": FLAPPING,
    f"{OVERVIEW} / Followers Kafka is about to remove, or should have / A": SHRINKS,
    # controller-failover's only followers not in sync are broker 2's, OFFLINE and not
    # caught up since the elections that reset them: no lag time (docs/health-record.md).
    f"{DRILLDOWN} / Follower lag time against the shrink thresholds / A": UNHEALTHY
    - {"controller-failover"},
    f"{DRILLDOWN} / Follower lag time against the shrink thresholds / B": UNHEALTHY,
    f"{DRILLDOWN} / Follower lag time against the shrink thresholds / C": UNHEALTHY,
    f"{DRILLDOWN} / Kafka removes the follower / A": SHRINKS,
    f"{DRILLDOWN} / Follower status over time / A": UNHEALTHY,
    f"{DRILLDOWN} / Messages behind the leader / A": UNHEALTHY,
    f"{DRILLDOWN} / Partition conditions over time / A": UNHEALTHY,
    f"{DRILLDOWN} / Propagation window, seconds from the monitor's clock / A": STALE,
    f"{DRILLDOWN} / Propagation window, seconds from the monitor's clock / B": STALE,
    f"{DRILLDOWN} / High watermark and leader LEO / A": UNHEALTHY,
    f"{DRILLDOWN} / High watermark and leader LEO / B": UNHEALTHY,
    f"{MONITOR} / Dead letters by reason / A": TROUBLES | {"controller-failover"},
    "rule UnderReplicatedPartitions": URP,
    "rule UnderMinIsr": CRASH,
    "rule OfflinePartitions": CRASH,
    # an offline partition whose ISR and ELR are both empty: Kafka 4.0+'s ELR only; the
    # simulator keeps the last leader in the ISR, as Kafka without the ELR does. The
    # promtool test fires it, and test_eligible_leaders the model's condition behind it.
    "rule OfflineUncleanOnly": set(),
    "rule PredictedIsrShrink": SHRINKS,
    "rule IsrShrinkOverdue": {"stuck-leader"},
    "rule MetadataPropagationOverdue": {"slow-controller"},
    "rule IsrFlapping": {"isr-churn-storm"},
    # controller-failover's only cause is broker 2 down: BrokerDown's, not this rule's
    "rule ReplicationCause": UNHEALTHY - {"controller-failover"},
    "rule BrokerDown": BROKER_DOWN,
    # a simulated leader serves its followers until it crashes, and the controller counts
    # it dead 6 s later (session_timeout_ms), before its news is T / 2 old (15 s; 1 s
    # for isr-churn-storm's broker 1, which never crashes): a hung leader is the lab's
    # paused broker (the promtool test fires it)
    "rule LeaderSilent": set(),
    "rule FollowerFlapping": FLAPPING,
    "rule IsrwatchMonitorDown": TROUBLES,
    "rule IsrwatchBatchesStalled": set(),  # 5 minutes without a batch: promtool tests it
    "rule IsrwatchSourceDown": TROUBLES,
    "rule IsrwatchNoEvents": TROUBLES,
    "rule IsrwatchWatermarkStalled": TROUBLES,
    "rule IsrwatchDeadLettersRising": TROUBLES,
}
CLUSTER_RULES = [
    "rule UnderReplicatedPartitions",
    "rule UnderMinIsr",
    "rule OfflinePartitions",
    "rule PredictedIsrShrink",
    "rule IsrShrinkOverdue",
    "rule MetadataPropagationOverdue",
    "rule IsrFlapping",
    "rule ReplicationCause",
    "rule BrokerDown",
    "rule LeaderSilent",
    "rule FollowerFlapping",
]
QUIET: dict[str, set[str]] = {
    # Where a rule must return nothing: a healthy cluster raises no cluster alert, and
    # Kafka failing to act (overdue shrink, overdue metadata) is only where it fails.
    **{rule: {"steady"} for rule in CLUSTER_RULES},
    "rule OfflinePartitions": {r.scenario for r in RUNS} - CRASH,
    "rule OfflineUncleanOnly": {r.scenario for r in RUNS},
    "rule LeaderSilent": {r.scenario for r in RUNS},
    "rule IsrShrinkOverdue": {r.scenario for r in RUNS} - {"stuck-leader"},
    "rule MetadataPropagationOverdue": {r.scenario for r in RUNS} - {"slow-controller"},
    # a broker down pages only where one stopped without a controlled shutdown
    "rule BrokerDown": {r.scenario for r in RUNS} - BROKER_DOWN,
}


def batches(run: Run, start_ms: int) -> Iterator[list[dict[str, Any]]]:
    """The scenario's records in micro-batches of ``STEP_MS`` of event time."""
    simulator = ClusterSimulator(load_scenario(run.scenario, dict(run.overrides)), SEED, start_ms)
    batch: list[dict[str, Any]] = []
    edge = start_ms + STEP_MS
    for event in simulator.events():
        while event.ts >= edge:
            yield batch
            batch, edge = [], edge + STEP_MS
        batch.append(event.envelope())
    yield batch


def feed(run: Run, exporter: HealthExporter, counter: ScrapeCounter, status: Path) -> None:
    """Every micro-batch through the job's stateful step and sink, two scrapes each."""
    sink = BatchSink(None, "partition-health", "isrwatch-dead-letters", exporter)
    job = InProcessJob(shards=4)
    lag_ms = 3_600_000 if run.troubles else 0
    stream = batches(run, int(time.time() * 1000) - lag_ms)
    if run.troubles:
        stream = chain([[], []], stream)  # the job runs before any fetch response arrives
    for batch_id, events in enumerate(stream):
        failing = run.troubles and 10 <= batch_id < 15
        status.write_text(
            json.dumps(
                {
                    "consecutive_failures": 3 if failing else 0,
                    "failures_total": 3 * batch_id // 10,
                    "last_success_at": time.time(),
                }
            )
        )
        if run.troubles:
            events = events + [{"source": "fetch-responses", "value": b"{not json"}] * (
                len(events) // 20 + 1
            )
        sink.write(batch_id, job.batch(events), time.monotonic())
        counter.wait(2)


def check(
    api: PrometheusApi,
    scenario: str,
    start: float,
    end: float,
    transient: frozenset[str] = frozenset(),
) -> list[str]:
    """Every expression runs; it has data where EXPECTED (unless ``transient``: a state
    the real job's micro-batches may step over), none where QUIET."""
    models = dashboard_models()
    settings: dict[str, list[dict[str, str]]] = {}
    failures = []
    for expression in all_expressions():
        candidates: list[dict[str, str]] = [{}]
        if expression.dashboard is not None:
            if expression.dashboard not in settings:
                settings[expression.dashboard] = assignments(
                    api, models[expression.dashboard], start, end
                )
            # No setting at all (no unhealthy partition to pick): placeholders, to parse.
            candidates = settings[expression.dashboard] or [
                dict.fromkeys(variables(expression.expr), "none")
            ]
        found = False
        for values in candidates:
            expr = substitute(expression.expr, values)
            try:
                result = api.query_range(expr, start, end)
            except AssertionError as error:
                failures.append(f"{expression.name}: does not run: {error}\n    {expr}")
                break
            if has_finite_value(result):
                found = True
                break
        expected = EXPECTED.get(expression.name, {r.scenario for r in RUNS})
        if scenario in expected and not found and expression.name not in transient:
            failures.append(f"{expression.name}: no data\n    {expression.expr}")
        if scenario in QUIET.get(expression.name, set()) and found:
            failures.append(f"{expression.name}: data, where it must have none")
    return failures


def test_every_expression_has_a_scenario_and_every_scenario_name_is_run() -> None:
    names = {e.name for e in all_expressions()}
    scenarios = {r.scenario for r in RUNS}
    assert EXPECTED.keys() <= names, EXPECTED.keys() - names
    assert QUIET.keys() <= names, QUIET.keys() - names
    assert set().union(*EXPECTED.values(), *QUIET.values()) <= scenarios
    never = {name for name, where in EXPECTED.items() if not where}
    # what no simulated scenario can show (each has its reason beside it in EXPECTED)
    assert never == {
        "rule IsrwatchBatchesStalled",
        "rule OfflineUncleanOnly",
        "rule LeaderSilent",
    }


@pytest.mark.parametrize("run", RUNS, ids=[r.scenario for r in RUNS])
def test_expressions_in_scenario(run: Run, tmp_path: Path) -> None:
    status = tmp_path / "source-status.json"
    exporter = HealthExporter(source_status=status)
    counter = ScrapeCounter()
    exporter.registry.register(counter)
    port = free_port()
    server, _ = start_http_server(port, addr="127.0.0.1", registry=exporter.registry)
    try:
        with running_prometheus(tmp_path / "prometheus", f"127.0.0.1:{port}") as api:
            start = time.time()
            counter.wait(2)
            feed(run, exporter, counter, status)
            if run.troubles:  # the monitor goes away
                server.shutdown()
                server.server_close()
                deadline = time.monotonic() + SCRAPE_TIMEOUT_S
                while not api.query('up{job="isrwatch"} == 0'):
                    assert time.monotonic() < deadline, "Prometheus still scrapes the exporter"
                    time.sleep(0.1)
            failures = check(api, run.scenario, start, time.time())
    finally:
        server.shutdown()
        server.server_close()
    assert not failures, "\n".join(failures)


DEMO_SCENARIO = "stuck-leader"
DEMO_SPEED = "2"
DEMO_TIMEOUT_S = 600.0
DEMO_TRANSIENT = frozenset({"rule PredictedIsrShrink"})
"""SHRINK_ELIGIBLE lasts 0.5 x T of event time, which a slow micro-batch can step over;
the stuck leader's SHRINK_OVERDUE lasts to the end."""


def test_expressions_with_the_real_job_in_the_demo(tmp_path: Path) -> None:
    """The same checks on ``isrwatch demo``: embedded broker, simulator, the Spark job and
    its own exporter, in a subprocess."""
    port = free_port()
    log_path = tmp_path / "demo.log"
    with running_prometheus(tmp_path / "prometheus", f"127.0.0.1:{port}") as api:
        start = time.time()
        with log_path.open("w") as log:
            demo = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "streaming.cli",
                    "demo",
                    "--scenario",
                    DEMO_SCENARIO,
                    "--speed",
                    DEMO_SPEED,
                    "--metrics-port",
                    str(port),
                    "--no-live",
                    "--set",
                    "metrics.host=127.0.0.1",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=DEMO_TIMEOUT_S,
                env={**os.environ, "PYSPARK_PYTHON": sys.executable},
            )
        assert demo.returncode == 0, log_path.read_text()
        end = time.time()
        scraped = api.query_range('isrwatch_partitions{job="isrwatch"}', start, end)
        assert scraped, f"Prometheus never scraped the demo: {log_path.read_text()}"
        failures = check(api, DEMO_SCENARIO, start, end, DEMO_TRANSIENT)
    assert not failures, "\n".join(failures)
