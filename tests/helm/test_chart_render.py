"""The chart rendered with Helm's engine for each documented value set: lint, Kubernetes
and CRD schemas, and what the objects must say for the job to run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from streaming.config import SecurityProtocol, load_config
from streaming.tools.probe import probe_command
from tests.helm.chart import (
    CHART,
    KUBE_VERSIONS,
    Manifest,
    ci_values,
    config_file,
    find,
    job_container,
    job_pod_labels,
    kinds,
    lint,
    merged,
    pod_specs,
    render,
    schema_errors,
)

HAS_DASHBOARDS = any((CHART / "files" / "dashboards").glob("*.json"))


def value_set(name: str) -> dict[str, Any]:
    """The documented value sets (helm/isrwatch/ci/*-values.yaml, and the defaults).

    Dashboards are only enabled once the chart carries some (see test_chart_files)."""
    if name == "defaults":
        return {}
    if name == "object-store-spark-operator":
        values = merged(ci_values("object-store"), {"mode": "sparkOperator"})
    else:
        values = ci_values(name)
    if not HAS_DASHBOARDS and "dashboards" in values.get("metrics", {}):
        values = merged(values, {"metrics": {"dashboards": {"enabled": False}}})
    return values


VALUE_SETS = [
    "defaults",
    "spark-operator",
    "sasl-ssl",
    "object-store",
    "object-store-spark-operator",
]


@pytest.fixture(scope="module", params=VALUE_SETS)
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[Manifest]]:
    name: str = request.param
    return name, render(value_set(name))


def test_every_documented_value_set_has_a_file() -> None:
    files = sorted(p.name.removesuffix("-values.yaml") for p in (CHART / "ci").glob("*.yaml"))
    assert files == ["object-store", "sasl-ssl", "spark-operator"]


@pytest.mark.parametrize("name", VALUE_SETS)
def test_lint_is_clean(name: str) -> None:
    assert lint(value_set(name)) == []


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
def test_every_manifest_matches_its_schema(
    rendered: tuple[str, list[Manifest]], kube_version: str
) -> None:
    _, manifests = rendered
    errors = [error for m in manifests for error in schema_errors(m, kube_version)]
    assert errors == []


def test_schema_check_catches_a_broken_manifest(rendered: tuple[str, list[Manifest]]) -> None:
    """The checks above can fail: a field the API does not know is an error in every kind."""
    _, manifests = rendered
    for manifest in manifests:
        broken = {**manifest, "spec": {**manifest.get("spec", {}), "bogusField": 1}}
        if manifest["kind"] in ("ConfigMap", "ServiceAccount"):
            broken = {**manifest, "bogusField": 1}
        assert schema_errors(broken, KUBE_VERSIONS[0]), manifest["kind"]


def test_objects_of_each_mode() -> None:
    assert kinds(render(value_set("defaults"))) == [
        "ConfigMap",
        "Deployment",
        "NetworkPolicy",
        "PersistentVolumeClaim",
        "Service",
        "ServiceAccount",
    ]
    operator = kinds(
        render(merged(value_set("spark-operator"), {"metrics": {"dashboards": {"enabled": False}}}))
    )
    assert operator == [
        "ConfigMap",
        "NetworkPolicy",
        "PersistentVolumeClaim",
        "PodDisruptionBudget",
        "PodDisruptionBudget",
        "PrometheusRule",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
        "ServiceMonitor",
        "SparkApplication",
    ]
    assert "PersistentVolumeClaim" not in kinds(render(value_set("object-store")))


# --------------------------------------------------------------------------- configuration


def secret_env(container: Manifest) -> dict[str, str]:
    """The container's environment, with a stand-in for each value read from a Secret."""
    env: dict[str, str] = {}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = f"secret:{ref['name']}/{ref['key']}"
    return env


def test_config_is_a_valid_job_configuration(
    rendered: tuple[str, list[Manifest]], tmp_path: Path
) -> None:
    """The job's own loader accepts what the chart gives it: file + environment."""
    name, manifests = rendered
    container = job_container(manifests)
    env = secret_env(container)
    config_path = tmp_path / "isrwatch.yaml"
    config_path.write_text(config_file(manifests))
    assert env["ISRWATCH_CONFIG"] == "/etc/isrwatch/config/isrwatch.yaml"
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts["/etc/isrwatch/config"] == "config"
    config = load_config(config_path, environ=env)
    assert config.metrics.enabled
    assert (config.metrics.host, config.metrics.port) == ("0.0.0.0", 9464)
    assert config.streaming.health_out is None
    operator = name in ("spark-operator", "object-store-spark-operator")
    expected_master = "k8s://https://kubernetes.default.svc:443" if operator else "local[2]"
    assert config.streaming.spark_master == expected_master


def test_defaults_are_the_shipped_configuration(tmp_path: Path) -> None:
    """With default values the job runs conf/isrwatch.yaml, except what the chart sets."""
    path = tmp_path / "isrwatch.yaml"
    path.write_text(config_file(render({})))
    chart = load_config(path, environ={}).model_dump(mode="json")
    shipped = load_config(CHART.parents[1] / "conf" / "isrwatch.yaml", environ={})
    expected = shipped.model_dump(mode="json")
    expected["kafka"]["bootstrap_servers"] = "kafka:9092"
    expected["streaming"]["checkpoint_location"] = "/var/lib/isrwatch/checkpoint"
    expected["streaming"]["spark_master"] = "local[2]"
    assert chart == expected


def test_values_override_the_shipped_settings(tmp_path: Path) -> None:
    overrides = {
        "config": {
            "kafka": {"ssl_check_hostname": False, "starting_offsets": "latest"},
            "rules": {"warn_ratio": 0.8, "propagation": {"mode": "kraft"}},
            "streaming": {"state_shards": 16, "trigger_interval_ms": 10000},
        }
    }
    path = tmp_path / "isrwatch.yaml"
    path.write_text(config_file(render(overrides)))
    config = load_config(path, environ={})
    assert config.kafka.ssl_check_hostname is False
    assert config.kafka.starting_offsets.value == "latest"
    assert config.rules.warn_ratio == 0.8
    assert config.rules.propagation.mode.value == "kraft"
    assert config.rules.propagation.blackout_ms == 5000  # untouched siblings keep defaults
    assert (config.streaming.state_shards, config.streaming.trigger_interval_ms) == (16, 10000)


def test_sasl_ssl_credentials_come_from_secrets(tmp_path: Path) -> None:
    manifests = render(value_set("sasl-ssl"))
    container = job_container(manifests)
    env = {item["name"]: item for item in container["env"]}
    assert env["ISRWATCH_KAFKA__SASL_PASSWORD"]["valueFrom"] == {
        "secretKeyRef": {"name": "isrwatch-kafka-sasl", "key": "password"}
    }
    text = config_file(manifests)
    assert yaml.safe_load(text)["kafka"]["sasl_password"] is None
    path = tmp_path / "isrwatch.yaml"
    path.write_text(text)
    config = load_config(path, environ=secret_env(container))
    kafka = config.kafka
    assert kafka.security_protocol is SecurityProtocol.SASL_SSL
    assert kafka.sasl_password is not None
    assert kafka.sasl_password.get_secret_value() == "secret:isrwatch-kafka-sasl/password"
    assert (kafka.sasl_username, kafka.ssl_check_hostname) == ("isrwatch", False)
    # Every PEM file the configuration names is mounted there from the TLS Secret.
    pod = next(spec for role, spec in pod_specs(manifests) if role == "job")
    volume = next(v for v in pod["volumes"] if v["name"] == "kafka-tls")
    mount = next(m for m in container["volumeMounts"] if m["name"] == "kafka-tls")
    assert volume["secret"]["secretName"] == "isrwatch-kafka-tls"
    assert mount["readOnly"] is True
    files = {
        f"{mount['mountPath']}/{item['path']}": item["key"] for item in volume["secret"]["items"]
    }
    assert files == {
        kafka.ssl_cafile: "ca.crt",
        kafka.ssl_certfile: "tls.crt",
        kafka.ssl_keyfile: "tls.key",
    }


def test_sasl_user_name_may_come_from_the_secret(tmp_path: Path) -> None:
    values = merged(value_set("sasl-ssl"), {"kafka": {"sasl": {"usernameKey": "username"}}})
    values["config"]["kafka"].pop("sasl_username")
    manifests = render(values)
    container = job_container(manifests)
    path = tmp_path / "isrwatch.yaml"
    path.write_text(config_file(manifests))
    config = load_config(path, environ=secret_env(container))
    assert config.kafka.sasl_username == "secret:isrwatch-kafka-sasl/username"


def test_the_chart_creates_no_secret() -> None:
    """Secrets are the user's (values cannot hold a password: test_values_schema)."""
    assert "Secret" not in kinds(render(value_set("sasl-ssl")))


def test_executors_get_the_tls_files_but_not_the_password() -> None:
    values = merged(
        value_set("sasl-ssl"),
        {"mode": "sparkOperator", "checkpoint": {"pvc": {"accessModes": ["ReadWriteMany"]}}},
    )
    specs = dict(pod_specs(render(values)))
    executor = specs["executor"]["containers"][0]
    assert "env" not in executor
    assert any(m["name"] == "kafka-tls" for m in executor["volumeMounts"])
    assert any(v["name"] == "kafka-tls" for v in specs["executor"]["volumes"])


# --------------------------------------------------------------------------- checkpoint


def test_pvc_checkpoint_is_mounted_and_kept_on_uninstall() -> None:
    manifests = render({})
    claim = find(manifests, "PersistentVolumeClaim")
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    deployment = find(manifests, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    pod = deployment["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "checkpoint")
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "checkpoint")
    location = yaml.safe_load(config_file(manifests))["streaming"]["checkpoint_location"]
    assert location.startswith(mount["mountPath"] + "/")


def test_existing_claim_is_used_not_created() -> None:
    manifests = render({"checkpoint": {"pvc": {"existingClaim": "isrwatch-state"}}})
    assert "PersistentVolumeClaim" not in kinds(manifests)
    pod = find(manifests, "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "checkpoint")
    assert volume["persistentVolumeClaim"]["claimName"] == "isrwatch-state"


def test_object_store_checkpoint_in_local_mode() -> None:
    manifests = render(value_set("object-store"))
    config = yaml.safe_load(config_file(manifests))
    assert config["streaming"]["checkpoint_location"] == "s3a://isrwatch-state/prod/checkpoint"
    assert config["streaming"]["state_store"] == "rocksdb"
    spark_defaults = find(manifests, "ConfigMap")["data"]["spark-defaults.conf"].splitlines()
    assert spark_defaults == [
        "spark.driver.memory 1g",
        "spark.hadoop.fs.s3a.endpoint https://minio.minio.svc:9000",
        "spark.hadoop.fs.s3a.path.style.access true",
        "spark.sql.streaming.stateStore.rocksdb.compactOnCommit true",
    ]
    container = job_container(manifests)
    assert container["envFrom"] == [{"secretRef": {"name": "isrwatch-s3"}}]
    assert {"name": "SPARK_CONF_DIR", "value": "/etc/isrwatch/spark"} in container["env"]
    assert not any(m["name"] == "checkpoint" for m in container["volumeMounts"])


def test_object_store_checkpoint_with_the_spark_operator() -> None:
    manifests = render(value_set("object-store-spark-operator"))
    app = find(manifests, "SparkApplication")
    assert app["spec"]["hadoopConf"] == {
        "fs.s3a.endpoint": "https://minio.minio.svc:9000",
        "fs.s3a.path.style.access": "true",
    }
    for role, spec in pod_specs(manifests):
        container = spec["containers"][0]
        assert container["envFrom"] == [{"secretRef": {"name": "isrwatch-s3"}}], role
        assert not any(v["name"] == "checkpoint" for v in spec["volumes"]), role


# --------------------------------------------------------------------------- Spark Operator


def test_spark_application_runs_the_job() -> None:
    manifests = render(value_set("spark-operator"))
    app = find(manifests, "SparkApplication")["spec"]
    assert (app["type"], app["mode"], app["sparkVersion"]) == ("Python", "cluster", "4.3.0")
    assert app["mainApplicationFile"] == "local:///opt/isrwatch/driver.py"
    assert app["arguments"] == ["run"]
    assert app["restartPolicy"]["type"] == "Always"
    assert app["executor"]["instances"] == 3
    assert app["sparkConf"]["spark.sql.streaming.minBatchesToRetain"] == "20"
    # Spark takes these containers of the pod templates as its driver and executor.
    assert (
        app["driver"]["template"]["spec"]["containers"][0]["name"]
        == app["sparkConf"]["spark.kubernetes.driver.podTemplateContainerName"]
    )
    assert (
        app["executor"]["template"]["spec"]["containers"][0]["name"]
        == app["sparkConf"]["spark.kubernetes.executor.podTemplateContainerName"]
    )
    claim = find(manifests, "PersistentVolumeClaim")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]


def test_spark_application_ships_a_packed_python_environment() -> None:
    archive = "s3a://envs/isrwatch-env-0.1.0.tar.gz"
    values = merged(value_set("spark-operator"), {"sparkOperator": {"pythonArchive": archive}})
    manifest = find(render(values), "SparkApplication")
    for kube_version in KUBE_VERSIONS:
        assert schema_errors(manifest, kube_version) == []
    app = manifest["spec"]
    # Spark unpacks it as ./environment in each pod's working directory ...
    assert app["deps"] == {"archives": ["s3a://envs/isrwatch-env-0.1.0.tar.gz#environment"]}
    driver = app["driver"]["template"]["spec"]["containers"][0]
    executor = app["executor"]["template"]["spec"]["containers"][0]
    # ... which is the writable, per-pod /tmp (the tmpVolume), not the shared checkpoint
    assert driver["workingDir"] == executor["workingDir"] == "/tmp"
    for container in (driver, executor):
        assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    # ... and its Python runs the driver and the executors' Python workers
    assert app["sparkConf"]["spark.pyspark.python"] == "./environment/bin/python"
    assert app["sparkConf"]["spark.pyspark.driver.python"] == "./environment/bin/python"
    driver_env = {e["name"]: e.get("value") for e in driver["env"]}
    assert driver_env["PYSPARK_PYTHON"] == "./environment/bin/python"
    assert driver_env["PYSPARK_DRIVER_PYTHON"] == "./environment/bin/python"
    assert executor["env"] == [
        {"name": "PYSPARK_PYTHON", "value": "./environment/bin/python"},
        {"name": "ISRWATCH_CONF_DIR", "value": "./environment/conf"},  # the schemas
    ]
    assert driver_env["ISRWATCH_CONF_DIR"] == "./environment/conf"
    assert app["sparkConf"]["spark.sql.streaming.minBatchesToRetain"] == "20"  # still there


def test_without_an_archive_the_image_python_runs() -> None:
    app = find(render(value_set("spark-operator")), "SparkApplication")["spec"]
    assert "deps" not in app
    assert not any(key.startswith("spark.pyspark.") for key in app["sparkConf"])
    for role in ("driver", "executor"):
        container = app[role]["template"]["spec"]["containers"][0]
        assert "workingDir" not in container, role
        names = [e["name"] for e in container.get("env", [])]
        assert not [n for n in names if n.startswith("PYSPARK") or n == "ISRWATCH_CONF_DIR"], role


def test_driver_may_manage_its_executors_and_nothing_else() -> None:
    manifests = render(value_set("spark-operator"))
    app = find(manifests, "SparkApplication")["spec"]
    account = find(manifests, "ServiceAccount")
    assert account["automountServiceAccountToken"] is True
    assert app["driver"]["serviceAccount"] == account["metadata"]["name"]
    role = find(manifests, "Role")
    assert [rule["apiGroups"] for rule in role["rules"]] == [[""]]
    binding = find(manifests, "RoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "monitoring"}
    ]
    assert app["executor"]["template"]["spec"]["automountServiceAccountToken"] is False
    deployment_account = find(render({}), "ServiceAccount")
    assert deployment_account["automountServiceAccountToken"] is False


# --------------------------------------------------------------------------- probes, security


def probe_args(probe: Manifest) -> list[str]:
    command: list[str] = probe["exec"]["command"]
    assert command[:3] == ["python", "-m", "streaming.tools.probe"]
    return command[3:]


@pytest.mark.parametrize(
    ("name", "require_source"),
    [("defaults", True), ("spark-operator", True), ("object-store", False)],
)
def test_probes_run_isrwatch_probe(name: str, require_source: bool) -> None:
    container = job_container(render(value_set(name)))
    for probe_name, check in [
        ("startupProbe", "live"),
        ("livenessProbe", "live"),
        ("readinessProbe", "ready"),
    ]:
        args = probe_args(container[probe_name])
        # The real command accepts them: the chart cannot pass an option it does not have.
        context = probe_command.make_context("probe", list(args))
        assert context.params["check"] == check
        assert context.params["url"] == "http://127.0.0.1:9464/metrics"
        assert context.params["timeout_s"] < container[probe_name]["timeoutSeconds"]
    liveness = probe_command.make_context("probe", probe_args(container["livenessProbe"]))
    readiness = probe_command.make_context("probe", probe_args(container["readinessProbe"]))
    assert liveness.params["max_batch_age_s"] == 600
    assert readiness.params["max_batch_age_s"] == 120
    assert readiness.params["require_source"] is require_source


def test_readiness_source_check_can_be_turned_off() -> None:
    container = job_container(render({"probes": {"readiness": {"requireSourceUp": False}}}))
    args = probe_args(container["readinessProbe"])
    assert probe_command.make_context("probe", args).params["require_source"] is False


def test_pods_run_as_non_root_on_a_read_only_filesystem(
    rendered: tuple[str, list[Manifest]],
) -> None:
    _, manifests = rendered
    for role, spec in pod_specs(manifests):
        assert spec["securityContext"]["runAsNonRoot"] is True, role
        assert spec["securityContext"]["runAsUser"] == 10001, role
        assert spec["enableServiceLinks"] is False, role
        container = spec["containers"][0]
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True, role
        assert security["allowPrivilegeEscalation"] is False, role
        assert security["capabilities"] == {"drop": ["ALL"]}, role
        tmp = next(m for m in container["volumeMounts"] if m["mountPath"] == "/tmp")
        volume = next(v for v in spec["volumes"] if v["name"] == tmp["name"])
        assert "emptyDir" in volume, role


def test_deployment_resources_come_from_values() -> None:
    resources = {"requests": {"cpu": "4", "memory": "8Gi"}, "limits": {"memory": "8Gi"}}
    manifests = render({"deployment": {"cores": 4, "driverMemory": "3g", "resources": resources}})
    assert job_container(manifests)["resources"] == resources
    assert yaml.safe_load(config_file(manifests))["streaming"]["spark_master"] == "local[4]"
    assert "spark.driver.memory 3g" in find(manifests, "ConfigMap")["data"]["spark-defaults.conf"]


def test_config_change_rolls_the_pod() -> None:
    def checksum(values: dict[str, Any]) -> str:
        pod = find(render(values), "Deployment")["spec"]["template"]
        annotation: str = pod["metadata"]["annotations"]["checksum/config"]
        return annotation

    assert checksum({}) == checksum({})
    assert checksum({}) != checksum({"config": {"rules": {"warn_ratio": 0.7}}})


# --------------------------------------------------------------------------- metrics, network


@pytest.mark.parametrize("name", ["defaults", "spark-operator"])
def test_service_and_service_monitor_reach_the_exporter(name: str) -> None:
    manifests = render(merged(value_set(name), {"metrics": {"serviceMonitor": {"enabled": True}}}))
    service = find(manifests, "Service")
    assert service["spec"]["publishNotReadyAddresses"] is True
    labels = job_pod_labels(manifests)
    assert service["spec"]["selector"].items() <= labels.items()
    component = "driver" if name == "spark-operator" else "job"
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == component
    container = job_container(manifests)
    assert {"name": "metrics", "containerPort": 9464, "protocol": "TCP"} in container["ports"]
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    monitor = find(manifests, "ServiceMonitor")["spec"]
    assert monitor["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    # job="isrwatch" whatever the release's name: the alert rules select it.
    assert service["metadata"]["labels"][monitor["jobLabel"]] == "isrwatch"


def test_network_policy() -> None:
    policy = find(render({}), "NetworkPolicy")["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    assert policy["ingress"] == [{"ports": [{"port": 9464, "protocol": "TCP"}]}]
    manifests = render(value_set("spark-operator"))
    policy = find(manifests, "NetworkPolicy")["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= job_pod_labels(manifests).items()
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    scrape, peers = policy["ingress"]
    assert scrape["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    assert peers == {"from": [{"podSelector": policy["podSelector"]}]}
    egress_ports = [p["port"] for rule in policy["egress"] for p in rule.get("ports", [])]
    assert egress_ports == [53, 53, 9092, 9093, 443, 6443]
    assert {"to": [{"podSelector": policy["podSelector"]}]} in policy["egress"]


def test_disruption_budgets_where_they_apply() -> None:
    assert "PodDisruptionBudget" not in kinds(render({}))
    job = find(render({"podDisruptionBudget": {"job": {"enabled": True}}}), "PodDisruptionBudget")
    assert job["spec"]["maxUnavailable"] == 0
    assert job["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "job"
    manifests = render(value_set("spark-operator"))
    budgets = {
        b["metadata"]["name"]: b["spec"] for b in manifests if b["kind"] == "PodDisruptionBudget"
    }
    assert budgets["isrwatch-executors"]["maxUnavailable"] == 1
    app = find(manifests, "SparkApplication")["spec"]
    executor_selector = budgets["isrwatch-executors"]["selector"]["matchLabels"]
    assert executor_selector.items() <= app["executor"]["labels"].items()
    assert budgets["isrwatch-driver"]["selector"]["matchLabels"].items() <= (
        app["driver"]["labels"].items()
    )


def test_names_follow_the_release() -> None:
    manifests = render({}, release="prod")
    names = {m["kind"]: m["metadata"]["name"] for m in manifests}
    assert names["Deployment"] == names["Service"] == names["ConfigMap"] == "prod-isrwatch"
    assert names["PersistentVolumeClaim"] == "prod-isrwatch-checkpoint"
    pod = find(manifests, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == names["ServiceAccount"]
    assert {v["name"]: v for v in pod["volumes"]}["config"]["configMap"]["name"] == "prod-isrwatch"
