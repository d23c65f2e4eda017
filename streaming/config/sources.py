"""Where settings come from: the YAML file, ``ISRWATCH_*`` environment variables and the
command line's overrides, each read into (key, value, source) triples for the loader to
layer; a source's own problems (a missing file, an unknown variable) are reported here."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic.fields import FieldInfo

from streaming.config.errors import ConfigError
from streaming.config.model_lookup import Key, alternatives, did_you_mean, is_text, lookup

__all__ = [
    "CONFIG_DIR_VARIABLE",
    "CONFIG_FILE_NAME",
    "CONFIG_FILE_VARIABLE",
    "ENV_PREFIX",
    "Setting",
    "command_line",
    "default_config_path",
    "environment",
    "leaves",
    "named_config_path",
    "read_file",
]

ENV_PREFIX = "ISRWATCH_"
CONFIG_DIR_VARIABLE = "ISRWATCH_CONF_DIR"
CONFIG_FILE_VARIABLE = "ISRWATCH_CONFIG"
CONFIG_FILE_NAME = "isrwatch.yaml"

# Kubernetes injects "service links" for every Service of the namespace: a Service named
# "isrwatch" (the chart's metrics Service) gives ISRWATCH_SERVICE_HOST, ISRWATCH_PORT,
# ISRWATCH_PORT_9464_TCP_ADDR, ... Settings always contain "__", so these never name one.
_SERVICE_LINK = re.compile(
    r"^ISRWATCH_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_\d+_(TCP|UDP|SCTP)(_[A-Z]+)?)?)$"
)

Setting = tuple[Key, object, str]
"""One setting as a source gives it: (key, value, the source named in problems)."""


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """The file load_config reads when given no path: $ISRWATCH_CONFIG, else
    $ISRWATCH_CONF_DIR/isrwatch.yaml, else conf/isrwatch.yaml of the source tree."""
    found = named_config_path(os.environ if environ is None else environ)
    return found or Path(__file__).resolve().parents[2] / "conf" / CONFIG_FILE_NAME


def named_config_path(environ: Mapping[str, str]) -> Path | None:
    """The file the environment names, if it names one (variable names in any case)."""
    upper = {name.upper(): value for name, value in environ.items()}
    if upper.get(CONFIG_FILE_VARIABLE):
        return Path(upper[CONFIG_FILE_VARIABLE])
    if upper.get(CONFIG_DIR_VARIABLE):
        return Path(upper[CONFIG_DIR_VARIABLE]) / CONFIG_FILE_NAME
    return None


class _Loader(yaml.SafeLoader):
    """A safe loader that rejects duplicate keys (a second ``kafka:`` would hide the first)."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if isinstance(key, str | int | float | bool) and key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_file(path: Path, source: str) -> dict[str, Any]:
    """The YAML file's sections; raises ConfigError naming ``source`` if it is unusable."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{source}: file not found") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: cannot read: not UTF-8 text") from None
    except OSError as error:
        raise ConfigError(f"{source}: cannot read: {error.strerror or error}") from None
    try:
        data = yaml.load(text, Loader=_Loader)  # a SafeLoader
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ConfigError(f"{source}: invalid YAML{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: the top level must be a mapping of sections (got {type(data).__name__})"
        )
    return data


def leaves(value: object, key: Key) -> Iterator[tuple[Key, object]]:
    """The settings a nested mapping sets; an empty mapping is a leaf."""
    if isinstance(value, Mapping) and value:
        for name, item in value.items():
            yield from leaves(item, (*key, str(name)))
    else:
        yield key, value


def _env_value(raw: str, field: FieldInfo) -> object:
    """A string setting takes the text as is (a password "123456" stays a string); others
    are parsed as a YAML scalar ("16" -> 16, "true" -> True, "null" -> None)."""
    if is_text(field):
        optional = type(None) in alternatives(field.annotation)
        return None if raw == "" and optional else raw
    try:
        parsed = yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw
    return parsed if parsed is None or isinstance(parsed, str | int | float | bool) else raw


def environment(environ: Mapping[str, str]) -> tuple[list[Setting], list[str]]:
    """The settings ``ISRWATCH_<SECTION>__<NAME>`` variables set, and their problems."""
    settings: list[Setting] = []
    errors: list[str] = []
    set_by: dict[Key, str] = {}
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in (CONFIG_DIR_VARIABLE, CONFIG_FILE_VARIABLE):
            continue
        if _SERVICE_LINK.match(upper):
            continue
        source = f"environment variable {name}"
        key = tuple(part.lower() for part in name[len(ENV_PREFIX) :].split("__"))
        dotted = ".".join(key)
        found = lookup(key) if all(key) else None
        if found is None:
            example = f"{ENV_PREFIX}KAFKA__BOOTSTRAP_SERVERS"
            errors.append(
                f"{source}: {dotted}: unknown setting{did_you_mean(key)} "
                f"(settings are named like {example})"
            )
        elif not isinstance(found, FieldInfo):
            errors.append(
                f"{source}: {dotted}: is a section, not a setting; "
                f"set its settings one by one, as {ENV_PREFIX}{name[len(ENV_PREFIX) :]}__<NAME>"
            )
        elif key in set_by:
            errors.append(f"{source}: {dotted}: also set by {set_by[key]}")
        else:
            set_by[key] = source
            settings.append((key, _env_value(environ[name], found), source))
    return settings, errors


def command_line(overrides: Mapping[str, object]) -> tuple[list[Setting], list[str]]:
    """The settings the command line's dotted overrides set (None: a flag not given)."""
    source = "command line"
    settings: list[Setting] = []
    errors: list[str] = []
    for dotted, value in overrides.items():
        if value is None:
            continue
        key = tuple(dotted.split("."))
        if not all(key):
            errors.append(f"{source}: {dotted}: not a dotted setting name")
            continue
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        settings.extend((key + sub, leaf, source) for sub, leaf in leaves(value, ()))
    return settings, errors
