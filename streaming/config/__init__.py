"""The job's configuration: one typed object, ``IsrwatchConfig``, and ``load_config``.

The models are plain data, one module per section of the file (``kafka``, ``topics``,
``streaming``, ``metrics``, ``collect``; ``rules`` is ``state.settings``' own), apart from
the loading: ``sources`` reads the YAML file, the environment and the command line,
``loading`` layers them and validates once, ``messages`` turns what pydantic rejects into
one ``<source>: <dotted.key>: <why>`` line per problem.

This package must not import pyspark: the CLI, the collectors and the tests load it without
a JVM; the Spark job builds its session from these settings itself.
"""

from streaming.config.collect import (
    AdminCollectorSettings,
    CollectSettings,
    LogCollectorSettings,
    LogStartPosition,
    MetadataLogCollectorSettings,
)
from streaming.config.errors import ConfigError
from streaming.config.isrwatch_config import IsrwatchConfig
from streaming.config.kafka import (
    KafkaSettings,
    SaslMechanism,
    SecurityProtocol,
    SourceFormat,
    StartingOffsets,
)
from streaming.config.librdkafka import librdkafka_names
from streaming.config.loading import dump_config, load_config
from streaming.config.metrics import MetricsSettings
from streaming.config.sources import (
    CONFIG_DIR_VARIABLE,
    CONFIG_FILE_NAME,
    CONFIG_FILE_VARIABLE,
    ENV_PREFIX,
    default_config_path,
)
from streaming.config.streaming import StateStore, StreamingSettings
from streaming.config.topics import FetchResponsesForm, TopicSettings

__all__ = [
    "CONFIG_DIR_VARIABLE",
    "CONFIG_FILE_NAME",
    "CONFIG_FILE_VARIABLE",
    "ENV_PREFIX",
    "AdminCollectorSettings",
    "CollectSettings",
    "ConfigError",
    "FetchResponsesForm",
    "IsrwatchConfig",
    "KafkaSettings",
    "LogCollectorSettings",
    "LogStartPosition",
    "MetadataLogCollectorSettings",
    "MetricsSettings",
    "SaslMechanism",
    "SecurityProtocol",
    "SourceFormat",
    "StartingOffsets",
    "StateStore",
    "StreamingSettings",
    "TopicSettings",
    "default_config_path",
    "dump_config",
    "librdkafka_names",
    "load_config",
]
