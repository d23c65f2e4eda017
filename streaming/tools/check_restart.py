"""``isrwatch check restart --broker N``: is it safe to stop broker N now?

The answer (``state.restart_check``) is computed from the latest health record of every
partition, read from the compacted ``partition-health`` topic or from a JSON-lines file
(``replay``'s output, or ``run --health-out``'s: the last record of a partition wins).
The job's exporter serves the same answer at ``/check/restart?broker=N``
(``streaming.job.metrics``), from the fragile partitions its shards report.

Exit codes: 0 safe, 1 not safe (or still not safe when ``--wait`` times out), 2 error.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import click
import msgspec

from state import HealthRecord, IsrAtRisk, RestartCheck, check_restart, decode_record
from streaming.acl_denial import Denial, undescribable_topics
from streaming.cli_options import config_option, load_or_exit, set_option
from streaming.config import IsrwatchConfig

SAFE, NOT_SAFE, ERROR = 0, 1, 2
POLL_INTERVAL_S = 1.0

Records = Sequence[HealthRecord]


class HealthUnavailableError(Exception):
    """No health record could be read."""


def latest_per_partition(values: Iterable[tuple[str, str | None]]) -> Records:
    """A compacted topic's view: the last value per key; a tombstone (None) deletes it."""
    latest: dict[str, HealthRecord] = {}
    for key, value in values:
        if value is None:
            latest.pop(key, None)
        else:
            try:
                latest[key] = decode_record(value)
            except msgspec.DecodeError as error:
                raise HealthUnavailableError(f"{key}: not a health record ({error})") from error
    return list(latest.values())


def read_file(path: Path) -> Records:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise HealthUnavailableError(f"{path}: {error.strerror}") from error
    values = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            values.append((decode_record(line).key, line))
        except msgspec.DecodeError as error:
            raise HealthUnavailableError(
                f"{path}:{number}: not a health record ({error})"
            ) from error
    return latest_per_partition(values)


def read_topic(config: IsrwatchConfig, timeout_s: float = 30.0) -> Records:
    """Every record of the partition-health topic up to its end offsets now."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    topic = config.topics.partition_health
    try:
        consumer = KafkaConsumer(enable_auto_commit=False, **config.kafka.kafka_python_options())
    except KafkaError as error:
        raise HealthUnavailableError(f"cannot reach Kafka: {error}") from error
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or []]
        if not partitions:
            # Kafka hides a topic the principal may not describe (Read implies Describe):
            # the consumer's metadata then has no partitions for it, as for no topic at all
            if topic in undescribable_topics(config.kafka.kafka_python_options(), [topic]):
                raise HealthUnavailableError(str(Denial.on_topic("check restart", "Read", topic)))
            raise HealthUnavailableError(f"topic {topic} does not exist or has no partitions")
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        end = consumer.end_offsets(partitions)
        values: list[tuple[str, str | None]] = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < end[tp] for tp in partitions):
            if time.monotonic() > deadline:
                raise HealthUnavailableError(f"timed out reading {topic}")
            for messages in consumer.poll(timeout_ms=500).values():
                values += [
                    (m.key.decode(), m.value.decode() if m.value is not None else None)
                    for m in messages
                ]
        return latest_per_partition(values)
    except KafkaError as error:
        raise HealthUnavailableError(f"reading {topic}: {error}") from error
    finally:
        consumer.close()


def answer(read: Callable[[], Records], broker: int, wait_s: float | None) -> RestartCheck:
    """The check now; with ``wait_s``, again every second until safe or the time is up."""
    deadline = None if wait_s is None else time.monotonic() + wait_s
    while True:
        records = read()
        if not records:
            raise HealthUnavailableError("no health records")
        result = check_restart(map(IsrAtRisk.of, records), broker)
        if result.safe or deadline is None or time.monotonic() >= deadline:
            return result
        time.sleep(min(POLL_INTERVAL_S, max(0.0, deadline - time.monotonic())))


@click.group(name="check")
def check_command() -> None:
    """Answers for operators and their scripts."""


@check_command.command(name="restart")
@click.option("--broker", type=int, required=True, help="The broker you mean to stop.")
@click.option("--bootstrap-servers", default=None, help="Read the partition-health topic here.")
@click.option(
    "--from",
    "from_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read health records from this JSON-lines file instead (replay or --health-out).",
)
@click.option("--wait", is_flag=True, help="Block until it is safe (or --timeout).")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=600.0,
    show_default=True,
    help="With --wait: give up after this many seconds (exit 1).",
)
@config_option
@set_option
def restart_command(
    broker: int,
    bootstrap_servers: str | None,
    from_file: Path | None,
    wait: bool,
    timeout: float,
    config_file: Path | None,
    overrides: dict[str, object],
) -> None:
    """Would stopping broker N now put partitions under min ISR or offline?

    Followers Kafka is about to remove from the ISR (SHRINK_ELIGIBLE, SHRINK_OVERDUE)
    count as already gone. Prints JSON: safe, and the partitions that would break with
    their ISR now, after, min.insync.replicas and what they become (under_min_isr or
    offline). Exit 0 when safe, 1 when not, 2 on error.
    """
    config = load_or_exit(config_file, overrides, {"kafka.bootstrap_servers": bootstrap_servers})

    def read() -> Records:
        return read_file(from_file) if from_file is not None else read_topic(config)

    try:
        result = answer(read, broker, timeout if wait else None)
    except HealthUnavailableError as error:
        click.echo(json.dumps({"error": str(error)}), err=True)
        raise SystemExit(ERROR) from error
    click.echo(json.dumps(result.to_json(), indent=2))
    raise SystemExit(SAFE if result.safe else NOT_SAFE)
