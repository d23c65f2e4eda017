"""How well ``collect logs`` reads real broker logs: events stated, emitted, wrong.

A corpus file holds real lines copied from one public source (its URL, Kafka version,
mode and layout named in the file) and, written by hand, the contract events those lines
state, with the facts they state (``expect``). This module runs the collector exactly as
``isrwatch collect logs --dry-run`` does on each file, then matches:

* **stated**: the expectations;
* **inexpressible**: stated events that lack a field the contract requires even in its
  partial form (docs/event-contract.md): no event can carry them without inventing a
  fact, so the collector must send none;
* **right**: stated events matched by an emitted event with every stated fact equal;
* **wrong**: emitted events that match no statement (a wrong fact, or an event nobody
  stated); **phantom**: emitted events whose topic no line of the file names.

Run it: ``python -m tests.log_corpus [--external DIR]`` (DIR: a directory of ``*.log``
files with an ``expected.jsonl``, one object per physical line: ``file``, ``line_no``,
``expect``). The unit tests call the same functions.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streaming.config import LogCollectorSettings
from streaming.feeds.collectors.log_collector import LogCollector
from streaming.feeds.collectors.metrics import CollectorMetrics
from streaming.feeds.wire import InputRecord

CORPUS_DIR = Path(__file__).parent / "unit" / "data" / "kafka_logs" / "corpus"
GENERATED_DIR = Path(__file__).parent / "unit" / "data" / "kafka_logs" / "generated"
COMPOSE_LAYOUT = "compose"
"""The console layout as ``docker compose logs`` prints it: each line behind its service's
``kafka-N  | ``, added by ``load_generated`` (the brokers' console files are the same
lines docker compose would read)."""

# The fields each contract event must carry (conf/schemas/controller-events.schema.json;
# the partial forms of LeaderAndIsr, IsrChange and ControllerChange need fewer); ``ts`` is
# left out, as statements do not repeat it.
REQUIRED: Mapping[str, frozenset[str]] = {
    "LeaderAndIsr": frozenset({"topic", "partition", "leader"}),
    "IsrChange": frozenset({"topic", "partition", "leader", "new_isr"}),
    "UpdateMetadata": frozenset(
        {"broker", "topic", "partition", "leader", "leader_epoch", "isr", "replicas"}
    ),
    "BrokerChange": frozenset({"live"}),
    "ControllerChange": frozenset({"controller_id"}),
    "TopicChange": frozenset(),
}


@dataclass(frozen=True)
class Statement:
    line: int  # 1-based
    event: Mapping[str, Any]
    file: str | None = None  # of a corpus of several files: which one

    @property
    def expressible(self) -> bool:
        return REQUIRED.get(str(self.event["type"]), frozenset()) <= set(self.event)


@dataclass(frozen=True)
class CorpusFile:
    name: str
    source: str
    kafka_version: str
    mode: str
    layout: str
    lines: Sequence[str]
    statements: Sequence[Statement]
    collect_layout: str | None = None
    files: Mapping[str, Sequence[str]] | None = None  # several files: name -> lines


@dataclass
class FileScore:
    name: str
    stated: int = 0
    inexpressible: int = 0
    right: int = 0
    wrong: list[Mapping[str, Any]] = field(default_factory=list)
    phantom: list[Mapping[str, Any]] = field(default_factory=list)
    missed: list[Statement] = field(default_factory=list)
    emitted: int = 0


@dataclass
class Score:
    files: list[FileScore]

    def total(self, name: str) -> int:
        return sum(len(v) if isinstance(v := getattr(f, name), list) else v for f in self.files)

    @property
    def expressible(self) -> int:
        return self.total("stated") - self.total("inexpressible")


# --------------------------------------------------------------------------- loading


def load_corpus(directory: Path = CORPUS_DIR) -> list[CorpusFile]:
    files = []
    for path in sorted(directory.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        files.append(
            CorpusFile(
                name=path.stem,
                source=doc["source"],
                kafka_version=doc["kafka_version"],
                mode=doc["mode"],
                layout=doc["layout"],
                lines=doc["lines"],
                statements=[Statement(s["line"], s["event"]) for s in doc["expect"]],
                collect_layout=doc.get("collect_layout"),
            )
        )
    return files


def load_external(directory: Path) -> list[CorpusFile]:
    """``*.log`` files and their ``expected.jsonl`` (a corpus kept outside the project)."""
    by_file: dict[str, list[Statement]] = {}
    meta: dict[str, Mapping[str, Any]] = {}
    for text in (directory / "expected.jsonl").read_text(encoding="utf-8").splitlines():
        if not text.strip():
            continue
        row = json.loads(text)
        meta.setdefault(row["file"], row)
        if row.get("expect"):
            by_file.setdefault(row["file"], []).append(Statement(row["line_no"], row["expect"]))
    files = []
    for path in sorted(directory.glob("*.log")):
        row = meta.get(path.name, {})
        files.append(
            CorpusFile(
                name=path.stem,
                source=str(path),
                kafka_version=str(row.get("kafka_version", "?")),
                mode=str(row.get("mode", "?")),
                layout="as found",
                lines=path.read_text(encoding="utf-8").splitlines(),
                statements=by_file.get(path.name, []),
            )
        )
    return files


def load_generated(directory: Path = GENERATED_DIR) -> list[CorpusFile]:
    """The generated corpus (bench/log_corpus_matrix.py): one file set per run and layout,
    with its ``expect.jsonl`` (tests/log_corpus_expect.py, from Kafka's ground truth)."""
    from tests.log_corpus_expect import layout_files, layouts

    files = []
    for run in sorted(path for path in directory.iterdir() if (path / "run.json").exists()):
        about = json.loads((run / "run.json").read_text(encoding="utf-8"))
        rows = [
            json.loads(text)
            for text in (run / "expect.jsonl").read_text(encoding="utf-8").splitlines()
        ]
        for layout in layouts(run):
            logs = layout_files(run, layout)
            statements = [
                Statement(row["line"], row["event"], row["file"])
                for row in rows
                if row["layout"] == layout
            ]
            variants = [(layout, logs)]
            if layout == "console":
                variants.append((COMPOSE_LAYOUT, _behind_compose(logs)))
            for name, variant in variants:
                files.append(
                    CorpusFile(
                        name=f"{run.name} {name}",
                        source=str(run / "command.txt"),
                        kafka_version=about["kafka_version"],
                        mode=about["mode"],
                        layout=name,
                        lines=[],
                        statements=statements,
                        files=variant,
                    )
                )
    return files


def _behind_compose(files: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """``docker compose logs``' prefix, ``<service>-<index>  | `` (Compose v2)."""
    return {
        name: [f"kafka-{name.split('/')[0].removeprefix('broker-')}  | {line}" for line in lines]
        for name, lines in files.items()
    }


# --------------------------------------------------------------------------- running


class _Collected:
    def __init__(self) -> None:
        self.events: list[InputRecord] = []

    def publish(self, events: Sequence[InputRecord]) -> None:
        self.events += events

    def close(self) -> None:
        pass


def emitted_events(corpus_file: CorpusFile) -> list[Mapping[str, Any]]:
    """The events ``collect logs --dry-run`` sends for the file's lines (their values)."""
    settings = LogCollectorSettings(layout=corpus_file.collect_layout)
    publisher = _Collected()
    files = corpus_file.files or {"server.log": corpus_file.lines}
    with tempfile.TemporaryDirectory() as directory:
        paths = []
        for name, lines in sorted(files.items()):
            path = Path(directory) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            paths.append(str(path))
        collector = LogCollector(paths, settings, publisher, CollectorMetrics("logs"), None)
        try:
            collector.run(follow=False, stop=threading.Event())
        finally:
            collector.close()
    return [event.value for event in publisher.events]


def flatten(event: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One fact set per partition (UpdateMetadata) or per topic (TopicChange)."""
    kind = event["type"]
    if kind == "UpdateMetadata":
        base = {k: v for k, v in event.items() if k != "partitions"}
        return [{**base, **state} for state in event["partitions"]]
    if kind == "TopicChange":
        base = {k: v for k, v in event.items() if k not in ("created", "deleted")}
        created = [{**base, "created": {t: p}, "deleted": []} for t, p in event["created"].items()]
        deleted = [{**base, "created": {}, "deleted": [t]} for t in event["deleted"]]
        return created + deleted
    return [dict(event)]


def matches(stated: Mapping[str, Any], emitted: Mapping[str, Any]) -> bool:
    """Every fact ``stated`` gives is the emitted one's (a ``null`` assignment: any; a
    ``{"one_of": [...]}`` value: any of those)."""
    for key, value in stated.items():
        if key not in emitted:
            return False
        if key == "created":
            for topic, partitions in value.items():
                if topic not in emitted["created"]:
                    return False
                if partitions is not None and emitted["created"][topic] != partitions:
                    return False
        elif key == "live":
            # every broker stated, with each fact stated for it (an epoch no line states,
            # Kafka before 2.2's, is left out of the statement)
            by_id = {b["id"]: b for b in emitted[key]}
            if {b["id"] for b in value} != set(by_id):
                return False
            if any(by_id[b["id"]].get(k) != v for b in value for k, v in b.items()):
                return False
        elif isinstance(value, dict) and set(value) == {"one_of"}:
            if emitted[key] not in value["one_of"]:
                return False  # the ground truth allows each of these, and no other
        elif emitted[key] != value:
            return False
    return True


def _topics(event: Mapping[str, Any]) -> set[str]:
    if "topic" in event:
        return {str(event["topic"])}
    return set(event.get("created", {})) | set(event.get("deleted", []))


def score_file(corpus_file: CorpusFile) -> FileScore:
    result = FileScore(corpus_file.name, stated=len(corpus_file.statements))
    emitted: list[Mapping[str, Any]] = [
        fact for event in emitted_events(corpus_file) for fact in flatten(event)
    ]
    result.emitted = len(emitted)
    files = corpus_file.files or {"": corpus_file.lines}
    text = "\n".join(line for lines in files.values() for line in lines)
    unmatched = list(emitted)
    # The most specific statements first: a partial one (a ControllerChange without its
    # epoch) must not take the event a full one of the same decision needs.
    for statement in sorted(corpus_file.statements, key=lambda s: -len(s.event)):
        if not statement.expressible:
            result.inexpressible += 1
            continue
        found = next((e for e in unmatched if matches(statement.event, e)), None)
        if found is None:
            result.missed.append(statement)
        else:
            unmatched.remove(found)
            result.right += 1
    result.wrong = unmatched
    result.phantom = [e for e in emitted if any(t not in text for t in _topics(e))]
    return result


def score(files: Iterable[CorpusFile]) -> Score:
    return Score([score_file(corpus_file) for corpus_file in files])


# --------------------------------------------------------------------------- report


def report(title: str, result: Score) -> str:
    stated, expressible = result.total("stated"), result.expressible
    right, wrong = result.total("right"), result.total("wrong")
    lines = [
        f"{title}: {len(result.files)} files, {stated} events stated, {expressible} of them"
        f" expressible in the contract; {right} emitted with the right facts"
        f" ({_percent(right, expressible)} of expressible, {_percent(right, stated)} of"
        f" stated); {wrong} wrong; {result.total('phantom')} naming an unstated topic",
    ]
    for f in result.files:
        if f.stated or f.emitted or f.wrong:
            lines.append(
                f"  {f.name}: stated {f.stated} (inexpressible {f.inexpressible}),"
                f" right {f.right}, missed {len(f.missed)}, wrong {len(f.wrong)}"
            )
        for statement in f.missed:
            lines.append(f"    missed line {statement.line}: {json.dumps(statement.event)}")
        for event in f.wrong:
            lines.append(f"    wrong: {json.dumps(event)}")
    return "\n".join(lines)


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "n/a"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--external",
        type=Path,
        action="append",
        default=[],
        help="a directory of *.log files and their expected.jsonl",
    )
    parser.add_argument(
        "--generated",
        action="store_true",
        help="score the generated corpus (tests/unit/data/kafka_logs/generated) too",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    print(report("project corpus", score(load_corpus())))
    if args.generated:
        print(report("generated corpus", score(load_generated())))
    for directory in args.external:
        print(report(f"external corpus {directory}", score(load_external(directory))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
