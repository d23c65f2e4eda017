"""``isrwatch lab`` and ``isrwatch lab fault`` on the command line."""

from __future__ import annotations

import signal
import tempfile
import time
from pathlib import Path

import click

from streaming.cli_options import config_option, load_or_exit, set_option
from streaming.tools.lab.cluster import BrokerFault
from streaming.tools.lab.distribution import LINES, LabError, line
from streaming.tools.lab.faults import request_fault
from streaming.tools.lab.node_config import DEFAULT_LAG_TIME_MAX_MS
from streaming.tools.lab.scenarios import SCENARIOS, scenario

__all__ = ["lab_command"]


def _interrupt(_signal: int, _frame: object) -> None:
    raise KeyboardInterrupt


@click.group(name="lab", invoke_without_command=True)
@click.option(
    "--kafka",
    "kafka_line",
    type=click.Choice(list(LINES)),
    default="4.1",
    show_default=True,
    help="Apache Kafka release line: 4.1 (KRaft) or 3.9 (ZooKeeper mode).",
)
@click.option("--brokers", type=click.IntRange(min=1), default=3, show_default=True)
@click.option(
    "--elr",
    type=click.Choice(["on", "off"]),
    default="on",
    show_default=True,
    help="Kafka 4.1's Eligible Leader Replicas; off formats the cluster with "
    "eligible.leader.replicas.version=0.",
)
@click.option(
    "--scenario",
    "scenario_name",
    type=click.Choice(list(SCENARIOS)),
    default="tour",
    show_default=True,
    help="Named sequence of faults (docs/real-kafka.md#scenarios).",
)
@click.option(
    "--seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Stop this many seconds after the first micro-batch (default: Ctrl-C).",
)
@click.option(
    "--after-scenario",
    "after_scenario_s",
    type=click.FloatRange(min=0),
    default=None,
    help="Stop this many seconds after the scenario's last step (a rolling restart takes "
    "what its checks take).",
)
@click.option(
    "--warm-up",
    "warm_up_s",
    type=click.FloatRange(min=0),
    default=0,
    show_default=True,
    help="Play the scenario this many seconds after the first micro-batch, once the "
    "JVMs have compiled what they run (docs/real-kafka.md#warm-up).",
)
@click.option(
    "--health-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write every health record to this JSON-lines file.",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory of the cluster's files, logs and cluster.json (default: a new one "
    "under the system's temporary directory, kept afterwards).",
)
@click.option(
    "--port-base",
    type=click.IntRange(min=1024, max=65000),
    default=None,
    help="First of the cluster's ports (4 per broker, and one more); default: ports the OS picks.",
)
@click.option(
    "--lag-time-max-ms",
    type=click.IntRange(min=1000),
    default=DEFAULT_LAG_TIME_MAX_MS,
    show_default=True,
    help="The brokers' replica.lag.time.max.ms (T); their session timeouts are 2 T.",
)
@click.option("--metrics-port", type=int, default=None, help="Port of /metrics (default: config).")
@click.option("--live/--no-live", default=None, help="Live view (default: when on a terminal).")
@config_option
@set_option
@click.pass_context
def lab_command(
    context: click.Context,
    kafka_line: str,
    brokers: int,
    elr: str,
    scenario_name: str,
    seconds: float | None,
    after_scenario_s: float | None,
    warm_up_s: float,
    health_out: Path | None,
    workdir: Path | None,
    port_base: int | None,
    lag_time_max_ms: int,
    metrics_port: int | None,
    live: bool | None,
    config_file: Path | None,
    overrides: dict[str, object],
) -> None:
    """Run a real Apache Kafka cluster here and watch it: the collectors, the job,
    /metrics and the live view (docs/real-kafka.md).

    Kafka's jars come from Maven Central into .cache/jvm (`make kafka`). The cluster's
    files, its logs in Kafka's default layout and cluster.json go to --workdir.
    `isrwatch lab fault ... --workdir DIR` acts on a running lab from another shell.
    """
    if context.invoked_subcommand is not None:
        return
    from rich.console import Console

    from streaming.tools.foreground import StartupError, output_to_log
    from streaming.tools.lab.session import LabOptions, check_ports, run_lab

    config = load_or_exit(config_file, overrides, {"metrics.port": metrics_port})
    if workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix=f"isrwatch-lab-{time.strftime('%H%M%S')}-"))
    workdir = workdir.resolve()
    try:
        options = LabOptions(
            kafka=line(kafka_line),
            brokers=brokers,
            elr=elr == "on",
            workdir=workdir,
            steps=scenario(scenario_name),
            scenario_name=scenario_name,
            seconds=seconds,
            health_out=health_out,
            after_scenario_s=after_scenario_s,
            warm_up_s=warm_up_s,
            port_base=port_base,
            lag_time_max_ms=lag_time_max_ms,
        )
        check_ports(config)
    except LabError as error:
        raise click.ClickException(str(error)) from error
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "isrwatch-lab.log"
    signal.signal(signal.SIGTERM, _interrupt)  # stop as cleanly as on Ctrl-C
    with output_to_log(log_path) as terminal:
        console = Console(file=terminal)
        options.live = console.is_terminal if live is None else live
        try:
            result = run_lab(config, options, console)
        except (StartupError, LabError) as error:
            raise click.ClickException(f"{error} (the lab's log: {log_path})") from error
    console = Console(stderr=True)
    for summary_line in result.summary:
        console.print(summary_line, highlight=False)
    if result.error is not None:
        console.print(f"error: {result.error} (see {log_path})", style="bold red", highlight=False)
        raise SystemExit(1)
    console.print(f"Spark's and the job's logs: {log_path}", highlight=False)


@lab_command.command(name="fault")
@click.argument("fault", type=click.Choice(list(BrokerFault.ALL)))
@click.option("--broker", type=int, required=True, help="The broker's id (cluster.json).")
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    required=True,
    help="The running lab's --workdir.",
)
def fault_command(fault: str, broker: int, workdir: Path) -> None:
    """Do FAULT to one broker of the lab running in --workdir: pause/resume
    (SIGSTOP/SIGCONT), kill (SIGKILL), stop (SIGTERM: a controlled shutdown), start,
    cut/heal (its inter-broker listener stops answering, through the fault proxy)."""
    try:
        click.echo(request_fault(workdir.resolve(), fault, broker))
    except LabError as error:
        raise click.ClickException(str(error)) from error
