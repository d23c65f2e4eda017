"""A batch of Kafka records as routing reads them: the values as Python bytes, the rest
of Spark's Kafka source columns (key, topic, partition, offset, timestamp) as Arrow.

Routing decodes each value from Python bytes (``state.fetch_pack.decode_fetch_records``,
``state.controller_decoder``). confluent-kafka hands the job's own source reader every
value as Python bytes already: copying them into an Arrow column only for routing to
copy them out again cost 16 % of the Python workers' CPU at 100,000 partitions
(``bench/pipeline_bench.py --py-spy``, docs/performance.md#packs-judged-together), so
the reader hands them over as they are. Spark's Kafka source hands Arrow columns, whose
values are read into Python once (:meth:`KafkaRecords.of_arrow`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]

VALUE = "value"


@dataclass(frozen=True)
class KafkaRecords:
    """Records in order: ``values[i]`` is the value of the record in row ``i`` of
    ``coordinates`` (Spark's Kafka source columns but ``value``)."""

    coordinates: pa.RecordBatch
    values: Sequence[bytes | None]

    def __post_init__(self) -> None:
        if len(self.values) != self.coordinates.num_rows:
            raise ValueError(
                f"{len(self.values)} values for {self.coordinates.num_rows} Kafka records"
            )

    @staticmethod
    def of_arrow(batch: pa.RecordBatch) -> KafkaRecords:
        """The records of a batch of Spark's Kafka source columns."""
        values: list[bytes | None] = batch.column(VALUE).to_pylist()
        return KafkaRecords(batch.drop_columns([VALUE]), values)

    def __len__(self) -> int:
        return len(self.values)

    def filter(self, keep: npt.NDArray[np.bool_]) -> KafkaRecords:
        """The records where ``keep`` is true, in order."""
        values = [value for value, kept in zip(self.values, keep.tolist(), strict=True) if kept]
        return KafkaRecords(self.coordinates.filter(pa.array(keep)), values)
