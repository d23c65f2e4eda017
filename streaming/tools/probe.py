"""``isrwatch probe``: is the streaming query healthy? The Kubernetes exec probes.

A process that is up says little about a streaming job: Spark may have lost its query,
or the Kafka source may be failing in a retry loop. The probe therefore reads the job's
own exporter (``streaming.job.metrics``) over loopback:

* ``--check live`` fails when the exporter does not answer, or when no micro-batch has
  ended for longer than ``--max-batch-age`` seconds while the Kafka source is not down:
  the query is stuck or gone, and a restart (from the checkpoint) is the cure. While
  Kafka is away no batch ends either, and a restart cannot help: readiness fails then.
* ``--check ready`` also needs at least one micro-batch completed since the job started
  and, unless ``--no-require-source``, the Kafka source up (``isrwatch_source_up``).

It exits 0 when healthy and 1 otherwise, printing why on one line (the kubelet keeps it
in the pod's events). It imports neither Spark nor the model, so it is cheap to exec:
``python -m streaming.tools.probe`` runs it without loading the rest of the command line.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from enum import StrEnum

import click
from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "BATCHES_COMPLETED",
    "SECONDS_SINCE_LAST_BATCH",
    "SOURCE_UP",
    "Check",
    "ExporterReading",
    "ProbeError",
    "assess",
    "probe_command",
    "read_exposition",
    "scrape",
]

SECONDS_SINCE_LAST_BATCH = "isrwatch_seconds_since_last_batch"
BATCHES_COMPLETED = "isrwatch_batch_duration_seconds_count"
SOURCE_UP = "isrwatch_source_up"

DEFAULT_URL = "http://127.0.0.1:9464/metrics"


class Check(StrEnum):
    """What the probe checks: liveness or readiness."""

    LIVE = "live"
    READY = "ready"


class ProbeError(Exception):
    """The exporter could not be read."""


@dataclass(frozen=True)
class ExporterReading:
    """The few series the probe judges by; None when the exporter does not serve one."""

    seconds_since_last_batch: float | None
    batches_completed: float | None
    source_up: float | None


def read_exposition(text: str) -> ExporterReading:
    """The probe's series from Prometheus text exposition; raises ProbeError if unparsable."""
    wanted = {SECONDS_SINCE_LAST_BATCH, BATCHES_COMPLETED, SOURCE_UP}
    found: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in wanted and not sample.labels:
                    found[sample.name] = sample.value
    except ValueError as error:
        raise ProbeError(f"the exporter's answer is not Prometheus text: {error}") from error
    return ExporterReading(
        seconds_since_last_batch=found.get(SECONDS_SINCE_LAST_BATCH),
        batches_completed=found.get(BATCHES_COMPLETED),
        source_up=found.get(SOURCE_UP),
    )


def assess(
    reading: ExporterReading, check: Check, max_batch_age_s: float, require_source: bool
) -> list[str]:
    """What is wrong for ``check``; an empty list means healthy."""
    problems: list[str] = []
    since = reading.seconds_since_last_batch
    if since is None:
        problems.append(f"the exporter serves no {SECONDS_SINCE_LAST_BATCH}: not an isrwatch job")
    elif since > max_batch_age_s and not (check is Check.LIVE and reading.source_up == 0):
        # Liveness: with the Kafka source down no batch can end (the batch in flight
        # cannot read), and a restart cannot bring Kafka back; readiness says so instead.
        problems.append(
            f"no micro-batch ended for {since:.0f} s (more than {max_batch_age_s:g} s): "
            "the streaming query is stuck or gone"
        )
    if check is Check.LIVE:
        return problems
    if not reading.batches_completed:
        problems.append("no micro-batch has completed since the job started")
    if require_source:
        if reading.source_up is None:
            problems.append(f"the Kafka source has not reported yet ({SOURCE_UP} missing)")
        elif reading.source_up != 1:
            problems.append("the Kafka source is down: Kafka does not answer its requests")
    return problems


def scrape(url: str, timeout_s: float) -> str:
    """The exporter's exposition text; raises ProbeError when it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            body: bytes = response.read()
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", None) or error
        raise ProbeError(f"the exporter at {url} does not answer: {reason}") from error
    return body.decode("utf-8", errors="replace")


def _summary(reading: ExporterReading, check: Check) -> str:
    parts = [f"last micro-batch ended {reading.seconds_since_last_batch or 0:.1f} s ago"]
    if check is Check.READY:
        parts.append(f"micro-batches completed: {reading.batches_completed or 0:.0f}")
        if reading.source_up is not None:
            parts.append("Kafka source up" if reading.source_up == 1 else "Kafka source down")
    return ", ".join(parts)


@click.command(name="probe")
@click.option(
    "--check",
    type=click.Choice([c.value for c in Check]),
    required=True,
    help="live: the query makes progress; ready: also completed a batch, source up.",
)
@click.option(
    "--url",
    default=DEFAULT_URL,
    show_default=True,
    help="The job's Prometheus exporter.",
)
@click.option(
    "--max-batch-age",
    "max_batch_age_s",
    type=click.FloatRange(min=0),
    default=300.0,
    show_default=True,
    help="Longest time without a micro-batch ending, seconds.",
)
@click.option(
    "--require-source/--no-require-source",
    default=True,
    show_default=True,
    help="ready: require isrwatch_source_up 1 (off when the exporter cannot see the source).",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0, min_open=True),
    default=5.0,
    show_default=True,
    help="Seconds to wait for the exporter.",
)
def probe_command(
    check: str, url: str, max_batch_age_s: float, require_source: bool, timeout_s: float
) -> None:
    """Exit 0 if the streaming job is healthy (Kubernetes exec probe), 1 with the reason if not."""
    wanted = Check(check)
    try:
        reading = read_exposition(scrape(url, timeout_s))
    except ProbeError as error:
        click.echo(f"{wanted.value}: FAIL: {error}")
        sys.exit(1)
    problems = assess(reading, wanted, max_batch_age_s, require_source)
    if problems:
        click.echo(f"{wanted.value}: FAIL: " + "; ".join(problems))
        sys.exit(1)
    click.echo(f"{wanted.value}: ok: {_summary(reading, wanted)}")


if __name__ == "__main__":
    probe_command()
