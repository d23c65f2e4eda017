"""PromQL as the dashboards and rules write it: selectors, and what an expression reads.

``metric_names`` lists the metric names an expression selects. It is a tokenizer, not a
parser: Prometheus itself parses every expression in the integration tests. It is enough
to check, without a Prometheus, that a dashboard or rule reads only what the exporter
exports.
"""

from __future__ import annotations

import re

JOB = 'job="$job"'
"""Every dashboard selector is scoped to the dashboard's ``job`` variable: one isrwatch
deployment (one Kafka cluster) per scrape job."""

GRAFANA_INTERVALS = {"$__rate_interval": "1m", "$__interval": "30s", "$__range": "1h"}
"""Grafana's built-in interval variables, and what to put in their place when Grafana is
not there to expand them (Prometheus' own tools and tests)."""


def label_eq(label: str, value: str) -> str:
    """``label="value"``."""
    return f'{label}="{value}"'


def series(metric: str, *matchers: str, job: bool = True) -> str:
    """``metric{job="$job", matcher, ...}`` (matchers as PromQL text: ``'status="X"'``)."""
    labels = [JOB, *matchers] if job else list(matchers)
    return f"{metric}{{{', '.join(labels)}}}" if labels else metric


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGES = re.compile(r"\[[^\[\]]*\]")
_LABEL_LISTS = re.compile(
    r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE
)
_IDENTIFIER = re.compile(r"(?<![\w$.])([A-Za-z_:][\w:]*)(\s*\()?")
_KEYWORDS = frozenset(
    {
        "and",
        "or",
        "unless",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "offset",
        "bool",
        "inf",
        "nan",
        "atan2",
    }
)


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (``rate(x_total[1m]) / y`` -> x_total, y).

    Strings, label matchers, range and subquery brackets, and the label lists of
    ``by``/``without``/``on``/``ignoring``/``group_*`` are removed first; what is left
    that is not a function call, a keyword or a number is a metric name.
    """
    text = _STRINGS.sub(" ", expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGES.sub(" ", text)
    text = _LABEL_LISTS.sub(" ", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        name, call = match.group(1), match.group(2)
        if call or name.lower() in _KEYWORDS:
            continue
        names.add(name)
    return names


def expand_intervals(expr: str) -> str:
    """Grafana's interval variables replaced by fixed durations (``GRAFANA_INTERVALS``)."""
    for variable, duration in GRAFANA_INTERVALS.items():
        expr = expr.replace(variable, duration)
    return expr


_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")


def variables(expr: str) -> set[str]:
    """Dashboard variables an expression uses (``$topic``, ``${topic}``), Grafana's
    built-in ``$__...`` ones excluded."""
    found = {a or b for a, b in _VARIABLE.findall(expr)}
    return {name for name in found if not name.startswith("__")}


def substitute(expr: str, values: dict[str, str]) -> str:
    """Dashboard variables replaced by values (``$topic`` -> ``orders``), as Grafana does
    for a single-valued variable; interval variables by ``GRAFANA_INTERVALS``."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name.startswith("__"):
            return match.group(0)
        return values[name]

    return expand_intervals(_VARIABLE.sub(value, expr))
