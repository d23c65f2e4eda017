"""Keep the chart's copies of the job's files equal to their sources.

    python helm/sync_chart_files.py          # write them
    python helm/sync_chart_files.py --check  # exit 1, naming what differs, if the chart is stale

The chart carries, under helm/isrwatch/:

* files/isrwatch.yaml                  = conf/isrwatch.yaml (the job's shipped defaults)
* files/alerts/isrwatch-rules.yaml     = conf/alerts/isrwatch-rules.yaml (PrometheusRule)
* files/dashboards/*.json              = dashboards/json/*.json (the Grafana ConfigMaps)
* values.schema.json, $defs "config.*" = the JSON Schema of streaming.config.IsrwatchConfig,
  less the settings the chart owns (values ``config`` is validated against it)

Helm reads only files inside the chart, hence the copies; a test runs ``--check``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CHART = Path("helm/isrwatch")
SCHEMA = CHART / "values.schema.json"
CONFIG_DEF_PREFIX = "config."

# Settings of IsrwatchConfig the chart sets itself (values.yaml says from which values).
CHART_OWNED: Mapping[str, tuple[str, ...]] = {
    "kafka": ("sasl_password", "ssl_cafile", "ssl_certfile", "ssl_keyfile"),
    "streaming": ("checkpoint_location", "spark_master", "health_out"),
    "": ("metrics",),
}


def copied_files(repo: Path) -> dict[Path, bytes]:
    """Chart path -> content, for every file the chart copies from the repository."""
    wanted: dict[Path, bytes] = {
        CHART / "files/isrwatch.yaml": (repo / "conf/isrwatch.yaml").read_bytes()
    }
    rules = repo / "conf/alerts/isrwatch-rules.yaml"
    if rules.exists():
        wanted[CHART / "files/alerts/isrwatch-rules.yaml"] = rules.read_bytes()
    for dashboard in sorted((repo / "dashboards/json").glob("*.json")):
        wanted[CHART / "files/dashboards" / dashboard.name] = dashboard.read_bytes()
    return wanted


def _rewrite_refs(node: Any) -> Any:
    """Pydantic's ``#/$defs/X`` become ``#/$defs/config.X`` (they live in the values schema)."""
    if isinstance(node, dict):
        return {
            key: (
                value.replace("#/$defs/", f"#/$defs/{CONFIG_DEF_PREFIX}", 1)
                if key == "$ref" and isinstance(value, str)
                else _rewrite_refs(value)
            )
            for key, value in node.items()
            if key != "title"
        }
    if isinstance(node, list):
        return [_rewrite_refs(item) for item in node]
    return node


def config_schema_defs() -> dict[str, Any]:
    """The ``config.*`` $defs: IsrwatchConfig's JSON Schema without the chart's settings."""
    sys.path.insert(0, str(REPO))
    from streaming.config import IsrwatchConfig

    schema = IsrwatchConfig.model_json_schema()
    defs: dict[str, Any] = schema.pop("$defs")
    defs["IsrwatchConfig"] = schema
    section_of = {"": "IsrwatchConfig", "kafka": "KafkaSettings", "streaming": "StreamingSettings"}
    for section, names in CHART_OWNED.items():
        properties = defs[section_of[section]]["properties"]
        for name in names:
            del properties[name]
    defs["IsrwatchConfig"]["description"] = (
        "The job's settings (conf/isrwatch.yaml) that override its shipped defaults. The chart "
        "sets kafka.sasl_password and kafka.ssl_* (kafka.sasl, kafka.tls), "
        "streaming.checkpoint_location (checkpoint), streaming.spark_master (mode), "
        "streaming.health_out and metrics (metrics) itself."
    )
    return {CONFIG_DEF_PREFIX + name: _rewrite_refs(value) for name, value in defs.items()}


def synced_schema(current: Mapping[str, Any]) -> dict[str, Any]:
    """``current`` with its ``config.*`` $defs replaced by fresh ones."""
    kept = {
        name: value
        for name, value in current.get("$defs", {}).items()
        if not name.startswith(CONFIG_DEF_PREFIX)
    }
    return {**current, "$defs": {**kept, **config_schema_defs()}}


def _dump_json(value: Any) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode()


def wanted_state(repo: Path) -> dict[Path, bytes | None]:
    """Every chart file this script manages -> its content (None: must not exist)."""
    wanted: dict[Path, bytes | None] = dict(copied_files(repo))
    managed_dirs = (CHART / "files/alerts", CHART / "files/dashboards")
    for directory in managed_dirs:
        for path in sorted((repo / directory).glob("*")):
            wanted.setdefault(path.relative_to(repo), None)
    schema = json.loads((repo / SCHEMA).read_text(encoding="utf-8"))
    wanted[SCHEMA] = _dump_json(synced_schema(schema))
    return wanted


def differences(repo: Path) -> Iterator[str]:
    """What ``--check`` reports: one line per stale chart file."""
    for path, content in wanted_state(repo).items():
        target = repo / path
        actual = target.read_bytes() if target.exists() else None
        if actual == content:
            continue
        if content is None:
            yield f"{path}: its source is gone"
        elif actual is None:
            yield f"{path}: missing"
        else:
            yield f"{path}: differs from its source"


def sync(repo: Path) -> list[Path]:
    """Write the chart's copies; returns the paths changed."""
    changed: list[Path] = []
    for path, content in wanted_state(repo).items():
        target = repo / path
        actual = target.read_bytes() if target.exists() else None
        if actual == content:
            continue
        if content is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only report stale chart files")
    parser.add_argument("--repo", type=Path, default=REPO, help="the repository's root")
    args = parser.parse_args(argv)
    repo: Path = args.repo.resolve()
    if args.check:
        stale = list(differences(repo))
        for line in stale:
            print(line)
        if stale:
            print("the chart is stale: run python helm/sync_chart_files.py", file=sys.stderr)
        return 1 if stale else 0
    for path in sync(repo):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
