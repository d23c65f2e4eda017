"""``isrwatch simulate``: run a scenario and publish its records (or write a replay file)."""

from __future__ import annotations

import contextlib
import sys
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

import click

from streaming.cli_options import key_values, load_or_exit
from streaming.feeds.publisher import (
    KafkaPublisher,
    PublishError,
    paced,
    publish_all,
    write_replay_file,
)
from streaming.feeds.simulator.cluster import ClusterSimulator
from streaming.feeds.simulator.scenario import (
    Scenario,
    ScenarioError,
    load_scenario,
    scenario_names,
)
from streaming.feeds.wire import InputRecord

parse_params = key_values("cluster.brokers=30")


scenario_option = click.option(
    "--scenario",
    default="demo",
    show_default=True,
    help=f"A scenario of conf/scenarios ({', '.join(scenario_names())}) or a YAML file.",
)
param_option = click.option(
    "--param",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    callback=parse_params,
    help="Override one scenario setting (dotted key, YAML value), e.g. cluster.brokers=30.",
)
seed_option = click.option("--seed", type=int, default=1, show_default=True, help="Random seed.")


def load_scenario_or_exit(name: str, params: dict[str, object]) -> Scenario:
    try:
        return load_scenario(name, params)
    except ScenarioError as error:
        raise click.ClickException(f"invalid scenario:\n{error}") from error


@click.command(name="simulate")
@scenario_option
@param_option
@seed_option
@click.option(
    "--seconds", type=float, default=None, help="Simulated seconds (default: the scenario's)."
)
@click.option(
    "--out",
    type=click.File("w", encoding="utf-8"),
    default=None,
    help="Write a replay file (JSON lines of {source, value}; - for stdout) instead of producing.",
)
@click.option(
    "--ground-truth",
    "ground_truth_file",
    type=click.File("w", encoding="utf-8"),
    default=None,
    help="Write what really happened (ISR changes, propagations, ...) as JSON lines.",
)
@click.option("--real-time", is_flag=True, help="Pace records to the wall clock (as --speed 1).")
@click.option(
    "--speed",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Simulated seconds per wall second (implies pacing); default: as fast as possible.",
)
@click.option(
    "--start-ms", type=int, default=None, help="Simulated epoch ms at start (default: now)."
)
@click.option("--bootstrap-servers", default=None, help="Kafka bootstrap servers (host:port,...).")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="isrwatch configuration (Kafka connection and topic names).",
)
def simulate_command(
    scenario: str,
    params: dict[str, object],
    seed: int,
    seconds: float | None,
    out: TextIO | None,
    ground_truth_file: TextIO | None,
    real_time: bool,
    speed: float | None,
    start_ms: int | None,
    bootstrap_servers: str | None,
    config_file: Path | None,
) -> None:
    """Simulate a Kafka cluster and produce its controller-events and fetch-responses.

    By default the records go to the configured Kafka topics as fast as possible;
    --real-time or --speed paces them; --out writes a replay file instead.
    """
    loaded = load_scenario_or_exit(scenario, params)
    start = start_ms if start_ms is not None else loaded.start_ms or int(time.time() * 1000)
    sim = ClusterSimulator(loaded, seed=seed, start_ms=start)
    sim.truth.write_to(ground_truth_file, keep=False)
    until = sim.end_ms if seconds is None else start + round(seconds * 1000)
    pace = 1.0 if real_time and speed is None else speed
    events = paced(sim.events(until), start, pace)
    started = time.monotonic()
    counts: Counter[str] = Counter()
    with contextlib.suppress(KeyboardInterrupt):
        if out is not None:
            write_replay_file(events, out, counts)
        else:
            _produce(events, bootstrap_servers, config_file, counts)
    summary = ", ".join(f"{kind}: {n}" for kind, n in sorted(counts.items()))
    click.echo(
        f"simulate: {loaded.name} seed {seed}, {(sim.now - start) / 1000:.1f} simulated s in "
        f"{time.monotonic() - started:.1f} s, {sum(counts.values())} records ({summary})",
        err=True,
    )


def _produce(
    events: Iterable[InputRecord],
    bootstrap_servers: str | None,
    config_file: Path | None,
    counts: Counter[str],
) -> None:
    from kafka.errors import KafkaError

    config = load_or_exit(config_file, {"kafka.bootstrap_servers": bootstrap_servers})
    try:
        publisher = KafkaPublisher(config)
    except KafkaError as error:
        raise click.ClickException(
            f"cannot reach Kafka at {config.kafka.bootstrap_servers}: {error}"
        ) from error
    try:
        publish_all(publisher, events, counts)
    except PublishError as error:
        raise click.ClickException(str(error)) from error
    finally:
        publisher.close()


if __name__ == "__main__":
    sys.exit(simulate_command())
