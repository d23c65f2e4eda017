"""The Prometheus exporter's collection and rendering, on the driver (its HTTP side:
``streaming.job.exporter_http``).

Each micro-batch every shard reports its gauges and this batch's counters (a stats row,
``streaming.job.shard_state``). Gauges are rendered from the latest report of each shard by
a custom collector, so a series disappears as soon as its partition or follower is
healthy again: per-partition and per-follower series exist only while unhealthy, which
bounds cardinality on a 100,000-partition cluster. Counters accumulate.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client import Counter as PromCounter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from state import NO_BROKER, Attribution, CauseCount, IsrAtRisk
from state.events import DeadLetterReason, Source
from streaming.job.connection_errors import ConnectionFailure
from streaming.job.metric_families import broker_families, topic_families, unhealthy_families
from streaming.job.reachability import ReachabilityWatch, outage_over, watch_families
from streaming.job.rendered_series import GZIP_LEVEL, RenderedOnce
from streaming.job.shard_stats import ShardStats

EVENT_RESULTS = {
    Source.FETCH_RESPONSES.value: ("applied", "error_response", "dead_letter"),
    Source.CONTROLLER_EVENTS.value: ("applied", "dead_letter"),
}
"""The result of every input event, by source (see ``HealthExporter.record_batch``)."""
OPENMETRICS_EOF = b"# EOF\n"


class HealthExporter(Collector):
    """Gauges from the shards' latest stats, plus counters and histograms."""

    def __init__(
        self, registry: CollectorRegistry | None = None, source_status: Path | None = None
    ) -> None:
        self.registry = registry or CollectorRegistry()
        self.source_status = source_status  # the Kafka source's health, written by its reader
        # set by the sink while a write to Kafka has waited past SINK_STALL_S (epoch s)
        self.sink_stalled_since: float | None = None
        # the driver's check that the brokers answer at all (streaming.job.reachability)
        self.watch: ReachabilityWatch | None = None
        self._shards: dict[int, ShardStats] = {}
        self._causes: list[CauseCount] = []
        self._planned: dict[str, int] = {}  # topic -> expected under-replicated partitions
        self._maintenance: dict[int, tuple[str, int]] = {}
        self._batch_time = time.time()
        self.events = PromCounter(
            "isrwatch_events",
            "Input events by source and result",
            ["source", "result"],
            registry=self.registry,
        )
        self.dead_letters = PromCounter(
            "isrwatch_dead_letters",
            "Records not applied, by reason",
            ["reason"],
            registry=self.registry,
        )
        # ISR changes by (topic, leader, kind, origin): too many label values to start them
        # all at 0, and rate()/increase() miss the first count of a series that appears
        # with it. So a new series is exported at 0 for one scrape before its count.
        self._isr_changes: Counter[tuple[str, str, str, str]] = Counter()  # exported
        self._new_isr_changes: Counter[tuple[str, str, str, str]] = Counter()  # not yet
        self._isr_lock = threading.Lock()  # scrapes run in the HTTP server's threads
        self.bounced = PromCounter(
            "isrwatch_broker_bounces",
            "Brokers seen re-registering with a larger epoch",
            ["broker"],
            registry=self.registry,
        )
        self.propagation_delay = Histogram(
            "isrwatch_propagation_delay_seconds",
            "Observed time from an ISR change to the last live broker caching it",
            buckets=(0.5, 1, 2.5, 5, 7.5, 10, 15, 30, 45, 60, 62.5, 90, 120, 300),
            registry=self.registry,
        )
        self.batch_duration = Histogram(
            "isrwatch_batch_duration_seconds",
            "Wall time of one micro-batch, sinks included",
            buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
            registry=self.registry,
        )
        # Counters start at 0 for every label value known in advance: Prometheus' rate()
        # and increase() cannot see the first increment of a series that starts at 1.
        for source, results in EVENT_RESULTS.items():
            for result in results:
                self.events.labels(source, result)
        for reason in DeadLetterReason:
            self.dead_letters.labels(reason.value)
        self.registry.register(self)
        # /metrics renders the unhealthy partitions' series once per batch (exposition)
        self.unhealthy_rendered = RenderedOnce(
            lambda: unhealthy_families(list(self._shards.values()))
        )
        self._scrape = threading.local()  # .light: this thread renders all but those

    def render(
        self, encoder: Callable[[Any], bytes], content_type: str, *, compressed: bool
    ) -> bytes:
        """The registry in ``encoder``'s format, rendered now, but the unhealthy
        partitions' series as rendered once since the last batch
        (``streaming.job.rendered_series``). Compressed, it is two gzip members, which a
        gzip reader (Prometheus') reads as one."""
        self._scrape.light = True
        try:
            light = encoder(self.registry)
        finally:
            self._scrape.light = False
        light = light.removesuffix(OPENMETRICS_EOF)  # OpenMetrics: one # EOF, at the end
        if compressed:
            light = gzip.compress(light, GZIP_LEVEL)
        heavy = self.unhealthy_rendered.render(encoder, content_type, compressed=compressed)
        return light + heavy

    def fragile(self) -> list[IsrAtRisk] | None:
        """Partitions one broker's stop could break, from every shard's latest report
        (None before the first batch): what ``/check/restart`` answers from."""
        if not self._shards:
            return None
        return [entry for shard in self._shards.values() for entry in shard.fragile]

    # ---------------------------------------------------------------- updates

    def record_batch(
        self,
        stats: Iterable[ShardStats],
        dead_letters: Mapping[tuple[str, str], int],
        duration_s: float,
    ) -> None:
        """One micro-batch: the stats row of every shard, dead letters by (source, reason).

        Every input event ends up with one result: ``applied``, ``error_response`` (a
        fetch answered with an error: valid, changes nothing) or ``dead_letter``.
        """
        for (source, reason), count in dead_letters.items():
            self.dead_letters.labels(reason).inc(count)
            self.events.labels(source, "dead_letter").inc(count)
        for shard in stats:
            if shard.fetch_error_responses:
                self.events.labels("fetch-responses", "error_response").inc(
                    shard.fetch_error_responses
                )
            self._shards[shard.shard] = shard
            for event_type, count in shard.applied.items():  # error responses not included
                source = "fetch-responses" if event_type == "FetchResponse" else "controller-events"
                self.events.labels(source, "applied").inc(count)
            with self._isr_lock:
                for t in shard.isr_transitions:
                    key = (
                        t.topic,
                        str(t.leader),
                        t.kind,
                        "controller" if t.by_controller else "leader",
                    )
                    if key in self._isr_changes:
                        self._isr_changes[key] += 1
                    else:
                        self._new_isr_changes[key] += 1
            for delay_ms in shard.propagation_delays_ms:
                self.propagation_delay.observe(delay_ms / 1000)
            for broker in shard.brokers:
                if int(broker) >= 0:  # -1 stands for "no leader"
                    self.bounced.labels(broker)  # at 0 until its first bounce
            for bounced in shard.bounced_brokers:
                self.bounced.labels(str(bounced)).inc()
        self.batch_duration.observe(duration_s)
        self._batch_time = time.time()
        self.unhealthy_rendered.changed()

    # -------------------------------------------------------------- collector

    def collect(self) -> Iterator[Metric]:
        shards = list(self._shards.values())
        yield from topic_families(shards)
        yield from broker_families(shards)
        if not getattr(self._scrape, "light", False):
            yield from unhealthy_families(shards)
        clock = max((s.clock_ms for s in shards), default=-1)
        last_event = GaugeMetricFamily(
            "isrwatch_last_event_time_seconds", "Largest event time applied (epoch seconds)"
        )
        lag = GaugeMetricFamily(
            "isrwatch_event_time_lag_seconds",
            "Wall clock minus the largest event time applied: how far behind the input the "
            "monitor is",
        )
        if clock >= 0:
            last_event.add_metric([], clock / 1000)
            lag.add_metric([], time.time() - clock / 1000)
        yield last_event
        yield lag
        applied = GaugeMetricFamily(
            "isrwatch_state_events_applied",
            "Events applied to the state since the job first started (checkpointed: each "
            "event counts once across restarts)",
            labels=["type"],
        )
        totals: Counter[str] = Counter()
        for shard in shards:
            totals.update(shard.applied_total)
        for event_type, count in sorted(totals.items()):
            applied.add_metric([event_type], count)
        yield applied
        since = GaugeMetricFamily(
            "isrwatch_seconds_since_last_batch", "Wall time since the last micro-batch ended"
        )
        since.add_metric([], time.time() - self._batch_time)
        yield since
        yield from self._source_health()
        yield self._isr_change_counts()
        yield from self._cause_gauges()

    def record_causes(self, attribution: Attribution) -> None:
        """This batch's cause attribution over all shards (``state.causes``)."""
        self._causes = attribution.summary()
        self._planned = attribution.planned_under_replicated()
        self._maintenance = attribution.shape.maintenance

    def _cause_gauges(self) -> Iterator[Metric]:
        """Per cause kind and responsible broker ("none" when it blames none): at most
        kinds x (brokers + 1) series, present only while the cause holds."""
        labels = ["kind", "broker"]
        followers = GaugeMetricFamily(
            "isrwatch_cause_followers",
            "Followers not IN_SYNC by cause and the broker it holds responsible",
            labels=labels,
        )
        partitions = GaugeMetricFamily(
            "isrwatch_cause_partitions",
            "Unhealthy partitions by principal cause and the broker it holds responsible",
            labels=labels,
        )
        leaders = GaugeMetricFamily(
            "isrwatch_cause_leaders",
            "Distinct leaders of the followers not IN_SYNC, by cause and responsible broker",
            labels=labels,
        )
        for count in self._causes:
            key = [count.kind, "none" if count.broker == NO_BROKER else str(count.broker)]
            if count.followers:
                followers.add_metric(key, count.followers)
                leaders.add_metric(key, count.leaders)
            if count.partitions:
                partitions.add_metric(key, count.partitions)
        yield followers
        yield partitions
        yield leaders
        planned = GaugeMetricFamily(
            "isrwatch_planned_under_replicated_partitions",
            "Under-replicated partitions whose cause is planned maintenance (a broker in "
            "controlled shutdown or catching up after it re-registered): expected",
            labels=["topic"],
        )
        topics = {topic for shard in self._shards.values() for topic in shard.topics}
        for topic in sorted(topics | self._planned.keys()):
            planned.add_metric([topic], self._planned.get(topic, 0))
        yield planned
        maintenance = GaugeMetricFamily(
            "isrwatch_broker_maintenance_since_seconds",
            "Brokers in planned maintenance (state: shutting_down, restarted) and since when "
            "(epoch seconds); series exist only while it lasts",
            labels=["broker", "state"],
        )
        for broker, (state, since) in sorted(self._maintenance.items()):
            maintenance.add_metric([str(broker), state], since / 1000)
        yield maintenance
        yield from self._flapping()

    def _flapping(self) -> Iterator[Metric]:
        labels = ["topic", "partition", "broker", "leader"]
        shrinks = GaugeMetricFamily(
            "isrwatch_follower_isr_shrinks",
            "Removals of a follower from the ISR within the flapping window (followers "
            "removed twice or more only)",
            labels=labels,
        )
        period = GaugeMetricFamily(
            "isrwatch_follower_flap_period_seconds",
            "Mean time between a follower's consecutive removals from the ISR in the window",
            labels=labels,
        )
        for shard in self._shards.values():
            for flap in shard.flapping:
                key = [flap.topic, str(flap.partition), str(flap.broker), str(flap.leader)]
                shrinks.add_metric(key, flap.shrinks)
                period.add_metric(key, flap.period_ms / 1000)
        yield shrinks
        yield period

    def _isr_change_counts(self) -> Metric:
        family = CounterMetricFamily(
            "isrwatch_isr_changes",
            "ISR changes applied, by topic, leader, kind (shrink/expand/other) and origin "
            "(a new series is 0 for one scrape before its count)",
            labels=["topic", "leader", "kind", "origin"],
        )
        with self._isr_lock:
            for key, count in sorted(self._isr_changes.items()):
                family.add_metric(list(key), count)
            for key in sorted(self._new_isr_changes):
                family.add_metric(list(key), 0)
            self._isr_changes.update(self._new_isr_changes)
            self._new_isr_changes.clear()
        return family

    def _source_health(self) -> Iterator[Metric]:
        """From the status file the Kafka source's reader writes (streaming.job.kafka_source)
        and the driver's reachability watch."""
        watch = self.watch.state if self.watch is not None else None
        yield from watch_families(watch)
        try:
            status = json.loads(self.source_status.read_text()) if self.source_status else None
        except (OSError, ValueError):
            status = None
        if not isinstance(status, dict):
            return
        stalled = self._stalled_reads(status.get("last_success_at") or 0)
        sink_stalled = self.sink_stalled_since is not None
        up = GaugeMetricFamily(
            "isrwatch_source_up",
            "1 if the Kafka source's last offset request was answered, the brokers answered "
            "the last reachability check, no read is stalled, no write to Kafka waits "
            "past its stall time and every input topic may be read",
        )
        unreachable = watch is not None and not watch.reachable
        planner_down = bool(status.get("consecutive_failures")) and not outage_over(status, watch)
        # an input topic the job's principal may not read: its records are missed
        denied = bool(status.get("denied_topics"))
        healthy = not (planner_down or stalled or sink_stalled or unreachable or denied)
        up.add_metric([], 1 if healthy else 0)
        yield up
        sink = GaugeMetricFamily(
            "isrwatch_sink_stalled",
            "1 while the job's write of a batch to Kafka has waited past sinks.SINK_STALL_S "
            "(the brokers do not take the records; the batch waits)",
        )
        sink.add_metric([], 1 if sink_stalled else 0)
        yield sink
        reads = GaugeMetricFamily(
            "isrwatch_source_stalled_reads",
            "Input partitions whose read gets nothing from Kafka although records are due "
            "(the batch waits; the source is down)",
        )
        reads.add_metric([], stalled)
        yield reads
        failing = GaugeMetricFamily(
            "isrwatch_source_consecutive_failures",
            "Offset requests in a row that Kafka did not answer (retried with back-off)",
        )
        failing.add_metric([], status.get("consecutive_failures") or 0)
        yield failing
        failures = CounterMetricFamily(
            "isrwatch_source_failures", "Offset requests Kafka did not answer, since start"
        )
        failures.add_metric([], status.get("failures_total") or 0)
        yield failures
        # Why it is down, while it is: a refused login or TLS handshake needs a person, an
        # unreachable broker may only need time (streaming.job.connection_errors).
        connection = GaugeMetricFamily(
            "isrwatch_source_connection_error",
            "1 while the Kafka source cannot connect or may not read, by cause "
            "(authentication, tls, unreachable, authorization) and bootstrap servers; no "
            "series while it connects and reads",
            labels=["reason", "bootstrap_servers"],
        )
        servers = ",".join(status.get("bootstrap_servers") or [])
        if planner_down and status.get("last_error_reason"):
            connection.add_metric([str(status["last_error_reason"]), servers], 1)
        elif unreachable and watch is not None and watch.problem is not None:
            connection.add_metric([watch.problem.reason.value, servers], 1)
        elif denied:
            connection.add_metric([ConnectionFailure.AUTHORIZATION.value, servers], 1)
        yield connection
        if status.get("last_success_at"):
            success = GaugeMetricFamily(
                "isrwatch_source_last_success_time_seconds",
                "When Kafka last answered the source (epoch seconds)",
            )
            success.add_metric([], status["last_success_at"])
            yield success

    def _stalled_reads(self, planner_success_at: float) -> int:
        """Read tasks reporting a stall (``kafka_source.partition_reader.ReadStall``) since
        the planner last reached Kafka: an older report is over, the broker answered since.
        The directory is ``partition_reader.read_status_dir`` (not imported: it loads Spark)."""
        if self.source_status is None:
            return 0
        stalled = 0
        for report in Path(f"{self.source_status}.reads").glob("*.json"):
            try:
                since = json.loads(report.read_text()).get("stalled_since") or 0
            except (OSError, ValueError, AttributeError):
                continue
            stalled += since > planner_success_at
        return stalled
