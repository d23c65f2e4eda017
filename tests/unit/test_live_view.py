"""The demo's view, drawn from the stats rows the shard step really produces."""

from __future__ import annotations

from rich.console import Console, RenderableType

from streaming.tools.cluster_health import ClusterHealth
from streaming.tools.live_view import fact_lines, lag_bar, plain_line, render
from tests.unit.test_shard_state import B, Job, follower_behind_a_short_t, kafka_records


def text_of(renderable: RenderableType) -> str:
    console = Console(record=True, width=200, color_system=None)
    console.print(renderable)
    return console.export_text()


def one_eligible_follower() -> ClusterHealth:
    """t:0's follower 2 is 12 s behind, its leader's T is 10 s: SHRINK_ELIGIBLE until 15 s."""
    job = Job(2, snapshot_when_idle=False)
    events = follower_behind_a_short_t()
    health = ClusterHealth()
    health.on_batch(0, job.batch(kafka_records(events)))
    return health


def test_the_snapshot_merges_every_shard() -> None:
    snapshot = one_eligible_follower().snapshot()
    assert (snapshot.batches, snapshot.partitions, snapshot.now_ms) == (1, 2, B + 12_000)
    assert snapshot.totals["predicted_under_replicated"] == 1
    assert snapshot.totals["under_replicated"] == 0
    assert snapshot.followers == {"SHRINK_ELIGIBLE": 1, "IN_SYNC": 1}
    assert [(p.record.topic, p.record.partition) for p in snapshot.unhealthy] == [("t", 0)]


def test_the_view_shows_the_follower_against_its_deadline() -> None:
    health = one_eligible_follower()
    text = text_of(render(health.snapshot(), "header", []))
    lines = text.splitlines()
    heading = lines.index("Predicted shrinks: Kafka removes these followers from the ISR (1)")
    assert lines[heading + 1].split() == [
        "partition",
        "follower",
        "leader",
        "removed",
        "in",
        "lag",
        "time",
        "lag",
        "msgs",
    ]
    # shrink by last caught up (B, the election) + 1.5 x 10 s: 3 s from now; lag 12 s
    assert lines[heading + 2].split()[:5] == ["t-0", "2", "1", "3.0s", "12.0s"]
    assert "predicted 1" in text
    assert health.peaks["predicted_under_replicated"] == 1
    assert health.first_seen_ms["predicted_under_replicated"] == B + 12_000
    assert "predicted=1" in plain_line(health.snapshot())


def test_the_lag_bar_marks_t_and_one_and_a_half_t() -> None:
    # 24 cells for 0 .. 2T: T at cell 12, 1.5 T at cell 18; 12 s of T = 10 s fills 14 cells
    assert lag_bar(12_000, 10_000).plain == "█" * 12 + "|" + "█" + "····" + "|" + "·" * 5


def test_facts_show_what_the_cluster_did() -> None:
    facts = [
        {"ts": B, "kind": "isr_shrink", "topic": "t", "partition": 0, "leader": 1, "follower": 2},
        {"ts": B, "kind": "update_metadata", "broker": 1, "partitions": []},
    ]
    lines = fact_lines(facts)
    assert lines == ["22:13:20.000  leader 1 dropped 2 from t-0's ISR"]
