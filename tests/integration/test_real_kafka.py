"""isrwatch on real Apache Kafka: ``isrwatch lab`` on a 3-node Kafka 4.1 KRaft cluster
started from the Maven jars (``make kafka``), scored against Kafka's own decisions.

The short run of docs/real-kafka.md: a follower paused while the producers write (the
leader's rule; then the controller's fence), then a leader killed (an election). The
scoreboard is printed; what is asserted does not depend on timing: Kafka did what the
scenario is about (its own metadata log and log lines say so), every change it committed
reached a health record, every partition's final leader and ISR equal Kafka's, and the
lab leaves no process and no port behind.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from streaming.tools.embedded_broker import bindable, free_port
from streaming.tools.lab.distribution import LINES, installed
from streaming.tools.lab.scoreboard import score_workdir
from tests.processes import descendants, still_running

LAG_TIME_MAX_MS = 6000


def lab(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "streaming.cli", "lab", *arguments]


def test_lab_on_kafka_4_1_is_scored_against_kafka_and_leaves_nothing_behind(
    tmp_path: Path,
) -> None:
    assert installed(LINES["4.1"]), "Kafka 4.1's jars are missing: `make kafka`"
    workdir = tmp_path / "lab"
    port = free_port()
    command = lab(
        "--scenario",
        "pause-then-election",
        "--lag-time-max-ms",
        str(LAG_TIME_MAX_MS),
        "--after-scenario",
        "20",
        "--no-live",
        "--metrics-port",
        str(port),
        "--workdir",
        str(workdir),
    )
    running = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen: dict[int, str] = {}
    while running.poll() is None:
        seen |= descendants(running.pid)
        time.sleep(1)
    output = running.stdout.read().decode() if running.stdout else ""
    assert running.returncode == 0, output + _tail(workdir / "isrwatch-lab.log")
    assert "Stopping: time is up" in output
    for done in ("pause broker", "resume broker", "kill broker", "start broker"):
        assert done in output

    described = json.loads((workdir / "cluster.json").read_text())
    assert described["kafka_version"] == "4.1.1"
    assert described["mode"] == "kraft"
    assert {broker["id"] for broker in described["brokers"]} == {1, 2, 3}

    score, truth = score_workdir(workdir)
    print("scoreboard:", json.dumps(score.row()))
    # Kafka did what the scenario is about, by its own records
    assert score.leader_shrinks, "no leader-driven shrink in Kafka's logs"
    assert any(change.leader_changed for change in truth.changes), "no election"
    # isrwatch saw all of it, and ends where Kafka ends
    assert score.unseen_changes == []
    assert score.final_differs == []
    assert len(score.final_equal) == 12  # 4 topics x 3 partitions
    # Spark's progress reports reached the lab's progress log: the batches that read the
    # collectors' events, with their durations
    assert score.batch_ms, "no micro-batch with input in progress.jsonl"

    deadline = time.monotonic() + 15  # orphans are reaped by init, not instantly
    while still_running(seen) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert seen, "no broker, collector or Spark process was seen"
    assert not still_running(seen), f"left running: {still_running(seen)}"
    for broker in described["brokers"]:
        assert bindable(broker["port"]), f"broker {broker['id']}'s port is still taken"
    assert bindable(port)


def _free_range_outside_the_ephemeral_ports(size: int) -> int:
    """The first port of ``size`` consecutive free ports below the kernel's ephemeral
    range. A range inside it can lose a port to any outgoing connection between the
    check and the lab's own check (CI saw the lab name a port the test had not taken)."""
    ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for base in range(20000, ephemeral_low - size, size):
        if all(bindable(port) for port in range(base, base + size)):
            return base
    raise AssertionError(f"no {size} free ports between 20000 and {ephemeral_low}")


def test_a_taken_port_is_named_and_nothing_starts(tmp_path: Path) -> None:
    base = _free_range_outside_the_ephemeral_ports(16)  # 4 ports for each of 4 nodes
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", base + 4))  # broker 1's client port
        holder.listen()
        done = subprocess.run(
            lab(
                "--port-base", str(base), "--seconds", "5", "--no-live", "--workdir", str(tmp_path)
            ),
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode != 0
    assert f"port {base + 4} (for broker 1) is taken by another process" in done.stderr
    assert "--port-base" in done.stderr
    assert not list(tmp_path.glob("broker-*/stdout.log")), "a broker was started"


def test_without_maven_or_the_jars_the_lab_says_how_to_get_them(tmp_path: Path) -> None:
    empty_cache = tmp_path / "cache"
    java_only = tmp_path / "bin"
    java_only.mkdir()
    (java_only / "java").symlink_to(_java())
    env = {
        **os.environ,
        "LAB_JVM_CACHE": str(empty_cache),
        "PATH": f"{java_only}:{Path(sys.executable).parent}",
    }
    env.pop("JAVA_HOME", None)
    done = subprocess.run(
        lab(
            "--seconds",
            "5",
            "--no-live",
            "--metrics-port",
            str(free_port()),
            "--workdir",
            str(tmp_path / "lab"),
        ),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode != 0
    assert "Maven is not installed" in done.stderr
    assert "make kafka" in done.stderr


def test_a_fault_for_a_lab_that_is_not_running_says_so(tmp_path: Path) -> None:
    done = subprocess.run(
        lab("fault", "pause", "--broker", "2", "--workdir", str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert f"no lab is running in {tmp_path}" in done.stderr


def _java() -> str:
    import shutil

    found = shutil.which("java")
    assert found is not None
    return str(Path(found).resolve())


def _tail(path: Path, lines: int = 40) -> str:
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
