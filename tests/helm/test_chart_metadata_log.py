"""The chart's KRaft metadata log reader: `collect metadata-log` beside one broker, its
metadata directory mounted read-only from the broker's own volume."""

from __future__ import annotations

from typing import Any

import pytest
from helm_python import HelmValuesError

from tests.helm.chart import KUBE_VERSIONS, find, lint, render, schema_errors

NAME = "isrwatch-metadata-log"
BROKER = {"statefulset.kubernetes.io/pod-name": "kafka-0"}
VALUES: dict[str, Any] = {
    "metadataLog": {
        "enabled": True,
        "claimName": "data-kafka-0",
        "subPath": "data",
        "brokerPodLabels": BROKER,
    },
}


def pod() -> dict[str, Any]:
    spec: dict[str, Any] = find(render(VALUES), "Deployment", NAME)["spec"]["template"]["spec"]
    return spec


def test_off_by_default() -> None:
    assert not [m for m in render({}) if m["metadata"]["name"] == NAME]


def test_the_broker_volume_is_mounted_read_only_at_its_metadata_dir() -> None:
    spec = pod()
    (volume,) = [v for v in spec["volumes"] if v["name"] == "broker-metadata"]
    assert volume["persistentVolumeClaim"] == {"claimName": "data-kafka-0", "readOnly": True}
    (container,) = spec["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "broker-metadata"]
    assert mount == {
        "name": "broker-metadata",
        "mountPath": "/var/lib/kafka-metadata",
        "subPath": "data",
        "readOnly": True,
    }
    assert container["args"] == [
        "collect",
        "metadata-log",
        "--follow",
        "--set",
        "collect.metadata_log.state_file=/var/lib/isrwatch-collector/metadata-log.json",
        "/var/lib/kafka-metadata",
    ]
    assert container["ports"] == [{"name": "metrics", "containerPort": 9467, "protocol": "TCP"}]


def test_it_runs_on_the_brokers_node_and_never_changes_file_ownership() -> None:
    spec = pod()
    (term,) = spec["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term == {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": BROKER},
    }
    assert "fsGroup" not in spec["securityContext"]  # would chown the broker's files
    assert spec["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
def test_valid_kubernetes_object(kube_version: str) -> None:
    assert schema_errors(find(render(VALUES), "Deployment", NAME), kube_version) == []


def test_lint_is_clean() -> None:
    assert lint(VALUES) == []


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        ({"claimName": ""}, "claimName"),
        ({"brokerPodLabels": {}}, "brokerPodLabels"),
        ({"podSecurityContext": {"fsGroup": 1000}}, "podSecurityContext"),
        ({"subPath": "../other"}, "subPath"),
        ({"subPath": "/abs"}, "subPath"),
    ],
)
def test_values_that_cannot_work_are_refused(override: dict[str, Any], problem: str) -> None:
    values = {"metadataLog": {**VALUES["metadataLog"], **override}}
    with pytest.raises(HelmValuesError, match=problem):
        render(values)
