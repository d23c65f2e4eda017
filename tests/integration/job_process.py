"""``isrwatch run`` in a process of its own, watched through its /metrics and its log:
what the security tests need to see a refused connection named, and the job keep trying
(docs/security.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from streaming.tools.embedded_broker import free_port

__all__ = ["JobProcess", "connection_errors", "keeps_trying", "refused", "scrape"]


class JobProcess:
    """``isrwatch run`` in a process of its own (its own process group), configured by
    environment variables, with /metrics on a free port and its stderr in a file."""

    def __init__(self, settings: dict[str, object], directory: Path) -> None:
        self.metrics_port = free_port()
        self.health_out = directory / "health.jsonl"
        self.stderr_path = directory / "job.stderr"
        env = {
            **os.environ,
            "PYTHONFAULTHANDLER": "1",
            **{
                f"ISRWATCH_{key.upper().replace('.', '__')}": str(value)
                for key, value in {
                    "streaming.checkpoint_location": directory / "checkpoint",
                    "streaming.trigger_interval_ms": 500,
                    "streaming.state_shards": 3,
                    "metrics.host": "127.0.0.1",
                    "metrics.port": self.metrics_port,
                    "kafka.retry_backoff_ms": 200,
                    "kafka.retry_backoff_max_ms": 1000,
                    "kafka.request_timeout_ms": 5000,
                    **settings,
                }.items()
            },
        }
        with self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "streaming.cli",
                    "run",
                    "--health-out",
                    str(self.health_out),
                ],
                env=env,
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """The samples /metrics serves now (empty while it does not answer)."""
        return scrape(self.metrics_port)

    def wait_for(self, what: str, condition: Any, timeout_s: float = 300) -> dict[Any, float]:
        """Poll /metrics until ``condition(samples)``; fails if the job exits meanwhile."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"the job exited:\n{self.stderr()[-4000:]}"
            samples = self.metrics()
            if samples and condition(samples):
                return samples
            time.sleep(0.5)
        raise AssertionError(f"no {what} within {timeout_s} s:\n{self.stderr()[-4000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The samples a process's /metrics on ``port`` serves now (empty while it does not
    answer)."""
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return {}
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def connection_errors(samples: dict[Any, float]) -> dict[tuple[str, str], float]:
    """isrwatch_source_connection_error by (reason, bootstrap_servers)."""
    return {
        (dict(labels)["reason"], dict(labels)["bootstrap_servers"]): value
        for (name, labels), value in samples.items()
        if name == "isrwatch_source_connection_error"
    }


def refused(
    job: JobProcess, reason: str, servers: str, words: tuple[str, ...], secret: str = ""
) -> dict[Any, float]:
    """Waits for ``/metrics`` to name ``reason`` for ``servers`` after three failed tries
    or more, then checks the source is down and the log says ``words``, with no traceback
    (and never ``secret``). Returns the samples."""
    down = job.wait_for(
        f"{reason} connection error",
        lambda s: (
            connection_errors(s) == {(reason, servers): 1}
            and s[("isrwatch_source_failures_total", ())] >= 3
        ),
    )
    assert down[("isrwatch_source_up", ())] == 0
    log = job.stderr()
    for said in words:
        assert said in log
    assert "Traceback" not in log
    assert not secret or secret not in log
    return down


def keeps_trying(job: JobProcess, down: dict[Any, float], reason: str, servers: str) -> None:
    """Not a crash loop: the same process goes on trying, with back-off."""
    failures = down[("isrwatch_source_failures_total", ())]
    later = job.wait_for(
        "more failures", lambda s: s[("isrwatch_source_failures_total", ())] > failures
    )
    assert connection_errors(later) == {(reason, servers): 1}
    assert job.process.poll() is None
