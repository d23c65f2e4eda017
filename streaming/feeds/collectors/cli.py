"""``isrwatch collect``: the collectors' commands."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
from pathlib import Path

import click

from streaming.acl_denial import DeniedError
from streaming.cli_options import config_option, load_or_exit, set_option
from streaming.config import IsrwatchConfig
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.collectors.state_file import StateFileError
from streaming.feeds.publisher import JsonLinesPublisher, KafkaPublisher, Publisher

_dry_run_option = click.option(
    "--dry-run",
    is_flag=True,
    help="Print the events as JSON lines ({source, key, value}) instead of producing them;"
    " no state is read or written.",
)


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    return stop


def _publisher(config: IsrwatchConfig, dry_run: bool) -> Publisher:
    if dry_run:
        return JsonLinesPublisher(sys.stdout)
    try:
        return KafkaPublisher(config)
    except Exception as error:
        raise click.ClickException(f"cannot connect to Kafka: {error}") from error


def _metrics(config: IsrwatchConfig, collector: str, port: int, serve: bool) -> CollectorMetrics:
    metrics = CollectorMetrics(collector)
    if serve and config.collect.metrics_enabled:
        metrics.serve(config.collect.metrics_host, port)
    return metrics


@click.group(name="collect")
def collect() -> None:
    """Feed controller-events and fetch-responses from a real Kafka cluster."""
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("kafka").setLevel(logging.WARNING)  # its INFO is every connection


@collect.command(name="logs")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--follow", is_flag=True, help="Keep reading the files as they grow, until stopped.")
@_dry_run_option
@config_option
@set_option
def logs_command(
    files: tuple[Path, ...],
    follow: bool,
    dry_run: bool,
    config_file: Path | None,
    overrides: dict[str, object],
) -> None:
    """Tail broker logs (state-change.log, server.log, controller.log) into controller-events.

    Resumes where the last run stopped (collect.logs.state_file). Lines it cannot parse
    are counted (isrwatch_collect_log_unparseable_lines), never fatal.
    """
    from streaming.feeds.collectors.log_collector import LogCollector

    config = load_or_exit(config_file, overrides)
    settings = config.collect.logs
    metrics = _metrics(config, "logs", settings.metrics_port, serve=follow)
    try:
        collector = LogCollector(
            [str(path) for path in files],
            settings,
            _publisher(config, dry_run),
            metrics,
            None if dry_run else Path(settings.state_file),
        )
    except (StateFileError, ValueError) as error:
        raise click.ClickException(str(error)) from error
    stop = _stop_on_signals()
    try:
        collector.run(follow=follow, stop=stop)
    except Exception as error:
        raise click.ClickException(f"cannot publish the events: {error}") from error
    finally:
        summaries = collector.report_all()
        with contextlib.suppress(Exception):
            collector.close()
        metrics.close()
    if dry_run:
        sys.stdout.flush()
        for summary in summaries:
            click.echo(f"summary: {summary}", err=True)


@collect.command(name="admin")
@click.option("--bootstrap-servers", default=None, help="Kafka bootstrap servers (host:port,...).")
@click.option(
    "--interval-ms",
    type=click.IntRange(min=1),
    default=None,
    help="Time between polls (default: collect.admin.poll_interval_ms).",
)
@click.option("--once", is_flag=True, help="Poll once and exit.")
@_dry_run_option
@config_option
@set_option
def admin_command(
    bootstrap_servers: str | None,
    interval_ms: int | None,
    once: bool,
    dry_run: bool,
    config_file: Path | None,
    overrides: dict[str, object],
) -> None:
    """Poll a live cluster with the admin API; publish what changed between polls.

    Emits LeaderAndIsr, IsrChange, BrokerChange, ControllerChange (KRaft), TopicChange,
    TopicConfig and BrokerConfig, and fetch-responses derived from per-replica log end
    offsets (docs/collectors.md#collect-admin).
    """
    from streaming.feeds.collectors.admin_collector import AdminCollector
    from streaming.feeds.collectors.admin_source import KafkaAdminSource

    config = load_or_exit(
        config_file,
        overrides,
        {
            "kafka.bootstrap_servers": bootstrap_servers,
            "collect.admin.poll_interval_ms": interval_ms,
        },
    )
    settings = config.collect.admin
    metrics = _metrics(config, "admin", settings.metrics_port, serve=not once)

    def unavailable(api: str, error: Exception) -> None:
        metrics.unavailable.labels(api).inc()
        if isinstance(error, DeniedError):  # it answered: no, and which ACL it wants
            metrics.warn_once(api, "%s refused, %s; polling without it", api, error)
        else:
            metrics.warn_once(
                api, "the cluster did not answer %s (%s); polling without it", api, error
            )

    try:
        # a poll waits at most broker_timeout_ms for any answer, the cluster-wide ones
        # (Metadata, DescribeCluster) included: one may go to a hung broker
        polled = config.kafka.model_copy(
            update={
                "bootstrap_servers": settings.bootstrap_servers or config.kafka.bootstrap_servers,
                "request_timeout_ms": min(
                    config.kafka.request_timeout_ms, settings.broker_timeout_ms
                ),
            }
        )
        source = KafkaAdminSource(
            polled,
            offsets=settings.fetch_responses,
            on_unavailable=unavailable,
            broker_timeout_ms=settings.broker_timeout_ms,
        )
    except Exception as error:
        metrics.close()
        raise click.ClickException(f"cannot connect to Kafka: {error}") from error
    try:
        collector = AdminCollector(
            source,
            _publisher(config, dry_run),
            metrics,
            None if dry_run else Path(settings.state_file),
            fetch_responses=settings.fetch_responses,
            broker_changes=settings.broker_changes,
            partition_events=settings.partition_events,
            interval_ms=settings.poll_interval_ms,
        )
    except (StateFileError, ValueError, click.ClickException) as error:
        source.close()
        metrics.close()
        raise click.ClickException(str(error)) from error
    stop = _stop_on_signals()
    try:
        collector.run(interval_ms=settings.poll_interval_ms, stop=stop, once=once)
    except Exception as error:
        raise click.ClickException(f"poll failed: {error}") from error
    finally:
        with contextlib.suppress(Exception):
            collector.close()
        metrics.close()


@collect.command(name="metadata-log")
@click.argument(
    "directories", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path)
)
@click.option("--follow", is_flag=True, help="Keep reading the log as it grows, until stopped.")
@_dry_run_option
@config_option
@set_option
def metadata_log_command(
    directories: tuple[Path, ...],
    follow: bool,
    dry_run: bool,
    config_file: Path | None,
    overrides: dict[str, object],
) -> None:
    """Replay a KRaft cluster's metadata log (a broker's or controller's
    ``__cluster_metadata-0`` directory, or the log dir holding it) into controller-events.

    Several directories are copies of the same log: each offset is read once, from the
    first that has it. Resumes where the last run stopped (collect.metadata_log.state_file);
    docs/collectors-metadata-log.md.
    """
    from streaming.feeds.collectors.metadata_log.collector import MetadataLogCollector

    config = load_or_exit(config_file, overrides)
    settings = config.collect.metadata_log
    metrics = _metrics(config, "metadata-log", settings.metrics_port, serve=follow)
    try:
        collector = MetadataLogCollector(
            directories,
            _publisher(config, dry_run),
            metrics,
            None if dry_run else Path(settings.state_file),
            max_read_bytes=settings.max_read_bytes,
            poll_interval_ms=settings.poll_interval_ms,
        )
    except (StateFileError, ValueError) as error:
        metrics.close()
        raise click.ClickException(str(error)) from error
    stop = _stop_on_signals()
    try:
        collector.run(follow=follow, stop=stop)
    except Exception as error:
        raise click.ClickException(f"cannot publish the events: {error}") from error
    finally:
        with contextlib.suppress(Exception):
            collector.close()
        metrics.close()
