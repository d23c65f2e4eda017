"""Rendering the chart with Helm's own engine, and checking what it renders.

Helm is helm-python-sdk (the Helm v4 SDK as a library). Core Kubernetes objects are checked
against the Kubernetes OpenAPI schemas kubernetes-validate ships (strict: unknown fields are
errors); custom resources against the schemas vendored in ``crd_schemas/`` (their
``$comment`` says from which upstream version), whose Kubernetes types refer to the same
Kubernetes definitions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import helm_python
import jsonschema
import kubernetes_validate  # type: ignore[import-untyped]
import yaml
from referencing import Registry, Resource

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "isrwatch"
CI_VALUES = CHART / "ci"
CRD_SCHEMAS = Path(__file__).resolve().parent / "crd_schemas"
RELEASE = "isrwatch"
NAMESPACE = "monitoring"

# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and the newest known.
KUBE_VERSIONS = ("1.29", "1.37")

CUSTOM_RESOURCES = {
    ("sparkoperator.k8s.io/v1beta2", "SparkApplication"): (
        "sparkapplication-sparkoperator.k8s.io-v1beta2.json"
    ),
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor-monitoring.coreos.com-v1.json",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheusrule-monitoring.coreos.com-v1.json",
}
K8S_DEFINITIONS_ID = "https://kubernetes.io/api/_definitions.json"

Manifest = dict[str, Any]


def ci_values(name: str) -> dict[str, Any]:
    """A documented value set, ``ci/<name>-values.yaml``."""
    loaded: dict[str, Any] = yaml.safe_load((CI_VALUES / f"{name}-values.yaml").read_text())
    return loaded


def merged(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` deep-merged over ``base`` (as Helm merges several values files)."""
    result = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = merged(result[key], value)
        else:
            result[key] = value
    return result


def render_templates(
    values: Mapping[str, Any] | None = None, release: str = RELEASE, namespace: str = NAMESPACE
) -> dict[str, str]:
    """Template path -> rendered text, as ``helm template`` renders them (schema checked)."""
    with helm_python.Chart.load(CHART) as chart:
        return chart.render(
            dict(values) if values is not None else None,
            name=release,
            namespace=namespace,
            is_install=True,
        )


def render(
    values: Mapping[str, Any] | None = None, release: str = RELEASE, namespace: str = NAMESPACE
) -> list[Manifest]:
    """The Kubernetes objects the chart renders for ``values``."""
    manifests: list[Manifest] = []
    for path, text in sorted(render_templates(values, release, namespace).items()):
        if not path.endswith((".yaml", ".yml")):
            continue
        manifests.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return manifests


def lint(values: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """``helm lint --strict`` findings that are warnings or errors."""
    report = helm_python.lint(
        CHART, dict(values) if values is not None else None, strict=True, namespace=NAMESPACE
    )
    findings: list[dict[str, Any]] = [
        message for message in report["messages"] if message["severity"] >= 2
    ]
    return findings + [{"severity": 3, "error": error} for error in report["errors"]]


def find(manifests: list[Manifest], kind: str, name: str | None = None) -> Manifest:
    """The one object of ``kind`` (and ``name``)."""
    found = [
        m
        for m in manifests
        if m["kind"] == kind and (name is None or m["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"{len(found)} {kind} objects named {name}: {found}"
    return found[0]


def kinds(manifests: list[Manifest]) -> list[str]:
    return sorted(m["kind"] for m in manifests)


# --------------------------------------------------------------------------- schemas


@cache
def _k8s_definitions(kube_version: str) -> Resource[Any]:
    schemas = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    path = schemas / f"v{kube_version}.0-local-strict" / "_definitions.json"
    return Resource.from_contents(json.loads(path.read_text(encoding="utf-8")))


@cache
def _crd_validator(file_name: str, kube_version: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((CRD_SCHEMAS / file_name).read_text(encoding="utf-8"))
    registry: Registry[Any] = Registry().with_resource(
        K8S_DEFINITIONS_ID, _k8s_definitions(kube_version)
    )
    return jsonschema.Draft202012Validator(schema, registry=registry)


def schema_errors(manifest: Manifest, kube_version: str) -> list[str]:
    """Why ``manifest`` breaks its kind's schema at ``kube_version``; [] when it is valid."""
    where = f"{manifest.get('kind')}/{manifest.get('metadata', {}).get('name')}"
    custom = CUSTOM_RESOURCES.get((manifest.get("apiVersion", ""), manifest.get("kind", "")))
    if custom is not None:
        errors = _crd_validator(custom, kube_version).iter_errors(manifest)
        return [f"{where}: {'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors]
    try:
        kubernetes_validate.validate(manifest, kube_version, strict=True)
    except kubernetes_validate.ValidationError as error:
        path = ".".join(map(str, error.absolute_path))
        return [f"{where}: {path}: {error.message}"]
    except kubernetes_validate.SchemaNotFoundError as error:
        return [f"{where}: {error.message}"]
    return []


# --------------------------------------------------------------------------- pod parts


def pod_specs(manifests: list[Manifest]) -> Iterator[tuple[str, Manifest]]:
    """(role, pod spec) of every pod the chart describes: the Deployment's pod, and the
    SparkApplication's driver and executor pod templates."""
    for manifest in manifests:
        if manifest["kind"] == "Deployment":
            yield "job", manifest["spec"]["template"]["spec"]
        elif manifest["kind"] == "SparkApplication":
            yield "driver", manifest["spec"]["driver"]["template"]["spec"]
            yield "executor", manifest["spec"]["executor"]["template"]["spec"]


def job_container(manifests: list[Manifest]) -> Manifest:
    """The container that runs the job's driver and exporter."""
    for role, spec in pod_specs(manifests):
        if role in ("job", "driver"):
            container: Manifest = spec["containers"][0]
            return container
    raise AssertionError("no job pod")


def job_pod_labels(manifests: list[Manifest]) -> dict[str, str]:
    for manifest in manifests:
        if manifest["kind"] == "Deployment":
            labels: dict[str, str] = manifest["spec"]["template"]["metadata"]["labels"]
            return labels
        if manifest["kind"] == "SparkApplication":
            driver_labels: dict[str, str] = manifest["spec"]["driver"]["labels"]
            return driver_labels
    raise AssertionError("no job pod")


def config_file(manifests: list[Manifest]) -> str:
    """The job's isrwatch.yaml as the chart's ConfigMap holds it."""
    text: str = find(manifests, "ConfigMap", RELEASE)["data"]["isrwatch.yaml"]
    return text
