"""The reachability watch: does Kafka answer the job at all, asked every fraction of a
trigger from the driver's process, independently of the micro-batches.

Why. The source's other health signals arrive late in an outage: the planner
(``latestOffset``) learns of it only when a kafka-python request times out (up to its
bootstrap timeout, 10 s) and is not called at all while a batch is stuck reading or
writing; a stalled read is reported after a transport error or a request timeout; the
sink after ``sinks.SINK_STALL_S``. The product promises that ``/metrics`` says the source
is down within one trigger (``streaming.trigger_interval_ms``). This watch keeps that
promise on its own: a daemon thread asks the bootstrap brokers for cluster metadata
(``DescribeCluster``, which librdkafka sends as a Metadata request for no topic: a few
dozen bytes each way whatever the number of partitions) with one long-lived librdkafka
``AdminClient`` on the job's own client settings (TLS and SASL included), and
``isrwatch_source_up`` is 0 while its last check failed.

Timing rule (:func:`watch_timing`), from the trigger ``T`` and the client's request
timeout ``R``::

    timeout  = min(max(T / 2, MIN_TIMEOUT_MS), R)
    interval = max(T / 4, MIN_INTERVAL_MS)

A check starts ``interval`` after the previous one ended and fails after ``timeout`` at
the latest, so an outage that begins just after an answer is reported within
``interval + timeout`` = 3/4 of a trigger: the quarter left covers a scrape's own time
and a loaded host's scheduling. Half a trigger of timeout is the most the bound allows a
slow broker before calling it down (a shorter one would report a busy broker as gone);
the floors keep a short trigger from asking more than ten times a second or giving up
on a broker within less than 200 ms. They hold the bound at 300 ms: more than 3/4 of a
trigger below 400 ms, more than the trigger below 300 ms
(:attr:`WatchTiming.detection_bound_s`). The request timeout is the ceiling: the watch
never waits longer than the job's clients would.

The client is told the same deadline (``socket.timeout.ms``: a request left unanswered
that long tears its connection down, so a broker that hung and came back is met on a
fresh connection) and reconnects at most ``interval`` apart (the job's
``retry_backoff_max_ms``, 30 s by default, would delay the return to "up" after a long
outage by as much). Which of the three outage kinds the fault proxy makes (refused,
hanging, cut mid-response) a check fails on, and how fast: docs/faults.md.

Why it failed is classified as the source's own failures are
(``streaming.job.connection_errors``: authentication, tls, unreachable), from the errors
librdkafka reported since the previous check. After a refused login or handshake the
client is made afresh for the next check: librdkafka reads the CA and certificate files
only when a client is made, and a file fixed on disk (a rotated secret) must end the
failure, as it does for the source. An unreachable broker keeps the client, which
reconnects by itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from streaming.job.connection_errors import (
    ConnectionFailure,
    ConnectionProblem,
    classify,
    most_telling,
)

__all__ = [
    "MIN_INTERVAL_MS",
    "MIN_TIMEOUT_MS",
    "Reachability",
    "ReachabilityWatch",
    "WatchTiming",
    "outage_over",
    "watch_families",
    "watch_timing",
]

log = logging.getLogger("isrwatch.reachability")

MIN_TIMEOUT_MS = 200
"""The shortest a check waits for an answer: less would call a merely busy broker down."""
MIN_INTERVAL_MS = 100
"""The shortest pause between checks: at most ten a second, whatever the trigger."""
_RECONNECT_BACKOFF_MS = 100  # librdkafka's default first reconnection wait


@dataclass(frozen=True)
class WatchTiming:
    """How long a check waits for an answer, and the pause between checks (ms)."""

    timeout_ms: float
    interval_ms: float

    @property
    def detection_bound_s(self) -> float:
        """The longest from an outage's start to a failed check."""
        return (self.timeout_ms + self.interval_ms) / 1000


def watch_timing(trigger_ms: int, request_timeout_ms: int) -> WatchTiming:
    """The module's rule: see its docstring."""
    timeout_ms = min(max(trigger_ms / 2, MIN_TIMEOUT_MS), request_timeout_ms)
    interval_ms = max(trigger_ms / 4, MIN_INTERVAL_MS)
    return WatchTiming(timeout_ms=timeout_ms, interval_ms=interval_ms)


@dataclass(frozen=True)
class Reachability:
    """The last check's outcome: ``answered_at`` is when the brokers last answered (epoch
    s; None if never), ``problem`` why the last check failed (None when it did not)."""

    reachable: bool
    checked_at: float
    answered_at: float | None
    problem: ConnectionProblem | None


class ReachabilityWatch:
    """Checks every ``timing.interval_ms`` that the brokers of ``client_config`` (a
    librdkafka configuration: ``KafkaSettings.librdkafka_options``) answer within
    ``timing.timeout_ms``; :attr:`state` is the last outcome (None before the first).

    ``admin_factory`` makes the client (confluent-kafka's ``AdminClient`` by default);
    ``clock`` gives the epoch time the outcome records.
    """

    def __init__(
        self,
        client_config: Mapping[str, Any],
        timing: WatchTiming,
        admin_factory: Callable[[dict[str, Any]], Any] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.timing = timing
        self._config = dict(client_config)
        self._admin_factory = admin_factory
        self._clock = clock
        self._admin: Any = None
        self._errors: list[ConnectionProblem] = []  # from error_cb since the last check
        self._errors_lock = threading.Lock()
        self._state: Reachability | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def state(self) -> Reachability | None:
        return self._state  # replaced whole by the watch's thread: a consistent value

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ReachabilityWatch:
        """Check now, then every interval, in a daemon thread, until :meth:`stop`."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, daemon=True, name="isrwatch-reachability"
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop checking (a check under way ends within its timeout); idempotent."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(self.timing.timeout_ms / 1000 + 5)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.check()
                self._stop.wait(self.timing.interval_ms / 1000)
        except Exception as error:  # a setting librdkafka refuses: say so, watch no more
            # no opinion rather than a stale one: the source's other signals remain
            self._state = None
            log.warning("cannot watch whether Kafka answers: %s", error)
        finally:
            self._admin = None  # librdkafka's client is destroyed with its last reference

    # ------------------------------------------------------------------ one check

    def check(self) -> Reachability:
        """Ask once, record and return the outcome."""
        admin = self._client()
        problem = self._ask(admin)
        admin.poll(0)  # serves error_cb: what librdkafka saw while asking
        with self._errors_lock:
            seen, self._errors = self._errors, []
        now = self._clock()
        previous = self._state
        if problem is None:
            state = Reachability(True, now, now, None)
        else:
            # a refused login or handshake explains a timeout, not the other way round
            problem = most_telling([*seen, problem]) or problem
            answered = previous.answered_at if previous is not None else None
            state = Reachability(False, now, answered, problem)
            if problem.reason is not ConnectionFailure.UNREACHABLE:
                # librdkafka reads the CA and certificate files when a client is made: a
                # fresh one reads a file fixed on disk since, as the source's clients do
                self._admin = None
        if previous is not None and previous.reachable != state.reachable:
            if state.problem is not None:
                log.warning(
                    "Kafka does not answer the reachability check: %s", state.problem.detail
                )
            else:
                log.warning("Kafka answers the reachability check again")
        self._state = state
        return state

    def _ask(self, admin: Any) -> ConnectionProblem | None:
        """None when the brokers answered within the timeout, else why not."""
        from confluent_kafka import KafkaException

        timeout_s = self.timing.timeout_ms / 1000
        try:
            admin.describe_cluster(request_timeout=timeout_s).result(timeout=timeout_s)
        except FutureTimeout:
            return ConnectionProblem(
                ConnectionFailure.UNREACHABLE, f"no answer within {timeout_s:g} s"
            )
        except KafkaException as error:
            kafka_error = error.args[0] if error.args else None
            if kafka_error is None or not hasattr(kafka_error, "code"):
                return ConnectionProblem(ConnectionFailure.UNREACHABLE, str(error))
            found = classify(kafka_error.code(), kafka_error.str())
            return found or ConnectionProblem(ConnectionFailure.UNREACHABLE, kafka_error.str())
        return None

    def _client(self) -> Any:
        if self._admin is None:
            factory = self._admin_factory
            if factory is None:
                from confluent_kafka.admin import AdminClient

                factory = AdminClient
            self._admin = factory(self._client_settings())
        return self._admin

    def _client_settings(self) -> dict[str, Any]:
        timeout_ms = max(1, int(self.timing.timeout_ms))
        interval_ms = max(_RECONNECT_BACKOFF_MS, int(self.timing.interval_ms))
        return {
            **self._config,
            "socket.timeout.ms": timeout_ms,
            "reconnect.backoff.ms": _RECONNECT_BACKOFF_MS,
            "reconnect.backoff.max.ms": interval_ms,
            "error_cb": self._on_error,
            "log_level": 0,  # the causes go to error_cb; a log line per retry is noise
        }

    def _on_error(self, error: Any) -> None:
        problem = classify(error.code(), error.str())
        if problem is not None:
            with self._errors_lock:
                self._errors.append(problem)


def watch_families(state: Reachability | None) -> Iterator[Metric]:
    """``isrwatch_source_reachable`` and the time of the brokers' last answer, once the
    watch has checked."""
    if state is None:
        return
    reachable = GaugeMetricFamily(
        "isrwatch_source_reachable",
        "1 if the bootstrap brokers answered the driver's last reachability check (a "
        "metadata request every quarter trigger, half a trigger to answer), else 0",
    )
    reachable.add_metric([], 1 if state.reachable else 0)
    yield reachable
    if state.answered_at is not None:
        answered = GaugeMetricFamily(
            "isrwatch_source_reachable_last_answer_time_seconds",
            "When the brokers last answered the reachability check (epoch seconds)",
        )
        answered.add_metric([], state.answered_at)
        yield answered


def outage_over(status: dict[str, Any], watch: Reachability | None) -> bool:
    """Whether the brokers answered the reachability watch after the planner's last
    failure, and that failure was an unreachable broker: the outage is over although the
    planner has not been asked since. (A query restarted during an outage re-runs its
    planned batch before it asks the planner again: 15 to 20 s measured after the broker
    returned. A refused login or handshake is not taken back this way: the watch's
    librdkafka client answering does not mean the planner's client will.)"""
    failed_at = status.get("last_error_at")
    return (
        watch is not None
        and watch.reachable
        and watch.answered_at is not None
        and failed_at is not None
        and status.get("last_error_reason") == ConnectionFailure.UNREACHABLE.value
        and watch.answered_at > float(failed_at)
    )
