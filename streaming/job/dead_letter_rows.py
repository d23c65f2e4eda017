"""The dead-letter rows a shard writes: the record as it arrived (a fetch, which travels
as columns, rendered back as JSON), the reason and a detail, keyed by the Kafka
coordinates of the record (docs/event-contract.md#dead-letters)."""

from __future__ import annotations

import json

import pandas as pd

from state import WIRE_COLUMNS
from state.events import DeadLetterReason, Source
from streaming.job.routing import DEAD, FETCH


def raw_text(row: pd.Series) -> str:
    """The record a dead letter holds: its raw text where it travelled (controller
    events, invalid records); a fetch travels as columns, rendered back as JSON."""
    if row["kind"] != FETCH:
        return str(row["value"])
    fields = {
        name: (int(row[name]) if name not in ("topic", "error") else row[name])
        for name in WIRE_COLUMNS
    }
    return json.dumps(fields, separators=(",", ":"))


MAX_DEAD_LETTER_RAW = 65_536
"""Characters of a record's raw text a dead letter holds. A dead letter must fit Kafka's
default 1 MB record: even at 12 bytes a character (``json.dumps`` escapes a character
outside the BMP as two ``\\uXXXX``) this is 786,432 bytes; the sink's producer refuses a
larger record, which would fail its batch again at every retry."""


def dead_letter_row(row: pd.Series, reason: DeadLetterReason, detail: str) -> dict[str, object]:
    """A dead letter, keyed by the Kafka coordinates of the record it holds."""
    topic, partition, offset = row["src_topic"], int(row["src_partition"]), int(row["src_offset"])
    raw = raw_text(row)
    letter: dict[str, object] = {
        "source": row["source"] if row["kind"] != FETCH else Source.FETCH_RESPONSES.value,
        "reason": reason.value,
        "detail": detail,
        "raw": raw[:MAX_DEAD_LETTER_RAW],
        "topic": topic,
        "partition": partition,
        "offset": offset,
    }
    if len(raw) > MAX_DEAD_LETTER_RAW:
        letter["raw_length"] = len(raw)  # the record's length; ``raw`` is its beginning
    return {
        "kind": DEAD,
        "key": f"{topic}:{partition}:{offset}",
        "value": json.dumps(letter),
        "src_topic": topic,
        "src_partition": partition,
        "src_offset": offset,
    }


def dead_letter_rows(rows: pd.DataFrame) -> list[dict[str, object]]:
    return [
        dead_letter_row(row, DeadLetterReason(row["reason"]), str(row["detail"]))
        for _, row in rows.iterrows()
    ]
