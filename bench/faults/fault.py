"""What every fault kind hands the campaign: its figures and its checks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from faults.verify import Comparison


class Mode(StrEnum):
    SHORT = "short"  # CI: a few faults, minutes
    LONG = "long"  # by hand: the full campaign


@dataclass
class FaultResult:
    """One fault kind's figures (None: not applicable) and checks."""

    name: str
    restarts_survived: int | None = None
    events_lost: int | None = None
    events_doubled: int | None = None
    outage_seconds_survived: float | None = None
    sink_duplicates: int | None = None  # at-least-once re-writes (not a failure)
    malformed_tried: int | None = None  # fuzz: records the contract refuses, sent
    crashes: int | None = None  # fuzz: the job's exits and its query's failures
    scrape_p99_s: float | None = None  # scrapes
    series: int | None = None  # scrapes: series in one scrape
    comparison: Comparison = field(default_factory=Comparison)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.comparison.passed

    def take_counts(self) -> None:
        """Figures from the comparison's counts."""
        self.events_lost = self.comparison.events_lost
        self.events_doubled = self.comparison.events_doubled
        self.sink_duplicates = (
            self.comparison.health_rewrites + self.comparison.dead_letter_duplicates
        )


@dataclass(frozen=True)
class Fault:
    """A fault kind: ``run(mode, workdir, seed)`` injects it and checks the job after it."""

    name: str
    summary: str
    run: Callable[[Mode, Path, int], FaultResult]
