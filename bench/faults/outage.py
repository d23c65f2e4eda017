"""Fault B: the broker unreachable from the job, through the fault proxy
(``streaming.tools.fault_proxy``), while the job keeps running and the load keeps being produced.

Every client (the job's source, its sinks, the load producer) reaches the broker only
through the proxy: the broker advertises the proxy's address. Each outage cycles the
proxy through ``refuse``, ``hang`` and ``drop`` in equal parts, then passes again.
During an outage the campaign scrapes ``/metrics`` every half second and runs the
Kubernetes probes (``python -m streaming.tools.probe``, the chart's ages) a few times; after
it, it waits for the job to catch up, then stops it and checks totals, health and
dead letters as for the kills.

What is expected (docs/kubernetes.md, streaming/tools/probe.py): ``isrwatch_source_up`` 0
within one trigger (the driver's reachability watch, streaming/job/reachability.py), the liveness
probe passing throughout (micro-batches keep ending, with no new data), the readiness
probe failing with "the Kafka source is down" until the broker answers again, and then
everything produced applied once.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from faults.checkpoint_phase import committed_offsets
from faults.fault import Fault, FaultResult, Mode
from faults.final_pass import final_pass
from faults.harness import (
    ROOT,
    JobProcess,
    JobSettings,
    Topics,
    applied_totals,
    batches_completed,
    broker_stack,
    create_topics,
    scrape,
    value,
)
from faults.load import TAIL, LoadProducer, PacedLoad, describe, planned_load
from faults.verify import (
    Comparison,
    compare_applied,
    compare_outputs,
    expected_from,
    read_topic,
)
from streaming.tools.fault_proxy import FaultProxy, ProxyMode

OUTAGES_S = {Mode.SHORT: (45.0,), Mode.LONG: (60.0, 600.0)}
CYCLE = (ProxyMode.REFUSE, ProxyMode.HANG, ProxyMode.DROP)
SIMULATED_S = {Mode.SHORT: 60, Mode.LONG: 240}
RATE = {Mode.SHORT: 400.0, Mode.LONG: 60.0}
LIVE_MAX_AGE_S, READY_MAX_AGE_S = 600, 120  # the chart's (helm/isrwatch/values.yaml)
START_PATIENCE_S = 300.0
CATCH_UP_PATIENCE_S = 600.0


def probe(check: str, url: str) -> tuple[bool, str]:
    """``isrwatch probe`` as the kubelet runs it: (passed, its line)."""
    age = LIVE_MAX_AGE_S if check == "live" else READY_MAX_AGE_S
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "streaming.tools.probe",
            "--check",
            check,
            "--url",
            url,
            "--max-batch-age",
            str(age),
            "--timeout",
            "4",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=30,
        check=False,
    )
    return done.returncode == 0, done.stdout.strip()


@dataclass
class OutageLog:
    seconds: float
    detected_after_s: float | None = None
    recovered_after_s: float | None = None  # from the broker's return to source_up 1
    live: list[tuple[bool, str]] = field(default_factory=list)
    ready: list[tuple[bool, str]] = field(default_factory=list)
    exporter_silent: int = 0  # scrapes the exporter did not answer

    def line(self) -> str:
        detected = "never" if self.detected_after_s is None else f"{self.detected_after_s:.1f} s"
        back = "never" if self.recovered_after_s is None else f"{self.recovered_after_s:.1f} s"
        return (
            f"outage {self.seconds:.0f} s: source_up 0 after {detected}, 1 again {back} "
            f"after the broker returned; live probe passed {sum(ok for ok, _ in self.live)}/"
            f"{len(self.live)}, ready probe failed {sum(not ok for ok, _ in self.ready)}/"
            f"{len(self.ready)}; exporter silent {self.exporter_silent} scrapes"
        )


def wait_ready(job: JobProcess, url: str) -> None:
    deadline = time.monotonic() + START_PATIENCE_S
    while time.monotonic() < deadline:
        if not job.alive():
            raise RuntimeError("the job exited before its first batch")
        samples = scrape(url)
        if batches_completed(samples) >= 1 and value(samples, "isrwatch_source_up") == 1:
            return
        time.sleep(0.5)
    raise RuntimeError("the job did not complete a batch in time")


def outage(proxy: FaultProxy, job: JobProcess, url: str, seconds: float) -> OutageLog:
    log = OutageLog(seconds)
    segment = seconds / len(CYCLE)
    begun = time.monotonic()
    # fractions of the outage: probes while it lasts, after the source's detection time
    # (a client's bootstrap timeout, 10 s, and the diagnosis: docs/faults.md)
    probe_at = [0.5, 0.75, 0.95]
    for index, mode in enumerate(CYCLE):
        proxy.set_mode(mode)
        until = begun + segment * (index + 1)
        while time.monotonic() < until:
            samples = scrape(url, timeout_s=2)
            elapsed = time.monotonic() - begun
            if samples is None:
                log.exporter_silent += 1
            elif log.detected_after_s is None and value(samples, "isrwatch_source_up") == 0:
                log.detected_after_s = elapsed
            if probe_at and elapsed >= probe_at[0] * seconds:
                probe_at.pop(0)
                log.live.append(probe("live", url))
                log.ready.append(probe("ready", url))
            if not job.alive():
                raise RuntimeError("the job died during the outage")
            time.sleep(0.5)
    proxy.set_mode(ProxyMode.PASS)
    back = time.monotonic()
    while time.monotonic() - back < START_PATIENCE_S:
        if value(scrape(url), "isrwatch_source_up") == 1:
            log.recovered_after_s = time.monotonic() - back
            break
        time.sleep(0.5)
    return log


def caught_up(job: JobProcess, settings: JobSettings, ends: dict[str, int]) -> float | None:
    """Seconds until the job's committed offsets reach ``ends``; None if not in time."""
    begun = time.monotonic()
    while time.monotonic() - begun < CATCH_UP_PATIENCE_S and job.alive():
        committed = committed_offsets(settings.checkpoint)
        if all(committed.get(key, -1) >= end for key, end in ends.items()):
            return time.monotonic() - begun
        time.sleep(0.5)
    return None


def run(mode: Mode, workdir: Path, seed: int) -> FaultResult:
    result = FaultResult("broker outage")
    workdir.mkdir(parents=True, exist_ok=True)
    comparison = Comparison()
    with broker_stack(with_proxy=True) as (broker, proxy):
        assert proxy is not None
        topics = Topics.fresh()
        create_topics(broker, topics, fetch_partitions=3)
        settings = JobSettings(
            proxy.address,
            topics,
            workdir / "checkpoint",
            extra={"streaming.shuffle_partitions": "2"},
        )
        records = planned_load("slow-follower", SIMULATED_S[mode], seed, 150)
        result.notes.append(f"load: {describe(records)}")
        producer = LoadProducer(proxy.address, topics)
        load = PacedLoad(producer, records[:-TAIL], RATE[mode])
        job = JobProcess(settings, workdir / "job.log")
        url = settings.metrics_url
        wait_ready(job, url)
        load.start()
        logs: list[OutageLog] = []
        for seconds in OUTAGES_S[mode]:
            time.sleep(5)  # some load read before the broker goes
            logs.append(outage(proxy, job, url, seconds))
            print(f"   {logs[-1].line()}", flush=True)
        load.join()
        if not producer.flush(300):
            raise RuntimeError("the load was not acknowledged")
        before_tail = producer.delivered()
        ends: dict[str, int] = {}
        for record in before_tail:
            key = f"{record.topic}:{record.partition}"
            ends[key] = max(ends.get(key, 0), record.offset + 1)
        catch_up_s = caught_up(job, settings, ends)
        expected = expected_from(before_tail)
        # all shards report in the batches after the catch-up; totals settle then
        on_metrics: dict[str, int] = {}
        settle = time.monotonic()
        while time.monotonic() - settle < 60 and job.alive():
            on_metrics = applied_totals(scrape(url))
            if sum(on_metrics.values()) >= sum(expected.applied.values()):
                break
            time.sleep(1)
        alive = job.alive()
        ready_after = probe("ready", url)
        job.stop()
        health_before = len(read_topic(broker.bootstrap_servers, topics.partition_health, 1.0))
        producer.send(records[-TAIL:])
        if not producer.flush(60):
            raise RuntimeError("the last records were not acknowledged")
        applied = final_pass(settings)
        for log in logs:
            detail = log.line()
            comparison.check(
                "source reported down during the outage", log.detected_after_s is not None, detail
            )
            comparison.check(
                "liveness probe passes during the outage",
                bool(log.live) and all(ok for ok, _ in log.live),
                " | ".join(line for _, line in log.live),
            )
            comparison.check(
                "readiness probe fails during the outage, naming the source",
                bool(log.ready)
                and all(not ok and "source is down" in line for ok, line in log.ready),
                " | ".join(line for _, line in log.ready),
            )
            comparison.check(
                "source up again after the outage", log.recovered_after_s is not None, detail
            )
        comparison.check(
            "the job ran through every outage and caught up",
            alive and catch_up_s is not None,
            f"caught up {catch_up_s if catch_up_s is None else round(catch_up_s, 1)}"
            " s after the load was written",
        )
        comparison.check(
            "readiness probe passes after the catch-up", ready_after[0], ready_after[1]
        )
        metrics_check = Comparison()
        compare_applied(metrics_check, expected, on_metrics)
        comparison.check(
            "/metrics applied totals after the catch-up equal replay's",
            metrics_check.passed,
            metrics_check.checks[0][2],
        )
        expected = expected_from(producer.delivered())
        compare_outputs(
            comparison,
            expected,
            dict(applied),
            broker.bootstrap_servers,
            topics.partition_health,
            topics.dead_letters,
            health_before,
        )
        result.comparison = comparison
        result.outage_seconds_survived = sum(log.seconds for log in logs) if alive else 0.0
        # the job's supervisor restarts a failed query (a batch that could not read or
        # write through the outage) from its checkpoint, in the same process
        log_text = (workdir / "job.log").read_text(errors="replace")
        result.restarts_survived = log_text.count("restarting from its checkpoint")
        result.notes += [log.line() for log in logs]
        result.notes.append(
            f"proxy: {proxy.connections_accepted} connections, {proxy.responses_cut} responses cut"
        )
        result.take_counts()
    return result


FAULT = Fault("outage", "the broker unreachable (refuse, hang, drop) while the job runs", run)
