"""The chart's PrometheusRule, dashboards, default configuration and config schema come
from the same sources as conf/ and dashboards/, and cannot drift from them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helm_python import HelmRenderError

from tests.helm.chart import REPO, find, render

SYNC = REPO / "helm" / "sync_chart_files.py"
RULES = REPO / "conf" / "alerts" / "isrwatch-rules.yaml"
DASHBOARDS = sorted((REPO / "dashboards" / "json").glob("*.json"))


def run_sync(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SYNC), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_chart_copies_equal_their_sources() -> None:
    result = run_sync("--check")
    assert result.returncode == 0, (
        "the chart is stale; run `python helm/sync_chart_files.py`:\n" + result.stdout
    )


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """The parts of the repository the sync reads and writes."""
    for part in ("helm/isrwatch", "conf", "dashboards/json"):
        shutil.copytree(REPO / part, tmp_path / part)
    return tmp_path


def test_check_names_what_drifted(repo_copy: Path) -> None:
    assert run_sync("--check", "--repo", str(repo_copy)).returncode == 0
    conf = repo_copy / "conf" / "isrwatch.yaml"
    conf.write_text(conf.read_text().replace("state_shards: 64", "state_shards: 32"))
    schema = repo_copy / "helm/isrwatch/values.schema.json"
    generated = json.loads(schema.read_text())
    del generated["$defs"]["config.KafkaSettings"]
    schema.write_text(json.dumps(generated))
    stray = repo_copy / "helm/isrwatch/files/dashboards/removed-upstream.json"
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_text("{}")
    result = run_sync("--check", "--repo", str(repo_copy))
    assert result.returncode == 1
    assert set(result.stdout.splitlines()) == {
        "helm/isrwatch/files/isrwatch.yaml: differs from its source",
        "helm/isrwatch/files/dashboards/removed-upstream.json: its source is gone",
        "helm/isrwatch/values.schema.json: differs from its source",
    }
    assert run_sync("--repo", str(repo_copy)).returncode == 0
    assert run_sync("--check", "--repo", str(repo_copy)).returncode == 0
    assert not stray.exists()
    synced = (repo_copy / "helm/isrwatch/files/isrwatch.yaml").read_text()
    assert "state_shards: 32" in synced


def test_prometheus_rule_is_the_rules_file() -> None:
    values = {"metrics": {"prometheusRule": {"enabled": True}}}
    if not RULES.exists():
        with pytest.raises(HelmRenderError, match="has no rule groups"):
            render(values)
        return
    rule = find(render(values), "PrometheusRule")
    assert rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]
    alerts = [r["alert"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    assert alerts, "the rules file has no alert"


def test_dashboard_config_maps_are_the_dashboards() -> None:
    values = {"metrics": {"dashboards": {"enabled": True, "folder": "Kafka"}}}
    if not DASHBOARDS:
        with pytest.raises(HelmRenderError, match="files/dashboards has no dashboard"):
            render(values)
        return
    maps = [
        m
        for m in render(values)
        if m["kind"] == "ConfigMap" and "-dashboard-" in m["metadata"]["name"]
    ]
    rendered = {name: json.loads(text) for m in maps for name, text in m["data"].items()}
    assert rendered == {path.name: json.loads(path.read_text()) for path in DASHBOARDS}
    for config_map in maps:
        assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert config_map["metadata"]["annotations"] == {"grafana_folder": "Kafka"}


def test_dashboards_may_go_to_grafanas_namespace() -> None:
    if not DASHBOARDS:
        pytest.fail("dashboards/json has no dashboard yet: this test needs one")
    values = {
        "metrics": {
            "dashboards": {
                "enabled": True,
                "namespace": "grafana",
                "label": "dashboards",
                "labelValue": "isrwatch",
            }
        }
    }
    maps = [m for m in render(values) if "-dashboard-" in m["metadata"]["name"]]
    assert len(maps) == len(DASHBOARDS)
    for config_map in maps:
        assert config_map["metadata"]["namespace"] == "grafana"
        assert config_map["metadata"]["labels"]["dashboards"] == "isrwatch"
