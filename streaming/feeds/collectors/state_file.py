"""A collector's resume state: one JSON document, replaced atomically."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class StateFileError(Exception):
    """The state file exists but cannot be used."""


def load_state(path: Path) -> dict[str, Any] | None:
    """The saved state, or None if there is none yet."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as error:
        raise StateFileError(f"{path}: cannot read: {error.strerror or error}") from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise StateFileError(f"{path}: not a collector state (invalid JSON: {error})") from None
    if not isinstance(data, dict):
        raise StateFileError(f"{path}: not a collector state (not a JSON object)")
    return data


def save_state(path: Path, state: Mapping[str, Any]) -> None:
    """Write ``state`` so that a crash leaves either the old or the new document."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            # dumps, not dump: the same text in one write, where dump writes each of its
            # pieces (0.45 s of CPU for collect admin's 2.8 MB at 100,000 partitions)
            out.write(json.dumps(state, separators=(",", ":"), sort_keys=True))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
