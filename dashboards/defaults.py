"""Defaults shared by the generator and the command line, which must not import the SDK
before it runs (``isrwatch --help`` stays fast)."""

from pathlib import Path

RULES_FILE = Path(__file__).resolve().parent.parent / "conf" / "alerts" / "isrwatch-rules.yaml"
"""The Prometheus rules: the one definition of every alert."""
DEFAULT_DATASOURCE_UID = "prometheus"
"""UID of the Prometheus data source the Grafana-managed alert rules query."""
DEFAULT_FOLDER_UID = "isrwatch"
"""UID of the Grafana folder of the Grafana-managed alert rules."""
