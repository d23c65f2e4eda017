"""The Apache Kafka releases the lab runs, resolved by Maven into a cache git ignores.

``jvm/kafka-<line>/pom.xml`` names a release and the logging binding its published POM
lacks (docs/real-kafka.md#resolving-kafka). ``make kafka`` (and ``.ci/run``) run
``mvn dependency:copy-dependencies`` on it into ``.cache/jvm/kafka-<line>/lib``; the lab
and the tests start brokers from those jars with ``java -cp``. Maven talks to its
registry only; a missing jar at run time is an error that says how to fetch it, never a
download from anywhere else.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

__all__ = [
    "MATRIX",
    "KafkaLine",
    "LabError",
    "Mode",
    "cache_root",
    "ensure_installed",
    "installed",
    "java_executable",
    "project_root",
]


class LabError(Exception):
    """The lab cannot do what was asked; the message says why and how to fix it."""


class Mode(StrEnum):
    KRAFT = "kraft"
    ZOOKEEPER = "zookeeper"


@dataclass(frozen=True)
class KafkaLine:
    """One release line as the lab runs it."""

    name: str  # the --kafka value: "4.1", "3.9"; its jars: jvm/kafka-<name>/pom.xml
    version: str  # the exact release in the POM
    mode: Mode
    log4j2: bool  # Kafka 4.x logs through log4j2; 3.x through log4j 1's API (reload4j)
    scala: str = "2.13"  # the Scala build of kafka_<scala> (2.13 from 2.4 on; 2.12 before)

    @property
    def key(self) -> str:
        """The line and its mode: "3.9-zookeeper", "3.9-kraft"."""
        return f"{self.name}-{self.mode.value}"

    @property
    def slf4j_binding(self) -> str:
        """The logging binding each POM adds (kafka_<scala>'s POM carries none that logs):
        log4j2's for 4.x, reload4j for 3.x, slf4j-log4j12 (log4j 1.2.17) up to 2.8."""
        if self.log4j2:
            return "log4j-slf4j-impl"
        return "slf4j-reload4j" if int(self.version.split(".")[0]) >= 3 else "slf4j-log4j12"

    @property
    def pom(self) -> Path:
        return project_root() / "jvm" / f"kafka-{self.name}" / "pom.xml"

    @property
    def lib(self) -> Path:
        return cache_root() / f"kafka-{self.name}" / "lib"

    def classpath(self) -> str:
        return str(self.lib / "*")


LINES: dict[str, KafkaLine] = {
    "4.1": KafkaLine("4.1", "4.1.1", Mode.KRAFT, log4j2=True),
    "3.9": KafkaLine("3.9", "3.9.1", Mode.ZOOKEEPER, log4j2=False),
}

MATRIX: tuple[KafkaLine, ...] = (
    LINES["4.1"],
    LINES["3.9"],
    KafkaLine("3.9", "3.9.1", Mode.KRAFT, log4j2=False),
    KafkaLine("3.6", "3.6.2", Mode.KRAFT, log4j2=False),
    KafkaLine("3.3", "3.3.2", Mode.KRAFT, log4j2=False),  # KRaft production-ready from 3.3
    KafkaLine("2.8", "2.8.2", Mode.ZOOKEEPER, log4j2=False),
    KafkaLine("2.4", "2.4.1", Mode.ZOOKEEPER, log4j2=False, scala="2.12"),
    KafkaLine("3.0", "3.0.2", Mode.ZOOKEEPER, log4j2=False),
    KafkaLine("3.5", "3.5.2", Mode.ZOOKEEPER, log4j2=False),
    KafkaLine("4.0", "4.0.1", Mode.KRAFT, log4j2=True),
    KafkaLine("2.0", "2.0.1", Mode.ZOOKEEPER, log4j2=False, scala="2.12"),
    KafkaLine("1.1", "1.1.1", Mode.ZOOKEEPER, log4j2=False, scala="2.12"),
    KafkaLine("0.11", "0.11.0.3", Mode.ZOOKEEPER, log4j2=False, scala="2.12"),
    KafkaLine("0.10.2", "0.10.2.2", Mode.ZOOKEEPER, log4j2=False, scala="2.12"),
)
"""The release lines the log corpus matrix runs (bench/log_corpus_matrix.py), in the
order it runs them; a line's jars come from jvm/kafka-<name>/pom.xml."""


def line(name: str) -> KafkaLine:
    try:
        return LINES[name]
    except KeyError:
        raise LabError(f"unknown Kafka line {name!r}; the lab runs {', '.join(LINES)}") from None


def project_root() -> Path:
    """The checkout: the lab's Maven definitions live in its ``jvm/``."""
    return Path(__file__).resolve().parents[3]


def cache_root() -> Path:
    """Where Maven copies the jars: ``$LAB_JVM_CACHE``, else the checkout's
    ``.cache/jvm``."""
    configured = os.environ.get("LAB_JVM_CACHE")
    return Path(configured) if configured else project_root() / ".cache" / "jvm"


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` when set, else ``java`` on the PATH (Java 17 runs both
    lines)."""
    home = os.environ.get("JAVA_HOME")
    candidate = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not candidate or not Path(candidate).exists():
        raise LabError(
            "no Java runtime: Kafka needs Java 17 (`make java` installs "
            "openjdk-17-jre-headless), or set JAVA_HOME"
        )
    return candidate


def installed(kafka: KafkaLine) -> bool:
    """The broker's jar and its logging binding are in the cache."""
    jars = {path.name for path in kafka.lib.glob("*.jar")}
    return f"kafka_{kafka.scala}-{kafka.version}.jar" in jars and any(
        name.startswith(kafka.slf4j_binding) for name in jars
    )


def ensure_installed(kafka: KafkaLine) -> None:
    """Resolve the line's jars with Maven when the cache lacks them."""
    if installed(kafka):
        return
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LabError(
            f"Kafka {kafka.version}'s jars are not in {kafka.lib} and Maven is not installed: "
            "install it (`apt-get install maven`), then run `make kafka`"
        )
    done = subprocess.run(
        [
            mvn,
            "--batch-mode",
            "--quiet",
            "--file",
            str(kafka.pom),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={kafka.lib}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not installed(kafka):
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise LabError(
            f"Maven could not resolve Kafka {kafka.version} ({kafka.pom}):\n" + "\n".join(tail)
        )
