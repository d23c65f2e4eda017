"""Fault A: ``kill -9`` of the job under load, at moments aimed at each phase of a
micro-batch (``faults.checkpoint_phase``), each followed by a restart on the same
checkpoint; the last restart is an available-now run whose last batch is checked.

The load (a simulated cluster with malformed records mixed in) is produced while the
job runs. The watcher polls the checkpoint every few milliseconds and kills the job's
whole process group (driver, Spark's JVM, Python workers) as soon as the aimed phase is
seen in a batch that reads records; a phase not reached within the patience is killed
wherever the batch is, and classified as it is found.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from faults.checkpoint_phase import PHASES, look, planned_rows
from faults.fault import Fault, FaultResult, Mode
from faults.final_pass import final_pass
from faults.harness import (
    JobProcess,
    JobSettings,
    Topics,
    broker_stack,
    create_topics,
)
from faults.load import TAIL, LoadProducer, PacedLoad, describe, planned_load
from faults.verify import (
    Comparison,
    compare_outputs,
    expected_from,
    read_topic,
)
from streaming.tools.embedded_broker import free_port

KILLS = {Mode.SHORT: 3, Mode.LONG: 20}
SIMULATED_S = {Mode.SHORT: 30, Mode.LONG: 300}
RATE = {Mode.SHORT: 40.0, Mode.LONG: 30.0}  # records/s: the load lasts through the kills
PATIENCE_S = 600.0  # longest wait for an aimed phase (Spark starts slowly on a busy host)
SHUFFLE_PARTITIONS = 2


@dataclass
class Moment:
    kill: int
    aimed: str
    phase: str
    batch: int | None
    rows: int
    stores_committed: int
    sink_started: bool
    after_start_s: float

    def line(self) -> str:
        sink = "; output records written before the kill" if self.sink_started else ""
        return (
            f"kill {self.kill}: aimed {self.aimed}, landed {self.phase} of batch "
            f"{self.batch} ({self.rows} records, {self.stores_committed}/"
            f"{SHUFFLE_PARTITIONS} state stores committed{sink}), "
            f"{self.after_start_s:.1f} s after the job started"
        )


def end_offsets(bootstrap_servers: str, topics: list[str]) -> int:
    """The sum of the topics' end offsets (what the sinks have written so far)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap_servers, "group.id": "fault-watch", "log_level": 0}
    )
    try:
        total = 0
        for topic in topics:
            partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            for partition in partitions:
                _, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=10
                )
                total += high
        return total
    finally:
        consumer.close()


def aim_and_kill(
    job: JobProcess, settings: JobSettings, aimed: str, index: int, since: float, outputs: list[str]
) -> Moment:
    """Kill ``job`` once the checkpoint shows ``aimed`` in a batch with records."""
    checkpoint, bootstrap = settings.checkpoint, settings.bootstrap_servers
    deadline = time.monotonic() + PATIENCE_S
    written_at_plan: dict[int, int] = {}
    view = look(checkpoint, SHUFFLE_PARTITIONS, since)
    while time.monotonic() < deadline:
        if not job.alive():
            raise RuntimeError(f"the job exited by itself (status {job.process.returncode})")
        view = look(checkpoint, SHUFFLE_PARTITIONS, since)
        if view.planned is not None and view.planned not in written_at_plan:
            written_at_plan[view.planned] = end_offsets(bootstrap, outputs)
            continue  # the look may be stale by now
        if (
            view.phase == aimed
            and view.planned is not None
            and planned_rows(checkpoint, view.planned) > 0
        ):
            break
        time.sleep(0.005)
    job.kill9()
    after = look(checkpoint, SHUFFLE_PARTITIONS, since)
    landed = view.phase if after.committed == view.committed else "between-batches"
    batch = view.planned
    grew = batch is not None and end_offsets(bootstrap, outputs) > written_at_plan.get(batch, 0)
    return Moment(
        index,
        aimed,
        landed,
        batch,
        planned_rows(checkpoint, batch) if batch is not None else 0,
        view.stores_committed,
        grew,
        time.monotonic() - job.started,
    )


def run(mode: Mode, workdir: Path, seed: int) -> FaultResult:
    result = FaultResult("kill -9")
    workdir.mkdir(parents=True, exist_ok=True)
    with broker_stack(with_proxy=False) as (broker, _):
        topics = Topics.fresh()
        create_topics(broker, topics, fetch_partitions=3)
        settings = JobSettings(
            broker.bootstrap_servers,
            topics,
            workdir / "checkpoint",
            extra={"streaming.shuffle_partitions": str(SHUFFLE_PARTITIONS)},
        )
        records = planned_load("broker-crash-and-bounce", SIMULATED_S[mode], seed, 150)
        result.notes.append(f"load: {describe(records)}")
        producer = LoadProducer(broker.bootstrap_servers, topics)
        load = PacedLoad(producer, records[:-TAIL], RATE[mode])
        outputs = [topics.partition_health, topics.dead_letters]
        moments: list[Moment] = []
        job = JobProcess(settings, workdir / "job.log")
        load.start()
        for index in range(1, KILLS[mode] + 1):
            since = time.time() - 1.0  # state files of this attempt (1 s: mtime granularity)
            moment = aim_and_kill(
                job, settings, PHASES[(index - 1) % len(PHASES)], index, since, outputs
            )
            moments.append(moment)
            print(f"   {moment.line()}", flush=True)
            if index < KILLS[mode]:  # the last restart is the available-now run below
                settings.metrics_port = free_port()
                job = JobProcess(settings, workdir / "job.log")
        load.hurry()
        load.join()
        producer.send(records[-TAIL:])
        if not producer.flush(120):
            raise RuntimeError("the load was not acknowledged")
        health_before = len(read_topic(broker.bootstrap_servers, topics.partition_health, 1.0))
        applied = final_pass(settings)
        produced = producer.delivered()
        expected = expected_from(produced)
        comparison = Comparison()
        compare_outputs(
            comparison,
            expected,
            dict(applied),
            broker.bootstrap_servers,
            topics.partition_health,
            topics.dead_letters,
            health_before,
        )
        landed = {phase: sum(m.phase == phase for m in moments) for phase in PHASES}
        comparison.check(
            "every kill landed inside a batch",
            all(m.phase in PHASES for m in moments),
            ", ".join(f"{phase} {count}" for phase, count in landed.items()),
        )
        result.comparison = comparison
        result.restarts_survived = len(moments)
        result.notes += [m.line() for m in moments]
        result.take_counts()
    return result


FAULT = Fault("kill", "SIGKILL of the job mid-batch, mid-commit and mid-sink, restarts", run)
