"""streaming.job.reachability: the driver's check that the brokers answer, and what the
exporter makes of it (``isrwatch_source_up`` 0 while the last check failed).

The timing rule, from the trigger T and the request timeout R (ms):
timeout = min(max(T/2, 200), R), interval = max(T/4, 100); an outage is reported within
interval + timeout. The expected values below are worked out by hand from it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from prometheus_client import generate_latest

from streaming.job.connection_errors import ConnectionFailure
from streaming.job.metrics import HealthExporter
from streaming.job.reachability import ReachabilityWatch, WatchTiming, watch_timing
from streaming.tools.embedded_broker import free_port
from streaming.tools.probe import Check, assess, read_exposition


@pytest.mark.parametrize(
    ("trigger_ms", "request_timeout_ms", "timeout_ms", "interval_ms", "bound_s"),
    [
        (5000, 30000, 2500, 1250, 3.75),  # the defaults: 3/4 of the trigger
        (1000, 5000, 500, 250, 0.75),  # the short fault campaign
        (400, 30000, 200, 100, 0.3),  # both floors reached exactly: still 3/4
        (399, 30000, 200, 100, 0.3),  # floors: 300 ms > 3/4 of 399, still < T
        (300, 30000, 200, 100, 0.3),  # = T: the last trigger the bound holds for
        (200, 30000, 200, 100, 0.3),  # floors: the bound is past the trigger
        (60000, 30000, 30000, 15000, 45.0),  # T/2 = R exactly
        (60000, 10000, 10000, 15000, 25.0),  # the request timeout is the ceiling
        (1000, 150, 150, 250, 0.4),  # a ceiling below the floor wins
    ],
)
def test_timing_rule_boundaries(
    trigger_ms: int,
    request_timeout_ms: int,
    timeout_ms: float,
    interval_ms: float,
    bound_s: float,
) -> None:
    timing = watch_timing(trigger_ms, request_timeout_ms)
    assert (timing.timeout_ms, timing.interval_ms) == (timeout_ms, interval_ms)
    assert timing.detection_bound_s == pytest.approx(bound_s)


# ---------------------------------------------------------------- a fake AdminClient

Answer = Callable[[], None]  # what describe_cluster's future does: return or raise


def answered() -> None:
    return None


def no_answer() -> None:
    raise FutureTimeout()


def failed(code: int, text: str) -> Answer:
    def answer() -> None:
        raise KafkaException(KafkaError(code, text))

    return answer


class FakeFuture:
    def __init__(self, answer: Answer) -> None:
        self.answer = answer

    def result(self, timeout: float | None = None) -> None:
        self.answer()


class FakeAdmin:
    """Answers each check as scripted; ``reports`` go to error_cb at the next poll."""

    def __init__(self, settings: dict[str, Any], script: Iterator[tuple[Answer, list[int]]]):
        self.settings = settings
        self.script = script
        self.pending: list[int] = []
        self.asked_with: list[float] = []

    def describe_cluster(self, request_timeout: float) -> FakeFuture:
        self.asked_with.append(request_timeout)
        answer, self.pending = next(self.script)
        return FakeFuture(answer)

    def poll(self, timeout: float) -> int:
        for code in self.pending:
            self.settings["error_cb"](KafkaError(code, f"error {code}"))
        served, self.pending = len(self.pending), []
        return served


def scripted_watch(
    script: list[tuple[Answer, list[int]]], times: list[float], timing: WatchTiming
) -> tuple[ReachabilityWatch, list[FakeAdmin]]:
    made: list[FakeAdmin] = []
    steps = iter(script)

    def factory(settings: dict[str, Any]) -> FakeAdmin:
        made.append(FakeAdmin(settings, steps))
        return made[-1]

    clock = iter(times)
    config = {"bootstrap.servers": "b:9092", "security.protocol": "SSL"}
    return ReachabilityWatch(config, timing, factory, clock=lambda: next(clock)), made


TRIGGER_1S = watch_timing(1000, 5000)  # timeout 500 ms, interval 250 ms


def test_down_on_the_first_failed_check_and_up_on_the_first_answer() -> None:
    # checks end at 0.0, 0.75, 1.5 (no answer), 2.25 (refused), 3.0 (answer)
    watch, made = scripted_watch(
        [
            (answered, []),
            (answered, []),
            (no_answer, []),
            (failed(-195, "refused"), [-195]),
            (answered, []),
        ],
        [0.0, 0.75, 1.5, 2.25, 3.0],
        TRIGGER_1S,
    )
    states = [watch.check() for _ in range(5)]
    assert [s.reachable for s in states] == [True, True, False, False, True]
    assert [s.checked_at for s in states] == [0.0, 0.75, 1.5, 2.25, 3.0]
    # the last answer is kept through the failures
    assert [s.answered_at for s in states] == [0.0, 0.75, 0.75, 0.75, 3.0]
    assert [s.problem.reason if s.problem else None for s in states] == [
        None,
        None,
        ConnectionFailure.UNREACHABLE,
        ConnectionFailure.UNREACHABLE,
        None,
    ]
    assert states[2].problem is not None
    assert states[2].problem.detail == "no answer within 0.5 s"
    assert len(made) == 1, "one long-lived client"
    assert made[0].asked_with == [0.5] * 5


def test_never_answered_has_no_answer_time() -> None:
    watch, _ = scripted_watch([(no_answer, [])], [7.0], TRIGGER_1S)
    state = watch.check()
    assert (state.reachable, state.answered_at) == (False, None)


def test_a_refused_login_reported_while_asking_is_the_cause() -> None:
    # the request times out, but librdkafka said why: the broker refused the SASL login
    watch, _ = scripted_watch([(no_answer, [-195, -169])], [1.0], TRIGGER_1S)
    state = watch.check()
    assert state.problem is not None
    assert state.problem.reason is ConnectionFailure.AUTHENTICATION


def test_errors_reported_before_an_answer_do_not_linger() -> None:
    watch, _ = scripted_watch([(answered, [-181]), (no_answer, [])], [1.0, 2.0], TRIGGER_1S)
    assert watch.check().reachable
    state = watch.check()  # the TLS error was served with the previous check
    assert state.problem is not None
    assert state.problem.reason is ConnectionFailure.UNREACHABLE


def test_the_client_has_the_jobs_settings_and_the_watchs_deadlines() -> None:
    watch, made = scripted_watch([(answered, [])], [0.0], TRIGGER_1S)
    watch.check()
    settings = dict(made[0].settings)
    assert callable(settings.pop("error_cb"))
    assert settings == {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SSL",
        "socket.timeout.ms": 500,
        "reconnect.backoff.ms": 100,
        "reconnect.backoff.max.ms": 250,
        "log_level": 0,
    }


def test_the_thread_checks_until_stopped() -> None:
    checked = threading.Event()
    calls = 0

    def answer() -> None:
        nonlocal calls
        calls += 1
        checked.set()

    def script() -> Iterator[tuple[Answer, list[int]]]:
        while True:
            yield answer, []

    steps = script()
    watch = ReachabilityWatch(
        {"bootstrap.servers": "b:9092"}, TRIGGER_1S, lambda s: FakeAdmin(s, steps)
    )
    watch.start()
    assert checked.wait(30)
    watch.stop()
    after_stop = calls
    assert watch.state is not None
    assert watch.state.reachable
    assert not any(t.name == "isrwatch-reachability" for t in threading.enumerate())
    assert calls == after_stop


def test_a_real_client_finds_nothing_listening_unreachable() -> None:
    timing = watch_timing(1000, 5000)
    watch = ReachabilityWatch({"bootstrap.servers": f"127.0.0.1:{free_port()}"}, timing)
    state = watch.check()
    assert not state.reachable
    assert state.problem is not None
    assert state.problem.reason is ConnectionFailure.UNREACHABLE


# ---------------------------------------------------------------- what /metrics says


def source_samples(exporter: HealthExporter) -> dict[tuple[str, str], float]:
    return {
        (sample.name, sample.labels.get("reason", "")): sample.value
        for family in exporter.collect()
        for sample in family.samples
        if sample.name.startswith("isrwatch_source_")
    }


def planner_status(
    path: Path, failures: int, reason: str | None = None, failed_at: float | None = None
) -> None:
    path.write_text(
        json.dumps(
            {
                "bootstrap_servers": ["b:9092"],
                "consecutive_failures": failures,
                "failures_total": failures,
                "last_error_reason": reason,
                "last_error_at": failed_at,
                "last_success_at": 100.0,
            }
        )
    )


def test_source_up_needs_both_the_planner_and_the_watch(tmp_path: Path) -> None:
    status = tmp_path / "source-status.json"
    planner_status(status, failures=0)
    exporter = HealthExporter(source_status=status)
    watch, _ = scripted_watch(
        [(answered, []), (no_answer, []), (answered, []), (answered, [])],
        [200.0, 201.0, 202.0, 203.0],
        TRIGGER_1S,
    )
    exporter.watch = watch
    # before the watch's first check: the planner alone, no reachability series
    got = source_samples(exporter)
    assert got[("isrwatch_source_up", "")] == 1
    assert ("isrwatch_source_reachable", "") not in got
    watch.check()  # answered at 200
    got = source_samples(exporter)
    assert (got[("isrwatch_source_up", "")], got[("isrwatch_source_reachable", "")]) == (1, 1)
    assert got[("isrwatch_source_reachable_last_answer_time_seconds", "")] == 200.0
    watch.check()  # no answer at 201: down although the planner's last call succeeded
    got = source_samples(exporter)
    assert (got[("isrwatch_source_up", "")], got[("isrwatch_source_reachable", "")]) == (0, 0)
    assert got[("isrwatch_source_connection_error", "unreachable")] == 1
    assert got[("isrwatch_source_reachable_last_answer_time_seconds", "")] == 200.0
    # the planner fails too (its cause wins the label), then the watch answers again
    planner_status(status, failures=2, reason="tls")
    got = source_samples(exporter)
    assert got[("isrwatch_source_connection_error", "tls")] == 1
    assert ("isrwatch_source_connection_error", "unreachable") not in got
    watch.check()  # answered at 202; the planner still fails: still down
    got = source_samples(exporter)
    assert (got[("isrwatch_source_up", "")], got[("isrwatch_source_reachable", "")]) == (0, 1)
    planner_status(status, failures=0)  # both succeed: up
    got = source_samples(exporter)
    assert got[("isrwatch_source_up", "")] == 1
    assert not any(name == "isrwatch_source_connection_error" for name, _ in got)


@pytest.mark.parametrize(
    ("reason", "failed_at", "up"),
    [
        ("unreachable", 201.5, 1),  # the watch answered at 202, after: the outage is over
        ("unreachable", 202.0, 0),  # at the same moment: not after
        ("unreachable", 202.5, 0),  # the planner failed after the watch's answer
        ("unreachable", None, 0),  # no failure time: nothing to compare
        ("tls", 201.5, 0),  # a refused handshake is not taken back by the watch's client
        ("authentication", 201.5, 0),
        (None, 201.5, 0),  # a failure of no known connection cause
    ],
)
def test_an_outage_the_watch_saw_end_does_not_wait_for_the_planner(
    tmp_path: Path, reason: str | None, failed_at: float | None, up: int
) -> None:
    """A query restarted during an outage re-runs its planned batch before it calls the
    planner again, which still reports its last failure."""
    status = tmp_path / "source-status.json"
    planner_status(status, failures=3, reason=reason, failed_at=failed_at)
    exporter = HealthExporter(source_status=status)
    watch, _ = scripted_watch([(answered, [])], [202.0], TRIGGER_1S)
    exporter.watch = watch
    watch.check()  # answered at 202
    got = source_samples(exporter)
    assert got[("isrwatch_source_up", "")] == up
    # the cause is named while the source is down for it, and only then
    named = {label for name, label in got if name == "isrwatch_source_connection_error"}
    assert named == (set() if up or reason is None else {reason})


def test_a_refused_handshake_makes_the_next_check_use_a_fresh_client() -> None:
    # unreachable keeps the client; tls drops it (a CA file fixed on disk is read again)
    watch, made = scripted_watch(
        [(no_answer, []), (no_answer, [-181]), (answered, []), (answered, [])],
        [1.0, 2.0, 3.0, 4.0],
        TRIGGER_1S,
    )
    reasons = [watch.check().problem for _ in range(4)]
    assert [p.reason if p else None for p in reasons] == [
        ConnectionFailure.UNREACHABLE,
        ConnectionFailure.TLS,
        None,
        None,
    ]
    assert [len(admin.asked_with) for admin in made] == [2, 2]


def test_the_probes_read_a_failed_check_as_the_source_down(tmp_path: Path) -> None:
    status = tmp_path / "source-status.json"
    planner_status(status, failures=0)
    exporter = HealthExporter(source_status=status)
    exporter.watch, _ = scripted_watch([(no_answer, [])], [300.0], TRIGGER_1S)
    exporter.watch.check()
    exporter.record_batch([], {}, 0.5)  # one batch completed, just now
    reading = read_exposition(generate_latest(exporter.registry).decode())
    assert reading.source_up == 0
    assert assess(reading, Check.READY, 120, require_source=True) == [
        "the Kafka source is down: Kafka does not answer its requests"
    ]
    assert assess(reading, Check.LIVE, 600, require_source=True) == []


def test_a_client_that_cannot_be_made_leaves_no_stale_outcome() -> None:
    made = 0

    def factory(settings: dict[str, Any]) -> FakeAdmin:
        nonlocal made
        made += 1
        if made > 1:  # the first client answers once, then one cannot be made
            raise KafkaException(KafkaError(-186, "Invalid value for configuration property"))
        return FakeAdmin(
            settings, iter([(answered, []), (failed(-181, "SSL handshake failed"), [])])
        )

    watch = ReachabilityWatch({"bootstrap.servers": "b:9092"}, TRIGGER_1S, factory)
    assert watch.check().reachable
    assert not watch.check().reachable  # tls: the client is dropped, the next one fails
    watch.start()  # its first check cannot make a client: the thread ends
    deadline = time.monotonic() + 30
    while watch.state is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    watch.stop()
    assert watch.state is None
    assert made == 2
