"""Spark's Kafka connector: its version is PySpark's, ``make spark-kafka`` copies only what
PySpark lacks, and the job finds the jars or says how to install them."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pyspark
import pytest

from streaming.job.connector import (
    CONNECTOR_ARTIFACT,
    ConnectorMissingError,
    connector_jars,
    connector_lib,
    pyspark_jars,
)
from streaming.jvm_cache import project_root

POM = project_root() / "jvm" / "spark-kafka" / "pom.xml"
MAVEN = "{http://maven.apache.org/POM/4.0.0}"
# What PySpark lacks and the connector needs: its own jar, its token provider, Kafka's
# client and the consumer pool (jvm/spark-kafka/pom.xml).
EXPECTED_ARTIFACTS = {
    CONNECTOR_ARTIFACT,
    "spark-token-provider-kafka-0-10_2.13",
    "kafka-clients",
    "commons-pool2",
}


def _pinned(text: str) -> str:
    found = re.search(r"^\s*\"?pyspark==([\w.]+)", text, re.MULTILINE)
    assert found is not None
    return found.group(1)


def _artifact(jar: Path) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``."""
    return re.sub(r"-\d+\.\d+[\w.\-]*\.jar$", "", jar.name)


def test_the_connector_is_of_the_pinned_pyspark_version() -> None:
    properties = ET.parse(POM).getroot().find(f"{MAVEN}properties")
    assert properties is not None
    spark_version = properties.findtext(f"{MAVEN}spark.version")
    assert spark_version == _pinned((project_root() / "constraints.txt").read_text())
    assert spark_version == _pinned((project_root() / "pyproject.toml").read_text())
    assert spark_version == pyspark.__version__


def test_make_spark_kafka_copied_what_pyspark_lacks_and_nothing_it_ships() -> None:
    jars = sorted(connector_lib().glob("*.jar"))
    assert jars, f"no jar in {connector_lib()}: `make spark-kafka`"
    assert {_artifact(jar) for jar in jars} == EXPECTED_ARTIFACTS
    shipped = {_artifact(jar) for jar in pyspark_jars().glob("*.jar")}
    assert shipped, "PySpark's jars were not found"
    assert not {_artifact(jar) for jar in jars} & shipped
    assert connector_jars(pyspark.__version__) == jars


def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *names: str) -> Path:
    monkeypatch.setenv("LAB_JVM_CACHE", str(tmp_path / "cache"))
    lib = connector_lib()
    lib.mkdir(parents=True)
    for name in names:
        (lib / name).write_bytes(b"")
    return lib


def test_a_connector_of_another_version_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = _cache(
        tmp_path, monkeypatch, f"{CONNECTOR_ARTIFACT}-4.1.3.jar", "kafka-clients-3.9.2.jar"
    )
    with pytest.raises(ConnectorMissingError) as refused:
        connector_jars("4.2.0", shipped=tmp_path / "pyspark-jars")
    message = str(refused.value)
    assert f"{CONNECTOR_ARTIFACT} 4.2.0" in message
    assert f"{lib} holds {CONNECTOR_ARTIFACT}-4.1.3.jar instead" in message
    assert "make spark-kafka" in message


def test_no_connector_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAB_JVM_CACHE", str(tmp_path / "empty"))
    with pytest.raises(ConnectorMissingError, match=r"has none: run `make spark-kafka`"):
        connector_jars("4.2.0", shipped=tmp_path / "pyspark-jars")


def test_a_connector_among_pysparks_own_jars_needs_nothing_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cache(tmp_path, monkeypatch, f"{CONNECTOR_ARTIFACT}-4.2.0.jar")
    shipped = tmp_path / "pyspark-jars"
    shipped.mkdir()
    (shipped / f"{CONNECTOR_ARTIFACT}-4.2.0.jar").write_bytes(b"")
    assert connector_jars("4.2.0", shipped=shipped) == []
    (shipped / f"{CONNECTOR_ARTIFACT}-4.2.0.jar").rename(
        shipped / f"{CONNECTOR_ARTIFACT}-4.1.3.jar"
    )
    assert connector_jars("4.2.0", shipped=shipped) == [
        connector_lib() / f"{CONNECTOR_ARTIFACT}-4.2.0.jar"
    ]


def test_isrwatch_run_without_the_connector_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from streaming.cli import main

    monkeypatch.setenv("LAB_JVM_CACHE", str(tmp_path / "empty"))
    result = CliRunner().invoke(
        main,
        [
            "run",
            "--checkpoint-location",
            str(tmp_path / "checkpoint"),
            "--set",
            "kafka.source_format=kafka",
            "--set",
            "metrics.enabled=false",
        ],
    )
    assert result.exit_code == 1
    assert "make spark-kafka" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def _dockerfile_stage(name: str) -> str:
    """The text of the Dockerfile's stage ``name`` (``FROM ... AS name`` to the next FROM)."""
    text = (project_root() / "Dockerfile").read_text()
    found = re.search(rf"^FROM \S+ AS {name}\n(.*?)(?=^FROM )", text, re.MULTILINE | re.DOTALL)
    assert found is not None, f"no stage {name} in the Dockerfile"
    return found.group(1)


def test_the_image_bundles_the_connector_the_pom_resolves_among_pysparks_jars() -> None:
    """The image's connector is what ``make spark-kafka`` resolves (the same POM, Maven
    goal and scope) and lands where ``connector_jars`` finds it shipped: PySpark's jars in
    the image's virtual environment, of the image's Python."""
    dockerfile = (project_root() / "Dockerfile").read_text()
    stage = _dockerfile_stage("spark-kafka")
    assert re.search(r"^COPY jvm/spark-kafka/pom\.xml \./pom\.xml$", stage, re.MULTILINE)
    makefile = (project_root() / "Makefile").read_text()
    recipe = re.search(r"^\.cache/jvm/spark-kafka/\.resolved:.*?\n\n", makefile, re.DOTALL | re.M)
    assert recipe is not None
    for word in ("dependency:copy-dependencies", "-DincludeScope=runtime"):
        assert word in recipe.group(0), word
        assert word in stage, word
    output = re.search(r"-DoutputDirectory=(\S+)", stage)
    assert output is not None
    python = re.search(r"^ARG PYTHON_IMAGE=python:(\d+\.\d+)-", dockerfile, re.MULTILINE)
    assert python is not None
    jars = f"/opt/isrwatch/venv/lib/python{python.group(1)}/site-packages/pyspark/jars/"
    copy = f"COPY --from=spark-kafka {output.group(1).rstrip('/')}/ {jars}"
    assert copy in _dockerfile_stage("build")
    # the image's SPARK_HOME is that PySpark, whose jars/ connector_jars looks in
    assert f"SPARK_HOME={jars.removesuffix('/jars/')}" in dockerfile
    assert pyspark_jars().parts[-3:] == ("site-packages", "pyspark", "jars")
