"""The text ``kafka.tools.DumpLogSegments --cluster-metadata-decoder`` prints: Kafka's own
decoding of ``__cluster_metadata``, read line by line into its records.

A batch's header line (``baseOffset: ... partitionLeaderEpoch: E ... CreateTime: T``)
comes before its records, one line each (``| offset: O CreateTime: T ... payload:
{json}``, 3.3 to 4.1.1); a ``LeaderChange`` control record prints ``LeaderChange: {json}``
in place of a payload. ``partitionLeaderEpoch`` is the Raft epoch that wrote the batch:
KRaft's controller epoch. The lab's judge (``decisions``) and the log corpus's ground
truth (``ground_truth``) both read the dump through :func:`dumped_records`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["LEADER_CHANGE", "DumpedRecord", "dumped_records"]

LEADER_CHANGE = "LEADER_CHANGE"
"""The ``kind`` of a ``LeaderChange`` control record (a quorum election)."""

_BATCH = re.compile(r"^baseOffset: \d+ .*?partitionLeaderEpoch: (?P<epoch>-?\d+)")
_RECORD = re.compile(
    r"^\| offset: (?P<offset>\d+) CreateTime: (?P<ts>\d+) .*?"
    r"(?:payload: (?P<payload>\{.*\})|LeaderChange: (?P<leader_change>\{.*\}))\s*$"
)


@dataclass(frozen=True)
class DumpedRecord:
    offset: int
    ts_ms: int  # its CreateTime: the batch's, the active controller's clock when written
    quorum_epoch: int  # its batch's partitionLeaderEpoch (-1 before any batch line)
    kind: str  # the record's ``type``, such as PARTITION_CHANGE_RECORD, or LEADER_CHANGE
    version: int  # the record's schema version (a LeaderChange's ``version``)
    data: dict[str, Any]  # the record's ``data``; a LeaderChange's own fields


def dumped_records(text: str) -> list[DumpedRecord]:
    """Every record of the dump, in log order."""
    records = []
    epoch = -1
    for line in text.splitlines():
        if batch := _BATCH.match(line):
            epoch = int(batch["epoch"])
            continue
        match = _RECORD.match(line)
        if match is None:
            continue
        offset, ts = int(match["offset"]), int(match["ts"])
        if match["payload"] is not None:
            record = json.loads(match["payload"])
            kind, data = str(record.get("type")), dict(record.get("data", {}))
        else:
            record = data = json.loads(match["leader_change"])
            kind = LEADER_CHANGE
        version = int(record.get("version", 0))
        records.append(DumpedRecord(offset, ts, epoch, kind, version, data))
    return records
