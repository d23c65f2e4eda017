"""Every generated file: the dashboards, and the Grafana-managed alert rule groups.

``dashboards/json/`` holds the committed output, for users without Python: a test checks
that it equals what this module generates. Regenerate it with
``isrwatch dashboards --out dashboards/json``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as model

from dashboards import drilldown, overview, self_health
from dashboards.alerting import load_rules, rule_groups
from dashboards.defaults import DEFAULT_DATASOURCE_UID, DEFAULT_FOLDER_UID, RULES_FILE

COMMITTED = Path(__file__).resolve().parent / "json"
ALERTING = "alerting"  # subdirectory of the rule groups, apart from the dashboards

BUILDERS: tuple[Callable[[], model.Dashboard], ...] = (
    overview.build,
    drilldown.build,
    self_health.build,
)


def render(document: object) -> str:
    """The JSON text of an SDK object: sorted keys, 2-space indent, final newline."""
    return JSONEncoder(sort_keys=True, indent=2).encode(document) + "\n"


def dashboards() -> list[model.Dashboard]:
    return [build() for build in BUILDERS]


def outputs(
    rules_file: Path = RULES_FILE,
    datasource_uid: str = DEFAULT_DATASOURCE_UID,
    folder_uid: str = DEFAULT_FOLDER_UID,
) -> dict[str, str]:
    """Relative path -> content of every generated file."""
    files = {f"{dashboard.uid}.json": render(dashboard) for dashboard in dashboards()}
    for group in rule_groups(load_rules(rules_file), datasource_uid, folder_uid):
        files[f"{ALERTING}/{group.title}.json"] = render(group)
    return files


def write(out: Path, files: dict[str, str]) -> list[Path]:
    """Write the files under ``out``; return their paths."""
    written = []
    for name, content in sorted(files.items()):
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        written.append(path)
    return written
