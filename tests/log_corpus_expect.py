"""The expectations of the generated corpus (tests/unit/data/kafka_logs/generated/): which
lines state which contract events, with facts taken from Kafka's ground truth.

A run's ``ground-truth.jsonl`` holds what Kafka stored (ZooKeeper's transactions or
``__cluster_metadata``: ``streaming.tools.lab.ground_truth``). Here each ground-truth
change is looked for in the brokers' lines by its identity only: the broker that logs it,
its time, the topic-partition and the number that names the change (a controller epoch, a
zkVersion / partition epoch, an ISR). The facts of a statement then come from the ground
truth, never from the line and never from the collector:

* ``ControllerChange``: an election (controller id, epoch), stated by a line of the
  elected broker within ``WINDOW_MS`` that says ``elected``, ``active controller``,
  ``incremented`` or ``transition to Leader`` and names the epoch;
* ``BrokerChange``: a controller line listing the live brokers or their epochs
  (``all live brokers``, ``broker epochs cache``): the live registrations and their epochs
  (czxid) at that line's time, once per change of that set;
* ``TopicChange``: a creation, stated by the controller's ``New topics`` / ``Created
  topic`` line naming the topic (its assignment from the ground truth); a deletion, by the
  controller's line that the topic's deletion completed or that it was removed;
* ``LeaderAndIsr``: a partition state version, by any line naming the partition, a
  LeaderAndIsr request's partition state and the version (``zkVersion=V``,
  ``partitionEpoch=V``): the full state; and by a broker's ``starts at leader epoch E ...
  partition epoch V`` line or the controller's ``Changed partition T-P from ... with state
  LeaderAndIsr(...)``: the partial form (topic, partition, leader), once per version;
* ``UpdateMetadata``: a broker's ``Cached leader info`` line naming the version: that
  broker's cached state, one per line (its replicas ``{"one_of": [...]}`` when a
  reassignment wrote the assignment between the state and the line; ``Deleted partition
  ... from metadata cache``: the removal, leader -2 in the contract's form);
* ``IsrChange``: a version whose ISR the leader changed (``_isr_changes`` says how that is
  told),
  stated by the leader's line naming the partition, ``ISR`` and the new ISR within
  ``WINDOW_MS``; its partition epoch when the line names the version, its old ISR when the
  line says ``from <old ISR>``.

``python -m tests.log_corpus_expect DIR...`` writes ``expect.jsonl`` in each run
directory; the unit tests check that the committed files are what this computes.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

WINDOW_MS = 15_000
"""How long after a ground-truth change its line may come (a controller processes a
ZooKeeper notification or a metadata record after its queue)."""

ISR_WINDOW_MS = 5_000
"""How far from its ground-truth change a leader's ISR line may be: the proposal comes
just before the write, the commit line just after the response."""

_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})[,.](\d{3})")


@dataclass(frozen=True)
class Line:
    file: str  # "broker-2/state-change.log"
    number: int  # 1-based
    broker: int
    ts: int
    text: str


def read_lines(files: Mapping[str, Sequence[str]]) -> list[Line]:
    """The lines of a layout's files with their broker (the directory) and time (UTC, as
    the lab's JVMs log)."""
    out = []
    for name, lines in sorted(files.items()):
        broker = int(name.split("/")[0].removeprefix("broker-"))
        for number, text in enumerate(lines, 1):
            match = _TIME.search(text[:60])
            if match is None:
                continue
            when = datetime.strptime(f"{match[1]} {match[2]}", "%Y-%m-%d %H:%M:%S")
            ts = int(when.replace(tzinfo=UTC).timestamp() * 1000) + int(match[3])
            out.append(Line(name, number, broker, ts, text))
    return out


def _partition_names(topic: str, partition: int) -> re.Pattern[str]:
    t = re.escape(topic)
    return re.compile(
        rf"(?:\b{t}-{partition}\b|\[{t},{partition}\]"
        rf"|topicName='{t}', partitionIndex={partition}\b)"
    )


def _isr_text(isr: Iterable[int]) -> re.Pattern[str]:
    ids = list(isr)
    return re.compile(r"(?<![\d,])\[?" + r",\s?".join(map(str, ids)) + r"\]?(?![\d,])")


@dataclass(frozen=True)
class Statement:
    file: str
    line: int
    event: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "event": self.event}


def load_truth(path: Path) -> dict[str, list[dict[str, Any]]]:
    truth: dict[str, list[dict[str, Any]]] = {}
    for text in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(text)
        if "kind" in row:
            truth.setdefault(row.pop("kind"), []).append(row)
    return truth


def _controller_at(truth: Mapping[str, list[dict[str, Any]]], ts: int) -> int | None:
    elected = [e for e in truth.get("elections", []) if e["ts"] <= ts]
    return max(elected, key=lambda e: e["ts"])["controller_id"] if elected else None


def statements(
    truth: Mapping[str, list[dict[str, Any]]],
    files: Mapping[str, Sequence[str]],
    mode: str = "zookeeper",
) -> list[Statement]:
    lines = read_lines(files)
    out: list[Statement] = []
    out += _elections(truth, lines)
    out += _controllers_seen(truth, lines)
    out += _broker_changes(truth, lines)
    out += _topic_changes(truth, lines)
    out += _partition_states(truth, lines)
    out += _isr_changes(truth, lines, mode)
    return sorted(out, key=lambda s: (s.file, s.line, json.dumps(s.event, sort_keys=True)))


def _first(lines: Iterable[Line]) -> Line | None:
    return next(iter(sorted(lines, key=lambda line: (line.ts, line.file, line.number))), None)


def _elections(truth: Mapping[str, list[dict[str, Any]]], lines: list[Line]) -> list[Statement]:
    out = []
    said = re.compile(r"(?i)elected|active controller|incremented|transition to leader")
    for election in truth.get("elections", []):
        epoch = re.compile(rf"\b{election['controller_epoch']}\b")
        found = _first(
            line
            for line in lines
            if line.broker == election["controller_id"]
            and election["ts"] - 2000 <= line.ts <= election["ts"] + WINDOW_MS
            and said.search(line.text)
            and epoch.search(line.text)
        )
        if found is not None:
            event = {
                "type": "ControllerChange",
                "controller_id": election["controller_id"],
                "controller_epoch": election["controller_epoch"],
            }
            out.append(Statement(found.file, found.number, event))
    return out


def _registered_by(truth: Mapping[str, list[dict[str, Any]]], broker: int, ts: int) -> int | None:
    """The epoch of ``broker``'s latest registration made by ``ts``."""
    made = [r for r in truth.get("registrations", []) if r["broker"] == broker and r["ts"] <= ts]
    return max(made, key=lambda r: r["ts"])["epoch"] if made else None


_LISTED = re.compile(r"(?i)all live brokers: ([\d,]*)|broker epochs cache: \w*\((.*)\)")


def _controllers_seen(
    truth: Mapping[str, list[dict[str, Any]]], lines: list[Line]
) -> list[Statement]:
    """A broker's line that another broker has been elected (it lost the election, or
    found a controller in place): the partial ControllerChange, one per line."""
    out = []
    said = re.compile(r"(?i)has been elected|elected as leader instead")
    for line in lines:
        controller = _controller_at(truth, line.ts)
        if (
            controller is not None
            and controller != line.broker
            and said.search(line.text)
            and re.search(rf"\b{controller}\b", line.text)
        ):
            event = {"type": "ControllerChange", "controller_id": controller}
            out.append(Statement(line.file, line.number, event))
    return out


def _broker_changes(
    truth: Mapping[str, list[dict[str, Any]]], lines: list[Line]
) -> list[Statement]:
    """The live set a controller line lists is the controller's read of ZooKeeper, a moment
    before the line: the line gives which brokers (its identity), the ground truth their
    epochs (each one's latest registration by then)."""
    out = []
    # Kafka before 2.2 had no broker epochs (KIP-380): its lines name none, and the
    # statement gives the live brokers only.
    epochs_stated = any(
        "broker epoch" in line.text or "epochs cache" in line.text for line in lines
    )
    last: dict[int, dict[int, int | None]] = {}
    for line in sorted(lines, key=lambda line: (line.ts, line.file, line.number)):
        listed = _LISTED.search(line.text)
        if listed is None or _controller_at(truth, line.ts) != line.broker:
            continue
        text = listed[1] if listed[1] is not None else re.sub(r"-> \d+", "", listed[2])
        ids = sorted({int(b) for b in re.findall(r"\d+", text)})
        live = {b: _registered_by(truth, b, line.ts) for b in ids}
        if last.get(line.broker) == live:
            continue  # the same change, said again (Updated broker epochs cache after it)
        last[line.broker] = live
        event = {
            "type": "BrokerChange",
            "controller_id": line.broker,
            "live": [
                {"id": b, "epoch": e} if epochs_stated else {"id": b}
                for b, e in sorted(live.items())
                if e is not None or not epochs_stated
            ],
        }
        out.append(Statement(line.file, line.number, event))
    return out


def _topic_changes(truth: Mapping[str, list[dict[str, Any]]], lines: list[Line]) -> list[Statement]:
    out = []
    created_said = re.compile(r"(?i)new topics|created topic|createtopics result.*success")
    deleted_said = re.compile(
        r"(?i)deletion of topic \S+ successfully completed|removed topic"
        r"|deletetopics result.*success"
    )
    for creation in truth.get("creations", []):
        name = re.compile(rf"\b{re.escape(creation['topic'])}\b")
        controller = _controller_at(truth, creation["ts"])
        found = _first(
            line
            for line in lines
            if line.broker == controller
            and creation["ts"] - 2000 <= line.ts <= creation["ts"] + WINDOW_MS
            and created_said.search(line.text)
            and name.search(line.text)
        )
        if found is not None:
            assignment = {p: list(r) for p, r in creation["assignment"].items()}
            event = {"type": "TopicChange", "created": {creation["topic"]: assignment}}
            out.append(Statement(found.file, found.number, event))
    for deletion in truth.get("deletions", []):
        name = re.compile(rf"\b{re.escape(deletion['topic'])}\b")
        controller = _controller_at(truth, deletion["ts"])
        found = _first(
            line
            for line in lines
            if line.broker == controller
            and deletion["ts"] - 2000 <= line.ts <= deletion["ts"] + WINDOW_MS
            and deleted_said.search(line.text)
            and name.search(line.text)
        )
        if found is not None:
            event = {"type": "TopicChange", "deleted": [deletion["topic"]]}
            out.append(Statement(found.file, found.number, event))
    return out


_VERSION = re.compile(
    r"(?:zkVersion=|partitionEpoch=|ZkVersion:|PartitionEpoch:|partition epoch )(\d+)"
)


# A LeaderAndIsr request's partition state: received by a broker or sent by the controller.
# (Not the controller's DEBUG "ISR for partition T-P updated to LeaderAndIsr(...)", which is
# the leader's ISR change, stated as such.)
_LEADER_AND_ISR_STATE = re.compile(
    r"LeaderAndIsr request \w*PartitionState\(|LeaderAndIsrPartitionState\("
)


# Kafka 0.10's wording prints the request's replicas from a Set (PartitionState.replicas),
# not in the assignment's order: such a line states no replica order, and without it the
# contract's LeaderAndIsr is the partial form.
_REPLICA_SET = re.compile(r"Broker \d+ received LeaderAndIsr request PartitionState\(")


def _partition_states(
    truth: Mapping[str, list[dict[str, Any]]], lines: list[Line]
) -> list[Statement]:
    out: list[Statement] = []
    full: set[tuple[str, int, int]] = set()
    partial: dict[tuple[str, int, int], Statement] = {}
    for version in truth.get("partitions", []):
        names = _partition_names(version["topic"], version["partition"])
        key = (version["topic"], version["partition"], version["partition_epoch"])
        incarnation = _incarnation(truth, version)
        for line in sorted(lines, key=lambda line: (line.ts, line.file, line.number)):
            if not (incarnation[0] <= line.ts < incarnation[1]) or not names.search(line.text):
                continue
            named = _VERSION.search(line.text)
            if named is None or int(named[1]) != version["partition_epoch"]:
                continue
            state = {
                "topic": version["topic"],
                "partition": version["partition"],
                "leader": version["leader"],
                "leader_epoch": version["leader_epoch"],
                "isr": version["isr"],
                "replicas": version["replicas"],
            }
            if "Cached leader info" in line.text:
                replicas = _replicas_sent(truth, version, line.ts)
                event = {
                    "type": "UpdateMetadata",
                    "broker": line.broker,
                    **state,
                    "replicas": replicas,
                }
                out.append(Statement(line.file, line.number, event))
            elif _LEADER_AND_ISR_STATE.search(line.text) and key not in full:
                full.add(key)
                event = {
                    "type": "LeaderAndIsr",
                    **state,
                    "partition_epoch": version["partition_epoch"],
                }
                if _REPLICA_SET.search(line.text):
                    event = {k: event[k] for k in ("type", "topic", "partition", "leader")}
                out.append(Statement(line.file, line.number, event))
            leadership = (
                "starts at leader epoch" in line.text or "with state LeaderAndIsr(" in line.text
            )
            if leadership and key not in partial:
                event = {
                    "type": "LeaderAndIsr",
                    "topic": version["topic"],
                    "partition": version["partition"],
                    "leader": version["leader"],
                }
                partial[key] = Statement(line.file, line.number, event)
    # Each broker that starts leading or following logs it before (or without) the full
    # state: the partial statement stands beside a full one of the same version.
    out += list(partial.values())
    out += _preferred_leaders(truth, lines)
    out += _removals(truth, lines)
    return out


def _replicas_sent(
    truth: Mapping[str, list[dict[str, Any]]], version: Mapping[str, Any], ts: int
) -> list[int] | dict[str, list[list[int]]]:
    """The replicas a controller sent with a partition state that a broker cached at
    ``ts``: the assignment when the state was written, or one a reassignment wrote after
    it (UpdateMetadata carries the current state with the assignment of the moment). The
    broker logs when it applies the request, not when it was sent: when an assignment
    was written in between, the ground truth allows each, and the statement says so
    (``{"one_of": [...]}``)."""
    later = [
        list(a["assignment"][str(version["partition"])])
        for a in truth.get("assignments", [])
        if a["topic"] == version["topic"] and version["ts"] < a["ts"] <= ts
    ]
    candidates = [list(version["replicas"])]
    candidates += [replicas for replicas in later if replicas not in candidates]
    return candidates[0] if len(candidates) == 1 else {"one_of": candidates}


def _preferred_leaders(
    truth: Mapping[str, list[dict[str, Any]]], lines: list[Line]
) -> list[Statement]:
    """The controller's line that a partition's preferred leader election completed: the
    partial LeaderAndIsr (its leader by then), one per line."""
    out = []
    for line in lines:
        if not re.search(
            r"(?i)(?<!failed to )completed preferred replica leader election", line.text
        ):
            continue
        for version in reversed(truth.get("partitions", [])):
            names = _partition_names(version["topic"], version["partition"])
            if version["ts"] <= line.ts and names.search(line.text):
                event = {
                    "type": "LeaderAndIsr",
                    "topic": version["topic"],
                    "partition": version["partition"],
                    "leader": version["leader"],
                }
                out.append(Statement(line.file, line.number, event))
                break
    return out


def _incarnation(
    truth: Mapping[str, list[dict[str, Any]]], version: Mapping[str, Any]
) -> tuple[int, int]:
    """From the topic's creation to its deletion (+ WINDOW_MS): a version number names a
    state of one incarnation of the topic only."""
    created = [c["ts"] for c in truth.get("creations", []) if c["topic"] == version["topic"]]
    deleted = [d["ts"] for d in truth.get("deletions", []) if d["topic"] == version["topic"]]
    start = max([ts for ts in created if ts <= version["ts"]] or [0]) - 2000
    end = min([ts for ts in deleted if ts >= version["ts"]] or [2**62]) + WINDOW_MS
    return start, end


def _removals(truth: Mapping[str, list[dict[str, Any]]], lines: list[Line]) -> list[Statement]:
    """``Deleted partition T-P from metadata cache``: a broker removed a partition of a
    topic being deleted; the contract's form of it is leader -2 with no state."""
    out = []
    for deletion in truth.get("deletions", []):
        removal = re.compile(
            rf"Deleted partition {re.escape(deletion['topic'])}-(\d+) from metadata cache"
        )
        for line in lines:
            match = removal.search(line.text)
            if match and deletion["ts"] - WINDOW_MS <= line.ts <= deletion["ts"] + WINDOW_MS:
                event = {
                    "type": "UpdateMetadata",
                    "broker": line.broker,
                    "topic": deletion["topic"],
                    "partition": int(match[1]),
                    "leader": -2,
                    "leader_epoch": 0,
                    "isr": [],
                    "replicas": [],
                }
                out.append(Statement(line.file, line.number, event))
    return out


def _names_version(text: str, partition_epoch: int) -> bool:
    """The line names no version, or this one."""
    named = re.search(r"(?i)version updated to \[?(\d+)", text)
    return named is None or int(named[1]) == partition_epoch


def _isr_changes(
    truth: Mapping[str, list[dict[str, Any]]], lines: list[Line], mode: str
) -> list[Statement]:
    """The leader's ISR changes: in ZooKeeper mode a version whose ISR changed under the
    same leader and leader epoch (the leader's write, or AlterIsr's, keeps the epoch; the
    controller's removal of a dead or reassigned replica bumps it, and a leader's proposal
    at the same moment is cancelled: a real 2.0.1 broker logged "Cached zkVersion [9] not
    equal to that in zookeeper, skip updating ISR" after one); in KRaft under the same
    leader (3.3 to 3.5 bump the leader epoch when they apply the leader's shrink). One
    line states one change: a line that fits several versions (a proposal names no
    version) goes to the one nearest in time."""
    versions = truth.get("partitions", [])
    candidates: list[tuple[int, Mapping[str, Any], Line]] = []  # version index, previous
    before: dict[tuple[str, int], Mapping[str, Any]] = {}
    for index, version in enumerate(versions):
        key = (version["topic"], version["partition"])
        previous = before.get(key)
        before[key] = version
        if (
            previous is None
            or previous["leader"] != version["leader"]
            or previous["isr"] == version["isr"]
            or version["leader"] < 0
            or (mode == "zookeeper" and previous["leader_epoch"] != version["leader_epoch"])
        ):
            continue  # not the leader's change of the ISR
        names = _partition_names(*key)
        new = _isr_text(version["isr"])
        candidates += [
            (index, previous, line)
            for line in lines
            if line.broker == version["leader"]
            and version["ts"] - ISR_WINDOW_MS <= line.ts <= version["ts"] + ISR_WINDOW_MS
            and _names_version(line.text, version["partition_epoch"])
            and names.search(line.text)
            and "ISR" in line.text
            and "LeaderAndIsr" not in line.text
            and "starts at leader epoch" not in line.text
            and re.search(r"\bto\s+" + new.pattern, line.text)
        ]
    nearest: dict[tuple[str, int], tuple[int, int]] = {}  # line -> (distance, version index)
    for index, _, line in candidates:
        distance = abs(line.ts - versions[index]["ts"])
        where = (line.file, line.number)
        if where not in nearest or distance < nearest[where][0]:
            nearest[where] = (distance, index)
    said: dict[int, tuple[Mapping[str, Any], list[Line]]] = {}
    for index, previous, line in candidates:
        if nearest[(line.file, line.number)][1] == index:
            said.setdefault(index, (previous, []))[1].append(line)
    out = []
    for index, (previous, stating) in sorted(said.items()):
        version = versions[index]
        event: dict[str, Any] = {
            "type": "IsrChange",
            "topic": version["topic"],
            "partition": version["partition"],
            "leader": version["leader"],
            "new_isr": version["isr"],
        }
        if any(
            (m := re.search(r"(?i)version updated to \[?(\d+)", line.text))
            and int(m[1]) == version["partition_epoch"]
            for line in stating
        ):
            event["partition_epoch"] = version["partition_epoch"]
        old = _isr_text(previous["isr"])
        if any(re.search(r"\bfrom\s+" + old.pattern, line.text) for line in stating):
            event["old_isr"] = previous["isr"]
        first = _first(stating)
        assert first is not None
        out.append(Statement(first.file, first.number, event))
    return out


# --------------------------------------------------------------------------- files


def layout_files(run: Path, layout: str) -> dict[str, list[str]]:
    """``logs/<layout>/broker-N/<file>`` of a run directory -> {"broker-N/<file>": lines}."""
    base = run / "logs" / layout
    return {
        str(path.relative_to(base)): path.read_text(encoding="utf-8").splitlines()
        for path in sorted(base.glob("broker-*/*"))
    }


def layouts(run: Path) -> list[str]:
    return sorted(path.name for path in (run / "logs").iterdir() if path.is_dir())


def expectations(run: Path) -> list[dict[str, Any]]:
    truth = load_truth(run / "ground-truth.jsonl")
    mode = json.loads((run / "run.json").read_text(encoding="utf-8"))["mode"]
    rows = []
    for layout in layouts(run):
        for statement in statements(truth, layout_files(run, layout), mode):
            rows.append({"layout": layout, **statement.to_json()})
    return rows


def write_expectations(run: Path) -> Path:
    path = run / "expect.jsonl"
    rows = expectations(run)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def main(argv: Sequence[str]) -> int:
    for directory in argv:
        print(write_expectations(Path(directory)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
