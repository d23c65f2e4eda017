"""The container image recipe (Dockerfile, helm/image/): it installs what the project pins,
and provides what the chart relies on. No docker daemon here: the recipe is read, and its
entrypoint and driver script are run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.helm.chart import CHART, REPO

IMAGE_DIR = REPO / "helm" / "image"
ENTRYPOINT = IMAGE_DIR / "entrypoint.sh"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    result: list[tuple[str, str]] = []
    pending = ""
    for line in (REPO / "Dockerfile").read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        command, _, args = (pending + stripped).partition(" ")
        result.append((command.upper(), " ".join(args.split())))
        pending = ""
    return result


def args_of(command: str) -> list[str]:
    return [args for name, args in instructions() if name == command]


def chart_values() -> dict[str, object]:
    values: dict[str, object] = yaml.safe_load((CHART / "values.yaml").read_text())
    return values


def pinned(requirement: str) -> tuple[str, str]:
    name, _, version = requirement.partition("==")
    return re.sub(r"[-_.]+", "-", name).lower(), version


def test_base_image_is_the_python_the_project_requires() -> None:
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">=3.11,<3.12"
    assert "PYTHON_IMAGE=python:3.11-slim-bookworm" in args_of("ARG")
    # the connector's jars come from a Maven stage (Spark's Kafka connector, jvm/spark-kafka)
    assert args_of("FROM") == [
        "${MAVEN_IMAGE} AS spark-kafka",
        "${PYTHON_IMAGE} AS build",
        "${PYTHON_IMAGE}",
    ]
    # The venv's interpreter is the base image's: the paths the image sets say 3.11.
    env = " ".join(args_of("ENV"))
    assert "SPARK_HOME=/opt/isrwatch/venv/lib/python3.11/site-packages/pyspark" in env


def test_installs_the_package_with_the_pinned_tree() -> None:
    copies = args_of("COPY")
    assert "pyproject.toml constraints.txt README.md ./" in copies
    runs = args_of("RUN")
    assert any(
        "/opt/isrwatch/venv/bin/pip install --constraint constraints.txt ." in run
        and "pip check" in run
        for run in runs
    )
    # The constraints pin every runtime dependency at the version pyproject.toml pins.
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    constraints = dict(
        pinned(line)
        for line in (REPO / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    )
    for requirement in project["dependencies"]:
        name, version = pinned(requirement)
        assert constraints.get(name) == version, requirement


def test_runtime_has_java_17_and_runs_as_the_charts_user() -> None:
    runs = " ".join(args_of("RUN"))
    assert "apt-get install -y --no-install-recommends openjdk-17-jre-headless tini" in runs
    assert "useradd --uid 10001 --gid 10001" in runs
    security = chart_values()["podSecurityContext"]
    assert isinstance(security, dict)
    assert args_of("USER") == [f"{security['runAsUser']}:{security['runAsGroup']}"]


def test_image_provides_what_the_chart_uses() -> None:
    copies = args_of("COPY")
    assert "helm/image/entrypoint.sh helm/image/driver.py /opt/isrwatch/" in copies
    assert "conf /opt/isrwatch/conf" in copies  # the event schemas the parser loads
    env = " ".join(args_of("ENV"))
    assert "PATH=/opt/isrwatch/venv/bin:$PATH" in env  # the probes run `python -m ...`
    assert "ISRWATCH_CONF_DIR=/opt/isrwatch/conf" in env
    assert "NUMBA_CACHE_DIR=/tmp/numba-cache" in env  # /tmp is the writable emptyDir
    assert "PYSPARK_PYTHON=/opt/isrwatch/venv/bin/python" in env
    sparkapp = (CHART / "templates" / "sparkapplication.yaml").read_text()
    assert "mainApplicationFile: local:///opt/isrwatch/driver.py" in sparkapp
    metrics = chart_values()["metrics"]
    assert isinstance(metrics, dict)
    assert args_of("EXPOSE") == [str(metrics["port"])]
    assert args_of("ENTRYPOINT") == ['["/usr/bin/tini", "--", "/opt/isrwatch/entrypoint.sh"]']
    assert args_of("CMD") == ['["run"]']


def test_dockerignore_keeps_what_the_build_copies() -> None:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    assert patterns[0] == "*"
    kept = {p.removeprefix("!").rstrip("/") for p in patterns if p.startswith("!")}
    sources: set[str] = set()
    for copy in args_of("COPY"):
        parts = copy.split()
        if parts[0].startswith("--from="):
            continue
        sources.update(part.rstrip("/") for part in parts[:-1])
    for source in sources:
        assert (REPO / source).exists(), source
        assert any(source == k or source.startswith(k + "/") for k in kept), source


# --------------------------------------------------------------------------- entrypoint


def fake_program(path: Path) -> None:
    """A stand-in for java, spark-submit or isrwatch that prints its name and arguments."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/bin/sh\nprintf "%s\\n" "$(basename "$0")" "$@"\n')
    path.chmod(0o755)


@pytest.fixture
def fake_env(tmp_path: Path) -> dict[str, str]:
    spark_home, java_home, bin_dir = tmp_path / "spark", tmp_path / "java", tmp_path / "bin"
    fake_program(spark_home / "bin" / "spark-submit")
    fake_program(java_home / "bin" / "java")
    fake_program(bin_dir / "isrwatch")
    return {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "SPARK_HOME": str(spark_home),
        "JAVA_HOME": str(java_home),
    }


def entrypoint(env: dict[str, str], *args: str) -> list[str]:
    result = subprocess.run(
        ["bash", str(ENTRYPOINT), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.splitlines()


def test_entrypoint_runs_isrwatch_by_default(fake_env: dict[str, str]) -> None:
    assert entrypoint(fake_env, "run") == ["isrwatch", "run"]
    assert entrypoint(fake_env, "config", "--set", "a=b c") == [
        "isrwatch",
        "config",
        "--set",
        "a=b c",
    ]


def test_entrypoint_starts_a_spark_driver(fake_env: dict[str, str]) -> None:
    env = {**fake_env, "SPARK_DRIVER_BIND_ADDRESS": "10.1.2.3"}
    args = [
        "--properties-file",
        "/opt/spark/conf/spark.properties",
        "--class",
        "org.apache.spark.deploy.PythonRunner",
        "local:///opt/isrwatch/driver.py",
        "run",
    ]
    assert entrypoint(env, "driver", *args) == [
        "spark-submit",
        "--conf",
        "spark.driver.bindAddress=10.1.2.3",
        "--conf",
        "spark.executorEnv.SPARK_DRIVER_POD_IP=10.1.2.3",
        "--deploy-mode",
        "client",
        *args,
    ]


def test_entrypoint_starts_a_spark_executor(fake_env: dict[str, str]) -> None:
    env = {
        **fake_env,
        "SPARK_JAVA_OPT_10": "-Dthird=3",
        "SPARK_JAVA_OPT_0": "-Dfirst=1",
        "SPARK_JAVA_OPT_2": "-Dsecond=2 with space",
        "SPARK_EXECUTOR_MEMORY": "2g",
        "SPARK_CONF_DIR": "/opt/spark/conf",
        "SPARK_DRIVER_URL": "spark://driver:7078",
        "SPARK_EXECUTOR_ID": "4",
        "SPARK_EXECUTOR_CORES": "2",
        "SPARK_APPLICATION_ID": "app-1",
        "SPARK_EXECUTOR_POD_IP": "10.1.2.4",
        "SPARK_RESOURCE_PROFILE_ID": "0",
        "SPARK_EXECUTOR_POD_NAME": "isrwatch-exec-4",
    }
    assert entrypoint(env, "executor") == [
        "java",
        "-Dfirst=1",
        "-Dsecond=2 with space",
        "-Dthird=3",
        "-Xms2g",
        "-Xmx2g",
        "-cp",
        f"/opt/spark/conf:{fake_env['SPARK_HOME']}/jars/*",
        "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
        "--driver-url",
        "spark://driver:7078",
        "--executor-id",
        "4",
        "--cores",
        "2",
        "--app-id",
        "app-1",
        "--hostname",
        "10.1.2.4",
        "--resourceProfileId",
        "0",
        "--podName",
        "isrwatch-exec-4",
    ]


def test_entrypoint_runs_the_real_command_line() -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    assert entrypoint(env, "--version")[0].startswith("isrwatch, version ")


def test_driver_script_is_the_command_line() -> None:
    result = subprocess.run(
        [sys.executable, str(IMAGE_DIR / "driver.py"), "probe", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "--check [live|ready]" in result.stdout
