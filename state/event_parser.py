"""Parse and validate input records against the JSON Schemas of docs/event-contract.md.

``parse_record`` turns one Kafka record value into a typed event (state/events.py) or a
``DeadLetter`` carrying the reason; it never raises. The schemas live in
``conf/schemas/`` (or ``$ISRWATCH_CONF_DIR/schemas``) and are loaded once.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields, is_dataclass
from functools import cache
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Any, TypeVar, cast, get_args, get_origin, get_type_hints

import fastjsonschema
from jsonschema import Draft202012Validator, ValidationError

from state.events import (
    CONTROLLER_EVENT_TYPES,
    DeadLetter,
    DeadLetterReason,
    Event,
    FetchResponse,
    Source,
)

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

SCHEMA_FILES: Mapping[Source, str] = {
    Source.CONTROLLER_EVENTS: "controller-events.schema.json",
    Source.FETCH_RESPONSES: "fetch-responses.schema.json",
}

# When a record has several errors, the reported one is the first of the highest rank.
_RANK = {
    DeadLetterReason.UNKNOWN_TYPE: 0,
    DeadLetterReason.MISSING_FIELD: 1,
    DeadLetterReason.WRONG_TYPE: 2,
    DeadLetterReason.INVALID_VALUE: 3,
}
_T = TypeVar("_T", bound="DataclassInstance")
_HINTS: dict[type[Any], dict[str, Any]] = {}  # field types of each event class
_MAX_DETAIL = 200
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def schema_dir() -> Path:
    """``$ISRWATCH_CONF_DIR/schemas`` if that variable is set, else the repository's."""
    conf = os.environ.get("ISRWATCH_CONF_DIR")
    base = Path(conf) if conf else Path(__file__).resolve().parent.parent / "conf"
    return base / "schemas"


def reload_schemas() -> None:
    """Forget the loaded schemas (after ``ISRWATCH_CONF_DIR`` changed, say)."""
    for cached in (_schema, schema_validator, fast_validator):
        cached.cache_clear()


@cache
def _schema(source: Source) -> dict[str, Any]:
    schema = json.loads((schema_dir() / SCHEMA_FILES[source]).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return cast("dict[str, Any]", schema)


@cache
def schema_validator(source: Source) -> Draft202012Validator:
    """The validator that says *why* a record breaks the schema (loaded on first use)."""
    return Draft202012Validator(_schema(source))


@cache
def fast_validator(source: Source) -> Callable[[object], object]:
    """The same schema compiled to Python code: about 3 us a fetch response instead of
    200 with ``jsonschema``. It only says yes or no; a no goes to ``schema_validator``
    for the reason. (The schemas keep ranges out of ``$ref`` siblings for it.)"""
    return cast(
        "Callable[[object], object]", fastjsonschema.compile(_schema(source), use_default=False)
    )


def parse_record(source: Source, value: bytes | str | None) -> Event | DeadLetter:
    """Parse one record value (UTF-8 JSON text) of ``source``; never raises."""
    if value is None:
        return DeadLetter(source, "", DeadLetterReason.INVALID_JSON, "record has no value (null)")
    if isinstance(value, str):
        raw = text = value
    elif isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        raw = data.decode("utf-8", errors="replace")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            return DeadLetter(source, raw, DeadLetterReason.INVALID_JSON, f"not UTF-8: {error}")
    else:  # despite the signature
        detail = f"value is {type(value).__name__}, not bytes or text"
        return DeadLetter(source, _render(value), DeadLetterReason.INVALID_JSON, detail)
    try:
        obj = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as error:  # JSONDecodeError is a ValueError
        detail = clip_detail(f"not valid JSON: {error}")
        return DeadLetter(source, raw, DeadLetterReason.INVALID_JSON, detail)
    if "\\u" in text and (where := lone_surrogate(obj)) is not None:
        detail = clip_detail(f"not UTF-8: {where} holds an escaped lone surrogate")
        return DeadLetter(source, raw, DeadLetterReason.INVALID_JSON, detail)
    return _parse(source, obj, raw)


def lone_surrogate(obj: object) -> str | None:
    """The path of the first string (or key) of ``obj`` that UTF-8 cannot hold, if any.

    JSON text may escape a lone surrogate (``"\\ud800"``); ``json`` and msgspec parse it
    into a ``str`` that no UTF-8 encoder takes (Arrow's, msgspec's, the Kafka producer's),
    so such a record would stop the job where it is written out. It is not Unicode text,
    and the contract's records are UTF-8: ``invalid_json``.
    """
    stack: list[tuple[list[str | int], object]] = [([], obj)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if not utf8_encodable(item):
                return _path(path)
        elif isinstance(item, dict):
            for key, value in item.items():
                if not utf8_encodable(key):
                    return _path(path) + " (a key)"
                stack.append(([*path, key], value))
        elif isinstance(item, list):
            stack.extend(([*path, index], value) for index, value in enumerate(item))
    return None


def utf8_encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_json_line(source: Source, obj: object) -> Event | DeadLetter:
    """Parse an already decoded JSON value (e.g. the ``value`` of a replay line)."""
    return _parse(source, obj, None)


def _parse(source: Source, obj: object, raw: str | None) -> Event | DeadLetter:
    def dead(reason: DeadLetterReason, detail: str) -> DeadLetter:
        return DeadLetter(source, _render(obj) if raw is None else raw, reason, clip_detail(detail))

    if not isinstance(obj, dict):
        return dead(DeadLetterReason.NOT_AN_OBJECT, f"value is {_json_type(obj)}, not an object")
    # Outside the try: a missing or broken schema must fail loudly, not dead-letter all.
    fast, schema = fast_validator(source), schema_validator(source)
    with contextlib.suppress(Exception):  # any doubt goes to the validator that explains
        fast(obj)
        return _build_event(source, obj)
    try:
        errors = [_classify(error) for error in schema.iter_errors(obj)]
        if errors:
            return dead(*min(errors, key=lambda error: _RANK[error[0]]))
        return _build_event(source, obj)
    except Exception as error:  # defensive: a bad record must never stop the job
        return dead(DeadLetterReason.INVALID_VALUE, f"cannot validate: {error!r}")


def _build_event(source: Source, obj: Mapping[str, Any]) -> Event:
    if source == Source.FETCH_RESPONSES:
        return _build(FetchResponse, obj)
    return _build(CONTROLLER_EVENT_TYPES[obj["type"]], obj)


def _classify(error: ValidationError) -> tuple[DeadLetterReason, str]:
    path = list(error.absolute_path)
    where = _path(path)
    value: Any = error.instance
    if "propertyNames" in error.relative_schema_path:
        return DeadLetterReason.INVALID_VALUE, f"invalid key in {where}: {error.message}"
    if error.validator == "required":
        required = cast("list[str]", error.validator_value)
        missing = next(name for name in required if name not in value)
        return DeadLetterReason.MISSING_FIELD, f"missing required field {_path([*path, missing])}"
    if error.validator == "type":
        expected = error.validator_value
        return DeadLetterReason.WRONG_TYPE, f"{where} must be {expected}, not {_json_type(value)}"
    if path == ["type"] and error.validator == "enum" and isinstance(value, str):
        return DeadLetterReason.UNKNOWN_TYPE, f"unknown event type {value!r}"
    if error.validator == "minimum":
        return DeadLetterReason.INVALID_VALUE, f"{where} must be >= {error.validator_value}"
    if error.validator == "maximum":
        return DeadLetterReason.INVALID_VALUE, f"{where} must be <= {error.validator_value}"
    if error.validator == "minLength":
        return DeadLetterReason.INVALID_VALUE, f"{where} must not be empty"
    if error.validator == "maxLength":  # not error.message: it holds the whole value
        limit = error.validator_value
        return DeadLetterReason.INVALID_VALUE, f"{where} must be at most {limit} characters"
    return DeadLetterReason.INVALID_VALUE, f"{where}: {error.message}"


def _build(cls: type[_T], obj: Mapping[str, Any]) -> _T:
    """An instance of the dataclass ``cls`` from a schema-valid JSON object."""
    hints = _HINTS.get(cls) or _HINTS.setdefault(cls, get_type_hints(cls))
    return cls(
        **{f.name: _convert(obj[f.name], hints[f.name]) for f in fields(cls) if f.name in obj}
    )


def _convert(value: Any, hint: Any) -> Any:
    """``value`` (schema-valid) as the field type ``hint``: ints, tuples, nested events."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is UnionType:  # ``X | None``: the schema never lets null through
        return _convert(value, next(arg for arg in args if arg is not type(None)))
    if hint is int:
        return int(value)  # an integral float such as 5.0
    if origin is tuple:
        return tuple(_convert(item, args[0]) for item in value)
    if origin is Mapping:  # TopicChange.created: the JSON keys are strings
        key_type, value_type = args
        return {key_type(key): _convert(item, value_type) for key, item in value.items()}
    if is_dataclass(hint):
        return _build(hint, value)  # type: ignore[arg-type]
    return value


def _path(path: Iterable[str | int]) -> str:
    """A JSON path such as ``partitions[2].isr`` (``"<record>"`` for the record itself)."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _IDENTIFIER.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{json.dumps(part)}]"
    return text or "<record>"


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _render(obj: object) -> str:
    """The raw text of an already decoded value, for its dead letter."""
    try:
        return json.dumps(obj, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):  # huge ints, non-JSON values, deep nesting
        return f"<unprintable {_json_type(obj)}>"


def clip_detail(text: str) -> str:
    """A dead letter's detail, cut to its most characters."""
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 3] + "..."


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")
