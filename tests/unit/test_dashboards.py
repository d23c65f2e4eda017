"""The dashboards and Grafana alert rules: valid SDK models, committed copies up to date,
every panel explained, and only metrics the exporter exports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from grafana_foundation_sdk.cog import runtime
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models import alerting as alerting_model
from grafana_foundation_sdk.models import dashboard as dashboard_model
from grafana_foundation_sdk.models import expr as expr_model
from grafana_foundation_sdk.models import prometheus as prometheus_model
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dashboards.alerting import grafana_template, rule_uid, seconds
from dashboards.defaults import RULES_FILE
from dashboards.generate import COMMITTED, outputs, render
from dashboards.promql import metric_names, substitute, variables
from state import ClusterShape, UnhealthyPartitions, attribute
from streaming.cli import main
from streaming.job.metrics import HealthExporter
from tests.unit.builders import partition_health
from tests.unit.test_metrics import shard_stats, unhealthy_record

register_default_plugins()

GENERATED = outputs()
DASHBOARDS = {name: json.loads(text) for name, text in GENERATED.items() if "/" not in name}
RULE_GROUPS = {name: json.loads(text) for name, text in GENERATED.items() if "/" in name}
PROMETHEUS_RULES = yaml.safe_load(RULES_FILE.read_text())["groups"]
LABEL_VALUES = re.compile(r"label_values\((.+), *\w+\)")


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """The visual panels (rows left out)."""
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def dashboard_exprs(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in panels(dashboard) for t in p["targets"]]


def rule_exprs() -> list[str]:
    return [r["expr"] for g in PROMETHEUS_RULES for r in g["rules"]]


def exported_metric_names(tmp_path: Path) -> set[str]:
    """Every sample name the real exporter serves when every kind of series has data."""
    status = tmp_path / "source-status.json"
    status.write_text(
        json.dumps(
            {"consecutive_failures": 0, "failures_total": 2, "last_success_at": 1_700_000_000.0}
        )
    )
    record = unhealthy_record(0)  # a follower about to shrink, metadata stale in its window
    flap = {
        "topic": "orders",
        "partition": 0,
        "broker": 3,
        "leader": 1,
        "shrinks": 3,
        "expands": 2,
        "period_ms": 4_500,
        "last_shrink_ms": 1_700_000_000_000,
    }
    exporter = HealthExporter(source_status=status)
    exporter.record_batch(
        [shard_stats(0, unhealthy=[record], bounced_brokers=[2], flapping=[flap])],
        {("fetch-responses", "invalid_json"): 1},
        0.2,
    )
    shape = ClusterShape.from_json(
        {
            "pairs": [[3, 1, 2]],
            "led": [[1, 2]],
            "live": [1, 3],
            "maintenance": [[2, "restarted", 1_700_000_000_000]],
        }
    )
    lagging = partition_health({3: "LAGGING"}, topic="orders", leader=1)
    exporter.record_causes(attribute(UnhealthyPartitions.of([lagging]), shape))
    text = generate_latest(exporter.registry).decode()
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


# ------------------------------------------------------------------- generated files


def test_committed_json_is_what_the_generator_produces() -> None:
    committed = {
        str(path.relative_to(COMMITTED)): path.read_text(encoding="utf-8")
        for path in sorted(COMMITTED.rglob("*.json"))
    }
    assert committed.keys() == GENERATED.keys(), "run: isrwatch dashboards --out dashboards/json"
    for name, text in GENERATED.items():
        assert committed[name] == text, (
            f"{name} is stale: isrwatch dashboards --out dashboards/json"
        )


def test_the_command_writes_the_same_files(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["dashboards", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    written = {str(p.relative_to(tmp_path)): p.read_text() for p in tmp_path.rglob("*.json")}
    assert written == GENERATED


def test_three_dashboards_with_distinct_uids() -> None:
    uids = sorted(d["uid"] for d in DASHBOARDS.values())
    assert uids == ["isrwatch-monitor", "isrwatch-overview", "isrwatch-partition"]
    assert all(name == f"{d['uid']}.json" for name, d in DASHBOARDS.items())


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_dashboard_round_trips_through_the_sdk_model(name: str) -> None:
    """Decoding with the SDK's model and encoding again loses nothing: every field is one
    the model knows, every panel type a registered panel plugin, every query Prometheus."""
    decoded = dashboard_model.Dashboard.from_json(json.loads(GENERATED[name]))
    assert render(decoded) == GENERATED[name]
    for panel in decoded.panels or []:
        if isinstance(panel, dashboard_model.RowPanel):
            continue
        assert runtime.panelcfg_config(panel.type_val) is not None, panel.type_val
        for query in panel.targets or []:
            assert isinstance(query, prometheus_model.Dataquery), panel.title


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_panels_are_laid_out_identified_and_explained(name: str) -> None:
    dashboard = DASHBOARDS[name]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert 0 not in ids
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
    for panel in panels(dashboard):
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert len(panel.get("description", "")) >= 100, f"{panel['title']}: explain it"
        refs = [t["refId"] for t in panel["targets"]]
        assert refs, panel["title"]
        assert len(refs) == len(set(refs)), panel["title"]


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_query_variable_is_defined_and_scoped_to_the_job(name: str) -> None:
    dashboard = DASHBOARDS[name]
    defined = {v["name"] for v in dashboard["templating"]["list"]}
    for expr in dashboard_exprs(dashboard):
        assert variables(expr) <= defined, expr
        assert 'job="$job"' in expr, expr


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_dashboards_read_only_metrics_the_exporter_exports(name: str, tmp_path: Path) -> None:
    exported = exported_metric_names(tmp_path)
    used = {m for expr in dashboard_exprs(DASHBOARDS[name]) for m in metric_names(expr)}
    for variable in DASHBOARDS[name]["templating"]["list"]:
        if variable["type"] == "query":  # label_values(SELECTOR, LABEL)
            selector = LABEL_VALUES.fullmatch(variable["query"])
            assert selector, variable["query"]
            used |= metric_names(selector.group(1))
    assert used, "no metric found: the tokenizer is broken"
    assert used <= exported, used - exported


def test_alert_rules_read_only_exported_metrics_and_prometheus_up(tmp_path: Path) -> None:
    exported = exported_metric_names(tmp_path)
    used = {m for expr in rule_exprs() for m in metric_names(expr)}
    # `up` is Prometheus' own series for the scrape of the exporter (IsrwatchMonitorDown).
    assert used - exported == {"up"}


# ------------------------------------------------------------------- Grafana alert rules


def test_one_grafana_rule_per_prometheus_alert_with_its_meaning() -> None:
    assert sorted(RULE_GROUPS) == sorted(f"alerting/{g['name']}.json" for g in PROMETHEUS_RULES)
    for group in PROMETHEUS_RULES:
        grafana = RULE_GROUPS[f"alerting/{group['name']}.json"]
        assert grafana["title"] == group["name"]
        assert grafana["interval"] == seconds(group.get("interval", "1m"))
        assert [r["title"] for r in grafana["rules"]] == [r["alert"] for r in group["rules"]]
        for prom, rule in zip(group["rules"], grafana["rules"], strict=True):
            query = next(q for q in rule["data"] if q["refId"] == "query")
            assert query["model"]["expr"] == prom["expr"].strip()
            assert query["model"]["instant"] is True
            assert rule["condition"] == "threshold"
            assert rule["for"] == prom.get("for", "0s")
            assert rule["labels"] == prom["labels"]
            assert rule["noDataState"] == "OK"  # no series: nothing fires, as in Prometheus
            for key, text in rule["annotations"].items():
                assert not re.search(r"\$value\b", text)
                assert text == grafana_template(prom["annotations"][key])


def test_grafana_rule_uids_are_distinct_and_short_enough() -> None:
    uids = [r["uid"] for g in RULE_GROUPS.values() for r in g["rules"]]
    assert len(uids) == len(set(uids))
    assert all(len(uid) <= 40 for uid in uids)
    assert rule_uid("IsrShrinkOverdue") == "isrwatch-isr-shrink-overdue"
    assert rule_uid("IsrwatchMonitorDown") == "isrwatch-monitor-down"


@pytest.mark.parametrize("name", sorted(RULE_GROUPS))
def test_rule_group_round_trips_through_the_sdk_model(name: str) -> None:
    decoded = alerting_model.RuleGroup.from_json(json.loads(GENERATED[name]))
    assert render(decoded) == GENERATED[name]
    for rule in decoded.rules or []:
        models = {q.ref_id: q.model for q in rule.data}
        assert isinstance(models["query"], prometheus_model.Dataquery)
        assert isinstance(models["prometheus_math"], expr_model.TypeMath)
        assert isinstance(models["threshold"], expr_model.TypeThreshold)


def test_grafana_template_maps_value_to_the_query_value() -> None:
    assert grafana_template("{{ $value | humanize }} of {{ $labels.topic }}, {{ $values }}") == (
        "{{ $values.query.Value | humanize }} of {{ $labels.topic }}, {{ $values }}"
    )


def test_prometheus_durations_in_seconds() -> None:
    assert [seconds(d) for d in ("10s", "1m", "1m30s", "2h")] == [10, 60, 90, 7200]
    with pytest.raises(ValueError, match="not a Prometheus duration"):
        seconds("1 minute")


# ------------------------------------------------------------------- PromQL helpers


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        (
            'sum by (topic) (isrwatch_followers{status="SHRINK_OVERDUE"}) > 0',
            {"isrwatch_followers"},
        ),
        (
            'histogram_quantile(0.99, sum by (le) (rate(x_bucket{job="$job"}[$__rate_interval])))',
            {"x_bucket"},
        ),
        ("a / on (job) group_left (topic) b or vector(0) unless c offset 5m", {"a", "b", "c"}),
        ('up{job=~".*isrwatch.*"} == 0 or absent(up{job=~".*isrwatch.*"})', {"up"}),
        ("1.5 * max(t) - scalar(max(u[5m:1m]))", {"t", "u"}),
        ("count without (partition, leader) (m) > 0 and n", {"m", "n"}),
    ],
)
def test_metric_names_of_an_expression(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_substitute_dashboard_variables() -> None:
    expr = 'sum(rate(x{job="$job", topic=~"${topic}"}[$__rate_interval])) + y[$__range]'
    assert variables(expr) == {"job", "topic"}
    assert substitute(expr, {"job": "isrwatch", "topic": "orders"}) == (
        'sum(rate(x{job="isrwatch", topic=~"orders"}[1m])) + y[1h]'
    )
    with pytest.raises(KeyError):
        substitute(expr, {"job": "isrwatch"})
