"""The log corpus matrix: real Apache Kafka brokers of each release line write the lines of
tests/unit/data/kafka_logs/generated/ (issue 27).

    python bench/log_corpus_matrix.py --line 4.1-kraft --line 3.9-zookeeper
    python bench/log_corpus_matrix.py --all            # every line of lab MATRIX

Per line, a 3-broker cluster starts from the Maven jars (``streaming.tools.lab``), with
``state.change.logger`` at TRACE and every broker writing Kafka's default files plus the
console layouts of ``node_config.CONSOLE_LAYOUTS`` from the same run, and goes through
the scripted events (``SCRIPT``). Then:

* the ground truth is read from what Kafka stored, never from a log line
  (``streaming.tools.lab.ground_truth``: ZooKeeper's transaction log, or
  ``DumpLogSegments --cluster-metadata-decoder`` on ``__cluster_metadata``);
* the brokers' logs are trimmed to the lines of the scenario's topics and of the
  controller and broker-membership lines (``keep_line``);
* ``tests.log_corpus_expect`` writes the expectations from the ground truth;
* one directory per line and mode is written: ``config/`` (each node's
  ``server.properties`` and the log4j file, as run), ``command.txt``, ``steps.json`` (what
  was done when), ``ground-truth.json``, ``logs/<layout>/broker-N/<file>``.

Nothing here is run by CI: the unit tests replay the committed directories.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # this tree's streaming, not an installed one
    sys.path.insert(0, str(ROOT))

from streaming.tools.lab.cluster import BrokerFault, LabCluster  # noqa: E402
from streaming.tools.lab.distribution import (  # noqa: E402
    LINES,
    MATRIX,
    KafkaLine,
    LabError,
    Mode,
    ensure_installed,
    java_executable,
)
from streaming.tools.lab.ground_truth import (  # noqa: E402
    GroundTruth,
    from_metadata_dump,
    from_zookeeper_log,
    zookeeper_transactions,
)
from streaming.tools.lab.node_config import CONSOLE_LAYOUTS  # noqa: E402
from tests.log_corpus_expect import write_expectations  # noqa: E402

OUT = ROOT / "tests" / "unit" / "data" / "kafka_logs" / "generated"
LAG_TIME_MAX_MS = 6000  # T: shrinks come T to 1.5 T after a follower stops; sessions: 2 T
TOPICS = ("orders", "moving", "doomed")
KAFKA_FILES = ("server.log", "state-change.log", "controller.log")
# The lines whose console layouts (and the docker compose view of them) are committed; the
# others keep Kafka's own files only, to keep the corpus small (every run writes them all).
CONSOLES_KEPT = ("4.1-kraft",)


@dataclass
class Step:
    name: str
    detail: str
    started_ms: int
    ended_ms: int = 0


def now_ms() -> int:
    return int(time.time() * 1000)


class Script:
    """The scripted events, on a started cluster; ``steps`` says what was done when."""

    def __init__(self, cluster: LabCluster, kafka: KafkaLine) -> None:
        self.cluster, self.kafka = cluster, kafka
        self.steps: list[Step] = []
        self._producing = threading.Event()

    @contextlib.contextmanager
    def step(self, name: str, detail: str) -> Iterator[None]:
        step = Step(name, detail, now_ms())
        print(f"  {name}: {detail}", flush=True)
        try:
            yield
        finally:
            step.ended_ms = now_ms()
            self.steps.append(step)

    def admin(self) -> Any:
        from kafka import KafkaAdminClient

        return KafkaAdminClient(
            bootstrap_servers=self.cluster.bootstrap_servers, request_timeout_ms=30000
        )

    def describe(self, topic: str) -> dict[int, dict[str, Any]]:
        admin = self.admin()
        try:
            [described] = admin.describe_topics([topic])
        finally:
            admin.close()
        return {p["partition_index"]: p for p in described.get("partitions", [])}

    def wait_for(self, what: str, check: Callable[[], bool], timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                if check():
                    return
            time.sleep(0.5)
        raise LabError(f"gave up waiting for {what} after {timeout_s:.0f} s")

    def controller(self) -> int | None:
        """The active controller: ZooKeeper mode, the broker of the last ``/controller``
        znode in ZooKeeper's transaction log (the admin client's DescribeCluster fails on
        2.x brokers); KRaft, the lab's reading of the nodes' quorum-state."""
        if self.kafka.mode is Mode.KRAFT:
            return self.cluster.active_controller()
        truth = from_zookeeper_log(
            zookeeper_transactions(self.cluster.workdir / "zookeeper" / "data")
        )
        return truth.elections[-1].controller_id if truth.elections else None

    def run(self) -> None:
        ids = self.cluster.node_ids
        controller = self.controller() or ids[-1]
        a, b = [node for node in ids if node != controller][:2]
        c = controller
        lag_s = LAG_TIME_MAX_MS / 1000
        with self.step(
            "create",
            f"orders [{a},{b},{c}] [{c},{a},{b}], moving [{a},{b}],"
            f" doomed [{a},{c},{b}]; controller {c}",
        ):
            self.create_topics(
                {"orders": [[a, b, c], [c, a, b]], "moving": [[a, b]], "doomed": [[a, c, b]]}
            )
            for topic in TOPICS:
                self.wait_for(
                    f"{topic}'s leaders",
                    lambda t=topic: (
                        all(  # type: ignore[misc]
                            p["leader_id"] >= 0 for p in self.describe(t).values()
                        )
                        and bool(self.describe(t))
                    ),
                )
        producer = threading.Thread(target=self._produce, daemon=True)
        self._producing.set()
        producer.start()
        time.sleep(2)
        with self.step("pause", f"follower {b} paused (SIGSTOP) for 1.5 T + 1 s, then resumed"):
            self.cluster.apply(BrokerFault.PAUSE, b)
            time.sleep(1.5 * lag_s + 1)
            self.cluster.apply(BrokerFault.RESUME, b)
            time.sleep(lag_s + 2)  # the expansion
        with self.step("kill", f"leader {a} of orders-0 killed (SIGKILL), started again"):
            self.cluster.apply(BrokerFault.KILL, a)
            self.wait_for(
                "a new leader of orders-0",
                lambda: self.describe("orders")[0]["leader_id"] not in (-1, a),
                timeout_s=90,
            )
            time.sleep(2)
            self.cluster.apply(BrokerFault.START, a)
            self.wait_for(
                f"{a} back in orders-0's ISR",
                lambda: a in self.describe("orders")[0]["isr_nodes"],
                timeout_s=90,
            )
        with self.step(
            "shutdown", f"broker {b} stopped (SIGTERM: controlled shutdown), started again"
        ):
            self.cluster.apply(BrokerFault.STOP, b)
            time.sleep(2)
            self.cluster.apply(BrokerFault.START, b)
            self.wait_for(
                f"{b} back in orders-0's ISR",
                lambda: b in self.describe("orders")[0]["isr_nodes"],
                timeout_s=90,
            )
        old_controller = self.controller() or c
        with self.step(
            "failover", f"active controller {old_controller} stopped (SIGTERM), started again"
        ):
            self.cluster.apply(BrokerFault.STOP, old_controller)
            self.wait_for(
                "another controller",
                lambda: self.controller() not in (None, old_controller),
                timeout_s=90,
            )
            self.cluster.apply(BrokerFault.START, old_controller)
            time.sleep(4)
        with self.step("reassign", f"moving-0 from [{a},{b}] to [{b},{c}]"):
            self.reassign("moving", 0, [b, c])
            self.wait_for(
                "moving-0 on its new replicas",
                lambda: sorted(self.describe("moving")[0]["replica_nodes"]) == sorted([b, c]),
                timeout_s=90,
            )
            time.sleep(3)
        with self.step("delete", "topic doomed deleted"):
            self.delete_topic("doomed")
            self.wait_for("doomed gone", lambda: "doomed" not in self._topic_names(), timeout_s=90)
            time.sleep(4)
        self._producing.clear()
        producer.join(timeout=10)

    def _topic_names(self) -> set[str]:
        admin = self.admin()
        try:
            return set(admin.list_topics())
        finally:
            admin.close()

    def create_topics(self, assignments: dict[str, list[list[int]]]) -> None:
        """Topics with these replicas: CreateTopics (2.4+; kafka-python asks older brokers
        for a partition count and replication factor, which Kafka refuses beside an
        assignment), else Kafka's own TopicCommand through ZooKeeper."""
        if not _at_least(self.kafka.version, 2, 4):
            for topic, replicas in assignments.items():
                plan = ",".join(":".join(map(str, r)) for r in replicas)
                self._tool(
                    "kafka.admin.TopicCommand",
                    "--create",
                    "--topic",
                    topic,
                    "--replica-assignment",
                    plan,
                )
            return
        from kafka.admin import NewTopic
        from kafka.errors import TopicAlreadyExistsError

        topics = [
            NewTopic(topic, replica_assignments=dict(enumerate(replicas)))
            for topic, replicas in assignments.items()
        ]
        for attempt in range(5):  # a KRaft broker may not know its peers yet (UnknownBrokerId)
            admin = self.admin()
            try:
                admin.create_topics(topics)
                return
            except TopicAlreadyExistsError:
                return
            except Exception:
                if attempt == 4:
                    raise
                time.sleep(2)
            finally:
                admin.close()

    def delete_topic(self, topic: str) -> None:
        if not _at_least(self.kafka.version, 2, 4):
            self._tool("kafka.admin.TopicCommand", "--delete", "--topic", topic)
            return
        admin = self.admin()
        try:
            admin.delete_topics([topic])
        finally:
            admin.close()

    def _tool(self, tool: str, *args: str) -> None:
        """One of Kafka's own admin tools of this release, through ZooKeeper."""
        subprocess.run(
            [
                java_executable(),
                "-Xmx256m",
                "-cp",
                self.kafka.classpath(),
                tool,
                "--zookeeper",
                str(self.cluster.describe()["zookeeper"]),
                *args,
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def reassign(self, topic: str, partition: int, replicas: list[int]) -> None:
        """AlterPartitionReassignments (KIP-455, 2.4+), else ZooKeeper's
        /admin/reassign_partitions znode, which ReassignPartitionsCommand --zookeeper writes
        (0.10 to 2.3)."""
        if _at_least(self.kafka.version, 2, 4):
            from kafka import TopicPartition

            admin = self.admin()
            try:
                admin.alter_partition_reassignments({TopicPartition(topic, partition): replicas})
            finally:
                admin.close()
            return
        plan = {
            "version": 1,
            "partitions": [{"topic": topic, "partition": partition, "replicas": replicas}],
        }
        described = self.cluster.describe()
        subprocess.run(
            [
                java_executable(),
                "-cp",
                self.kafka.classpath(),
                "org.apache.zookeeper.ZooKeeperMain",
                "-server",
                described["zookeeper"],
                "create",
                "/admin/reassign_partitions",
                json.dumps(plan, separators=(",", ":")),
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )

    def _produce(self) -> None:
        from kafka import KafkaProducer

        producer = None
        while self._producing.is_set():
            try:
                if producer is None:
                    producer = KafkaProducer(
                        bootstrap_servers=self.cluster.bootstrap_servers,
                        acks=1,
                        retries=5,
                        request_timeout_ms=5000,
                        max_block_ms=5000,
                    )
                for partition in (0, 1):
                    producer.send("orders", b"x" * 100, partition=partition)
                time.sleep(0.05)
            except Exception:
                time.sleep(0.5)
        if producer is not None:
            with contextlib.suppress(Exception):
                producer.close(timeout=5)


def _at_least(version: str, major: int, minor: int) -> bool:
    parts = [int(p) for p in version.split(".")[:2]]
    return (parts[0], parts[1]) >= (major, minor)


# --------------------------------------------------------------------------- ground truth


def ground_truth(kafka: KafkaLine, workdir: Path) -> tuple[GroundTruth, str]:
    """What Kafka stored, and how it was read (for the corpus' README)."""
    if kafka.mode is Mode.ZOOKEEPER:
        data = workdir / "zookeeper" / "data"
        return (
            from_zookeeper_log(zookeeper_transactions(data)),
            "ZooKeeper's transaction log (zookeeper/data/version-2/log.*), decoded by"
            " streaming.tools.lab.ground_truth",
        )
    dump = workdir / "metadata-dump.txt"
    # The newest line's DumpLogSegments decodes every line's metadata log (the records'
    # format is the same); before 3.7 it printed a LeaderChange control record as its type
    # only, without the leader it names.
    decoder = LINES["4.1"]
    ensure_installed(decoder)
    if not dump.exists():
        dumps = []
        for metadata in sorted(workdir.glob("broker-*/metadata/__cluster_metadata-0")):
            segments = sorted(metadata.glob("*.log"))
            done = subprocess.run(
                [
                    java_executable(),
                    "-Xmx256m",
                    "-cp",
                    decoder.classpath(),
                    "kafka.tools.DumpLogSegments",
                    "--cluster-metadata-decoder",
                    "--files",
                    ",".join(map(str, segments)),
                ],
                capture_output=True,
                text=True,
                check=True,
                timeout=120,
            )
            dumps.append(done.stdout)
        dump.write_text(max(dumps, key=len), encoding="utf-8")
    return (
        from_metadata_dump(dump.read_text(encoding="utf-8")),
        f"kafka.tools.DumpLogSegments --cluster-metadata-decoder (Kafka {decoder.version})"
        " on the longest __cluster_metadata-0 of the nodes, read by"
        " streaming.tools.lab.ground_truth",
    )


# --------------------------------------------------------------------------- the corpus

_INTERNAL = re.compile(r"__consumer_offsets|__transaction_state|__cluster_metadata")
_RELEVANT = re.compile(
    r"(?i)controller|elected|broker epoch|registered broker|live brokers|"
    r"\b(?:{})\b".format("|".join(TOPICS))
)
# Loggers whose lines state none of the events, however often they name a topic or the
# controller: connections, fetchers, log segments, request plumbing.
_NOISE = re.compile(
    r"\((?:org\.apache\.kafka\.clients\.|kafka\.log\.|org\.apache\.kafka\.storage\."
    r"|kafka\.server\.(?:ReplicaFetcher|ReplicaAlterLogDirs|AbstractFetcher|BrokerToController"
    r"|NodeToController|ControllerChannelManager|BrokerLifecycleManager)"
    r"|kafka\.controller\.RequestSendThread|kafka\.network\.|kafka\.utils\.|org\.apache\.zookeeper"
    r"|kafka\.zookeeper\.|org\.apache\.kafka\.raft\.|kafka\.raft\.|org\.apache\.kafka\.image\."
    r"|org\.apache\.kafka\.snapshot\.|kafka\.coordinator\.|org\.apache\.kafka\.coordinator\.)"
    r"|Received response |(?:Handling|Completed) LeaderAndIsr request correlationId"
    # the controller's own account of the requests it sends: the brokers' lines state the
    # same partition states (and the collector reads those)
    # (but not its new partition states: "Changed partition T-P from ... with state ...")
    r"|\[Controller id=\d+ epoch=\d+\] (?:Sending |Changed state of replica"
    r"|Changed partition \S+ state from)"
    r"|Controller \d+ epoch \d+ (?:sending |received response |changed state of replica)"
    r"|\] (?:Add \d+ partitions and deleted|Finished LeaderAndIsr request"
    r"|Handling LeaderAndIsr request)"
)


def keep_entry(line: str) -> bool:
    """The entries the corpus keeps: those naming a scenario topic, and the controller's
    and broker membership lines; never internal topics', never the noise loggers'."""
    if "Completed transition to Leader(" in line:
        return True  # the Raft leader (org.apache.kafka.raft): KRaft's controller election
    return bool(_RELEVANT.search(line)) and not _INTERNAL.search(line) and not _NOISE.search(line)


def trim(lines: list[str], entry_start: re.Pattern[str]) -> list[str]:
    """The kept entries' first lines (stack traces and other continuations are dropped)."""
    return [line for line in lines if entry_start.match(line) and keep_entry(line)]


_ENTRY_START = {
    "apache": re.compile(r"\[\d{4}-\d{2}-\d{2} "),
    "console": re.compile(r"\[\d{4}-\d{2}-\d{2} "),
    "strimzi": re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d"),
}


def write_corpus(kafka: KafkaLine, workdir: Path, out: Path) -> Path:
    """The corpus directory of one run, from the run's directory (the cluster is gone)."""
    truth, truth_source = ground_truth(kafka, workdir)
    target = out / kafka.key
    if target.exists():
        shutil.rmtree(target)
    (target / "config").mkdir(parents=True)
    brokers = sorted(int(home.name.split("-")[1]) for home in workdir.glob("broker-*"))
    for node_id in brokers:
        home = workdir / f"broker-{node_id}"
        shutil.copy(home / "server.properties", target / "config" / f"broker-{node_id}.properties")
        for file in KAFKA_FILES:
            _write_trimmed(
                home / "logs" / file,
                target / "logs" / "apache" / f"broker-{node_id}" / file,
                _ENTRY_START["apache"],
            )
        for console in CONSOLE_LAYOUTS if kafka.key in CONSOLES_KEPT else ():
            name = "strimzi" if "strimzi" in console.file else "console"
            _write_trimmed(
                home / "logs" / console.file,
                target / "logs" / name / f"broker-{node_id}" / console.file,
                _ENTRY_START[name],
            )
    for config in workdir.glob("log4j*.properties"):
        shutil.copy(config, target / "config" / config.name)
    shutil.copy(workdir / "command.txt", target / "command.txt")
    shutil.copy(workdir / "steps.json", target / "steps.json")
    rows = [json.dumps({"source": truth_source})]
    for kind, items in truth.to_json().items():
        rows += [json.dumps({"kind": kind, **item}) for item in items]
    (target / "ground-truth.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    run = {
        "kafka_version": kafka.version,
        "mode": kafka.mode.value,
        "scala": kafka.scala,
        "java": _java_version(),
        "replica_lag_time_max_ms": LAG_TIME_MAX_MS,
        "brokers": brokers,
        "consoles": {c.file: {"pattern": c.pattern, "where": c.where} for c in CONSOLE_LAYOUTS},
    }
    (target / "run.json").write_text(json.dumps(run, indent=1) + "\n", encoding="utf-8")
    write_expectations(target)
    return target


def _write_trimmed(source: Path, target: Path, entry_start: re.Pattern[str]) -> None:
    if not source.exists():
        return
    lines = source.read_text(encoding="utf-8", errors="replace").splitlines()
    kept = trim(lines, entry_start)
    if kept:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(line + "\n" for line in kept), encoding="utf-8")


def _java_version() -> str:
    done = subprocess.run(
        [java_executable(), "-version"], capture_output=True, text=True, check=False
    )
    return done.stderr.splitlines()[0] if done.stderr else "?"


# --------------------------------------------------------------------------- main


def run_line(kafka: KafkaLine, port_base: int, runs: Path) -> Path:
    """Run the script on a new cluster of ``kafka`` in ``runs/<key>``; returns that
    directory, which keeps everything (the corpus is written from it)."""
    ensure_installed(kafka)
    workdir = runs / kafka.key
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    cluster = LabCluster(
        kafka,
        3,
        workdir,
        lag_time_max_ms=LAG_TIME_MAX_MS,
        port_base=port_base,
        consoles=CONSOLE_LAYOUTS,
    )
    script = Script(cluster, kafka)
    try:
        with script.step("start", "3 brokers started, each waited for"):
            cluster.start()
        script.run()
        time.sleep(2)
    finally:
        cluster.stop()
        (workdir / "steps.json").write_text(
            json.dumps([vars(s) for s in script.steps], indent=1) + "\n", encoding="utf-8"
        )
    command = "python bench/log_corpus_matrix.py " + shlex.join(
        ["--line", kafka.key, "--port-base", str(port_base)]
    )
    (workdir / "command.txt").write_text(command + "\n", encoding="utf-8")
    return workdir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--line", action="append", default=[], help=f"one of {', '.join(k.key for k in MATRIX)}"
    )
    parser.add_argument("--all", action="store_true")
    parser.add_argument("--port-base", type=int, default=31000)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--runs",
        type=Path,
        default=Path(tempfile.gettempdir()) / "isrwatch-log-corpus",
        help="where each run's whole directory stays",
    )
    parser.add_argument(
        "--rewrite",
        action="store_true",
        help="write the corpus again from the runs kept in --runs, starting no broker",
    )
    args = parser.parse_args(argv)
    by_key = {k.key: k for k in MATRIX}
    keys = list(by_key) if args.all else args.line
    failed = {}
    for position, key in enumerate(keys):
        print(f"{key}:", flush=True)
        # Each run its own ports: the last run's sockets may linger in TIME_WAIT.
        port_base = args.port_base + 100 * position
        try:
            workdir = (
                args.runs / key if args.rewrite else run_line(by_key[key], port_base, args.runs)
            )
            print(f"  wrote {write_corpus(by_key[key], workdir, args.out)}")
        except Exception as error:  # a line that does not start here is listed, with why
            failed[key] = f"{type(error).__name__}: {error}"
            print(f"  FAILED: {failed[key]}", flush=True)
    if failed:
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / "not-started.json"
        known = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps({**known, **failed}, indent=1) + "\n", encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
