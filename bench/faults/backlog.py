"""A backlog larger than one micro-batch, read in capped batches.

The whole load is written first, with leader elections in it
(``broker-crash-and-bounce``). Then the job reads it with a small
``kafka.max_events_per_partition_per_batch``, as docs/pipeline.md advises after a restart
or an outage. The cap applies to each input partition on its own: the sparse
``controller-events`` partition fits in the first batch, while each ``fetch-responses``
partition gets only its first records. Unless the source stops every partition at one
event time (``streaming.job.kafka_source.event_time``), the elections are applied before
the fetches that came before them, and those fetches become ``stale_leader_epoch`` dead
letters: events lost, and health that differs from replay.
This fault checks exactly what the kills check, with no kill.
"""

from __future__ import annotations

from pathlib import Path

from faults.fault import Fault, FaultResult, Mode
from faults.final_pass import final_pass
from faults.harness import JobSettings, Topics, broker_stack, create_topics
from faults.load import LoadProducer, describe, planned_load
from faults.verify import (
    Comparison,
    compare_outputs,
    expected_from,
)

CAP = {Mode.SHORT: 1500, Mode.LONG: 500}  # records per input partition per batch
SIMULATED_S = {Mode.SHORT: 60, Mode.LONG: 120}


def run(mode: Mode, workdir: Path, seed: int) -> FaultResult:
    result = FaultResult("backlog")
    workdir.mkdir(parents=True, exist_ok=True)
    with broker_stack(with_proxy=False) as (broker, _):
        topics = Topics.fresh()
        create_topics(broker, topics, fetch_partitions=3)
        settings = JobSettings(
            broker.bootstrap_servers,
            topics,
            workdir / "checkpoint",
            max_events_per_partition_per_batch=CAP[mode],
            extra={"streaming.shuffle_partitions": "2"},
        )
        records = planned_load("broker-crash-and-bounce", SIMULATED_S[mode], seed, 150)
        result.notes.append(
            f"load: {describe(records)}, {CAP[mode]} records per partition per batch"
        )
        producer = LoadProducer(broker.bootstrap_servers, topics)
        producer.send(records)
        if not producer.flush(120):
            raise RuntimeError("the load was not acknowledged")
        applied = final_pass(settings)
        expected = expected_from(producer.delivered())
        comparison = Comparison()
        compare_outputs(
            comparison,
            expected,
            dict(applied),
            broker.bootstrap_servers,
            topics.partition_health,
            topics.dead_letters,
        )
        result.comparison = comparison
        result.restarts_survived = 0
        result.take_counts()
    return result


FAULT = Fault("backlog", "a backlog read in capped batches", run)
