"""Layering: the sources merged key by key into one plain dict, validated once.

The layers, lowest to highest precedence: the models' defaults, a YAML file
(``conf/isrwatch.yaml`` unless told otherwise), ``ISRWATCH_*`` environment variables and
the command line's ``overrides``. The merge remembers which source set each key, so that a
setting may be completed by a higher layer (a password from the environment for a SASL
protocol from the file) and every problem is reported against the source that caused it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from streaming.config.errors import ConfigError
from streaming.config.isrwatch_config import IsrwatchConfig
from streaming.config.messages import describe
from streaming.config.model_lookup import Key
from streaming.config.sources import (
    Setting,
    command_line,
    default_config_path,
    environment,
    leaves,
    named_config_path,
    read_file,
)

__all__ = ["dump_config", "load_config"]


def _put(
    data: dict[str, Any], sources: dict[Key, str], key: Key, value: object, source: str
) -> None:
    """Set one setting of the merged data and remember its source; a higher layer replaces
    the settings below or above it (a scalar where a section was, or the reverse)."""
    node = data
    for name in key[:-1]:
        child = node.get(name)
        if not isinstance(child, dict):
            child = node[name] = {}
        node = child
    if isinstance(value, Mapping) and isinstance(node.get(key[-1]), dict):
        return  # an empty section over a section: nothing to change
    node[key[-1]] = dict(value) if isinstance(value, Mapping) else value
    for known in [k for k in sources if k[: len(key)] == key or key[: len(k)] == k]:
        del sources[known]
    sources[key] = source


def load_config(
    path: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
) -> IsrwatchConfig:
    """The effective configuration: defaults < YAML file < environment < overrides.

    ``path`` None reads ``default_config_path(environ)``; when that is the source tree's
    ``conf/isrwatch.yaml`` (no $ISRWATCH_CONFIG / $ISRWATCH_CONF_DIR) and it does not exist
    (an installed wheel), the defaults are used. ``overrides`` maps dotted keys
    (``"kafka.bootstrap_servers"``) to values; None values are skipped. ``environ``
    defaults to ``os.environ``. Raises ConfigError listing every problem.
    """
    environ = os.environ if environ is None else environ
    settings: list[Setting] = []
    errors: list[str] = []

    explicit = path is not None or named_config_path(environ) is not None
    file = Path(path) if path is not None else default_config_path(environ)
    if explicit or file.exists():
        source = os.fspath(path) if path is not None else str(file)
        try:
            data = read_file(file, source)
        except ConfigError as error:
            errors.extend(error.problems)
        else:
            settings.extend((key, value, source) for key, value in leaves(data, ()) if key)

    for layer in (environment(environ), command_line(overrides or {})):
        settings.extend(layer[0])
        errors.extend(layer[1])
    if errors:  # the merged data would be incomplete: validating it would mislead
        raise ConfigError(errors)

    merged: dict[str, Any] = {}
    sources: dict[Key, str] = {}
    for key, value, source in settings:
        _put(merged, sources, key, value, source)
    try:
        return IsrwatchConfig.model_validate(merged)
    except ValidationError as error:
        raise ConfigError(describe(error, sources)) from None  # the cause may hold secrets


def dump_config(config: IsrwatchConfig) -> str:
    """YAML of the effective configuration, secrets masked (``**********``)."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
