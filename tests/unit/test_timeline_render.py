"""The picture, the Markdown report and the command, drawn without a display.

The timelines here are SYNTHETIC: built by hand from the facts' own types, so that what
each lane, label and line must show is known in advance.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

from streaming.cli import main
from streaming.tools.timeline.facts import (
    FollowerEpisode,
    IsrChange,
    MetadataBlackout,
    OverdueShrink,
    PartitionPeriod,
    Shrink,
    StatusSpan,
    Timeline,
)
from streaming.tools.timeline.markdown import render_markdown
from streaming.tools.timeline.picture import render_figure, render_html, render_png
from streaming.tools.timeline.picture_drawing import DEADLINE_MARK, LANE, MAX_LANES, T_MARK
from streaming.tools.timeline.words import clock

START = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC
T = 30_000


def small() -> Timeline:
    """t-0: follower 2 lags from +10 s (last caught up), predicted at +41 s, removed by
    leader 1 at +45 s (deadline +55 s), back at +80 s; follower 3 in sync throughout.
    The change reaches every cache at +51 s, within [+50 s, +52.5 s]."""
    spans = [
        StatusSpan(START, START + 26_000, "IN_SYNC"),
        StatusSpan(START + 26_000, START + 41_000, "LAGGING"),
        StatusSpan(START + 41_000, START + 45_000, "SHRINK_ELIGIBLE"),
        StatusSpan(START + 45_000, START + 80_000, "OUT_OF_SYNC"),
        StatusSpan(START + 80_000, START + 90_000, "IN_SYNC"),
    ]
    episode = FollowerEpisode(
        "t",
        0,
        2,
        1,
        START + 26_000,
        T,
        behind_since_ms=START + 10_000,
        first_lagging_ms=START + 26_000,
        predicted_ms=START + 41_000,
        removed_ms=START + 45_000,
        rejoined_ms=START + 80_000,
        end_ms=START + 80_000,
        worst="OUT_OF_SYNC",
    )
    return Timeline(
        start_ms=START,
        end_ms=START + 90_000,
        lag_time_max_ms=T,
        overdue_slack_ms=2_000,
        lanes={("t", 0, 2): spans, ("t", 0, 3): [StatusSpan(START, START + 90_000, "IN_SYNC")]},
        leaders={("t", 0): 1},
        episodes=[episode],
        shrinks=[Shrink(START + 45_000, "t", 0, 1, 2, False, True, START + 41_000, START + 55_000)],
        overdue=[],
        isr_changes=[
            IsrChange(START + 45_000, "t", 0, 1, (1, 2, 3), (1, 3), False, exact=True),
            IsrChange(START + 80_000, "t", 0, 1, (1, 3), (1, 3, 2), False, exact=True),
        ],
        blackouts=[
            MetadataBlackout(
                "t", 0, START + 45_000, START + 50_000, START + 52_500, START + 51_000, exact=True
            )
        ],
        periods=[PartitionPeriod("under_replicated", "t", 0, START + 45_000, START + 80_000)],
        notes=["synthetic"],
    )


def large(brokers: int = 12, partitions: int = 1_000) -> Timeline:
    """``partitions`` partitions of RF 3, partition p followed by brokers (p + 1) % 12 + 1
    and (p + 2) % 12 + 1: broker 4 follows the p = 1 and 2 (mod 12), 84 + 84 = 168;
    broker 7 the p = 4 and 5 (mod 12), 83 + 83 = 166 (1 000 = 83 x 12 + 4). Broker 7 is out
    of sync everywhere from +30 s, broker 4 overdue on partition 2; the rest in sync."""
    lanes: dict[tuple[str, int, int], list[StatusSpan]] = {}
    end = START + 60_000
    for p in range(partitions):
        for k in (1, 2):
            broker = (p + k) % brokers + 1
            status = "IN_SYNC"
            if broker == 7:
                status = "OUT_OF_SYNC"
            if broker == 4 and p == 2:
                status = "SHRINK_OVERDUE"
            lanes[(f"topic-{p // 100}", p % 100, broker)] = [
                StatusSpan(START, START + 30_000, "IN_SYNC"),
                StatusSpan(START + 30_000, end, status),
            ]
    return Timeline(
        START,
        end,
        T,
        2_000,
        lanes,
        {},
        [],
        [],
        [
            OverdueShrink("topic-0", 2, 3, 4, START + 29_000, START + 30_000),
        ],
        [],
        [],
        [],
    )


def texts(figure: Figure) -> list[str]:
    return [t.get_text() for ax in figure.axes for t in ax.texts] + [
        ax.get_title(loc="left") for ax in figure.axes
    ]


def lane_labels(axes: Axes) -> list[str]:
    return [label.get_text() for label in axes.get_yticklabels()]


def test_small_timeline_draws_one_lane_per_troubled_follower() -> None:
    figure = render_figure(small())
    lanes, partitions = figure.axes[:2]
    assert lane_labels(lanes) == ["t-0  follower 2  (leader 1)", "1 other follower: IN_SYNC"]
    assert lane_labels(partitions) == ["t-0"]
    # one coloured bar per status span of follower 2, one for the calm lane
    bars = [c for c in lanes.collections if c.get_label() == LANE]
    assert [len(c.get_paths()) for c in bars] == [1, 5]
    # T and 1.5 T after last caught up: +40 s and +55 s
    marks = {
        c.get_label(): [round(seg[0][0] * 86_400_000) - START for seg in c.get_segments()]
        for c in lanes.collections
        if isinstance(c, LineCollection) and c.get_label() in (T_MARK, DEADLINE_MARK)
    }
    assert marks == {T_MARK: [40_000], DEADLINE_MARK: [55_000]}
    # removed (v) at +45 s, back (^) at +80 s, predicted (D) at +41 s
    markers = {
        (line.get_marker(), round(float(np.asarray(line.get_xdata())[0]) * 86_400_000) - START)
        for line in lanes.get_lines()
    }
    assert markers == {("v", 45_000), ("^", 80_000), ("D", 41_000)}
    # the time axis: UTC clock labels over the whole range
    low, high = partitions.get_xlim()
    assert (round(low * 86_400_000), round(high * 86_400_000)) == (START, START + 90_000)
    assert partitions.get_xlabel() == "time (UTC)"
    assert "isrwatch timeline: 2023-11-14 22:13:20 UTC" in figure.texts[0].get_text()


def test_beyond_max_lanes_the_picture_summarises_per_broker_worst_first() -> None:
    timeline = large()
    assert len(timeline.lanes) == 2_000
    figure = render_figure(timeline)
    lanes = figure.axes[0]
    labels = lane_labels(lanes)
    # broker 4 has the worst status (SHRINK_OVERDUE), then broker 7; the 10 calm ones share
    assert labels == [
        "broker 4  (168 followers)",
        "broker 7  (166 followers)",
        "10 other brokers  (1666 followers)",
    ]
    assert len(labels) <= MAX_LANES
    assert "IN_SYNC throughout: 1-3, 5-6, 8-12" in texts(figure)
    assert any("2000 follower lanes summarised per broker" in t for t in texts(figure))
    assert figure.axes[1].get_ylabel() == "partitions"


def test_png_and_html_are_valid_and_self_contained(tmp_path: Path) -> None:
    timeline = small()
    render_png(timeline, tmp_path / "timeline.png")
    render_html(timeline, tmp_path / "timeline.html")
    png = (tmp_path / "timeline.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width == 14 * 110  # 14 in at 110 dpi
    assert height > 300
    page = (tmp_path / "timeline.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert page.count("<svg") == 1
    assert "</svg>" in page
    assert "src=" not in page  # nothing fetched from elsewhere
    assert 'href="http' not in page.replace('xmlns:xlink="http', "")
    assert page.index("<h2>Summary</h2>") < page.index("<h2>Key moments</h2>")  # as in the .md
    assert "t-0" in page


def test_markdown_tells_the_same_story() -> None:
    text = render_markdown(small())
    assert text.startswith("# isrwatch timeline: 2023-11-14 22:13:20 UTC to 22:14:50.000 UTC")
    assert "| ISR shrinks | 1 | 1 by leaders, 0 by the controller |" in text
    assert (
        "| shrinks predicted beforehand (all but the controller's) | 1 of 1 | lead time 4.0 s"
        in text
    )
    assert "| metadata propagations | 1 | 1 within |" in text
    assert "| partitions under-replicated | 1 | longest 35.0 s |" in text
    moments = [line for line in text.splitlines() if line.startswith("- `")]
    assert moments == [
        f"- `{clock(START + 10_000)} (+10.0 s)` broker 2 last caught up, then fell behind, on t-0",
        f"- `{clock(START + 41_000)} (+41.0 s)` isrwatch predicted that Kafka will remove "
        "broker 2 from t-0",
        f"- `{clock(START + 45_000)} (+45.0 s)` leader 1 removed broker 2 from the ISR of t-0, "
        "predicted 4.0 s before",
        f"- `{clock(START + 80_000)} (+80.0 s)` broker 2 back in the ISR of t-0",
    ]
    assert "![timeline](timeline.png)" in text


def test_markdown_of_a_large_timeline_is_cut_worst_first() -> None:
    text = render_markdown(large())
    assert (
        "| overdue shrinks (SHRINK_OVERDUE) | 1 | longest overdue 31.0 s, 1 still at the end |"
        in text
    )


@pytest.fixture
def capture_file(tmp_path: Path) -> Path:
    from tests.unit.test_timeline_facts import capture

    path = tmp_path / "capture.jsonl"
    path.write_text("\n".join(capture()) + "\nnot json\n", encoding="utf-8")
    return path


def test_the_command_writes_the_three_files(tmp_path: Path, capture_file: Path) -> None:
    out = tmp_path / "out"
    health = tmp_path / "health.jsonl"
    health.write_text(json.dumps({"topic": "t"}) + "\n", encoding="utf-8")
    result = CliRunner().invoke(
        main,
        [
            "timeline",
            str(capture_file),
            "--out",
            str(out),
            "--health-out",
            str(health),
            "--set",
            "rules.replica_lag_time_max_ms=10000",
            "--from",
            "1970-01-01T00:00:00",
            "--to",
            "30000",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "1 shrinks" in result.output
    report = (out / "timeline.md").read_text(encoding="utf-8")
    assert "1 invalid_json" in report  # the capture's bad line, counted
    assert "1 not_a_health_record" in report
    assert "| ISR shrinks | 1 |" in report
    assert (out / "timeline.png").read_bytes()[:4] == b"\x89PNG"
    assert "<svg" in (out / "timeline.html").read_text(encoding="utf-8")


def test_the_command_needs_an_input(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["timeline", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "give a CAPTURE" in result.output


def test_a_large_calm_timeline_is_one_lane() -> None:
    calm = large()
    calm.lanes = {key: [StatusSpan(START, calm.end_ms, "IN_SYNC")] for key in calm.lanes}
    labels = lane_labels(render_figure(calm).axes[0])
    assert labels == ["12 brokers  (2000 followers)"]
