"""The campaign's load: a simulated cluster's events, with malformed records mixed in, written
by a paced producer that remembers where each record landed (topic, partition, offset).

The expected results are computed from what was produced: ``replay`` over the valid
records in production order, and one dead letter per malformed or rejected record.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import KafkaError, Message, Producer

from faults.harness import Topics
from state.events import Source
from streaming.feeds.simulator import ClusterSimulator, load_scenario
from streaming.feeds.wire import encode, envelope_line

START_MS = 1_700_000_000_000

MALFORMED: tuple[tuple[Source, bytes, str], ...] = (
    (Source.FETCH_RESPONSES, b"not json at all", "invalid_json"),
    (Source.FETCH_RESPONSES, b"[1, 2, 3]", "not_an_object"),
    (Source.CONTROLLER_EVENTS, b'{"type": "Bogus", "ts": %d}', "unknown_type"),
    (Source.CONTROLLER_EVENTS, b'{"type": "IsrChange", "ts": %d}', "missing_field"),
)
"""Records that break the contract, with the dead letter reason each must get (by hand,
from docs/event-contract.md#dead-letters); ``%d`` takes the neighbouring event's ts."""


@dataclass(frozen=True)
class Planned:
    """One record to produce: ``line`` is its replay envelope (None: malformed)."""

    source: Source
    key: bytes
    value: bytes
    line: str | None
    expected_reason: str | None = None


@dataclass
class Produced:
    planned: Planned
    topic: str
    partition: int
    offset: int

    @property
    def coordinates(self) -> str:
        """The dead letter key of this record (docs/event-contract.md#dead-letters)."""
        return f"{self.topic}:{self.partition}:{self.offset}"


def planned_load(scenario: str, seconds: int, seed: int, malformed_every: int) -> list[Planned]:
    """The scenario's events for ``seconds`` simulated seconds, with a malformed record
    after every ``malformed_every`` valid ones (cycling through ``MALFORMED``)."""
    sim = ClusterSimulator(load_scenario(scenario, {"duration_s": seconds}), seed, START_MS)
    planned: list[Planned] = []
    bad = 0
    for index, event in enumerate(sim.events(), start=1):
        planned.append(
            Planned(event.source, event.key.encode(), encode(event.value), envelope_line(event))
        )
        if index % malformed_every == 0:
            source, raw, reason = MALFORMED[bad % len(MALFORMED)]
            bad += 1
            value = raw % event.ts if b"%d" in raw else raw
            planned.append(Planned(source, b"0", value, None, reason))
    return planned


class LoadProducer:
    """Writes planned records in order with an idempotent producer (a retried send is
    not written twice: the input holds each planned record exactly once)."""

    def __init__(self, bootstrap_servers: str, topics: Topics) -> None:
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap_servers,
                "enable.idempotence": True,
                "linger.ms": 10,
                "partitioner": "murmur2_random",  # kafka-python's and Java's: keys stay put
                "message.timeout.ms": 3_600_000,  # an outage delays records, never drops them
                "log_level": 0,
            }
        )
        self._topics = {
            Source.CONTROLLER_EVENTS: topics.controller_events,
            Source.FETCH_RESPONSES: topics.fetch_responses,
        }
        self.produced: list[Produced | None] = []
        self.failures: list[str] = []

    def send(self, records: Sequence[Planned]) -> None:
        """Queue ``records`` (delivery is reported to ``produced``, in order)."""
        for record in records:
            slot = len(self.produced)
            self.produced.append(None)

            def delivered(
                error: KafkaError | None,
                message: Message,
                slot: int = slot,
                record: Planned = record,
            ) -> None:
                if error is not None:
                    self.failures.append(str(error))
                    return
                self.produced[slot] = Produced(
                    record,
                    str(message.topic()),
                    int(message.partition() or 0),
                    int(message.offset() or 0),
                )

            while True:
                try:
                    self._producer.produce(
                        self._topics[record.source],
                        key=record.key,
                        value=record.value,
                        on_delivery=delivered,
                    )
                    break
                except BufferError:
                    self._producer.poll(0.1)
            self._producer.poll(0)

    def flush(self, timeout_s: float) -> bool:
        """True once every queued record is acknowledged."""
        return self._producer.flush(timeout_s) == 0 and None not in self.produced

    def delivered(self) -> list[Produced]:
        if None in self.produced or self.failures:
            raise RuntimeError(f"not every record was written: {self.failures[:3]}")
        return [p for p in self.produced if p is not None]


class PacedLoad(threading.Thread):
    """Sends ``records`` at ``rate`` records/s in slices of 0.2 s while ``gate`` is set."""

    def __init__(
        self,
        producer: LoadProducer,
        records: Sequence[Planned],
        rate: float,
        gate: threading.Event | None = None,
    ) -> None:
        super().__init__(daemon=True, name="paced-load")
        self.producer = producer
        self.records = list(records)
        self.rate = rate
        self.gate = gate
        self.sent = 0
        self.halt = threading.Event()
        self._hurry = threading.Event()

    def hurry(self) -> None:
        """Send the rest at once (the fault is over; the final check needs all of it)."""
        self._hurry.set()
        self.halt.set()

    def run(self) -> None:
        step = max(1, int(self.rate * 0.2))
        while self.sent < len(self.records) and not self.halt.is_set():
            if self.gate is not None and not self.gate.is_set():
                self.gate.wait(0.2)
                continue
            begun = time.monotonic()
            self.producer.send(self.records[self.sent : self.sent + step])
            self.sent += len(self.records[self.sent : self.sent + step])
            self.halt.wait(max(0.0, 0.2 - (time.monotonic() - begun)))
        if self._hurry.is_set():
            self.producer.send(self.records[self.sent :])
            self.sent = len(self.records)

    @property
    def done(self) -> bool:
        return self.sent >= len(self.records)


TAIL = 50
"""Records held back until the job under test is stopped: the final available-now run
then has new records to read, so it runs a batch, whose end writes every partition's
health (with nothing new it runs none and writes nothing)."""


def malformed_count(records: Sequence[Planned]) -> int:
    return sum(r.line is None for r in records)


def describe(records: Sequence[Planned]) -> str:
    valid = [r for r in records if r.line is not None]
    controller = sum(r.source is Source.CONTROLLER_EVENTS for r in valid)
    return json.dumps(
        {
            "records": len(records),
            "controller_events": controller,
            "fetch_responses": len(valid) - controller,
            "malformed": malformed_count(records),
        }
    )
