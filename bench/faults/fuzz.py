"""Fuzzed records through the running job: nothing crashes, every bad record is a dead letter.

    python -m bench.faults.fuzz [--records 10000] [--seed 1] [--workdir DIR]

Starts the embedded broker and ``isrwatch run`` on it (the job's own process, Kafka
source, /metrics on a free port), writes valid records of a simulated cluster (the seeds,
``bench.faults.mutations.seeds``), then ``--records`` fuzzed records made from them
(``bench.faults.mutations``: every kind in turn, the 0.2 to 10 MB kinds capped), and
reads the dead-letter topic back. What it checks, and prints:

* the job never crashed: the process is alive, its streaming query never failed (the job
  logs ``streaming query failed`` before restarting one), and batches went on (the
  exporter's batch count grew, and the last batch is recent);
* every record the campaign's own judge (``mutations.contract_verdict``: strict UTF-8,
  JSON without extensions, ``jsonschema`` against conf/schemas) calls invalid is in the
  dead-letter topic, matched by its input topic, partition and offset, with a reason of
  the parser (``invalid_json`` ... ``unknown_type``);
* no record it calls valid is refused by the parser; a valid record is applied or a
  dead letter of the model or the job (``unknown_partition``, ``late``, ...);
* every record written has exactly one outcome in the job's counters
  (``isrwatch_events_total``: applied, error response or dead letter).

Exit status 0 when every check holds.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from state.events import DeadLetterReason, Source
from streaming.feeds.wire import InputRecord
from streaming.tools.embedded_broker import EmbeddedBroker, free_port

from .mutations import MUTATIONS, Fuzzed, contract_verdict, fuzz, seeds

PARSER_REASONS = frozenset(
    {
        DeadLetterReason.INVALID_JSON.value,
        DeadLetterReason.NOT_AN_OBJECT.value,
        DeadLetterReason.MISSING_FIELD.value,
        DeadLetterReason.WRONG_TYPE.value,
        DeadLetterReason.INVALID_VALUE.value,
        DeadLetterReason.UNKNOWN_TYPE.value,
    }
)
MAX_RECORD_BYTES = 16 * 1024 * 1024
"""What the campaign's clients allow a record (the 10 MB ones, plus their envelope)."""
QUERY_FAILED = "streaming query failed"


@dataclass
class Sent:
    """A record written, where it landed, and what became of it."""

    record: Fuzzed
    valid: bool
    partition: int = -1
    offset: int = -1
    refused: str | None = None  # the broker's error, when it did not take the record
    reason: str | None = None  # its dead letter's reason, None if none was written


@dataclass
class JobWatch:
    """What the campaign saw of the job while it ran."""

    samples: int = 0
    dead: bool = False
    exit_code: int | None = None
    first_batches: float | None = None
    last_batches: float = 0.0
    events: dict[tuple[str, str], float] = field(default_factory=dict)
    since_last_batch: float | None = None


@dataclass
class KindCounts:
    """What became of the records of one mutation kind."""

    tried: int = 0
    refused: int = 0  # by Kafka
    valid: int = 0  # by the contract (of those Kafka took)
    applied: int = 0  # valid, and no dead letter
    no_letter: int = 0  # invalid, and no dead letter: lost
    reasons: dict[str, int] = field(default_factory=dict)  # dead letters by reason

    def add(self, item: Sent) -> None:
        self.tried += 1
        if item.refused is not None:
            self.refused += 1
            return
        self.valid += item.valid
        self.applied += item.valid and item.reason is None
        self.no_letter += not item.valid and item.reason is None
        if item.reason is not None:
            self.reasons[item.reason] = self.reasons.get(item.reason, 0) + 1


@dataclass
class FuzzReport:
    sent: list[Sent]
    seeds: list[Sent]
    watch: JobWatch
    query_failures: int
    stderr_tail: str

    @property
    def delivered(self) -> list[Sent]:
        return [s for s in self.sent if s.refused is None]

    def lost(self) -> list[Sent]:
        """Invalid records the broker took and the job wrote no dead letter for."""
        return [s for s in self.delivered if not s.valid and s.reason is None]

    def misjudged(self) -> list[Sent]:
        """Invalid records the parser let through, valid ones it refused."""
        return [
            s
            for s in self.delivered
            if s.reason is not None and (s.reason in PARSER_REASONS) == s.valid
        ]

    def counted(self) -> float:
        return sum(self.watch.events.values())

    def failures(self) -> list[str]:
        out = []
        if self.watch.dead:
            out.append(f"the job exited (status {self.watch.exit_code})")
        if self.query_failures:
            out.append(f"the streaming query failed {self.query_failures} time(s)")
        if self.watch.first_batches is None or self.watch.last_batches <= self.watch.first_batches:
            out.append("no batch ended while the fuzzed records were read")
        if self.lost():
            out.append(f"{len(self.lost())} invalid record(s) with no dead letter")
        if self.misjudged():
            out.append(f"{len(self.misjudged())} record(s) judged otherwise by the job")
        written = len(self.delivered) + sum(s.refused is None for s in self.seeds)
        if self.counted() != written:
            out.append(f"the job counted {self.counted():.0f} outcomes for {written} records")
        return out

    def summary(self) -> dict[str, object]:
        """The figures as JSON-ready data (``--json``)."""
        kinds: dict[str, KindCounts] = {}
        for item in self.sent:
            kinds.setdefault(item.record.kind, KindCounts()).add(item)
        return {
            "failures": self.failures(),
            "lost": len(self.lost()),
            "kinds": {kind: asdict(counts) for kind, counts in kinds.items()},
            "misjudged": len(self.misjudged()),
            "query_failures": self.query_failures,
            "alive": not self.watch.dead,
            "counted": self.counted(),
            "batches": [self.watch.first_batches, self.watch.last_batches],
        }

    def table(self) -> str:
        kinds = sorted({s.record.kind for s in self.sent}, key=list(MUTATIONS).index)
        reasons = sorted({s.reason for s in self.delivered if s.reason is not None})
        head = ["kind", "tried", "refused", "valid", "applied", *reasons, "no letter"]
        rows = [head]
        for kind in [*kinds, "total"]:
            mine = [s for s in self.sent if kind in ("total", s.record.kind)]
            got = [s for s in mine if s.refused is None]
            by_reason = Counter(s.reason for s in got)
            rows.append(
                [
                    kind,
                    str(len(mine)),
                    str(len(mine) - len(got)),
                    str(sum(s.valid for s in got)),
                    str(sum(s.valid and s.reason is None for s in got)),
                    *(str(by_reason[r]) for r in reasons),
                    str(sum(not s.valid and s.reason is None for s in got)),
                ]
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
        return "\n".join(
            "  ".join(
                cell.rjust(w) if i else cell.ljust(w)
                for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            )
            for row in rows
        )


# ------------------------------------------------------------------- the job


@dataclass(frozen=True)
class Topics:
    controller_events: str
    fetch_responses: str
    partition_health: str
    dead_letters: str

    def of(self, source: Source) -> str:
        return (
            self.controller_events if source is Source.CONTROLLER_EVENTS else self.fetch_responses
        )


def make_topics(broker: EmbeddedBroker) -> Topics:
    suffix = uuid.uuid4().hex[:8]
    topics = Topics(
        f"fuzz-controller-events-{suffix}",
        f"fuzz-fetch-responses-{suffix}",
        f"fuzz-partition-health-{suffix}",
        f"fuzz-dead-letters-{suffix}",
    )
    broker.create_topics([topics.controller_events])
    broker.create_topics([topics.fetch_responses], partitions=2)
    broker.create_topics([topics.partition_health, topics.dead_letters])
    return topics


def start_job(bootstrap: str, topics: Topics, workdir: Path, port: int) -> subprocess.Popen[bytes]:
    settings = {
        "kafka.bootstrap_servers": bootstrap,
        "topics.controller_events": topics.controller_events,
        "topics.fetch_responses": topics.fetch_responses,
        "topics.partition_health": topics.partition_health,
        "topics.dead_letters": topics.dead_letters,
        "streaming.checkpoint_location": str(workdir / "checkpoint"),
        "streaming.trigger_interval_ms": 1000,
        "streaming.state_shards": 3,
        "metrics.enabled": "true",
        "metrics.host": "127.0.0.1",
        "metrics.port": port,
    }
    # the environment, not --set: ``run``'s own --bootstrap-servers flag (unset) wins over --set
    env = {
        **os.environ,
        **{
            f"ISRWATCH_{key.upper().replace('.', '__')}": str(value)
            for key, value in settings.items()
        },
    }
    return subprocess.Popen(
        [sys.executable, "-m", "streaming.cli", "run"],
        env=env,
        preexec_fn=_die_with_parent,
        stdout=(workdir / "job.out").open("wb"),
        stderr=(workdir / "job.err").open("wb"),
        start_new_session=True,
    )


def _die_with_parent() -> None:
    """In the job's process before it runs: the kernel sends it SIGTERM when the campaign
    dies, even by SIGKILL (a test's timeout), so no job outlives its campaign. (Its Spark
    JVM exits when the job's Python ends, and the Python workers with the JVM.)"""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


PR_SET_PDEATHSIG = 1

_SAMPLE = re.compile(r"^(isrwatch_[a-z_]+)(?:\{([^}]*)\})? (\S+)$", re.MULTILINE)


def scrape(port: int) -> dict[tuple[str, str], float] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    except OSError:
        return None
    return {(name, labels or ""): float(value) for name, labels, value in _SAMPLE.findall(text)}


def watch_job(
    job: subprocess.Popen[bytes], port: int, watch: JobWatch, stop: threading.Event
) -> None:
    while not stop.wait(1.0):
        if job.poll() is not None:
            watch.dead = True
            watch.exit_code = job.returncode
            return
        metrics = scrape(port)
        if metrics is None:
            continue
        watch.samples += 1
        batches = metrics.get(("isrwatch_batch_duration_seconds_count", ""), 0.0)
        watch.last_batches = batches
        watch.since_last_batch = metrics.get(("isrwatch_seconds_since_last_batch", ""))
        watch.events = {
            key: value for key, value in metrics.items() if key[0] == "isrwatch_events_total"
        }


def mark_fuzz_start(watch: JobWatch) -> None:
    watch.first_batches = watch.last_batches


# ------------------------------------------------------------- Kafka in and out


def producer(bootstrap: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "acks": "all",
            "message.max.bytes": MAX_RECORD_BYTES + 1024 * 1024,
            "queue.buffering.max.kbytes": 262_144,
        }
    )


def write(
    out: Producer, topics: Topics, sent: Sequence[Sent], chunk: int = 200, pause_s: float = 0.3
) -> None:
    """Writes in chunks with pauses between, so that the records span many batches."""
    for start in range(0, len(sent), chunk):
        for item in sent[start : start + chunk]:

            def delivered(error: KafkaError | None, message: Message, item: Sent = item) -> None:
                if error is not None:
                    item.refused = error.str()
                else:
                    item.partition = message.partition() or 0
                    item.offset = message.offset() or 0

            while True:
                try:
                    out.produce(
                        topics.of(item.record.source),
                        key=item.record.key,
                        value=item.record.value,
                        on_delivery=delivered,
                    )
                    break
                except BufferError:
                    out.poll(0.1)
                except Exception as error:  # e.g. the client's own size limit
                    item.refused = str(error)
                    break
        out.flush(120)
        time.sleep(pause_s)


def read_dead_letters(bootstrap: str, topic: str, until: float, wanted: set[str]) -> dict[str, str]:
    """Dead letters by key (``topic:partition:offset``) -> reason, until every wanted key
    is there or ``until`` (monotonic) passes."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"fuzz-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 4 * MAX_RECORD_BYTES,
            "max.partition.fetch.bytes": 2 * MAX_RECORD_BYTES,
            "receive.message.max.bytes": 8 * MAX_RECORD_BYTES,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    found: dict[str, str] = {}
    try:
        while time.monotonic() < until and not wanted <= found.keys():
            message = consumer.poll(1.0)
            if message is None or message.error() is not None:
                continue
            letter = json.loads(message.value() or b"{}")
            found[f"{letter['topic']}:{letter['partition']}:{letter['offset']}"] = letter["reason"]
    finally:
        consumer.close()
    return found


def key_of(topics: Topics, item: Sent) -> str:
    return f"{topics.of(item.record.source)}:{item.partition}:{item.offset}"


# ------------------------------------------------------------------- campaign


def run_fuzz(
    records: int,
    *,
    seed: int = 1,
    workdir: Path | None = None,
    broker: EmbeddedBroker | None = None,
    settle_s: float = 600.0,
    log: bool = True,
) -> FuzzReport:
    """The campaign; ``broker``: a running embedded broker (else one is started)."""
    workdir = workdir or Path(tempfile.mkdtemp(prefix="isrwatch-fuzz-"))
    workdir.mkdir(parents=True, exist_ok=True)
    own_broker = broker is None
    if broker is None:
        broker = EmbeddedBroker().start()
    say = print if log else (lambda *_: None)
    try:
        topics = make_topics(broker)
        bootstrap = broker.bootstrap_servers
        base = seeds()
        fuzzed = fuzz(base, records, seed)
        seed_items = [
            Sent(Fuzzed("seed", r.source, r.key.encode(), encode_seed(r)), True) for r in base
        ]
        items = [Sent(f, contract_verdict(f.source, f.value)) for f in fuzzed]
        valid = sum(i.valid for i in items)
        say(
            f"fuzz: {len(seed_items)} seed records, {len(items)} fuzzed "
            f"({valid} valid by the contract); workdir {workdir}"
        )
        port = free_port()
        job = start_job(bootstrap, topics, workdir, port)
        watch, stop = JobWatch(), threading.Event()
        watcher = threading.Thread(target=watch_job, args=(job, port, watch, stop), daemon=True)
        watcher.start()
        try:
            out = producer(bootstrap)
            write(out, topics, seed_items, chunk=2_000, pause_s=0.0)
            wait_for(lambda: watch.last_batches > 0 or watch.dead, 300)
            mark_fuzz_start(watch)
            started = time.monotonic()
            write(out, topics, items, pause_s=1.0)  # about a trigger: many batches
            say(
                f"fuzz: written in {time.monotonic() - started:.0f} s "
                f"({sum(i.refused is not None for i in items)} refused by Kafka)"
            )
            total = sum(s.refused is None for s in [*seed_items, *items])
            wait_for(lambda: sum(watch.events.values()) >= total or watch.dead, settle_s)
            wanted = {key_of(topics, s) for s in items if s.refused is None and not s.valid}
            letters = read_dead_letters(
                bootstrap, topics.dead_letters, time.monotonic() + 60, wanted
            )
            for item in [*seed_items, *items]:
                if item.refused is None:
                    item.reason = letters.get(key_of(topics, item))
            time.sleep(2.0)  # one more sample: the batches went on
            # counted before the stop: a batch the stop interrupts fails its query too
            failed_while_watched = job_stderr(workdir).count(QUERY_FAILED)
        finally:
            stop.set()
            watcher.join()
            stop_job(job)
        stderr = job_stderr(workdir)
        return FuzzReport(items, seed_items, watch, failed_while_watched, stderr[-3000:])
    finally:
        if own_broker:
            broker.stop()


def job_stderr(workdir: Path) -> str:
    return (workdir / "job.err").read_text(encoding="utf-8", errors="replace")


def stop_job(job: subprocess.Popen[bytes]) -> None:
    """Stops the job and what it started (its Spark JVM, Python workers): its own
    process group (``start_new_session``)."""
    for sig, wait_s in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, sig)
        try:
            job.wait(wait_s)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(job.pid, signal.SIGKILL)  # workers left behind by the job
            return
        except subprocess.TimeoutExpired:
            continue


def encode_seed(record: InputRecord) -> bytes:
    return json.dumps(record.value, separators=(",", ":")).encode()


def wait_for(condition: object, timeout_s: float) -> bool:
    assert callable(condition)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return False


def print_report(report: FuzzReport) -> None:
    print(report.table())
    seeds_letters = Counter(s.reason for s in report.seeds if s.reason is not None)
    print(f"seeds: {len(report.seeds)} written, dead letters {dict(seeds_letters)}")
    watch = report.watch
    print(
        f"job: alive {not watch.dead}, query failures {report.query_failures}, batches "
        f"{watch.first_batches:.0f} -> {watch.last_batches:.0f} while fuzzed, "
        f"{watch.since_last_batch} s since the last at the end; outcomes counted "
        f"{report.counted():.0f}"
    )
    for item in report.lost()[:10]:
        print(f"  LOST {item.record.kind} {item.record.value!r:.200}")
    for item in report.misjudged()[:10]:
        print(
            f"  MISJUDGED {item.record.kind} valid={item.valid} reason={item.reason} "
            f"{item.record.value!r:.200}"
        )
    refused = Counter(s.refused for s in report.sent if s.refused is not None)
    for error, count in refused.items():
        print(f"  refused by Kafka ({count}): {error}")
    failures = report.failures()
    print("fuzz: " + ("every check holds" if not failures else "FAILED: " + "; ".join(failures)))
    if failures:
        print(report.stderr_tail)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    # a SIGTERM ends the campaign through its finally blocks: job and broker stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    report = run_fuzz(args.records, seed=args.seed, workdir=args.workdir)
    print_report(report)
    if args.json is not None:
        args.json.write_text(json.dumps(report.summary(), indent=1), encoding="utf-8")
    return 0 if not report.failures() else 1


if __name__ == "__main__":
    sys.exit(main())
