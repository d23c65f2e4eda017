"""The Prometheus alert rules pass promtool's checks and unit tests (conf/alerts/tests/).

promtool comes with Debian's prometheus package, which .ci/run installs; without it the
tests fail rather than skip.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ALERTS = Path(__file__).resolve().parents[2] / "conf" / "alerts"
RULES = ALERTS / "isrwatch-rules.yaml"
UNIT_TESTS = sorted((ALERTS / "tests").glob("*.yaml"))

pytestmark = pytest.mark.integration


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    assert binary, "promtool not found: install Debian's prometheus package (.ci/run does)"
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=120)


def test_rules_pass_promtool_check() -> None:
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_rules_pass_their_promtool_unit_tests() -> None:
    assert UNIT_TESTS, "no promtool unit tests in conf/alerts/tests"
    result = promtool("test", "rules", *map(str, UNIT_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_is_unit_tested_firing_and_not_firing() -> None:
    alerts = {
        rule["alert"]
        for group in yaml.safe_load(RULES.read_text())["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }
    firing: set[str] = set()
    quiet: set[str] = set()
    for path in UNIT_TESTS:
        for test in yaml.safe_load(path.read_text())["tests"]:
            for case in test.get("alert_rule_test", []):
                (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
    assert alerts - firing == set(), "alerts never tested firing"
    assert alerts - quiet == set(), "alerts never tested not firing"
