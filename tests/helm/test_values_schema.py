"""values.schema.json (and the chart's own checks) reject bad values with a message that
names the value and says what is wrong."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from helm_python import HelmRenderError, HelmValuesError

from streaming.config import load_config
from tests.helm.chart import CHART, merged, render
from tests.helm.test_chart_render import value_set

SCHEMA_PREFIX = "values don't meet the specifications of the schema(s)"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"mode": "yarn"}, "at '/mode': value must be one of 'deployment', 'sparkOperator'"),
        # The chart's settings, and secrets, are not the job's configuration in values.
        (
            {"config": {"kafka": {"sasl_password": "hunter2"}}},
            "at '/config/kafka': additional properties 'sasl_password' not allowed",
        ),
        (
            {"config": {"kafka": {"ssl_keyfile": "/key.pem"}}},
            "at '/config/kafka': additional properties 'ssl_keyfile' not allowed",
        ),
        (
            {"config": {"streaming": {"checkpoint_location": "/data"}}},
            "at '/config/streaming': additional properties 'checkpoint_location' not allowed",
        ),
        (
            {"config": {"metrics": {"port": 9000}}},
            "at '/config': additional properties 'metrics' not allowed",
        ),
        # The job's own settings are checked as the job checks them (its JSON Schema).
        (
            {"config": {"streaming": {"state_shard": 4}}},
            "at '/config/streaming': additional properties 'state_shard' not allowed",
        ),
        (
            {"config": {"streaming": {"state_shards": 0}}},
            "at '/config/streaming/state_shards': exclusiveMinimum",
        ),
        (
            {"config": {"kafka": {"security_protocol": "TLS"}}},
            "at '/config/kafka/security_protocol': value must be one of 'PLAINTEXT', 'SSL', "
            "'SASL_PLAINTEXT', 'SASL_SSL'",
        ),
        (
            {"config": {"rules": {"warn_ratio": 2}}},
            "at '/config/rules/warn_ratio': maximum: got 2, want 1",
        ),
        (
            {"config": {"rules": {"propagation": {"mode": "raft"}}}},
            "at '/config/rules/propagation/mode': value must be one of",
        ),
        (
            {"config": {"kafka": {"max_events_per_partition_per_batch": "many"}}},
            "at '/config/kafka/max_events_per_partition_per_batch': got string, want integer",
        ),
        # The chart's values.
        ({"metrics": {"port": 80}}, "at '/metrics/port': minimum: got 80, want 1,024"),
        ({"checkpoint": {"type": "s3"}}, "at '/checkpoint/type': value must be one of"),
        (
            {"checkpoint": {"type": "objectStore", "objectStore": {"uri": "bucket/path"}}},
            "at '/checkpoint/objectStore/uri': 'bucket/path' does not match pattern",
        ),
        (
            {"checkpoint": {"pvc": {"subPath": "../escape"}}},
            "at '/checkpoint/pvc/subPath'",
        ),
        ({"securityContext": {"runAsNonRoot": False}}, "at '/securityContext/runAsNonRoot'"),
        ({"podSecurityContext": {"runAsUser": 0}}, "at '/podSecurityContext/runAsUser'"),
        (
            {"sparkOperator": {"executor": {"instances": 0}}},
            "at '/sparkOperator/executor/instances': minimum: got 0, want 1",
        ),
        (
            {"sparkOperator": {"driver": {"cpus": 2}}},
            "at '/sparkOperator/driver': additional properties 'cpus' not allowed",
        ),
        (
            {"sparkOperator": {"restartPolicy": {"type": "Never"}}},
            "at '/sparkOperator/restartPolicy/type': value must be one of 'Always', 'OnFailure'",
        ),
        # the chart names the unpacked archive itself (#environment); a URI, not a path
        (
            {"sparkOperator": {"pythonArchive": "s3a://envs/env.tar.gz#venv"}},
            "at '/sparkOperator/pythonArchive': 's3a://envs/env.tar.gz#venv' does not match",
        ),
        (
            {"sparkOperator": {"pythonArchive": "/opt/env.tar.gz"}},
            "at '/sparkOperator/pythonArchive': '/opt/env.tar.gz' does not match pattern",
        ),
        (
            {"probes": {"liveness": {"maxBatchAgeSeconds": 5}}},
            "at '/probes/liveness/maxBatchAgeSeconds': minimum: got 5, want 10",
        ),
        (
            {"deployment": {"driverMemory": "2GB"}},
            "at '/deployment/driverMemory': '2GB' does not match pattern",
        ),
        ({"kafka": {"sasl": {"existingSecret": "Bad_Name"}}}, "at '/kafka/sasl/existingSecret'"),
        ({"sparkConf": {"driver.memory": "1g"}}, "invalid propertyName 'driver.memory'"),
        (
            {"metrics": {"serviceMonitor": {"interval": "30 seconds"}}},
            "at '/metrics/serviceMonitor/interval': '30 seconds' does not match pattern",
        ),
        (
            {"networkPolicy": {"egress": {"kafkaPorts": []}}},
            "at '/networkPolicy/egress/kafkaPorts'",
        ),
        ({"tmpVolume": {"sizeLimit": "lots"}}, "at '/tmpVolume/sizeLimit'"),
        ({"replicas": 2}, "at '': additional properties 'replicas' not allowed"),
    ],
)
def test_schema_rejects(values: dict[str, Any], message: str) -> None:
    with pytest.raises(HelmValuesError) as caught:
        render(values)
    text = str(caught.value)
    assert SCHEMA_PREFIX in text
    assert message in text, text


SASL = {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "u"}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"config": {"kafka": SASL}},
            "kafka.sasl.existingSecret is required: config.kafka.security_protocol is SASL_SSL",
        ),
        (
            {"kafka": {"sasl": {"existingSecret": "kafka-user"}}},
            "kafka.sasl.existingSecret is set but config.kafka.security_protocol is PLAINTEXT",
        ),
        (
            {"kafka": {"tls": {"existingSecret": "kafka-ca"}}},
            "kafka.tls.existingSecret is set but config.kafka.security_protocol is PLAINTEXT",
        ),
        (
            {
                "config": {"kafka": {**SASL, "sasl_mechanism": None}},
                "kafka": {"sasl": {"existingSecret": "kafka-user"}},
            },
            "config.kafka.sasl_mechanism is required with a SASL protocol",
        ),
        (
            {
                "config": {"kafka": {**SASL, "sasl_username": None}},
                "kafka": {"sasl": {"existingSecret": "kafka-user"}},
            },
            "config.kafka.sasl_username is required with a SASL protocol",
        ),
        (
            {"checkpoint": {"type": "objectStore"}},
            "checkpoint.objectStore.uri is required with checkpoint.type objectStore",
        ),
        (
            {"mode": "sparkOperator"},
            "mode sparkOperator with a pvc checkpoint needs checkpoint.pvc.accessModes "
            "[ReadWriteMany]",
        ),
    ],
)
def test_chart_rejects_inconsistent_values(values: dict[str, Any], message: str) -> None:
    with pytest.raises(HelmRenderError, match="execution error") as caught:
        render(values)
    assert message in str(caught.value)


def test_every_job_setting_the_chart_does_not_own_is_accepted() -> None:
    """The whole shipped configuration, less the chart's settings, is valid values."""
    shipped = yaml.safe_load((CHART.parents[1] / "conf" / "isrwatch.yaml").read_text())
    for section, name in [
        ("kafka", "sasl_password"),
        ("kafka", "ssl_cafile"),
        ("kafka", "ssl_certfile"),
        ("kafka", "ssl_keyfile"),
        ("streaming", "checkpoint_location"),
        ("streaming", "spark_master"),
        ("streaming", "health_out"),
    ]:
        del shipped[section][name]
    del shipped["metrics"]
    render({"config": shipped})


def test_values_accepted_are_accepted_by_the_job(tmp_path: Any) -> None:
    """Where schema and job could disagree (nulls, numbers as YAML gives them), the job
    loads what the chart renders."""
    values = merged(
        value_set("defaults"),
        {
            "config": {
                "kafka": {"client_id": "isrwatch-prod", "request_timeout_ms": 45000},
                "rules": {"warn_ratio": 0.25, "min_insync_replicas": 2},
                "streaming": {"watermark_delay_ms": 0},
            }
        },
    )
    manifests = render(values)
    config_map = next(m for m in manifests if m["kind"] == "ConfigMap")
    path = tmp_path / "isrwatch.yaml"
    path.write_text(config_map["data"]["isrwatch.yaml"])
    config = load_config(path, environ={})
    assert (config.kafka.client_id, config.kafka.request_timeout_ms) == ("isrwatch-prod", 45000)
    assert (config.rules.warn_ratio, config.rules.min_insync_replicas) == (0.25, 2)
    assert config.streaming.watermark_delay_ms == 0
