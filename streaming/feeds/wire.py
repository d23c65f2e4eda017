"""The wire form of the job's input: records for its two input topics, with their Kafka
keys (docs/event-contract.md), and the replay file's line.

The collectors and the simulator make ``InputRecord`` values, and ``collect admin`` an
``InputBatch`` of them whose fetch responses are columns; ``streaming.feeds.publisher``
sends them as :func:`kafka_records`: one JSON value each, or their fetch responses in fetch
packs (``state.fetch_pack``, the packed form's one definition).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, overload

from state.events import MOST_ROWS_PER_PACK, FetchResponse, Source
from streaming.config import FetchResponsesForm

if TYPE_CHECKING:  # Arrow and numpy only in a producer that packs (kafka_records)
    from state.fetch_pack import FetchRows

MAX_PARTITIONS_PER_EVENT = 1000
"""Events that list partitions (UpdateMetadata, TopicChange) are split to stay well under
Kafka's default 1 MB record limit: a controller failover puts every partition of the
cluster in one request."""

MAX_PACK_BYTES = 900_000
"""A pack longer than this (long topic names) is sent as two halves, and so on: under
Kafka's default 1 MB record limit with room for the record's own framing."""

_T = TypeVar("_T")
_K = TypeVar("_K")
_V = TypeVar("_V")


@dataclass(frozen=True, slots=True)
class InputRecord:
    """``value`` is the event as JSON-ready data; ``key`` follows docs/event-contract.md: the
    ``"<topic>:<partition>"`` of a per-partition event, else a broker or controller id."""

    source: Source
    key: str
    value: Mapping[str, Any]

    @property
    def ts(self) -> int:
        return int(self.value["ts"])

    @property
    def event_type(self) -> str:
        """The controller event's ``type``, or ``FetchResponse``."""
        if self.source is Source.FETCH_RESPONSES:
            return FetchResponse.__name__
        return str(self.value.get("type", ""))

    def envelope(self) -> dict[str, Any]:
        """The replay file's line (docs/event-contract.md#replay-contract)."""
        return {"source": self.source.value, "value": dict(self.value)}


def chunks(items: Sequence[_T], size: int) -> list[list[_T]]:
    """``items`` in consecutive lists of at most ``size`` (one empty list if none)."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)] or [[]]


def split_created(
    created: Mapping[str, Mapping[_K, _V]], most: int = MAX_PARTITIONS_PER_EVENT
) -> list[dict[str, dict[_K, _V]]]:
    """A TopicChange's ``created`` map in parts of at most ``most`` partitions each."""
    parts: list[dict[str, dict[_K, _V]]] = []
    size = most
    for topic, partitions in created.items():
        for partition, replicas in partitions.items():
            if size == most:
                parts.append({})
                size = 0
            parts[-1].setdefault(topic, {})[partition] = replicas
            size += 1
    return parts


def partition_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def envelope_line(record: InputRecord) -> str:
    """The replay file's line of ``record`` (docs/event-contract.md#replay-contract)."""
    return json.dumps(record.envelope(), separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    """A record as it is sent to its input topic: ``value`` is its bytes."""

    source: Source
    key: str
    value: bytes


class InputBatch(Sequence[InputRecord]):
    """Records whose fetch responses are columns: ``records`` in order, then the rows of
    ``fetches`` (a poll of ``collect admin``: its controller events, then one fetch
    response per follower). Read as a sequence, it is every one as a record of its own
    (:func:`fetch_records`), made when first asked for; a publisher that packs reads
    ``fetches`` instead (:func:`kafka_records`), with no Python object per row."""

    __slots__ = ("_each", "fetches", "records")

    def __init__(self, records: Sequence[InputRecord], fetches: FetchRows) -> None:
        self.records = records
        self.fetches = fetches
        self._each: list[InputRecord] | None = None

    def __len__(self) -> int:
        return len(self.records) + len(self.fetches)

    @overload
    def __getitem__(self, index: int) -> InputRecord: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[InputRecord]: ...

    def __getitem__(self, index: int | slice) -> InputRecord | Sequence[InputRecord]:
        return self._one_by_one()[index]

    def __iter__(self) -> Iterator[InputRecord]:
        return iter(self._one_by_one())

    def _one_by_one(self) -> list[InputRecord]:
        if self._each is None:
            self._each = [*self.records, *fetch_records(self.fetches)]
        return self._each


def fetch_records(rows: FetchRows) -> list[InputRecord]:
    """Each row as a fetch-responses record, keyed by its partition."""
    return [
        InputRecord(
            Source.FETCH_RESPONSES, partition_key(value["topic"], value["partition"]), value
        )
        for value in rows.values()
    ]


def kafka_records(
    records: Sequence[InputRecord], form: FetchResponsesForm = FetchResponsesForm.JSON
) -> list[KafkaRecord]:
    """``records`` as Kafka records: each a JSON value, or with ``form`` packed, the fetch
    responses in packs of one leader's fetches each (in their order, keyed by the
    leader's id: docs/event-contract.md#fetch-packs) after the other records. An
    ``InputBatch``'s fetch responses are packed from its columns, after those of its
    ``records``."""
    if form is FetchResponsesForm.JSON:
        return [KafkaRecord(r.source, r.key, encode(r.value)) for r in records]
    # Imported here: Arrow and numpy only in a producer that packs (a collector that
    # writes JSON stays light).
    from state.fetch_pack import FetchRows

    columns: FetchRows | None = None
    if isinstance(records, InputBatch):
        columns = records.fetches
        records = records.records
    out = [
        KafkaRecord(r.source, r.key, encode(r.value))
        for r in records
        if r.source is not Source.FETCH_RESPONSES
    ]
    values = [r.value for r in records if r.source is Source.FETCH_RESPONSES]
    parts = [FetchRows.of_values(values)] if values else []
    if columns is not None:
        parts.append(columns)
    for rows in parts:
        out += [
            KafkaRecord(Source.FETCH_RESPONSES, str(leader), pack)
            for leader, pack in rows.packs(MOST_ROWS_PER_PACK, MAX_PACK_BYTES)
        ]
    return out
