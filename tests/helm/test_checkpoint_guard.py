"""An upgrade that reuses the checkpoint must keep the settings the checkpoint is bound to.

On a real ``helm upgrade`` the chart reads the previous configuration with ``lookup``,
which offline rendering answers with nothing. These tests render a copy of the chart whose
extra template hands the chart's guard a previous configuration from a file instead.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml
from helm_python import HelmRenderError

from tests.helm.chart import CHART, NAMESPACE, RELEASE, config_file, render

PROBE = """\
{{- $previous := .Files.Get "files/previous-isrwatch.yaml" | fromYaml -}}
{{- include "isrwatch.checkpointGuard" (list $previous (include "isrwatch.config" . | fromYaml)) -}}
"""


@pytest.fixture
def upgrade(tmp_path: Path) -> Callable[[dict[str, Any], dict[str, Any]], None]:
    chart = tmp_path / "isrwatch"
    shutil.copytree(CHART, chart)
    (chart / "templates" / "zz-checkpoint-guard.yaml").write_text(PROBE)

    def upgrade_from(previous_values: dict[str, Any], values: dict[str, Any]) -> None:
        previous = yaml.safe_load(config_file(render(previous_values)))
        (chart / "files" / "previous-isrwatch.yaml").write_text(yaml.safe_dump(previous))
        with helm_python.Chart.load(chart) as loaded:
            loaded.render(values, name=RELEASE, namespace=NAMESPACE, is_upgrade=True)

    return upgrade_from


def test_settings_the_checkpoint_does_not_bind_may_change(upgrade: Any) -> None:
    upgrade({}, {"config": {"rules": {"warn_ratio": 0.7}, "kafka": {"client_id": "x"}}})
    upgrade({}, {"mode": "deployment", "deployment": {"cores": 4}})


@pytest.mark.parametrize(
    ("config", "key", "change"),
    [
        ({"streaming": {"state_shards": 32}}, "streaming.state_shards", "from 64 to 32"),
        (
            {"topics": {"fetch_responses": "fetches"}},
            "topics.fetch_responses",
            "from fetch-responses to fetches",
        ),
        (
            {"topics": {"controller_events": "ctrl"}},
            "topics.controller_events",
            "from controller-events to ctrl",
        ),
        ({"kafka": {"source_format": "kafka"}}, "kafka.source_format", "from python to kafka"),
    ],
)
def test_changing_a_bound_setting_fails(
    upgrade: Any, config: dict[str, Any], key: str, change: str
) -> None:
    with pytest.raises(HelmRenderError) as caught:
        upgrade({}, {"config": config})
    message = str(caught.value)
    assert f"{key} would change {change}" in message
    assert "the checkpoint /var/lib/isrwatch/checkpoint was written with" in message
    assert "give the job a new checkpoint" in message


def test_a_new_checkpoint_may_start_with_new_settings(upgrade: Any) -> None:
    upgrade(
        {},
        {"config": {"streaming": {"state_shards": 32}}, "checkpoint": {"pvc": {"subPath": "v2"}}},
    )


def test_a_fresh_install_has_nothing_to_keep() -> None:
    render({"config": {"streaming": {"state_shards": 8}}})
