"""The demo's live view in a real pseudo-terminal of 80x24 and 120x40, read back through a
terminal emulator (pyte): what matters first, empty sections not drawn, unknown values as
``-``, nothing but the view on screen. The content is tests/unit/live_view_screens.py's.

Budget (hand-computed): the view has the terminal's height less one line (Live's cursor);
3 of them are the header and the summary; a section takes 2 lines (title, column names)
plus its rows. At 80x24: 20 lines. Every section gets title, names and one row while they
fit (6 sections x 3 = 18, 2 left), then rows in order: predicted shrinks its 2nd, overdue
has no more, offline and under min ISR neither, under-replicated its 2nd. At 120x40: 36
lines; sections with all their rows take 4 + 3 + 3 + 3 + 8 + 11 = 32, the simulated
cluster's facts the 4 left (a title and the last 3 facts).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect
import pyte
import pytest

from state import STATUS_NAMES
from streaming.tools.live_view import Section, allot
from tests.unit.live_view_screens import NOISE

ROOT = Path(__file__).resolve().parents[2]
PREDICTED = "Predicted shrinks: Kafka removes these followers from the ISR"
OVERDUE = "Overdue shrinks: past Kafka's deadline, still in the ISR"
OFFLINE = "Offline: no live leader"
UNDER_MIN_ISR = "Under min ISR: acks=all producers fail"
URP = "Under-replicated"
OTHERS = "Other followers not in sync"
FACTS = "What the simulated cluster did"


def screen_of(rows: int, columns: int, log: Path) -> list[str]:
    """Run the view in a pseudo-terminal of that size; the screen when it has ended."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env |= {"TERM": "xterm-256color", "ISRWATCH_VIEW_LOG": str(log)}
    child: pexpect.spawn[bytes] = pexpect.spawn(
        sys.executable,
        ["-m", "tests.unit.live_view_screens"],
        cwd=str(ROOT),
        env=env,
        dimensions=(rows, columns),
        timeout=60,
    )
    output = child.read()
    child.close()
    assert child.exitstatus == 0, output.decode(errors="replace")
    screen = pyte.Screen(columns, rows)
    pyte.ByteStream(screen).feed(output)
    return [line.rstrip() for line in screen.display]


def headings(screen: list[str]) -> list[str]:
    titles = (PREDICTED, OVERDUE, OFFLINE, UNDER_MIN_ISR, URP, OTHERS, FACTS, "Metadata")
    return [line for line in screen if line.startswith(titles)]


def row_after(screen: list[str], heading: str, n: int = 1) -> list[str]:
    """The n-th row under a section's column names, as words."""
    return screen[screen.index(heading) + 1 + n].split()


def assert_only_the_view(screen: list[str], log: Path) -> None:
    text = "\n".join(screen)
    # nothing scrolled away; the figures are as of NOW (B + 100 s)
    assert screen[0] == "isrwatch: screens x1 | cluster 22:13:30 | monitor 22:15:00"
    assert "None" not in text
    assert NOISE not in text
    logged = log.read_text()
    for where in ("FutureWarning", "stdout 3", "stderr 3", "fd 2 (a Java stack trace) 3"):
        assert where in logged, where


def test_80x24_shows_what_matters_first(tmp_path: Path) -> None:
    log = tmp_path / "view.log"
    screen = screen_of(24, 80, log)
    assert_only_the_view(screen, log)
    assert headings(screen) == [
        f"{PREDICTED} (2)",
        f"{OVERDUE} (1)",
        f"{OFFLINE} (1)",
        f"{UNDER_MIN_ISR} (1)",
        f"{URP} (2 of 6)",
        f"{OTHERS} (1 of 9)",
    ]
    predicted = f"{PREDICTED} (2)"
    # soonest deadline first: NOW + 2 000, then NOW + 7 300
    assert row_after(screen, predicted) == ["orders-1", "3", "1", "2.0s", "43.0s", "800"]
    assert row_after(screen, predicted, 2) == ["orders-0", "2", "1", "7.3s", "37.7s", "1200"]
    # 12 000 past its deadline; its fetch offset is unknown: "-" messages behind
    assert row_after(screen, f"{OVERDUE} (1)") == ["payments-0", "2", "1", "12.0s", "57.0s", "-"]
    assert row_after(screen, f"{OFFLINE} (1)") == ["orders-2", "-", "[3]", "[1,", "3]"]
    assert row_after(screen, f"{UNDER_MIN_ISR} (1)") == ["orders-3", "2", "[2]", "[1,", "2,", "3]"]
    # never caught up since the election: no lag time, no offset
    assert row_after(screen, f"{OTHERS} (1 of 9)") == ["orders-2", "1", "-", "OFFLINE", "-", "-"]
    assert screen[23] == ""  # 23 lines of view, the cursor below


def test_120x40_shows_everything_and_the_last_facts(tmp_path: Path) -> None:
    log = tmp_path / "view.log"
    screen = screen_of(40, 120, log)
    assert_only_the_view(screen, log)
    assert headings(screen) == [
        f"{PREDICTED} (2)",
        f"{OVERDUE} (1)",
        f"{OFFLINE} (1)",
        f"{UNDER_MIN_ISR} (1)",
        f"{URP} (6)",
        f"{OTHERS} (9)",
        FACTS,
    ]
    others = f"{OTHERS} (9)"
    assert row_after(screen, others, 9)[:6] == ["orders-4", "3", "1", "CATCHING_UP", "4.0s", "40"]
    # 9 s of T = 30 s on 24 cells for 0 .. 60 s: 4 filled, T at cell 12, 1.5 T at 18
    bar = "█" * 4 + "·" * 8 + "|" + "·" * 5 + "|" + "·" * 5
    assert row_after(screen, others, 4)[-1] == bar
    facts = screen[screen.index(FACTS) + 1 :]
    assert [line.split("  ")[1] for line in facts[:3]] == [
        f"leader 1 added 3 back to orders-{i}'s ISR" for i in (7, 8, 9)
    ]
    assert screen[39] == ""


def section(rows: int) -> Section:
    return Section("s", ("a",), [("x",)] * rows)


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        (2, [0, 0, 0]),  # not even one section's title, names and a row
        (3, [1, 0, 0]),
        (8, [2, 1, 0]),  # 3 + 3, the third needs 3: the first gets its 2nd row
        (9, [1, 1, 1]),
        (10, [2, 1, 1]),
        (13, [2, 1, 4]),  # every row: 4 + 3 + 6
        (20, [2, 1, 4]),
    ],
)
def test_allot_gives_rows_in_order(budget: int, expected: list[int]) -> None:
    assert allot([section(2), section(1), section(4)], budget) == expected


def test_every_status_of_the_model_has_a_style() -> None:
    from streaming.tools.live_view import STATUS_STYLE

    assert set(STATUS_STYLE) == set(STATUS_NAMES)
