"""The API of ``state`` (state/__init__.py): what it names loads, lazily."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import state

INIT = Path(state.__file__)


def test_every_exported_name_loads_from_its_module() -> None:
    for name in state.__all__:
        value = getattr(state, name)
        assert value is getattr(sys.modules[state._MODULE_OF[name]], name)


def test_the_type_checkers_imports_name_what_the_loader_exports() -> None:
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    guarded = next(
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    )
    imported = {
        (node.module, alias.name)
        for node in guarded.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name
    }
    exported = {(module, name) for name, module in state._MODULE_OF.items()}
    assert imported == exported


def test_a_collector_importing_the_decoders_does_not_load_numba_or_pandas() -> None:
    code = (
        "import sys\n"
        "from state import parse_json_line, FollowerStatus\n"
        "import state.events\n"
        "print(sorted(m for m in ('numba', 'pandas') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=INIT.parents[1],
    ).stdout
    assert out.strip() == "[]"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        state.NoSuchThing  # noqa: B018 - the lookup is the test
