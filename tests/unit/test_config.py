"""streaming.config: defaults, layering, error messages, secrets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from state.settings import PropagationMode
from streaming.config import (
    ConfigError,
    IsrwatchConfig,
    KafkaSettings,
    SaslMechanism,
    SecurityProtocol,
    default_config_path,
    dump_config,
    load_config,
)
from streaming.job.query import jvm_kafka_options

SHIPPED = Path(__file__).resolve().parents[2] / "conf" / "isrwatch.yaml"
NO_ENV: dict[str, str] = {}

SASL_SSL_YAML = """\
kafka:
  bootstrap_servers: "b1:9093, b2:9093"
  security_protocol: SASL_SSL
  sasl_mechanism: SCRAM-SHA-512
  sasl_username: isrwatch
  ssl_cafile: /etc/kafka/ca.pem
"""


def write(tmp_path: Path, text: str, name: str = "isrwatch.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def problems(excinfo: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    return str(excinfo.value).splitlines()


def leaf_keys(value: object, prefix: str = "") -> set[str]:
    if isinstance(value, dict):
        keys: set[str] = set()
        for name, item in value.items():
            keys |= leaf_keys(item, f"{prefix}{name}.")
        return keys
    return {prefix.rstrip(".")}


# --------------------------------------------------------------------------- defaults


def test_shipped_file_equals_model_defaults() -> None:
    assert default_config_path(NO_ENV) == SHIPPED
    assert load_config(environ=NO_ENV) == IsrwatchConfig()
    assert load_config(SHIPPED, environ=NO_ENV) == IsrwatchConfig()


def test_shipped_file_sets_every_setting() -> None:
    shipped: Any = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))
    assert leaf_keys(shipped) == leaf_keys(IsrwatchConfig().model_dump(mode="json"))


def test_every_field_has_a_description() -> None:
    for section in IsrwatchConfig.model_fields.values():
        assert section.description
        model: Any = section.annotation
        if model.__module__.startswith("streaming.config."):  # rules: state.settings' own
            for name, field in model.model_fields.items():
                assert field.description, f"{model.__name__}.{name}"


def test_config_is_frozen() -> None:
    config = IsrwatchConfig()
    with pytest.raises(ValueError, match="frozen"):
        config.streaming.state_shards = 3


def test_file_named_by_environment(tmp_path: Path) -> None:
    write(tmp_path, "streaming:\n  state_shards: 7\n")
    by_dir = load_config(environ={"ISRWATCH_CONF_DIR": str(tmp_path)})
    assert by_dir.streaming.state_shards == 7
    other = write(tmp_path, "streaming:\n  state_shards: 9\n", name="other.yaml")
    env = {"ISRWATCH_CONF_DIR": str(tmp_path), "ISRWATCH_CONFIG": str(other)}
    assert load_config(environ=env).streaming.state_shards == 9
    # an explicit path wins over both
    assert load_config(tmp_path / "isrwatch.yaml", environ=env).streaming.state_shards == 7


def test_empty_file_means_defaults(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, "# nothing\n"), environ=NO_ENV) == IsrwatchConfig()


# --------------------------------------------------------------------------- layering


@pytest.mark.parametrize(
    ("env", "overrides", "expected"),
    [
        ({}, {}, "file:9092"),
        ({"ISRWATCH_KAFKA__BOOTSTRAP_SERVERS": "env:9092"}, {}, "env:9092"),
        (
            {"ISRWATCH_KAFKA__BOOTSTRAP_SERVERS": "env:9092"},
            {"kafka.bootstrap_servers": "cli:9092"},
            "cli:9092",
        ),
        (
            {"ISRWATCH_KAFKA__BOOTSTRAP_SERVERS": "env:9092"},
            {"kafka.bootstrap_servers": None},  # an unset CLI flag
            "env:9092",
        ),
    ],
)
def test_precedence_file_env_overrides(
    tmp_path: Path, env: dict[str, str], overrides: dict[str, object], expected: str
) -> None:
    path = write(tmp_path, "kafka:\n  bootstrap_servers: file:9092\n  client_id: from-file\n")
    config = load_config(path, overrides, env)
    assert config.kafka.bootstrap_servers == expected
    assert config.kafka.client_id == "from-file"  # the rest of the section stays
    assert config.kafka.request_timeout_ms == 30000  # and defaults fill the gaps


def test_nested_environment_variable(tmp_path: Path) -> None:
    path = write(tmp_path, "rules:\n  propagation:\n    tick_ms: 1000\n")
    config = load_config(path, environ={"ISRWATCH_RULES__PROPAGATION__MODE": "kraft"})
    assert config.rules.propagation.mode is PropagationMode.KRAFT
    assert config.rules.propagation.tick_ms == 1000


def test_environment_values_are_yaml_scalars_names_case_insensitive() -> None:
    env = {
        "ISRWATCH_STREAMING__STATE_SHARDS": "16",
        "isrwatch_metrics__enabled": "false",
        "ISRWATCH_RULES__WARN_RATIO": "0.25",
        "ISRWATCH_STREAMING__HEALTH_OUT": "",
        "HOME": "/root",  # not ours: ignored
    }
    config = load_config(environ=env)
    assert config.streaming.state_shards == 16
    assert config.metrics.enabled is False
    assert config.rules.warn_ratio == 0.25
    assert config.streaming.health_out is None


def test_string_settings_from_environment_stay_strings() -> None:
    env = {
        "ISRWATCH_KAFKA__SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "ISRWATCH_KAFKA__SASL_MECHANISM": "PLAIN",
        "ISRWATCH_KAFKA__SASL_USERNAME": "yes",
        "ISRWATCH_KAFKA__SASL_PASSWORD": "123456",
    }
    kafka = load_config(environ=env).kafka
    assert kafka.sasl_username == "yes"
    assert kafka.sasl_password is not None
    assert kafka.sasl_password.get_secret_value() == "123456"


def test_layers_complete_each_other(tmp_path: Path) -> None:
    """SASL_SSL in the file, password from the environment: valid together."""
    path = write(tmp_path, SASL_SSL_YAML)
    config = load_config(path, environ={"ISRWATCH_KAFKA__SASL_PASSWORD": "s3cret"})
    assert config.kafka.security_protocol is SecurityProtocol.SASL_SSL
    assert config.kafka.sasl_mechanism is SaslMechanism.SCRAM_SHA_512


def test_overrides_accept_paths(tmp_path: Path) -> None:
    config = load_config(
        overrides={"streaming.checkpoint_location": tmp_path / "cp", "metrics.port": 9999},
        environ=NO_ENV,
    )
    assert config.streaming.checkpoint_location == str(tmp_path / "cp")
    assert config.metrics.port == 9999


def test_kubernetes_service_links_are_ignored() -> None:
    env = {
        "ISRWATCH_SERVICE_HOST": "10.0.0.7",
        "ISRWATCH_SERVICE_PORT": "9464",
        "ISRWATCH_PORT": "tcp://10.0.0.7:9464",
        "ISRWATCH_PORT_9464_TCP_ADDR": "10.0.0.7",
    }
    assert load_config(environ=env) == IsrwatchConfig()


# --------------------------------------------------------------------------- errors


def test_unknown_key_in_file(tmp_path: Path) -> None:
    path = write(tmp_path, "streaming:\n  foo: 1\n  state_shard: 4\n")
    with pytest.raises(ConfigError) as excinfo:
        load_config(path, environ=NO_ENV)
    assert problems(excinfo) == [
        f"{path}: streaming.foo: unknown setting",
        f"{path}: streaming.state_shard: unknown setting (did you mean streaming.state_shards?)",
    ]


def test_unknown_section_in_file(tmp_path: Path) -> None:
    path = write(tmp_path, "kafak:\n  client_id: x\n")
    with pytest.raises(ConfigError, match=r"kafak: unknown setting \(did you mean kafka\?\)"):
        load_config(path, environ=NO_ENV)


def test_unknown_environment_variable() -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_config(environ={"ISRWATCH_STREAMING__FOO": "1"})
    (line,) = problems(excinfo)
    assert line.startswith("environment variable ISRWATCH_STREAMING__FOO: streaming.foo: ")
    assert "unknown setting" in line


def test_environment_variable_with_single_underscore() -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_config(environ={"ISRWATCH_KAFKA_BOOTSTRAP_SERVERS": "h:9092"})
    assert "environment variable ISRWATCH_KAFKA_BOOTSTRAP_SERVERS:" in str(excinfo.value)
    assert "ISRWATCH_KAFKA__BOOTSTRAP_SERVERS" in str(excinfo.value)  # the hint


def test_environment_variable_naming_a_section() -> None:
    with pytest.raises(ConfigError, match="ISRWATCH_METRICS: metrics: is a section"):
        load_config(environ={"ISRWATCH_METRICS": "off"})


def test_unknown_key_in_overrides() -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_config(overrides={"kafka.bootstrap": "h:9092"}, environ=NO_ENV)
    assert problems(excinfo) == [
        "command line: kafka.bootstrap: unknown setting (did you mean kafka.bootstrap_servers?)"
    ]


def test_wrong_type(tmp_path: Path) -> None:
    path = write(tmp_path, "metrics:\n  port: abc\n")
    with pytest.raises(ConfigError) as excinfo:
        load_config(path, environ=NO_ENV)
    assert problems(excinfo) == [f"{path}: metrics.port: must be an integer (got 'abc')"]


def test_wrong_type_from_environment() -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_config(environ={"ISRWATCH_METRICS__ENABLED": "maybe"})
    assert problems(excinfo) == [
        "environment variable ISRWATCH_METRICS__ENABLED: metrics.enabled: "
        "must be true or false (got 'maybe')"
    ]


def test_negative_interval_says_which_key_and_why(tmp_path: Path) -> None:
    path = write(tmp_path, "streaming:\n  trigger_interval_ms: -5\n")
    with pytest.raises(ConfigError) as excinfo:
        load_config(path, environ=NO_ENV)
    assert problems(excinfo) == [
        f"{path}: streaming.trigger_interval_ms: must be greater than 0 (got -5)"
    ]


def test_every_problem_is_listed_with_its_source(tmp_path: Path) -> None:
    path = write(tmp_path, "metrics:\n  port: 70000\nstreaming:\n  watermark_delay_ms: -1\n")
    with pytest.raises(ConfigError) as excinfo:
        load_config(
            path,
            overrides={"topics.dead_letters": "bad topic"},
            environ={"ISRWATCH_KAFKA__STARTING_OFFSETS": "newest"},
        )
    lines = problems(excinfo)
    assert len(lines) == 4
    assert (
        "environment variable ISRWATCH_KAFKA__STARTING_OFFSETS: kafka.starting_offsets: "
        "must be 'earliest' or 'latest' (got 'newest')"
    ) in lines
    assert "command line: topics.dead_letters: must be a Kafka topic name" in lines[1]
    assert f"{path}: streaming.watermark_delay_ms: must be greater than or equal to 0" in lines[2]
    assert f"{path}: metrics.port: must be less than or equal to 65535 (got 70000)" in lines


def test_distinct_topics() -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_config(overrides={"topics.partition_health": "controller-events"}, environ=NO_ENV)
    assert problems(excinfo) == [
        "command line: topics.partition_health: same topic as topics.controller_events "
        "('controller-events')"
    ]


def test_invalid_yaml_reports_line(tmp_path: Path) -> None:
    path = write(tmp_path, "kafka:\n  client_id: a\n  bootstrap_servers: [b1:9092\nmetrics: {}\n")
    with pytest.raises(ConfigError) as excinfo:
        load_config(path, environ=NO_ENV)
    (line,) = problems(excinfo)
    assert line.startswith(f"{path}: invalid YAML at line 4,")


def test_duplicate_key_is_invalid_yaml(tmp_path: Path) -> None:
    path = write(tmp_path, "kafka:\n  client_id: a\nmetrics:\n  port: 1\nkafka:\n  client_id: b\n")
    with pytest.raises(
        ConfigError, match=r"invalid YAML at line 5, column 1: duplicate key 'kafka'"
    ):
        load_config(path, environ=NO_ENV)


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, "- kafka\n- metrics\n")
    with pytest.raises(ConfigError, match="top level must be a mapping of sections"):
        load_config(path, environ=NO_ENV)


def test_section_must_be_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, "metrics: 9464\n")
    with pytest.raises(ConfigError) as excinfo:
        load_config(path, environ=NO_ENV)
    assert problems(excinfo) == [
        f"{path}: metrics: must be a section (a mapping of settings) (got 9464)"
    ]


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match=f"^{missing}: file not found$"):
        load_config(missing, environ=NO_ENV)
    with pytest.raises(ConfigError, match="file not found"):
        load_config(environ={"ISRWATCH_CONFIG": str(missing)})


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path, environ=NO_ENV)  # a directory


def test_file_problems_and_environment_problems_together(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_config(tmp_path / "nope.yaml", environ={"ISRWATCH_NOPE__X": "1"})
    lines = problems(excinfo)
    assert len(lines) == 2
    assert lines[0].endswith("nope.yaml: file not found")
    assert lines[1].startswith("environment variable ISRWATCH_NOPE__X: nope.x: unknown setting")


# --------------------------------------------------------------------------- security


def test_sasl_protocol_needs_mechanism_and_credentials() -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_config(environ={"ISRWATCH_KAFKA__SECURITY_PROTOCOL": "SASL_SSL"})
    source = "environment variable ISRWATCH_KAFKA__SECURITY_PROTOCOL"
    assert problems(excinfo) == [
        f"{source}: kafka.sasl_mechanism: required when security_protocol is SASL_SSL",
        f"{source}: kafka.sasl_username: required when security_protocol is SASL_SSL",
        f"{source}: kafka.sasl_password: required when security_protocol is SASL_SSL",
    ]


def test_sasl_mechanism_without_sasl_protocol(tmp_path: Path) -> None:
    path = write(tmp_path, "kafka:\n  security_protocol: SSL\n  sasl_mechanism: PLAIN\n")
    with pytest.raises(ConfigError) as excinfo:
        load_config(path, environ=NO_ENV)
    assert problems(excinfo) == [
        f"{path}: kafka.sasl_mechanism: only used with security_protocol SASL_PLAINTEXT or "
        "SASL_SSL (security_protocol is SSL)"
    ]


def test_ssl_files_need_a_tls_protocol() -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_config(overrides={"kafka.ssl_cafile": "/ca.pem"}, environ=NO_ENV)
    assert problems(excinfo) == [
        "command line: kafka.ssl_cafile: only used with security_protocol SSL or SASL_SSL "
        "(security_protocol is PLAINTEXT)"
    ]


def test_sasl_validation_on_the_model() -> None:
    with pytest.raises(ValueError, match="sasl_password: required"):
        KafkaSettings(
            security_protocol=SecurityProtocol.SASL_PLAINTEXT,
            sasl_mechanism=SaslMechanism.PLAIN,
            sasl_username="u",
        )


def test_secrets_never_printed(tmp_path: Path) -> None:
    path = write(tmp_path, SASL_SSL_YAML)
    config = load_config(path, environ={"ISRWATCH_KAFKA__SASL_PASSWORD": "hunter2-s3cret"})
    dumped = dump_config(config)
    assert "hunter2-s3cret" not in dumped
    assert "sasl_password: '**********'" in dumped
    assert "hunter2-s3cret" not in repr(config)
    assert "hunter2-s3cret" not in str(config)

    # nor in error messages, nor in the exception chain
    with pytest.raises(ConfigError) as excinfo:
        load_config(environ={"ISRWATCH_KAFKA__SASL_PASSWORD": "hunter2-s3cret"})
    assert "hunter2-s3cret" not in str(excinfo.value)
    assert excinfo.value.__cause__ is None
    assert excinfo.value.__suppress_context__
    with pytest.raises(ConfigError) as excinfo:
        load_config(overrides={"kafka.sasl_password": 31337}, environ=NO_ENV)
    assert "31337" not in str(excinfo.value)
    with pytest.raises(ValueError, match="sasl_password") as direct:
        KafkaSettings(sasl_password="hunter2-s3cret")
    assert "hunter2-s3cret" not in str(direct.value)


def test_dump_config_is_loadable(tmp_path: Path) -> None:
    config = load_config(overrides={"rules.propagation.mode": "kraft"}, environ=NO_ENV)
    path = write(tmp_path, dump_config(config), name="dumped.yaml")
    assert load_config(path, environ=NO_ENV) == config


def test_kafka_python_options_for_sasl_ssl(tmp_path: Path) -> None:
    path = write(tmp_path, SASL_SSL_YAML)
    config = load_config(path, environ={"ISRWATCH_KAFKA__SASL_PASSWORD": "pw"})
    assert config.kafka.kafka_python_options() == {
        "bootstrap_servers": ["b1:9093", "b2:9093"],
        "client_id": "isrwatch",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "isrwatch",
        "sasl_plain_password": "pw",
        "ssl_check_hostname": True,
        "ssl_cafile": "/etc/kafka/ca.pem",
        "request_timeout_ms": 30000,
        "retry_backoff_ms": 1000,
        "reconnect_backoff_max_ms": 30000,
    }


def test_kafka_python_options_plaintext() -> None:
    assert IsrwatchConfig().kafka.kafka_python_options() == {
        "bootstrap_servers": ["127.0.0.1:9092"],
        "client_id": "isrwatch",
        "security_protocol": "PLAINTEXT",
        "request_timeout_ms": 30000,
        "retry_backoff_ms": 1000,
        "reconnect_backoff_max_ms": 30000,
    }


# --------------------------------------------------------------------------- collect


def test_collect_section_defaults_and_layers(tmp_path: Path) -> None:
    defaults = IsrwatchConfig().collect
    assert (defaults.logs.time_zone, defaults.logs.start_at.value) == ("UTC", "beginning")
    assert defaults.logs.metrics_port != defaults.admin.metrics_port
    path = write(tmp_path, "collect:\n  logs:\n    time_zone: Europe/Paris\n    start_at: end\n")
    env = {"ISRWATCH_COLLECT__ADMIN__POLL_INTERVAL_MS": "2500"}
    collect = load_config(path, {"collect.admin.fetch_responses": False}, env).collect
    assert (collect.logs.time_zone, collect.logs.start_at.value) == ("Europe/Paris", "end")
    assert collect.admin.poll_interval_ms == 2500
    assert collect.admin.fetch_responses is False


def test_collect_settings_are_checked(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "collect:\n  logs:\n    time_zone: Europe/Atlantis\n"
        "    start_at: middle\n  admin:\n    poll_interval_ms: 0\n",
    )
    with pytest.raises(ConfigError) as excinfo:
        load_config(path, environ=NO_ENV)
    lines = problems(excinfo)
    assert (
        f"{path}: collect.logs.time_zone: must be an IANA time zone name, such as UTC or "
        "Europe/Paris (got 'Europe/Atlantis')" in lines
    )
    assert any(line.startswith(f"{path}: collect.logs.start_at: ") for line in lines)
    assert any(line.startswith(f"{path}: collect.admin.poll_interval_ms: ") for line in lines)
    assert len(lines) == 3


def test_the_cap_read_under_its_name_before_it_counted_events(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old = write(tmp_path, "kafka:\n  max_records_per_partition_per_batch: 2500\n")
    assert load_config(old, environ=NO_ENV).kafka.max_events_per_partition_per_batch == 2500
    assert "max_records_per_partition_per_batch is now" in caplog.text
    both = write(
        tmp_path,
        "kafka:\n  max_records_per_partition_per_batch: 2500\n"
        "  max_events_per_partition_per_batch: 7\n",
    )
    with pytest.raises(ConfigError, match="max_records_per_partition_per_batch"):
        load_config(both, environ=NO_ENV)  # both: the old one is an unknown key


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"topics.fetch_responses_form": "json"}, 3_000_000),  # one event a record
        ({}, 3_000_000),  # packed, the default: records, the connector cannot count rows
        ({"topics.fetch_responses_form": "packed", "kafka.max_records_per_batch": 9}, 9),
        ({"kafka.max_events_per_partition_per_batch": 4095}, 4095),
    ],
)
def test_spark_connectors_records_per_trigger(overrides: dict[str, Any], expected: int) -> None:
    config = load_config(None, overrides, environ=NO_ENV)
    assert jvm_kafka_options(config)["maxOffsetsPerTrigger"] == str(expected)
