"""``isrwatch replay``: apply a captured event file in order and print partition health.

Each line of the file is ``{"source": "controller-events" | "fetch-responses",
"value": {...}}`` (docs/event-contract.md#replay-contract). A line that is not such an envelope, or
whose value breaks the contract, is a dead letter like any bad record of the job.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from state import (
    ApplyReport,
    HealthRecord,
    ReplicationModel,
    annotate,
    parse_json_line,
    shape_of_model,
)
from state.events import DeadLetter, DeadLetterReason, Event, FetchResponse, Source
from state.settings import RuleSettings

REPLAY_FILE = "replay-file"
"""``DeadLetter.source`` of a line that is not a valid envelope."""


@dataclass
class ReplayResult:
    records: list[HealthRecord]
    as_of_ms: int | None
    events: int = 0
    after_until: int = 0  # valid events later than --until-ms, not applied
    dead_letters: list[tuple[int, DeadLetter]] = field(default_factory=list)  # (line, letter)
    report: ApplyReport = field(default_factory=ApplyReport)

    def dead_letters_by_reason(self) -> Counter[str]:
        return Counter(letter.reason.value for _, letter in self.dead_letters)


def read_envelope(line_number: int, line: str) -> Event | DeadLetter:
    try:
        envelope = json.loads(line)
    except ValueError as error:
        return DeadLetter(REPLAY_FILE, line, DeadLetterReason.INVALID_JSON, str(error))
    if not isinstance(envelope, dict):
        return DeadLetter(
            REPLAY_FILE, line, DeadLetterReason.NOT_AN_OBJECT, "line is not an object"
        )
    for key in ("source", "value"):
        if key not in envelope:
            detail = f"line {line_number} has no {key!r}"
            return DeadLetter(REPLAY_FILE, line, DeadLetterReason.MISSING_FIELD, detail)
    try:
        source = Source(envelope["source"])
    except ValueError:
        detail = f"source must be one of {[s.value for s in Source]}"
        return DeadLetter(REPLAY_FILE, line, DeadLetterReason.INVALID_VALUE, detail)
    return parse_json_line(source, envelope["value"])


def source_of(event: Event) -> Source:
    return Source.FETCH_RESPONSES if isinstance(event, FetchResponse) else Source.CONTROLLER_EVENTS


def replay(lines: Iterable[str], settings: RuleSettings, until_ms: int | None) -> ReplayResult:
    """Apply the events in file order and evaluate every partition at ``until_ms``.

    With ``until_ms``, events whose ``ts`` is later are not applied (the state as of
    that time); by default it is the largest ``ts`` in the file and all are applied.
    """
    model = ReplicationModel(settings)
    events: list[tuple[int, Event]] = []
    dead: list[tuple[int, DeadLetter]] = []
    raw_lines: dict[int, str] = {}
    after_until = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        parsed = read_envelope(number, line)
        if isinstance(parsed, DeadLetter):
            dead.append((number, parsed))
        elif until_ms is not None and parsed.ts > until_ms:
            after_until += 1
        else:
            events.append((number, parsed))
            raw_lines[number] = line.rstrip("\n")
    report = model.apply(events)
    by_line = dict(events)
    for number, reason in zip(report.rejected_ids, report.rejected_reasons, strict=True):
        source = source_of(by_line[number])
        dead.append((number, DeadLetter(source, raw_lines[number], reason, "not applied")))
    dead.sort(key=lambda item: item[0])
    as_of = until_ms if until_ms is not None else max((e.ts for _, e in events), default=None)
    records: list[HealthRecord] = []
    if as_of is not None:
        # Causes come from the pattern over every partition, which replay holds.
        frame = model.evaluate(as_of)
        shape = shape_of_model(frame, model)
        unhealthy = np.flatnonzero(frame.unhealthy()).tolist()
        records = annotate(list(frame.records()), unhealthy, shape)
    return ReplayResult(records, as_of, len(events), after_until, dead, report)
