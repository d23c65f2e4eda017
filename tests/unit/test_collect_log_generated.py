"""``collect logs`` on the generated corpus (tests/unit/data/kafka_logs/generated/): lines
real brokers of each Kafka release wrote in this project's lab, with expectations from
Kafka's own ground truth (bench/log_corpus_matrix.py, tests/log_corpus_expect.py). No
broker starts here: the committed runs are replayed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.log_corpus import GENERATED_DIR, CorpusFile, load_generated, score
from tests.log_corpus_expect import expectations
from tests.log_corpus_wordings import DOC, doc_table, table

GENERATED = load_generated()
RUNS = sorted(path for path in GENERATED_DIR.iterdir() if (path / "run.json").exists())


def test_every_run_has_its_configuration_command_ground_truth_and_layouts() -> None:
    assert {run.name for run in RUNS} >= {"4.1-kraft", "3.9-zookeeper"}
    for run in RUNS:
        assert (run / "command.txt").read_text().startswith("python bench/log_corpus_matrix.py")
        assert list((run / "config").glob("broker-*.properties"))
        assert (run / "ground-truth.jsonl").exists()
    layouts = {f.layout for f in GENERATED}
    assert {"apache", "console", "strimzi", "compose"} <= layouts


@pytest.mark.parametrize("run", RUNS, ids=lambda run: run.name)
def test_expectations_are_what_the_ground_truth_gives(run: Path) -> None:
    """expect.jsonl is the output of tests/log_corpus_expect.py on the committed ground
    truth and lines (never the collector's)."""
    committed = [json.loads(line) for line in (run / "expect.jsonl").read_text().splitlines()]
    assert committed == expectations(run)


@pytest.mark.parametrize(
    "corpus", GENERATED, ids=[corpus.name.replace(" ", "-") for corpus in GENERATED]
)
def test_generated_corpus_score(corpus: CorpusFile) -> None:
    """Issue 27's goal, per run and layout: at least 98 % of the stated events emitted
    with the right facts, none wrong, none about a partition no line names."""
    result = score([corpus])
    assert result.total("phantom") == 0
    assert result.total("wrong") == 0
    assert result.total("right") >= 0.98 * result.total("stated")


def test_the_docs_wording_table_is_the_corpus() -> None:
    """docs/collectors-logs.md's 'Wordings real brokers wrote' is made from the corpus
    (python -m tests.log_corpus_wordings --write)."""
    assert doc_table(DOC.read_text(encoding="utf-8")) == table()
