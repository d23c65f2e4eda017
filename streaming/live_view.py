"""The demo's terminal view of cluster health, drawn with rich from the job's own output.

``ClusterHealth`` collects what the job's sink hands over after every micro-batch (each
shard's stats row: gauges and the records of its unhealthy partitions) and the dead
letters; the ``render_*`` functions turn a snapshot of it into rich renderables.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pandas as pd
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from streaming.routing import DEAD
from streaming.shard_stats import ShardStats
from streaming.sinks import dead_letters_by_reason, shard_stats_of

STATUS_STYLE = {
    "IN_SYNC": "green", "LAGGING": "yellow", "SHRINK_ELIGIBLE": "bold dark_orange",
    "SHRINK_OVERDUE": "bold red", "CATCHING_UP": "cyan", "OUT_OF_SYNC": "magenta",
    "OFFLINE": "bold red",
}  # fmt: skip
STATUS_ORDER = list(STATUS_STYLE)
CONDITIONS = ("offline", "under_min_isr", "under_replicated", "predicted_under_replicated")
COUNTED = (*CONDITIONS, "metadata_stale_expected", "metadata_stale_overdue")


@dataclass
class HealthSnapshot:
    """The latest report of every shard, merged."""

    batches: int = 0
    now_ms: int | None = None
    partitions: int = 0
    totals: Counter[str] = field(default_factory=Counter)
    followers: Counter[str] = field(default_factory=Counter)
    unhealthy: list[dict[str, Any]] = field(default_factory=list)
    dead_letters: Counter[str] = field(default_factory=Counter)


class ClusterHealth:
    """Thread-safe collector of the job's per-batch output (the sink's ``on_batch``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shards: dict[int, ShardStats] = {}
        self._batches = 0
        self._dead_letters: Counter[str] = Counter()
        self.peaks: Counter[str] = Counter()  # the most partitions seen in each condition
        self.first_seen_ms: dict[str, int] = {}  # event time each condition first appeared

    def on_batch(self, _batch_id: int, rows: pd.DataFrame) -> None:
        dead = rows[rows["kind"] == DEAD]
        with self._lock:
            for stats in shard_stats_of(rows):
                self._shards[stats.shard] = stats
            for (_source, reason), count in dead_letters_by_reason(dead).items():
                self._dead_letters[reason] += count
            self._batches += 1
            snapshot = self._snapshot()
            for condition in COUNTED:
                count = snapshot.totals[condition]
                self.peaks[condition] = max(self.peaks[condition], count)
                if count and snapshot.now_ms is not None:
                    self.first_seen_ms.setdefault(condition, snapshot.now_ms)

    def snapshot(self) -> HealthSnapshot:
        with self._lock:
            return self._snapshot()

    def _snapshot(self) -> HealthSnapshot:
        snapshot = HealthSnapshot(self._batches, dead_letters=Counter(self._dead_letters))
        for stats in self._shards.values():
            now = stats.now_ms
            snapshot.now_ms = max(now, snapshot.now_ms or now)
            snapshot.partitions += stats.partitions
            for gauges in stats.topics.values():
                for condition in COUNTED:
                    snapshot.totals[condition] += int(getattr(gauges, condition))
                snapshot.followers.update(gauges.followers)
            snapshot.unhealthy.extend(stats.unhealthy)
        snapshot.unhealthy.sort(key=lambda r: (r["topic"], r["partition"]))
        return snapshot


# ------------------------------------------------------------------ rendering


def clock(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S.%f")[:-3]


def seconds(ms: int | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.1f}s"


def partition_name(record: dict[str, Any]) -> str:
    return f"{record['topic']}-{record['partition']}"


def render_summary(snapshot: HealthSnapshot) -> Text:
    totals = snapshot.totals
    text = Text()
    text.append(f"{snapshot.partitions} partitions", style="bold")
    for condition, style in (
        ("under_replicated", "dark_orange"), ("under_min_isr", "red"), ("offline", "bold red"),
        ("predicted_under_replicated", "yellow"),
    ):  # fmt: skip
        count = totals[condition]
        text.append(f"  {condition.replace('_', '-')} ")
        text.append(str(count), style=style if count else "green")
    text.append("  metadata stale ")
    text.append(f"{totals['metadata_stale_expected']} expected", style="cyan")
    text.append(" / ")
    overdue = totals["metadata_stale_overdue"]
    text.append(f"{overdue} overdue", style="bold red" if overdue else "green")
    text.append("\nfollowers ")
    for status in STATUS_ORDER:
        if snapshot.followers[status]:
            text.append(f"{status} {snapshot.followers[status]}  ", style=STATUS_STYLE[status])
    return text


def lag_bar(lag_ms: int, lag_max_ms: int, width: int = 24) -> Text:
    """Lag time on a 0 .. 2 T scale with marks at T and 1.5 T (the shrink rule)."""
    scale = 2 * lag_max_ms
    filled = min(width, round(width * lag_ms / scale)) if scale else width
    t_mark, one_and_half = width // 2, width * 3 // 4
    bar = Text()
    for i in range(width):
        char = "|" if i in (t_mark, one_and_half) else ("█" if i < filled else "·")
        style = "red" if i >= one_and_half else "dark_orange" if i >= t_mark else "yellow"
        bar.append(char, style=style if i < filled or char == "|" else "grey50")
    return bar


def render_followers(snapshot: HealthSnapshot, limit: int = 12) -> Table:
    table = Table(title="Followers not in sync (lag time against T | 1.5 T)", expand=True)
    for column in ("partition", "follower", "leader", "status", "lag time", "0 .. T | 1.5T .. 2T",
                   "shrink by", "lag msgs"):  # fmt: skip
        table.add_column(column, no_wrap=True)
    rows = []
    for record in snapshot.unhealthy:
        lag_max = int(record.get("replica_lag_time_max_ms", 0))
        for follower in record["followers"]:
            if follower["status"] == "IN_SYNC":
                continue
            rows.append((STATUS_ORDER.index(follower["status"]), record, follower, lag_max))
    rows.sort(key=lambda row: (-row[0], -(row[2].get("lag_time_ms") or 0)))
    now = snapshot.now_ms
    for _, record, follower, lag_max in rows[:limit]:
        lag = follower.get("lag_time_ms")
        deadline = follower.get("shrink_by_ms")
        table.add_row(
            partition_name(record), str(follower["broker"]), str(record["leader"]),
            Text(follower["status"], style=STATUS_STYLE[follower["status"]]),
            seconds(lag), lag_bar(lag, lag_max) if lag is not None and lag_max else Text("-"),
            _relative(deadline, now),
            str(follower.get("lag_messages", "-")),
        )  # fmt: skip
    if len(rows) > limit:
        table.caption = f"... and {len(rows) - limit} more"
    return table


def render_partitions(snapshot: HealthSnapshot, limit: int = 10) -> Table:
    table = Table(title="Unhealthy partitions", expand=True)
    for column in ("partition", "leader", "isr / replicas", "conditions"):
        table.add_column(column, no_wrap=True)
    flagged = [r for r in snapshot.unhealthy if any(r[c] for c in CONDITIONS)]
    flagged.sort(key=lambda r: [not r[c] for c in CONDITIONS])
    for record in flagged[:limit]:
        conditions = Text()
        for condition in CONDITIONS:
            if record[condition]:
                conditions.append(condition.replace("_", "-") + " ", style="bold")
        table.add_row(
            partition_name(record), str(record["leader"]),
            f"{record['isr']} / {record['replicas']}", conditions,
        )  # fmt: skip
    if len(flagged) > limit:
        table.caption = f"... and {len(flagged) - limit} more"
    return table


def render_blackouts(snapshot: HealthSnapshot, limit: int = 8) -> Table:
    table = Table(title="Metadata blackout windows (brokers still caching an old ISR)", expand=True)
    for column in ("partition", "state", "stale brokers", "window opens", "window closes"):
        table.add_column(column, no_wrap=True)
    now = snapshot.now_ms
    stale = [r for r in snapshot.unhealthy if r["metadata"]["state"] != "CONSISTENT"]
    for record in stale[:limit]:
        metadata = record["metadata"]
        state = metadata["state"]
        table.add_row(
            partition_name(record),
            Text(state, style="bold red" if state == "STALE_OVERDUE" else "cyan"),
            str(metadata["stale_brokers"]),
            _relative(metadata["blackout_earliest_ms"], now),
            _relative(metadata["blackout_latest_ms"], now),
        )
    if len(stale) > limit:
        table.caption = f"... and {len(stale) - limit} more"
    return table


def _relative(ms: int | None, now: int | None) -> str:
    if ms is None or now is None:
        return "-"
    delta = (ms - now) / 1000
    return f"in {delta:.1f}s" if delta >= 0 else f"{-delta:.1f}s ago"


def describe_fact(fact: dict[str, Any]) -> str | None:
    """One line for the facts worth showing next to the monitor's view."""
    kind = fact["kind"]
    where = f"{fact.get('topic')}-{fact.get('partition')}"
    match kind:
        case "isr_shrink":
            return f"leader {fact['leader']} dropped {fact['follower']} from {where}'s ISR"
        case "isr_expand":
            return f"leader {fact['leader']} added {fact['follower']} back to {where}'s ISR"
        case "shrink_failed":
            return f"leader {fact['leader']} failed to drop {fact['follower']} from {where}"
        case "propagation":
            return f"broker {fact['broker']} propagated {len(fact['changes'])} ISR change(s)"
        case "broker_crash" | "broker_restart":
            return f"broker {fact['broker']} {kind.split('_')[1]}ed"
        case "controller_change":
            return f"controller is now {fact['controller_id']} (epoch {fact['controller_epoch']})"
        case "leader_and_isr" if fact["reason"] != "topic created":
            return f"controller: {where} leader {fact['leader']} isr {fact['isr']}"
        case "topic_created" | "topic_deleted":
            return f"topic {fact['topic']} {kind.split('_')[1]}"
    return None


def render_facts(facts: Sequence[dict[str, Any]], limit: int = 6) -> Panel:
    lines = [
        f"{clock(fact['ts'])}  {line}"
        for fact in facts
        if (line := describe_fact(fact)) is not None
    ][-limit:]  # fmt: skip
    return Panel("\n".join(lines) or "nothing yet", title="What the simulated cluster did")


def render(
    snapshot: HealthSnapshot, header: str, facts: Sequence[dict[str, Any]]
) -> RenderableType:
    return Group(
        Panel(render_summary(snapshot), title=header),
        render_partitions(snapshot),
        render_followers(snapshot),
        render_blackouts(snapshot),
        render_facts(facts),
    )


def plain_line(snapshot: HealthSnapshot) -> str:
    """The view as one line, for terminals that are not interactive (logs, CI)."""
    totals = snapshot.totals
    followers = " ".join(f"{s}={snapshot.followers[s]}" for s in STATUS_ORDER
                         if snapshot.followers[s])  # fmt: skip
    return (
        f"as of {clock(snapshot.now_ms)}: {snapshot.partitions} partitions, "
        f"under-replicated={totals['under_replicated']} "
        f"under-min-isr={totals['under_min_isr']} offline={totals['offline']} "
        f"predicted={totals['predicted_under_replicated']} "
        f"stale={totals['metadata_stale_expected']}/{totals['metadata_stale_overdue']} "
        f"followers: {followers or '-'}; batches {snapshot.batches}"
    )
