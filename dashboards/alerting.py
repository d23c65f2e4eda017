"""Grafana-managed copies of the Prometheus alert rules, for teams that alert in Grafana.

The Prometheus rules file (``conf/alerts/isrwatch-rules.yaml``) is the one definition of
every alert; each of its groups becomes one Grafana rule group, for Grafana's
provisioning API (``PUT /api/v1/provisioning/folder/{folder}/rule-groups/{group}``).
A rule keeps Prometheus' meaning, as Grafana's own Prometheus rule import does: the
PromQL query runs as an instant query, and every series it returns is an alert instance
(math ``is_number($query) || is_nan($query) || is_inf($query)``, threshold ``> 0``); no
series is OK, not NoData.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from grafana_foundation_sdk.builders import alerting, expr, prometheus
from grafana_foundation_sdk.models import alerting as alerting_model
from grafana_foundation_sdk.models import dashboard as dashboard_model

from dashboards.defaults import DEFAULT_DATASOURCE_UID, DEFAULT_FOLDER_UID, RULES_FILE

DEFAULT_GROUP_INTERVAL = "1m"  # Prometheus' default evaluation_interval
QUERY_RANGE_SECONDS = 600  # the instant query's time range, as Grafana's import uses

QUERY, MATH, THRESHOLD = "query", "prometheus_math", "threshold"
EXPRESSIONS = dashboard_model.DataSourceRef(type_val="__expr__", uid="__expr__")

_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_VALUE = re.compile(r"\$value\b")


def seconds(duration: str) -> int:
    """A Prometheus duration (``1m30s``) in whole seconds."""
    parts = _DURATION.findall(duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise ValueError(f"not a Prometheus duration: {duration!r}")
    return round(sum(int(n) * _SECONDS[u] for n, u in parts))


def rule_uid(alert: str) -> str:
    """A stable Grafana rule uid from the alert name: ``IsrShrinkOverdue`` ->
    ``isrwatch-isr-shrink-overdue`` (Grafana uids are at most 40 characters)."""
    words = re.findall(r"[A-Z][a-z0-9]*|[a-z0-9]+", alert.removeprefix("Isrwatch"))
    return "-".join(["isrwatch", *(w.lower() for w in words)])


def grafana_template(text: str) -> str:
    """A Prometheus annotation template in Grafana's terms: ``$value`` is the value of the
    query (``$values.query.Value``); ``$labels`` and the humanize functions are the same."""
    return _VALUE.sub(f"$values.{QUERY}.Value", text)


def load_rules(path: Path = RULES_FILE) -> list[dict[str, Any]]:
    """The groups of a Prometheus rules file."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    groups: list[dict[str, Any]] = document["groups"]
    return groups


def rule_groups(
    groups: list[dict[str, Any]],
    datasource_uid: str = DEFAULT_DATASOURCE_UID,
    folder_uid: str = DEFAULT_FOLDER_UID,
) -> list[alerting_model.RuleGroup]:
    """One Grafana rule group per Prometheus rule group (alerting rules only)."""
    return [
        alerting.RuleGroup(group["name"])
        .folder_uid(folder_uid)
        .interval(seconds(group.get("interval", DEFAULT_GROUP_INTERVAL)))
        .rules(
            [
                _rule(rule, group["name"], datasource_uid, folder_uid)
                for rule in group["rules"]
                if "alert" in rule
            ]
        )
        .build()
        for group in groups
    ]


def _rule(rule: dict[str, Any], group: str, datasource_uid: str, folder_uid: str) -> alerting.Rule:
    datasource = dashboard_model.DataSourceRef(type_val="prometheus", uid=datasource_uid)
    query = (
        prometheus.Dataquery()
        .expr(rule["expr"].strip())
        .instant()
        .ref_id(QUERY)
        .datasource(datasource)
    )
    math = (
        expr.TypeMath()
        .expression(f"is_number(${QUERY}) || is_nan(${QUERY}) || is_inf(${QUERY})")
        .ref_id(MATH)
        .datasource(EXPRESSIONS)
    )
    threshold = (
        expr.TypeThreshold()
        .expression(MATH)
        .conditions(
            [
                expr.ExprTypeThresholdConditions().evaluator(
                    expr.ExprTypeThresholdConditionsEvaluator().type("gt").params([0])
                )
            ]
        )
        .ref_id(THRESHOLD)
        .datasource(EXPRESSIONS)
    )
    return (
        alerting.Rule(rule["alert"])
        .uid(rule_uid(rule["alert"]))
        .org_id(1)
        .folder_uid(folder_uid)
        .rule_group(group)
        .queries(
            [
                alerting.Query(QUERY)
                .datasource_uid(datasource_uid)
                .relative_time_range(
                    alerting_model.RelativeTimeRange(from_val=QUERY_RANGE_SECONDS, to=0)
                )
                .model(query),
                alerting.Query(MATH).datasource_uid(EXPRESSIONS.uid or "").model(math),
                alerting.Query(THRESHOLD).datasource_uid(EXPRESSIONS.uid or "").model(threshold),
            ]
        )
        .condition(THRESHOLD)
        .for_val(rule.get("for", "0s"))
        .no_data_state("OK")
        .exec_err_state("Error")
        .labels(dict(rule.get("labels", {})))
        .annotations({k: grafana_template(v) for k, v in rule.get("annotations", {}).items()})
    )
