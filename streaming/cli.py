"""The ``isrwatch`` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

import click
import yaml

from streaming.config import ConfigError, IsrwatchConfig, dump_config, load_config
from streaming.replay import replay


def _load(config_file: Path | None, overrides: dict[str, object] | None = None) -> IsrwatchConfig:
    try:
        return load_config(config_file, overrides)
    except ConfigError as error:
        raise click.ClickException(f"invalid configuration:\n{error}") from error


def _dump_line(record: object) -> str:
    return json.dumps(record, separators=(",", ":"))


config_option = click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="YAML configuration file (default: conf/isrwatch.yaml, or $ISRWATCH_CONFIG).",
)


def _parse_settings(
    _context: click.Context, _parameter: click.Parameter, values: tuple[str, ...]
) -> dict[str, object]:
    overrides: dict[str, object] = {}
    for item in values:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE (e.g. rules.warn_ratio=0.8)")
        overrides[key.strip()] = yaml.safe_load(text) if text else None
    return overrides


set_option = click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    callback=_parse_settings,
    help="Override one setting (dotted key, YAML value); repeatable. Beats file and env.",
)


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
    config = _load(config_file, overrides)
    result = replay(events_file, config.rules, until_ms)
    for record in result.records:
        click.echo(_dump_line(record))
    if dead_letters_file is not None:
        for line, letter in result.dead_letters:
            dead_letters_file.write(_dump_line({
                "line": line, "source": letter.source, "reason": letter.reason.value,
                "detail": letter.detail, "raw": letter.raw,
            }) + "\n")  # fmt: skip
    reasons = ", ".join(f"{r}: {n}" for r, n in sorted(result.dead_letters_by_reason().items()))
    click.echo(
        f"replay: {result.events} events, {len(result.records)} partitions at "
        f"{result.as_of_ms}, {result.after_until} events after it not applied, "
        f"{len(result.dead_letters)} dead letters" + (f" ({reasons})" if reasons else ""),
        err=True,
    )


@main.command(name="config")
@config_option
@set_option
def config_command(config_file: Path | None, overrides: dict[str, object]) -> None:
    """Print the effective configuration (file < environment < --set), secrets masked."""
    click.echo(dump_config(_load(config_file, overrides)), nl=False)


if __name__ == "__main__":
    sys.exit(main())
