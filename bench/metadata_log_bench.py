"""Metadata log bench: how fast ``collect metadata-log`` decodes and replays a log.

Reads one ``__cluster_metadata-0`` directory (given, or a SYNTHETIC one made here: N
partitions at RF 3 and M ISR changes, one record per batch as a controller writes them)
and times, in the same run:

* baseline: kafka-python's ``DefaultRecordBatch`` alone (framing, CRC-32C, records), the
  least any reader of the log pays;
* decode: the same plus the metadata record decoder;
* replay: the whole collector (decode, replay, events, contract check), publishing nowhere.

    PYTHONPATH=. python bench/metadata_log_bench.py [DIR] [--partitions 2000] [--changes 50000]

(the synthetic log is built with the tests' own encoder, tests/unit/metadata_log_synthetic.py)
"""

from __future__ import annotations

import argparse
import struct
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch

from streaming.feeds.collectors.metadata_log.collector import MetadataLogCollector
from streaming.feeds.collectors.metadata_log.records import decode_metadata_value
from streaming.feeds.collectors.metadata_log.segments import (
    Batch,
    batches_in,
    partition_dir,
    segments,
)
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.wire import InputRecord
from tests.unit import metadata_log_synthetic as syn

T0 = 1_700_000_000_000


def synthetic(directory: Path, partitions: int, changes: int) -> None:
    topic_id = "v9meXjI1RVKB-NSvF0GXDA"
    batches = [syn.leader_change_batch(0, 1, T0, leader=1, voters=[1])]
    batches.append(syn.batch(1, 1, T0, [syn.topic_record("bench", topic_id)]))
    offset = 2
    for p in range(partitions):
        record = syn.partition_record(1, topic_id, p, [1, 2, 3], [1, 2, 3], 1 + p % 3)
        batches.append(syn.batch(offset, 1, T0 + offset, [record]))
        offset += 1
    for k in range(changes):
        isr = [1, 2, 3] if k % 2 else [1, 2]
        record = syn.partition_change_record(1, topic_id, k % partitions, isr=isr)
        batches.append(syn.batch(offset, 1, T0 + offset, [record]))
        offset += 1
    syn.write_segment(directory, 0, batches)


class Discard:
    def publish(self, events: Sequence[InputRecord]) -> None:
        pass

    def close(self) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", nargs="?", type=Path)
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--changes", type=int, default=50_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        directory = args.dir
        if directory is None:
            directory = Path(scratch) / "__cluster_metadata-0"
            synthetic(directory, args.partitions, args.changes)
        data = b"".join(s.path.read_bytes() for s in segments(partition_dir(directory)))
        records = 0

        started = time.perf_counter()
        batches = 0
        for _, batch in batches_in(data):
            assert isinstance(batch, Batch)
            batches += 1
        framed = time.perf_counter() - started

        started = time.perf_counter()
        kafka_only = pos = 0
        while pos + 12 <= len(data):
            (length,) = struct.unpack_from(">i", data, pos + 8)
            end = pos + 12 + length
            batch_only = DefaultRecordBatch(data[pos:end])
            assert batch_only.validate_crc()
            kafka_only += sum(1 for _ in batch_only)
            pos = end
        baseline = time.perf_counter() - started

        started = time.perf_counter()
        for _, batch in batches_in(data):
            assert isinstance(batch, Batch)
            for record in batch.records:
                if not batch.is_control and record.value is not None:
                    decode_metadata_value(record.value)
                    records += 1
        decoded = time.perf_counter() - started

        collector = MetadataLogCollector([directory], Discard(), CollectorMetrics("bench"), None)
        started = time.perf_counter()
        events = 0
        while True:
            read, published = collector.read_once()
            events += published
            if not read:
                break
        replayed = time.perf_counter() - started

    mb = len(data) / 1e6
    print(f"log: {mb:.1f} MB, {batches} batches, {kafka_only} records, {events} events")
    for name, seconds in (
        ("baseline (kafka-python batches only)", baseline),
        ("framing + CRC + records (segments.py)", framed),
        ("+ metadata record decoder", decoded),
        ("whole collector (decode, replay, events)", replayed),
    ):
        print(
            f"{name:44s} {seconds:7.2f} s  {batches / seconds:10.0f} batches/s"
            f"  {mb / seconds:6.1f} MB/s"
        )


if __name__ == "__main__":
    main()
