"""How much of its input the log collector understands: lines read, recognised, and one
example of a line it did not recognise, per file. A layout the reader does not know
shows at once, instead of a collector that runs on silently with nothing."""

from __future__ import annotations

from dataclasses import dataclass, field

from streaming.feeds.collectors.log_lines import Continuation, LineResult, Unparseable

UNRECOGNISED_REASONS = frozenset({"unknown_layout", "bad_timestamp", "no_timestamp"})


@dataclass(slots=True)
class FileRecognition:
    """One file's counts. A line is recognised when it is an entry in a known layout, or
    continues one (a stack trace); a continuation with no entry above it in the file is
    not."""

    read: int = 0
    recognised: int = 0
    records: int = 0
    example: str | None = None  # the first unrecognised line
    entry_seen: bool = False
    reported: bool = False

    @property
    def unrecognised(self) -> int:
        return self.read - self.recognised

    def count(self, line: str, result: LineResult, *, record: bool) -> bool:
        """Count one line; whether it was recognised."""
        self.read += 1
        if isinstance(result, Continuation):
            recognised = self.entry_seen
        elif isinstance(result, Unparseable) and result.reason in UNRECOGNISED_REASONS:
            recognised = False
        else:
            recognised = True
            self.entry_seen = True
        if recognised:
            self.recognised += 1
        elif self.example is None:
            self.example = line.rstrip("\r\n")[:300]
        if record:
            self.records += 1
        return recognised

    def understood(self) -> bool:
        """At least half the lines are recognised."""
        return 2 * self.recognised >= self.read

    def summary(self, path: str) -> str:
        text = (
            f"{path}: {self.read} lines read, {self.recognised} recognised,"
            f" {self.records} with a record"
        )
        if self.example is not None:
            text += f"; {self.unrecognised} not recognised, e.g. {self.example!r}"
        return text


@dataclass(slots=True)
class Recognition:
    files: dict[str, FileRecognition] = field(default_factory=dict)

    def of(self, path: str) -> FileRecognition:
        return self.files.setdefault(path, FileRecognition())

    def summaries(self) -> list[str]:
        return [counts.summary(path) for path, counts in sorted(self.files.items())]
