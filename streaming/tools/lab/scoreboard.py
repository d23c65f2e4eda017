"""isrwatch's health records against Kafka's own decisions (``decisions``).

The health records come with the wall time the lab saw them (``health-seen.jsonl``); the
decisions with the controller's commit time. So "before the commit" is on one clock, the
machine's, as both processes run here.

* **A shrink** is a follower leaving a partition's ISR in a committed change. It is the
  leader's rule when the leader logged ``Shrinking ISR`` for it shortly before; otherwise
  the controller's (a fence after a session timeout, a controlled shutdown, an election).
* **Flagged** before the commit: a health record seen before it shows that follower
  LAGGING or worse. **Named**: SHRINK_ELIGIBLE or SHRINK_OVERDUE.
* Kafka's leader checks every T/2 on its own phase, so it removes a stalled follower at
  some time in (T, 1.5 T] after it last caught up: SHRINK_ELIGIBLE (lag > T, seen at the
  next poll and trigger) cannot always come first. ``eligible_window_ms`` is what Kafka
  allowed: the commit time minus (last caught-up + T), from the leader's own line.
* **A false prediction**: the follower was named SHRINK_ELIGIBLE, and Kafka neither
  removed it within T/2 + a margin nor had a reason not to that a record shows (the
  follower back IN_SYNC, its broker fenced first, or its leader's broker fenced: a hung
  leader runs no check).
* **Final state**: each partition's last record against Kafka's last change.
* **Latency**: from each change committed after the first micro-batch to the first record
  showing its leader and ISR.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streaming.tools.lab.cluster import read_cluster_file
from streaming.tools.lab.decisions import (
    IsrChange,
    LeaderShrinkLine,
    MetadataTruth,
    dump_metadata_log,
    from_zookeeper,
    leader_shrink_lines,
    read_metadata_log,
)
from streaming.tools.lab.distribution import LabError
from streaming.tools.lab.ground_truth import from_zookeeper_log, zookeeper_transactions
from streaming.tools.lab.workload import CHURN_TOPIC, LAB_TOPICS

__all__ = ["Score", "SeenRecord", "read_seen", "score", "score_workdir"]

FLAGGED = frozenset({"LAGGING", "SHRINK_ELIGIBLE", "SHRINK_OVERDUE", "OFFLINE"})
NAMED = frozenset({"SHRINK_ELIGIBLE", "SHRINK_OVERDUE"})
LEADER_LINE_BEFORE_COMMIT_MS = 5_000  # a leader's line comes ms before the commit
MARGIN_MS = 5_000  # a poll, a trigger and a batch on a busy 2-core machine


@dataclass(frozen=True)
class SeenRecord:
    seen_ms: int
    record: dict[str, Any]

    @property
    def key(self) -> tuple[str, int]:
        return (self.record["topic"], self.record["partition"])

    def follower(self, broker: int) -> dict[str, Any] | None:
        for follower in self.record.get("followers", []):
            if follower["broker"] == broker:
                found: dict[str, Any] = follower
                return found
        return None

    def follower_status(self, broker: int) -> str | None:
        follower = self.follower(broker)
        return None if follower is None else str(follower["status"])

    def predicted_ms(self, broker: int, field: str) -> int | None:
        """The follower's ``shrink_by_ms`` or ``shrink_at_ms`` (None: absent or null)."""
        follower = self.follower(broker)
        value = None if follower is None else follower.get(field)
        return value if isinstance(value, int) else None


def read_tombstones(path: Path) -> set[tuple[str, int]]:
    """The partitions the job deleted (a tombstone on the partition-health topic)."""
    if not path.exists():
        return set()
    deleted = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and "deleted" in (entry := json.loads(line)):
            topic, _, partition = str(entry["deleted"]).rpartition(":")
            deleted.add((topic, int(partition)))
    return deleted


def read_batch_times(path: Path) -> list[int]:
    """How long each micro-batch that read input took (Spark's ``triggerExecution``), from
    the lab's ``progress.jsonl``, after the first: as for commit to record, the first
    batch (Spark's start, and what the collectors sent before it) is left out. Empty for
    a run before the lab kept the file."""
    if not path.exists():
        return []
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    first = min((entry["batch"] for entry in entries), default=None)
    return [
        int(entry["duration_ms"]["triggerExecution"])
        for entry in entries
        if entry["batch"] != first
        and entry["input_rows"]
        and "triggerExecution" in entry["duration_ms"]
    ]


def read_seen(path: Path) -> list[SeenRecord]:
    if not path.exists():
        return []
    seen = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            entry = json.loads(line)
            if "record" in entry:  # else a tombstone: {"seen_ms", "deleted": "topic:p"}
                seen.append(SeenRecord(int(entry["seen_ms"]), entry["record"]))
    return sorted(seen, key=lambda record: record.seen_ms)


@dataclass(frozen=True)
class ShrinkScore:
    commit: IsrChange
    follower: int
    by_leader: bool
    flagged_ms: int | None  # first record seen before the commit flagging the follower
    named_ms: int | None
    eligible_window_ms: int | None  # leader's rule: commit - (last caught up + T)
    # what the last record before the commit that named it predicted (None: nothing)
    shrink_by_ms: int | None = None
    shrink_at_ms: int | None = None

    @property
    def lead_ms(self) -> int | None:
        return None if self.flagged_ms is None else self.commit.ts_ms - self.flagged_ms

    def error_ms(self, predicted: int | None) -> int | None:
        """|commit - prediction|."""
        return None if predicted is None else abs(self.commit.ts_ms - predicted)


@dataclass(frozen=True)
class Prediction:
    topic: str
    partition: int
    follower: int
    named_ms: int
    # "removed", "leader decided", "caught up", "fenced", "leader fenced", "false"
    outcome: str


@dataclass
class Score:
    shrinks: list[ShrinkScore] = field(default_factory=list)
    predictions: list[Prediction] = field(default_factory=list)
    final_equal: list[tuple[str, int]] = field(default_factory=list)
    final_differs: list[tuple[tuple[str, int], str]] = field(default_factory=list)
    latencies_ms: list[int] = field(default_factory=list)
    batch_ms: list[int] = field(default_factory=list)  # micro-batches that read input
    unseen_changes: list[IsrChange] = field(default_factory=list)
    # a partition's last change, back to the leader and ISR its last record showed (an ISR
    # shrunk and expanded again between two micro-batches): the job's view needed no new
    # record, so none shows the change, and it is not counted unseen
    restored_changes: list[IsrChange] = field(default_factory=list)

    gated_stops: int = 0  # rolling restart: stops `check restart --wait` called safe
    unsafe_stops: list[tuple[int, list[tuple[str, int]]]] = field(default_factory=list)

    @property
    def leader_shrinks(self) -> list[ShrinkScore]:
        return [shrink for shrink in self.shrinks if shrink.by_leader]

    @property
    def false_predictions(self) -> list[Prediction]:
        return [p for p in self.predictions if p.outcome == "false"]

    def row(self) -> dict[str, Any]:
        """The scoreboard's row: what docs/real-kafka.md tabulates."""
        leader = self.leader_shrinks
        leads = [s.lead_ms for s in leader if s.lead_ms is not None]
        by_errors = [e for s in leader if (e := s.error_ms(s.shrink_by_ms)) is not None]
        at_errors = [e for s in leader if (e := s.error_ms(s.shrink_at_ms)) is not None]
        return {
            "shrinks committed": len(self.shrinks),
            "by the leader's rule": len(leader),
            "flagged before commit": sum(s.flagged_ms is not None for s in leader),
            "named eligible before commit": sum(s.named_ms is not None for s in leader),
            "median lead ms": int(statistics.median(leads)) if leads else None,
            # the 1.5 T bound against the learned run, on the shrinks each predicted
            "shrink_by median error ms (n)": _median_of(by_errors),
            "shrink_at median error ms (n)": _median_of(at_errors),
            "false predictions": len(self.false_predictions),
            "final state equal": f"{len(self.final_equal)}/"
            f"{len(self.final_equal) + len(self.final_differs)}",
            "commit to record p99 ms": _percentile(self.latencies_ms, 0.99),
            "batch p99 ms": _percentile(self.batch_ms, 0.99),
            "changes never seen": len(self.unseen_changes),
            **(
                {"gated stops (under min ISR)": f"{self.gated_stops} ({len(self.unsafe_stops)})"}
                if self.gated_stops
                else {}
            ),
        }


def _median_of(errors: Sequence[int]) -> str | None:
    return f"{int(statistics.median(errors))} ({len(errors)})" if errors else None


def _percentile(values: Sequence[int], q: float) -> int | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def score(
    truth: MetadataTruth,
    lines: Sequence[LeaderShrinkLine],
    seen: Sequence[SeenRecord],
    lag_time_max_ms: int,
    watched_topics: Iterable[str],
) -> Score:
    topics = set(watched_topics)
    by_partition: dict[tuple[str, int], list[SeenRecord]] = defaultdict(list)
    for record in seen:
        by_partition[record.key].append(record)
    result = Score()
    changes = [change for change in truth.changes if change.topic in topics]
    watch_started_ms = seen[0].seen_ms if seen else 0
    for change in changes:
        history = by_partition.get((change.topic, change.partition), [])
        for follower in change.removed:
            line = _leader_line(lines, change, follower)
            since = (
                line.last_caught_up_ms[follower]
                if line is not None
                else change.ts_ms - 2 * lag_time_max_ms
            )
            before = [r for r in history if since <= r.seen_ms < change.ts_ms]
            flagged = next((r for r in before if r.follower_status(follower) in FLAGGED), None)
            named = next((r for r in before if r.follower_status(follower) in NAMED), None)
            last_named = next(
                (r for r in reversed(before) if r.follower_status(follower) in NAMED), None
            )
            result.shrinks.append(
                ShrinkScore(
                    commit=change,
                    follower=follower,
                    by_leader=line is not None,
                    flagged_ms=flagged.seen_ms if flagged else None,
                    named_ms=named.seen_ms if named else None,
                    eligible_window_ms=(
                        change.ts_ms - (line.last_caught_up_ms[follower] + lag_time_max_ms)
                        if line is not None
                        else None
                    ),
                    shrink_by_ms=last_named.predicted_ms(follower, "shrink_by_ms")
                    if last_named
                    else None,
                    shrink_at_ms=last_named.predicted_ms(follower, "shrink_at_ms")
                    if last_named
                    else None,
                )
            )
        if change.ts_ms >= watch_started_ms:  # what came before, the job read as backlog
            shown = next(
                (r for r in history if r.seen_ms >= change.ts_ms and _shows(r.record, change)),
                None,
            )
            if shown is None:
                later = [c for c in changes if c.topic == change.topic and c.ts_ms > change.ts_ms]
                # a change replaced before a record had to show it is neither
                replaced = any(c.partition == change.partition for c in later)
                if not replaced and not _deleting(truth, change):
                    if _back_to_shown(history, change):
                        result.restored_changes.append(change)
                    else:
                        result.unseen_changes.append(change)
            else:
                result.latencies_ms.append(shown.seen_ms - change.ts_ms)
    result.predictions = _predictions(by_partition, changes, truth, lines, lag_time_max_ms)
    for key, last in truth.final_state().items():
        if key[0] not in topics:
            continue
        history = by_partition.get(key, [])
        if not history:
            result.final_differs.append((key, "no health record"))
            continue
        final = history[-1].record
        problems = []
        if final.get("leader") != last.leader:
            problems.append(f"leader {final.get('leader')} (Kafka: {last.leader})")
        if sorted(final.get("isr", [])) != sorted(last.isr):
            problems.append(f"isr {final.get('isr')} (Kafka: {list(last.isr)})")
        # null (never stated: ZooKeeper, or no record carried it) is Kafka's empty ELR
        for name, kafkas in (("elr", last.elr), ("last_known_elr", last.last_known_elr)):
            if sorted(final.get(name) or []) != sorted(kafkas):
                problems.append(f"{name} {final.get(name)} (Kafka: {list(kafkas)})")
        if problems:
            result.final_differs.append((key, ", ".join(problems)))
        else:
            result.final_equal.append(key)
    return result


def _back_to_shown(history: Sequence[SeenRecord], change: IsrChange) -> bool:
    """Whether no record came after ``change`` and the last before it already showed its
    leader and ISR (the caller knows no later change replaced it)."""
    if not history or any(r.seen_ms >= change.ts_ms for r in history):
        return False
    return _shows(history[-1].record, change)


def _shows(record: dict[str, Any], change: IsrChange) -> bool:
    """Whether a health record shows ``change``'s leader and ISR."""
    return record.get("leader") == change.leader and sorted(record.get("isr", [])) == sorted(
        change.isr
    )


def _deleting(truth: MetadataTruth, change: IsrChange) -> bool:
    """Whether ``change`` is part of its topic's deletion, which replaces it: ZooKeeper
    mode's controller writes a deleted topic's partitions offline (leader -1, the ISR one
    replica less at a time) ms before it removes the topic. Whether the job deleted those
    partitions too is checked apart (``score_workdir``)."""
    deleted_ms = truth.deleted_topics.get(change.topic)
    return deleted_ms is not None and 0 <= deleted_ms - change.ts_ms <= MARGIN_MS


def _leader_line(
    lines: Sequence[LeaderShrinkLine], change: IsrChange, follower: int
) -> LeaderShrinkLine | None:
    for line in lines:
        if (
            line.topic == change.topic
            and line.partition == change.partition
            and follower in line.out_of_sync
            and change.ts_ms - LEADER_LINE_BEFORE_COMMIT_MS <= line.ts_ms <= change.ts_ms
        ):
            return line
    return None


def _predictions(
    by_partition: dict[tuple[str, int], list[SeenRecord]],
    changes: Sequence[IsrChange],
    truth: MetadataTruth,
    lines: Sequence[LeaderShrinkLine],
    lag_time_max_ms: int,
) -> list[Prediction]:
    """Each run of records naming a follower SHRINK_ELIGIBLE, and what Kafka did."""
    predictions = []
    for (topic, partition), history in by_partition.items():
        followers = {f["broker"] for r in history for f in r.record.get("followers", [])}
        for follower in sorted(followers):
            named_since: int | None = None
            for record in history:
                status = record.follower_status(follower)
                if status in NAMED and named_since is None:
                    named_since = record.seen_ms
                    window_end = named_since + lag_time_max_ms // 2 + MARGIN_MS
                    predictions.append(
                        Prediction(
                            topic,
                            partition,
                            follower,
                            named_since,
                            _outcome(
                                changes,
                                truth,
                                lines,
                                history,
                                topic,
                                partition,
                                follower,
                                named_since,
                                window_end,
                            ),
                        )
                    )
                elif status not in NAMED:
                    named_since = None
    return predictions


def _outcome(
    changes: Sequence[IsrChange],
    truth: MetadataTruth,
    lines: Sequence[LeaderShrinkLine],
    history: Sequence[SeenRecord],
    topic: str,
    partition: int,
    follower: int,
    named_ms: int,
    window_end: int,
) -> str:
    """What Kafka did about a follower named at ``named_ms``, by ``window_end``.

    "leader decided": the leader's check removed it (its ``Shrinking ISR`` line) but no
    commit followed in time. The leader acted as predicted; the controller that commits
    the change was gone. Kafka 3.9 (ZooKeeper mode, the lab's controller-failover): the
    leaders' AlterPartition went to the killed controller until ZooKeeper expired its
    session and another broker took over, 20 s later, removing the dead broker from
    every ISR itself."""
    for change in changes:
        if (
            change.topic == topic
            and change.partition == partition
            and follower in change.removed
            and named_ms - MARGIN_MS <= change.ts_ms <= window_end
        ):
            return "removed"
    if any(
        line.topic == topic
        and line.partition == partition
        and follower in line.out_of_sync
        and named_ms - MARGIN_MS <= line.ts_ms <= window_end
        for line in lines
    ):
        return "leader decided"
    if any(
        f.broker == follower and f.fenced and named_ms - MARGIN_MS <= f.ts_ms <= window_end
        for f in truth.fences
    ):
        return "fenced"
    leader = next((r.record["leader"] for r in history if r.seen_ms >= named_ms), None)
    if any(
        f.broker == leader and f.fenced and named_ms - MARGIN_MS <= f.ts_ms <= window_end
        for f in truth.fences
    ):
        return "leader fenced"
    if any(
        named_ms < r.seen_ms <= window_end and r.follower_status(follower) == "IN_SYNC"
        for r in history
    ):
        return "caught up"
    return "false"


SEEN_FILE = "health-seen.jsonl"
RUN_FILE = "run.json"
RESTARTS_FILE = "restarts.jsonl"
PROGRESS_FILE = "progress.jsonl"


def score_workdir(workdir: Path) -> tuple[Score, MetadataTruth]:
    """Score the lab run whose files are in ``workdir`` (``cluster.json``, the brokers'
    logs and metadata logs, ``health-seen.jsonl``); the cluster may be stopped."""
    described = read_cluster_file(workdir)
    truth = _kafka_decisions(workdir, described)
    run_file = workdir / RUN_FILE
    if run_file.exists():
        # what Kafka had decided by the last moment the job knew of (its clock at the
        # end), or else a margin before the watch ended
        run = json.loads(run_file.read_text(encoding="utf-8"))
        job_clock = run.get("job_clock_ms")
        truth = truth.until(job_clock if job_clock else run["watch_ended_ms"] - MARGIN_MS)
    server_logs = [Path(b["log_files"][0]) for b in described["brokers"]]
    result = score(
        truth,
        leader_shrink_lines(server_logs),
        read_seen(workdir / SEEN_FILE),
        int(described["replica_lag_time_max_ms"]),
        [*(topic.name for topic in LAB_TOPICS), CHURN_TOPIC],
    )
    result.batch_ms = read_batch_times(workdir / PROGRESS_FILE)
    tombstones = read_tombstones(workdir / SEEN_FILE)
    for change in truth.changes:
        key = (change.topic, change.partition)
        if change.created and change.topic in truth.deleted_topics and key not in tombstones:
            result.final_differs.append((key, "deleted by Kafka, never deleted by the job"))
    restarts = workdir / RESTARTS_FILE
    if restarts.exists():
        gates = [json.loads(line) for line in restarts.read_text(encoding="utf-8").splitlines()]
        brokers = len(described["brokers"])
        min_isr = {t.name: t.min_insync_replicas_on(brokers) for t in LAB_TOPICS}
        judge_gated_stops(result, truth, gates, min_isr)
    return result, truth


def judge_gated_stops(
    result: Score,
    truth: MetadataTruth,
    gates: Sequence[dict[str, Any]],
    min_insync_replicas: Mapping[str, int],
) -> None:
    """Each stop the restart check called safe, against Kafka: the partitions whose ISR
    the controlled shutdown left under their topic's ``min_insync_replicas`` (the topics
    judged), by the metadata log as of the broker's exit."""
    for gate in gates:
        if not gate.get("safe") or "stopped_ms" not in gate:
            continue
        result.gated_stops += 1
        after = truth.until(int(gate["stopped_ms"])).final_state()
        under = sorted(
            key
            for key, state in after.items()
            if key[0] in min_insync_replicas and len(state.isr) < min_insync_replicas[key[0]]
        )
        if under:
            result.unsafe_stops.append((int(gate["broker"]), under))


def _kafka_decisions(workdir: Path, described: dict[str, Any]) -> MetadataTruth:
    """KRaft: the longest copy of ``__cluster_metadata`` (every voter holds the whole
    log); ZooKeeper mode: ZooKeeper's transaction log."""
    if described.get("mode") == "zookeeper":
        writes = zookeeper_transactions(workdir / "zookeeper" / "data")
        return from_zookeeper(from_zookeeper_log(writes))
    truth: MetadataTruth | None = None
    for broker in described["brokers"]:
        log_dir = Path(broker["metadata_dir"]) / "__cluster_metadata-0"
        records = dump_metadata_log(described["java"], described["classpath"], log_dir)
        candidate = read_metadata_log(records)
        if truth is None or len(candidate.changes) > len(truth.changes):
            truth = candidate
    if truth is None:
        raise LabError(f"no metadata log under {workdir}")
    return truth
