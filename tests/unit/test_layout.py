"""The layout of ``streaming/`` and ``state/`` (docs/architecture.md): the roles keep to
themselves."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Loads every module of the feeds, the tools, the configuration and the command line, and
# names the first one after which pyspark is loaded.
_IMPORT_ALL = """
import importlib, pkgutil, sys
import streaming.config, streaming.feeds, streaming.tools
names = ["streaming.cli", "streaming.cli_options"]
for package in (streaming.config, streaming.feeds, streaming.tools):
    names += [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
for name in names:
    importlib.import_module(name)
    if "pyspark" in sys.modules:
        print("pyspark loaded by", name)
        break
else:
    print(len(names), "modules without pyspark")
"""


def test_only_the_job_loads_pyspark() -> None:
    """The collectors, the simulator and the tools run where Spark is not installed (a
    collector's sidecar, a laptop): none of them may load pyspark on import."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL], cwd=REPO, check=True, capture_output=True, text=True
    )
    assert done.stdout.strip().endswith("modules without pyspark"), done.stdout
    assert int(done.stdout.split()[0]) > 50  # the walk found the packages' modules


def test_the_job_is_where_pyspark_is_imported() -> None:
    importing = sorted(
        str(path.relative_to(REPO))
        for path in (REPO / "streaming").rglob("*.py")
        if any(
            line.lstrip().startswith(("import pyspark", "from pyspark"))
            for line in path.read_text(encoding="utf-8").splitlines()
        )
    )
    assert importing, "no module imports pyspark: the scan is broken"
    assert all(path.startswith("streaming/job/") for path in importing), importing


def _state_imports() -> dict[str, set[str]]:
    """Each module of ``state/`` -> the ``state`` modules it imports, those made only for
    type checking included (the package's lazy ``__init__`` left out)."""
    graph: dict[str, set[str]] = {}
    for path in sorted((REPO / "state").glob("*.py")):
        if path.stem == "__init__":
            continue
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("state."):
                imported.add(str(node.module))
            elif isinstance(node, ast.Import):
                imported |= {a.name for a in node.names if a.name.startswith("state.")}
        graph[f"state.{path.stem}"] = imported
    return graph


def _cycle_through(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """A path of imports from ``start`` back to it, if there is one."""
    paths = [[start]]
    seen: set[str] = set()
    while paths:
        path = paths.pop()
        for module in sorted(graph.get(path[-1], ())):
            if module == start:
                return [*path, module]
            if module not in seen:
                seen.add(module)
                paths.append([*path, module])
    return None


def test_state_has_no_import_cycle() -> None:
    """A rule module names what it needs of the model or the table (a Protocol) rather than
    importing the module that imports it back."""
    graph = _state_imports()
    assert len(graph) > 25
    cycles = {m: path for m in graph if (path := _cycle_through(graph, m)) is not None}
    assert cycles == {}


LAYERS_BELOW = {
    "state": ("streaming",),
    "streaming/config": ("streaming.job", "streaming.feeds", "streaming.tools", "streaming.cli"),
    "streaming/job": ("streaming.tools", "streaming.cli"),
    "streaming/feeds": ("streaming.tools", "streaming.cli"),
}
"""Each layer (a directory) and the packages above it, which it must not import: the
model, then the configuration, then the job and the feeds, then the tools and the
command line (docs/architecture.md)."""


def test_no_import_runs_against_the_layers() -> None:
    against = []
    for layer, above in LAYERS_BELOW.items():
        for path in sorted((REPO / layer).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = (
                    [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else []
                )
                against += [
                    f"{path.relative_to(REPO)}: {name}"
                    for name in names
                    if any(name == top or name.startswith(top + ".") for top in above)
                ]
    assert against == []
