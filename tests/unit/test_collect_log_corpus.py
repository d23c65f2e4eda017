"""``collect logs`` on real broker lines: the project's corpus (tests/unit/data/kafka_logs/
corpus, each file from a named public source) and, when present beside the clone, the
corpus kept outside the project (../shared/real-log-samples). The scoring is
tests/log_corpus.py; ``python -m tests.log_corpus`` prints the figures.
"""

from __future__ import annotations

import re
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from streaming.feeds.collectors.log_layouts import CONTINUATION, Entry, LineReader
from tests.log_corpus import (
    REQUIRED,
    CorpusFile,
    Statement,
    emitted_events,
    load_corpus,
    load_external,
    matches,
    score,
)

CORPUS = load_corpus()
EXTERNAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "real-log-samples"


def test_the_corpus_names_its_sources_versions_modes_and_layouts() -> None:
    sources = {f.source for f in CORPUS}
    assert len(sources) >= 15
    assert all(re.fullmatch(r"https://\S+", f.source) for f in CORPUS)
    majors = {re.match(r"\d+", f.kafka_version).group() for f in CORPUS}  # type: ignore[union-attr]
    assert {"0", "1", "2", "3", "4"} <= majors
    assert {f.mode for f in CORPUS} == {"zk", "kraft"}
    layouts = " ".join(f.layout for f in CORPUS)
    for layout in ("apache", "strimzi", "docker compose", "custom", "journald"):
        assert layout in layouts


def test_real_journald_lines_are_read_and_state_nothing() -> None:
    """frodo-tips: a 3.6 broker under systemd read with journalctl (10 real lines, one the
    author's '...'): every line is an entry or the continuation of one, and none gives
    an event."""
    [journald] = [f for f in CORPUS if "journald" in f.layout]
    reader = LineReader(ZoneInfo("UTC"))
    read = [reader.read(line) for line in journald.lines]
    assert [type(r).__name__ for r in read].count("Entry") == 9
    assert read[5] is CONTINUATION
    first = read[0]
    assert isinstance(first, Entry)
    assert (first.level, first.logger) == ("INFO", "kafka.server.ZkAdminManager")
    assert emitted_events(journald) == []


def test_statements_point_at_lines_of_their_file() -> None:
    for corpus_file in CORPUS:
        for statement in corpus_file.statements:
            assert 1 <= statement.line <= len(corpus_file.lines), corpus_file.name
            assert statement.event["type"] in REQUIRED


def test_project_corpus_score() -> None:
    result = score(CORPUS)
    assert result.total("wrong") == 0
    assert result.total("phantom") == 0
    # 12 events stated (counted by hand in the corpus files), all expressible since the
    # partial forms (a controller change without its epoch: bitnami/charts#12830); the
    # twelfth, a Raft leader's line (bitnami/containers#43226), since issue 27
    assert (result.total("stated"), result.total("inexpressible")) == (12, 0)
    assert result.total("right") >= 0.95 * result.total("stated")


@pytest.mark.skipif(
    not EXTERNAL.is_dir(),
    reason=f"the corpus kept outside the project is not beside this clone ({EXTERNAL})",
)
def test_external_corpus_score() -> None:
    result = score(load_external(EXTERNAL))
    assert result.total("wrong") == 0
    assert result.total("phantom") == 0
    assert result.total("right") >= 0.95 * result.total("stated")


# --------------------------------------------------------------------------- the scoring


def one_file(lines: list[str], statements: list[Statement]) -> CorpusFile:
    return CorpusFile("f", "https://example.invalid", "2.2", "zk", "apache", lines, statements)


SHRINK = (
    "[2022-03-12 18:10:07,139] INFO [Partition orders-7 broker=3] Shrinking ISR from 3,1 to 3."
    " Leader: (highWatermark: 1, endOffset: 2). Out of sync replicas: (brokerId: 1, endOffset: 1)."
    " (kafka.cluster.Partition)"
)
EXPAND = (
    "[2022-03-12 18:10:07,381] INFO [Partition orders-7 broker=3] Expanding ISR from 3 to 3,1"
    " (kafka.cluster.Partition)"
)
CHANGE = {"type": "IsrChange", "topic": "orders", "partition": 7, "leader": 3}


def test_scoring_counts_right_missed_wrong_and_inexpressible() -> None:
    """Two proposals of a broker that logs commits at TRACE (made-up numbers): two
    changes. One statement is right, one has a wrong fact, one cannot be carried."""
    result = score(
        [
            one_file(
                [SHRINK, EXPAND],
                [
                    Statement(1, {**CHANGE, "old_isr": [3, 1], "new_isr": [3]}),
                    Statement(
                        2, {**CHANGE, "old_isr": [3], "new_isr": [3, 4]}
                    ),  # wrong: 1 rejoined
                    Statement(
                        2, {"type": "LeaderAndIsr", "topic": "orders", "partition": 7}
                    ),  # no leader
                ],
            )
        ]
    )
    f = result.files[0]
    assert (f.stated, f.inexpressible, f.right, len(f.missed), len(f.wrong)) == (3, 1, 1, 1, 1)
    assert f.wrong[0]["new_isr"] == [3, 1]
    assert f.phantom == []


def test_matching_rules() -> None:
    emitted = {
        "type": "TopicChange",
        "controller_id": 0,
        "created": {"t": {"0": [1, 3]}},
        "deleted": [],
    }
    assert matches({"type": "TopicChange", "created": {"t": None}}, emitted)
    assert matches({"type": "TopicChange", "created": {"t": {"0": [1, 3]}}}, emitted)
    assert not matches({"type": "TopicChange", "created": {"t": {"0": [3, 1]}}}, emitted)
    assert not matches({"type": "TopicChange", "created": {"u": None}}, emitted)
    assert not matches({"type": "TopicChange", "controller_epoch": 4}, emitted)
    live = {"type": "BrokerChange", "live": [{"id": 2, "epoch": 5}, {"id": 1, "epoch": 4}]}
    assert matches(
        {"type": "BrokerChange", "live": [{"id": 1, "epoch": 4}, {"id": 2, "epoch": 5}]}, live
    )
