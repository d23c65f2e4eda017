"""The ``isrwatch`` command line."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import TextIO

import click

from dashboards.cli import dashboards_command
from streaming.cli_options import config_option, load_or_exit, set_option
from streaming.config import dump_config
from streaming.feeds.collectors.cli import collect
from streaming.feeds.simulator.cli import (
    load_scenario_or_exit,
    param_option,
    scenario_option,
    seed_option,
    simulate_command,
)
from streaming.tools.check_restart import check_command
from streaming.tools.lab.cli import lab_command
from streaming.tools.probe import probe_command
from streaming.tools.replay import replay
from streaming.tools.timeline.cli import timeline_command


def _dump_line(record: object) -> str:
    return json.dumps(record, separators=(",", ":"))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="isrwatch")
def main() -> None:
    """isrwatch: live Kafka replication monitor (ISR shrink prediction, propagation windows)."""


@main.command(name="replay")
@click.argument("events_file", type=click.File("r", encoding="utf-8"))
@click.option(
    "--until-ms",
    type=int,
    default=None,
    help="Evaluate at this time (epoch ms); default: the largest ts in the file.",
)
@click.option(
    "--dead-letters",
    "dead_letters_file",
    type=click.File("w", encoding="utf-8"),
    default=None,
    help="Write records that were not applied here, as JSON lines.",
)
@config_option
@set_option
def replay_command(
    events_file: TextIO,
    until_ms: int | None,
    dead_letters_file: TextIO | None,
    config_file: Path | None,
    overrides: dict[str, object],
) -> None:
    """Apply EVENTS_FILE (JSON lines of {"source", "value"}) in order; print partition health.

    One health record per partition, sorted by topic then partition. Records that break
    the event contract or that Kafka would ignore (stale epochs, ...) are counted on
    stderr and, with --dead-letters, written out with their reason.
    """
    config = load_or_exit(config_file, overrides)
    result = replay(events_file, config.rules, until_ms)
    for record in result.records:
        click.echo(_dump_line(record))
    if dead_letters_file is not None:
        for line, letter in result.dead_letters:
            dead_letters_file.write(
                _dump_line(
                    {
                        "line": line,
                        "source": letter.source,
                        "reason": letter.reason.value,
                        "detail": letter.detail,
                        "raw": letter.raw,
                    }
                )
                + "\n"
            )
    reasons = ", ".join(f"{r}: {n}" for r, n in sorted(result.dead_letters_by_reason().items()))
    click.echo(
        f"replay: {result.events} events, {len(result.records)} partitions at "
        f"{result.as_of_ms}, {result.after_until} events after it not applied, "
        f"{len(result.dead_letters)} dead letters" + (f" ({reasons})" if reasons else ""),
        err=True,
    )


@main.command(name="run")
@config_option
@click.option("--bootstrap-servers", default=None, help="Kafka bootstrap servers (host:port,...).")
@click.option(
    "--checkpoint-location",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where Spark keeps offsets and state.",
)
@click.option(
    "--available-now",
    is_flag=True,
    help="Process everything available, write every partition's health, and exit.",
)
@click.option(
    "--health-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also append health records to this JSON-lines file.",
)
@set_option
def run_command(
    config_file: Path | None,
    bootstrap_servers: str | None,
    checkpoint_location: Path | None,
    available_now: bool,
    health_out: Path | None,
    overrides: dict[str, object],
) -> None:
    """Run the streaming job: controller-events + fetch-responses -> partition health."""
    from streaming.job.query import CheckpointMismatchError, run

    flags = {
        "kafka.bootstrap_servers": bootstrap_servers,
        "streaming.checkpoint_location": checkpoint_location,
        "streaming.health_out": health_out,
    }
    config = load_or_exit(config_file, overrides, flags)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    out = config.streaming.health_out
    try:
        run(config, available_now=available_now, health_out=Path(out) if out else None, stop=stop)
    except CheckpointMismatchError as error:
        raise click.ClickException(str(error)) from error
    except KeyboardInterrupt:
        stop.set()


@main.command(name="broker")
@click.option("--port", type=int, default=9092, show_default=True)
@config_option
def broker_command(port: int, config_file: Path | None) -> None:
    """Run the embedded Kafka-protocol broker (Tansu) with the job's topics, until Ctrl-C."""
    from streaming.tools.embedded_broker import EmbeddedBroker

    config = load_or_exit(config_file)
    topics = config.topics
    with EmbeddedBroker(port=port) as broker:
        broker.start()
        broker.create_topics(
            [
                topics.controller_events,
                topics.fetch_responses,
                topics.partition_health,
                topics.dead_letters,
            ]
        )
        click.echo(f"broker: {broker.bootstrap_servers} (Ctrl-C stops it)", err=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()


@main.command(name="config")
@config_option
@set_option
def config_command(config_file: Path | None, overrides: dict[str, object]) -> None:
    """Print the effective configuration (file < environment < --set), secrets masked."""
    click.echo(dump_config(load_or_exit(config_file, overrides)), nl=False)


main.add_command(probe_command)

main.add_command(dashboards_command)

main.add_command(collect)

main.add_command(check_command)


@main.command(name="demo")
@scenario_option
@param_option
@seed_option
@click.option(
    "--seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Stop after this many wall seconds (default: Ctrl-C or the scenario's end).",
)
@click.option(
    "--speed",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Simulated seconds per wall second.",
)
@click.option("--metrics-port", type=int, default=None, help="Port of /metrics (default: config).")
@click.option("--live/--no-live", default=None, help="Live view (default: when on a terminal).")
@config_option
@set_option
def demo_command(
    scenario: str,
    params: dict[str, object],
    seed: int,
    seconds: float | None,
    speed: float,
    metrics_port: int | None,
    live: bool | None,
    config_file: Path | None,
    overrides: dict[str, object],
) -> None:
    """Run everything on this machine: embedded broker, simulated cluster, the job, /metrics.

    The simulator produces a scenario's records in real time (or --speed times faster), the
    streaming job reads them and serves /metrics, and a live view shows what the monitor
    sees. Ctrl-C or --seconds stops everything and prints a summary.
    """
    from rich.console import Console

    from streaming.tools.demo import DemoOptions, run_demo
    from streaming.tools.foreground import StartupError, output_to_log

    config = load_or_exit(config_file, overrides, {"metrics.port": metrics_port})
    options = DemoOptions(load_scenario_or_exit(scenario, params), seconds, speed, seed)
    log_path = Path(tempfile.gettempdir()) / f"isrwatch-demo-{os.getpid()}.log"
    signal.signal(signal.SIGTERM, _interrupt)  # stop as cleanly as on Ctrl-C
    with output_to_log(log_path) as terminal:
        console = Console(file=terminal)
        options.live = console.is_terminal if live is None else live
        try:
            result = run_demo(config, options, console)
        except StartupError as error:
            raise click.ClickException(
                f"{error} (Spark's and the job's logs: {log_path})"
            ) from error
    console = Console(stderr=True)
    for line in result.summary:
        console.print(line, highlight=False)
    if result.error is not None:  # one line, the details are in the log
        console.print(f"error: {result.error} (see {log_path})", style="bold red", highlight=False)
        raise SystemExit(1)
    console.print(f"Spark's and the job's logs: {log_path}", highlight=False)


def _interrupt(_signal: int, _frame: object) -> None:
    raise KeyboardInterrupt


main.add_command(simulate_command)

main.add_command(timeline_command)

main.add_command(lab_command)

if __name__ == "__main__":
    sys.exit(main())
