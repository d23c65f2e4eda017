"""Options and helpers shared by the ``isrwatch`` commands."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import click
import yaml

from streaming.config import ConfigError, IsrwatchConfig, load_config


def load_or_exit(
    config_file: Path | None,
    overrides: Mapping[str, object] | None = None,
    flags: Mapping[str, object] | None = None,
) -> IsrwatchConfig:
    """The configuration, or a clean exit listing every problem.

    ``flags`` are a command's own options (``--bootstrap-servers``...), by dotted key: one
    that was given beats ``--set`` of the same key; one left out (None) leaves ``--set``'s
    value in place rather than erasing it.
    """
    given = {key: value for key, value in (flags or {}).items() if value is not None}
    try:
        return load_config(config_file, {**(overrides or {}), **given})
    except ConfigError as error:
        raise click.ClickException(f"invalid configuration:\n{error}") from error


def key_values(
    example: str,
) -> Callable[[click.Context | None, click.Parameter | None, tuple[str, ...]], dict[str, object]]:
    """A click callback turning repeated ``dotted.key=value`` (YAML values) into a dict."""

    def parse(
        _context: click.Context | None, _parameter: click.Parameter | None, values: tuple[str, ...]
    ) -> dict[str, object]:
        overrides: dict[str, object] = {}
        for item in values:
            key, sep, text = item.partition("=")
            if not sep or not key:
                raise click.BadParameter(f"{item!r} is not KEY=VALUE (e.g. {example})")
            overrides[key.strip()] = yaml.safe_load(text) if text else None
        return overrides

    return parse


parse_settings = key_values("rules.warn_ratio=0.8")

config_option = click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="YAML configuration file (default: conf/isrwatch.yaml, or $ISRWATCH_CONFIG).",
)

set_option = click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    callback=parse_settings,
    help="Override one setting (dotted key, YAML value); repeatable. Beats file and env.",
)
