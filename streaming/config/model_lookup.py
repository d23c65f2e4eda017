"""What a dotted key names in ``IsrwatchConfig``: a section, a setting or nothing, and
what kind of value a setting takes (the loader's questions about the models)."""

from __future__ import annotations

import difflib
import types
from typing import Annotated, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from streaming.config.isrwatch_config import IsrwatchConfig

__all__ = ["Key", "alternatives", "did_you_mean", "is_secret", "is_text", "lookup"]

Key = tuple[str, ...]
"""A setting or section by the names on its path: ``("kafka", "bootstrap_servers")``."""


def _section(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def lookup(key: Key) -> type[BaseModel] | FieldInfo | None:
    """The section (a model class) or the setting (a field) ``key`` names; None: neither."""
    model: type[BaseModel] = IsrwatchConfig
    for depth, name in enumerate(key):
        field = model.model_fields.get(name)
        if field is None:
            return None
        section = _section(field.annotation)
        if depth == len(key) - 1:
            return section or field
        if section is None:
            return None
        model = section
    return model


def alternatives(annotation: object) -> tuple[object, ...]:
    """The types a (possibly optional, possibly Annotated) annotation admits."""
    if get_origin(annotation) in (Union, types.UnionType):
        return tuple(kind for arg in get_args(annotation) for kind in alternatives(arg))
    if get_origin(annotation) is Annotated:
        return alternatives(get_args(annotation)[0])
    return (annotation,)


def is_text(field: FieldInfo) -> bool:
    """A str or SecretStr setting, possibly optional."""
    kinds = [kind for kind in alternatives(field.annotation) if kind is not type(None)]
    return all(kind is str or kind is SecretStr for kind in kinds)


def is_secret(key: Key) -> bool:
    found = lookup(key)
    return isinstance(found, FieldInfo) and SecretStr in alternatives(found.annotation)


def did_you_mean(key: Key) -> str:
    parent = lookup(key[:-1])
    if not isinstance(parent, type):
        return ""
    close = difflib.get_close_matches(key[-1], list(parent.model_fields), n=1)
    return f" (did you mean {'.'.join((*key[:-1], close[0]))}?)" if close else ""
