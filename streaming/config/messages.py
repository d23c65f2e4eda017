"""A pydantic ``ValidationError`` of the merged settings as the user's problems: one line
per problem, ``<source>: <dotted.key>: <why>``, blaming the source that set the key."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from streaming.config.errors import CROSS_FIELD
from streaming.config.model_lookup import Key, did_you_mean, is_secret

__all__ = ["describe"]

_MESSAGES = {
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "model_type": "must be a section (a mapping of settings)",
    "model_attributes_type": "must be a section (a mapping of settings)",
}


def _source_of(sources: Mapping[Key, str], key: Key) -> str:
    """Who set ``key`` (or the section holding it); for a section, who set its settings."""
    for end in range(len(key), 0, -1):
        if (source := sources.get(key[:end])) is not None:
            return source
    below = [source for known, source in sources.items() if known[: len(key)] == key]
    return ", ".join(dict.fromkeys(below)) or "defaults"


def _blame(sources: Mapping[Key, str], keys: Sequence[Key]) -> str:
    for key in keys:
        for end in range(len(key), 0, -1):
            if (source := sources.get(key[:end])) is not None:
                return source
    return "defaults"


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _why(error: Mapping[str, Any], key: Key) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown setting" + did_you_mean(key)
    ctx = error.get("ctx") or {}
    if kind in ("too_short", "string_too_short") and ctx.get("min_length") == 1:
        message = "must not be empty"
    else:
        message = _MESSAGES.get(kind) or str(error["msg"])
        for prefix in ("Value error, ", "Assertion failed, "):
            message = message.removeprefix(prefix)
        if message.startswith("Input should be "):
            message = "must be " + message.removeprefix("Input should be ")
    value = error.get("input")
    if kind == "missing" or isinstance(value, Mapping | BaseModel):
        return message
    return f"{message} (got {'**********' if is_secret(key) else _short(value)})"


def describe(error: ValidationError, sources: Mapping[Key, str]) -> list[str]:
    """One line per problem of ``error``; ``sources`` tells who set each key."""
    lines: list[str] = []
    for item in error.errors():
        loc = tuple(str(part) for part in item["loc"])
        problems = (item.get("ctx") or {}).get("problems")
        if item["type"] == CROSS_FIELD and problems:
            for field, why, blamed in problems:
                source = _blame(sources, [(*loc, name) for name in blamed])
                lines.append(f"{source}: {'.'.join((*loc, field))}: {why}")
        else:
            dotted = ".".join(loc) or "(top level)"
            lines.append(f"{_source_of(sources, loc)}: {dotted}: {_why(item, loc)}")
    return lines
