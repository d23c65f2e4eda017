"""The capture's records as the fixture writers feed them to a release's job: the same
error codes, and the columns Spark's Kafka source hands the job. Imports only
``state.events.Source``, which every release has, so any release's checkout can run the
writers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from state.events import Source

ERROR_EVERY = 400
ERROR = "NOT_LEADER_OR_FOLLOWER"


def envelopes(capture: Path) -> list[dict[str, Any]]:
    """The capture, with an error code on every ERROR_EVERY-th fetch response."""
    out: list[dict[str, Any]] = []
    fetches = 0
    for line in capture.read_text(encoding="utf-8").splitlines():
        envelope = json.loads(line)
        if envelope["source"] == Source.FETCH_RESPONSES.value:
            fetches += 1
            if fetches % ERROR_EVERY == 0:
                envelope["value"]["error"] = ERROR
        out.append(envelope)
    return out


def kafka_records(batch: list[dict[str, Any]], offsets: dict[str, int]) -> pd.DataFrame:
    """The records as Spark's Kafka source hands them (one Kafka partition per topic)."""
    rows = []
    for envelope in batch:
        topic = envelope["source"]
        rows.append(
            {
                "key": None,
                "value": json.dumps(envelope["value"]).encode(),
                "topic": topic,
                "partition": 0,
                "offset": offsets[topic],
                "timestamp": pd.Timestamp(envelope["value"]["ts"], unit="ms"),
                "timestampType": 0,
            }
        )
        offsets[topic] += 1
    return pd.DataFrame(rows)
