"""The fault kinds the campaign knows, by name; a module is imported only when its fault
runs. A new kind is a module with a ``FAULT`` and a line here."""

from __future__ import annotations

import importlib

from faults.fault import Fault

MODULES = {
    "kill": "faults.kill",
    "outage": "faults.outage",
    "backlog": "faults.backlog",
    "fuzz": "faults.hostile_input",
    "scrapes": "faults.scrape_load",
}
DEFAULT = ("kill", "outage", "backlog")
"""What a run without ``--faults`` injects (``fuzz`` and ``scrapes`` are runs of their own:
docs/faults-fuzz-and-scrapes.md)."""


def fault(name: str) -> Fault:
    loaded: Fault = importlib.import_module(MODULES[name]).FAULT
    return loaded
