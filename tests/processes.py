"""The processes a command started, from /proc: to check that it leaves none behind."""

from __future__ import annotations

from pathlib import Path


def processes() -> dict[int, tuple[int, str, str]]:
    """pid -> (parent pid, state, start time) of every process, from /proc."""
    table = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        table[int(stat.parent.name)] = (int(fields[1]), fields[0], fields[19])
    return table


def descendants(pid: int) -> dict[int, str]:
    """Every process whose ancestry leads to ``pid``, with its start time."""
    table = processes()
    found: dict[int, str] = {}
    frontier = {pid}
    while frontier:
        children = {child for child, (parent, _, _) in table.items() if parent in frontier}
        frontier = children - set(found)
        found |= {child: table[child][2] for child in frontier}
    return found


def still_running(seen: dict[int, str]) -> set[int]:
    table = processes()
    return {
        pid
        for pid, started in seen.items()
        if pid in table and table[pid][2] == started and table[pid][1] != "Z"
    }
