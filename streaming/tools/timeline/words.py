"""How the timeline's texts say things: times, durations, partitions, who removed a
follower, and a propagation's verdict. The report, the Markdown and the picture take their
words from here, so they say the same."""

from __future__ import annotations

from datetime import UTC, datetime

from state import Cause
from streaming.tools.timeline.facts import MetadataBlackout, Shrink, Timeline


def clock(ms: int) -> str:
    """UTC wall-clock time to the millisecond."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%H:%M:%S.%f")[:-3]


def stamp(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def seconds(ms: int) -> str:
    """A duration: ``9.9 s``, ``2 min 05 s``."""
    if abs(ms) < 120_000:
        return f"{ms / 1000:.1f} s"
    whole = round(ms / 1000)
    return f"{whole // 60} min {whole % 60:02d} s"


def at(timeline: Timeline, ms: int) -> str:
    """A moment as wall-clock time and offset from the start of the range."""
    return f"{clock(ms)} (+{(ms - timeline.start_ms) / 1000:.1f} s)"


def tp_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def cause_text(cause: Cause | None) -> str:
    return "" if cause is None else cause.text


def propagation_verdict(timeline: Timeline, blackout: MetadataBlackout) -> tuple[str, str]:
    """(verdict, words) of one propagation against its predicted window."""
    slack = timeline.overdue_slack_ms
    if blackout.latest_ms is None:
        if blackout.observed_ms is None:
            return "still stale", "still stale at the end, no window predicted"
        return "no window", "no window predicted"
    if blackout.observed_ms is None:
        late = blackout.late_by_ms(slack, timeline.end_ms)
        return "still stale", f"still stale at the end, {seconds(late)} past the window"
    late = blackout.late_by_ms(slack, timeline.end_ms)
    if late > 0:
        return "late", f"took the change {seconds(late)} after the window (+ slack) closed"
    if blackout.earliest_ms is not None and blackout.observed_ms <= blackout.earliest_ms:
        return "early", "before the predicted earliest (the leader's last propagation unseen)"
    return "within", "within the predicted window"


def shrink_actor(shrink: Shrink) -> str:
    if shrink.by_controller is None:  # inferred from health records
        return f"Kafka (leader {shrink.leader})"
    return "the controller" if shrink.by_controller else f"leader {shrink.leader}"
