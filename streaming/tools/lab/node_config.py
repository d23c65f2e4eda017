"""Each node's configuration files: ``server.properties`` and Kafka's default log layout.

The settings that matter to what isrwatch watches, and why each has its value:

* ``replica.lag.time.max.ms`` (T, 10 s by default here): the leader's shrink rule;
  ``isr-expiration`` runs every T/2 (``ReplicaManager.startup``, 3.9.1 and 4.1.1).
* ``broker.session.timeout.ms`` (KRaft) and ``zookeeper.session.timeout.ms`` (ZooKeeper
  mode) are set above 1.5 x T. A paused (SIGSTOP) broker sends no heartbeat, and the
  controller fences it after its session times out, removing it from every ISR at once.
  With Kafka's defaults (9 s sessions, T = 30 s) fencing always comes first, so a paused
  follower could never show the leader's rule; longer sessions let it, and the
  idle-partition scenario shows the fence.
* Inter-broker traffic goes through a listener of its own (``REPLICATION``), advertised
  at the lab's fault proxy, so that ``lab fault cut`` can stop followers fetching from a
  broker while its clients and the controller still reach it.
* Small-machine sizes (threads, the cleaner's buffer, internal topics' partitions): a
  3-node cluster shares 2 cores with Spark.

Logs go to files in Kafka's default layout (``server.log``, ``state-change.log``,
``controller.log``...; pattern ``[%d] %p %m (%c)%n``) with ``state.change.logger`` at
TRACE, the way an operator turns it on to follow partition state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "CONSOLE_LAYOUTS",
    "DEFAULT_LAG_TIME_MAX_MS",
    "KAFKA_LOG_FILES",
    "STANDARD_AUTHORIZER",
    "ClientListener",
    "ConsoleLayout",
    "NodeLayout",
    "kafka_log_config",
    "render_properties",
    "server_properties",
    "zookeeper_log_config",
    "zookeeper_properties",
]

DEFAULT_LAG_TIME_MAX_MS = 10_000
LOG_PATTERN = "[%d] %p %m (%c)%n"

# Kafka's default appenders: (appender name, file). Every logger not routed below writes
# to server.log.
KAFKA_LOG_FILES: tuple[tuple[str, str], ...] = (
    ("KafkaAppender", "server.log"),
    ("StateChangeAppender", "state-change.log"),
    ("RequestAppender", "kafka-request.log"),
    ("CleanerAppender", "log-cleaner.log"),
    ("ControllerAppender", "controller.log"),
    ("AuthorizerAppender", "kafka-authorizer.log"),
)
# Loggers routed to their own file only (additivity off), with their level.
_ROUTED: tuple[tuple[str, str, str], ...] = (
    ("kafka.request.logger", "WARN", "RequestAppender"),
    ("kafka.network.RequestChannel$", "WARN", "RequestAppender"),
    ("kafka.controller", "TRACE", "ControllerAppender"),
    ("org.apache.kafka.controller", "INFO", "ControllerAppender"),
    ("kafka.log.LogCleaner", "INFO", "CleanerAppender"),
    ("org.apache.kafka.storage.internals.log.LogCleaner", "INFO", "CleanerAppender"),
    ("state.change.logger", "TRACE", "StateChangeAppender"),
    ("kafka.authorizer.logger", "INFO", "AuthorizerAppender"),
)


STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@dataclass(frozen=True)
class ClientListener:
    """The security of the listener clients use (named ``CLIENT``), on the broker itself.

    ``protocol``: ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``. Users log in with
    ``sasl_mechanism``: PLAIN checks ``users`` (name -> password) in the listener's JAAS
    configuration; SCRAM users are stored in the metadata log by StorageTool's
    ``--add-scram`` at format (``format_arguments``), as an operator creates them.
    ``keystore``: a PEM file with the broker's key and certificate chain (the TLS
    protocols); ``client_ca``: with it, clients must present a certificate that CA
    signed (``ssl.client.auth=required``: mutual TLS, the principal is the certificate's
    subject). ``authorizer``: the StandardAuthorizer, with ``super_users`` (names) allowed
    everything; the replication and controller listeners stay PLAINTEXT and their
    principal, ANONYMOUS, is a super user, so that the brokers may talk to each other.
    """

    protocol: str
    sasl_mechanism: str | None = None
    users: Mapping[str, str] = field(default_factory=dict)
    keystore: Path | None = None
    client_ca: Path | None = None
    authorizer: bool = False
    super_users: tuple[str, ...] = ()

    def properties(self) -> dict[str, str]:
        prefix = "listener.name.client."
        settings: dict[str, str] = {}
        if self.protocol.endswith("SSL"):
            if self.keystore is None:
                raise ValueError(f"a {self.protocol} listener needs the broker's keystore")
            settings |= {
                f"{prefix}ssl.keystore.type": "PEM",
                f"{prefix}ssl.keystore.location": str(self.keystore),
            }
            if self.client_ca is not None:
                settings |= {
                    f"{prefix}ssl.client.auth": "required",
                    f"{prefix}ssl.truststore.type": "PEM",
                    f"{prefix}ssl.truststore.location": str(self.client_ca),
                }
        if self.protocol.startswith("SASL"):
            mechanism = self.sasl_mechanism
            if mechanism is None:
                raise ValueError(f"a {self.protocol} listener needs a SASL mechanism")
            module = _LOGIN_MODULES[mechanism]
            plain_users = (
                "".join(f' user_{name}="{password}"' for name, password in self.users.items())
                if mechanism == "PLAIN"
                else ""
            )
            settings |= {
                "sasl.enabled.mechanisms": mechanism,
                f"{prefix}{mechanism.lower()}.sasl.jaas.config": (
                    f"{module} required{plain_users};"
                ),
            }
        if self.authorizer:
            settings |= {
                "authorizer.class.name": STANDARD_AUTHORIZER,
                "super.users": ";".join(
                    f"User:{name}" for name in ("ANONYMOUS", *self.super_users)
                ),
            }
        return settings

    def format_arguments(self) -> list[str]:
        """StorageTool's ``--add-scram`` for each SCRAM user."""
        if self.sasl_mechanism is None or not self.sasl_mechanism.startswith("SCRAM"):
            return []
        arguments = []
        for name, password in self.users.items():
            arguments += ["--add-scram", f"{self.sasl_mechanism}=[name={name},password={password}]"]
        return arguments


@dataclass(frozen=True)
class ConsoleLayout:
    """One more appender that every logger writes to, in one stream, the way a packaged
    image logs to its console; the log corpus matrix writes each to ``<file>`` beside
    Kafka's own files, from the same run."""

    file: str
    pattern: str  # log4j's: the same text for log4j 1 (reload4j) and log4j2
    where: str  # who logs this way


CONSOLE_LAYOUTS: tuple[ConsoleLayout, ...] = (
    ConsoleLayout(
        "console.log",
        LOG_PATTERN,
        "Kafka's stdout appender (config/log4j.properties to 3.9, config/log4j2.yaml in"
        " 4.x), which Confluent's cp-kafka and Bitnami's images keep: every logger in one"
        " stream",
    ),
    ConsoleLayout(
        "console-strimzi.log",
        "%d{ISO8601} %p %m (%c) [%t]%n",
        "Strimzi's Kafka images (its log4j ConversionPattern): no brackets around the time,"
        " the thread after the logger; log4j2's ISO8601 puts a 'T' in the time",
    ),
)


@dataclass(frozen=True)
class NodeLayout:
    """Where one node keeps its files and listens."""

    node_id: int
    home: Path  # the node's directory: configuration, logs/, data/, metadata/
    client_port: int  # PLAINTEXT, for clients and the collectors
    replication_port: int  # REPLICATION, inter-broker (behind the fault proxy)
    replication_advertised_port: int  # the fault proxy's port in front of it
    controller_port: int | None  # CONTROLLER (KRaft)

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def data(self) -> Path:
        return self.home / "data"

    @property
    def metadata(self) -> Path:
        return self.home / "metadata"

    @property
    def properties_file(self) -> Path:
        return self.home / "server.properties"

    def log_files(self) -> list[Path]:
        return [self.logs / name for _, name in KAFKA_LOG_FILES]


def _common(
    node: NodeLayout, brokers: int, lag_time_max_ms: int, client: ClientListener | None
) -> dict[str, str]:
    replicas = min(3, brokers)
    # Clients' listener: PLAINTEXT, or CLIENT with the protocol of ``client``.
    name, protocol = ("CLIENT", client.protocol) if client else ("PLAINTEXT", "PLAINTEXT")
    return {
        "listeners": ",".join(
            [
                f"{name}://127.0.0.1:{node.client_port}",
                f"REPLICATION://127.0.0.1:{node.replication_port}",
                *(
                    [f"CONTROLLER://127.0.0.1:{node.controller_port}"]
                    if node.controller_port is not None
                    else []
                ),
            ]
        ),
        "advertised.listeners": f"{name}://127.0.0.1:{node.client_port},"
        f"REPLICATION://127.0.0.1:{node.replication_advertised_port}",
        "listener.security.protocol.map": f"{name}:{protocol},REPLICATION:PLAINTEXT,"
        "CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "REPLICATION",
        "log.dirs": str(node.data),
        "replica.lag.time.max.ms": str(lag_time_max_ms),
        "num.network.threads": "2",
        "num.io.threads": "2",
        "num.replica.fetchers": "1",
        "background.threads": "2",
        "log.cleaner.dedupe.buffer.size": str(4 * 1024 * 1024),
        "offsets.topic.num.partitions": "5",
        "offsets.topic.replication.factor": str(replicas),
        "transaction.state.log.num.partitions": "5",
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.min.isr": str(min(2, replicas)),
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
        # the default from 1.0; 0.10 and 0.11 only mark a deleted topic without it
        "delete.topic.enable": "true",
        **(client.properties() if client else {}),
    }


def server_properties(
    node: NodeLayout,
    *,
    voters: Mapping[int, int] | None,
    zookeeper_port: int | None,
    brokers: int,
    lag_time_max_ms: int = DEFAULT_LAG_TIME_MAX_MS,
    client: ClientListener | None = None,
) -> dict[str, str]:
    """One node's settings: a combined KRaft node when ``voters`` (node id -> controller
    port) is given, else a ZooKeeper-mode broker of the ensemble at ``zookeeper_port``;
    the clients' listener secured by ``client`` when given."""
    settings = _common(node, brokers, lag_time_max_ms, client)
    session_ms = str(2 * lag_time_max_ms)  # above 1.5 x T: see the module's docstring
    if voters is not None:
        settings |= {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": ",".join(
                f"{voter}@127.0.0.1:{port}" for voter, port in sorted(voters.items())
            ),
            "controller.listener.names": "CONTROLLER",
            "metadata.log.dir": str(node.metadata),
            "broker.session.timeout.ms": session_ms,
        }
    else:
        if zookeeper_port is None:
            raise ValueError("a ZooKeeper-mode broker needs its ensemble's port")
        settings |= {
            "broker.id": str(node.node_id),
            "zookeeper.connect": f"127.0.0.1:{zookeeper_port}",
            "zookeeper.session.timeout.ms": session_ms,
        }
    return settings


def zookeeper_properties(data_dir: Path, port: int) -> dict[str, str]:
    return {
        "dataDir": str(data_dir),
        "clientPort": str(port),
        "clientPortAddress": "127.0.0.1",
        "maxClientCnxns": "0",
        "admin.enableServer": "false",
        "4lw.commands.whitelist": "ruok,stat,mntr",
    }


def render_properties(settings: Mapping[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def kafka_log_config(log4j2: bool, consoles: tuple[ConsoleLayout, ...] = ()) -> str:
    """Kafka's default layout as a log4j2 properties file (Kafka 4.x) or a log4j 1
    properties file (0.10 to 3.x, read by log4j 1.2 or reload4j), and each of
    ``consoles`` as one more appender of every logger. The directory comes from the
    ``kafka.logs.dir`` system property, as with Kafka's own scripts."""
    console_names = [f"Console{index}" for index in range(len(consoles))]
    if log4j2:
        return _log4j2_config(consoles)
    lines = [f"log4j.rootLogger=INFO, {', '.join(['KafkaAppender', *console_names])}"]
    files = [(name, file, LOG_PATTERN) for name, file in KAFKA_LOG_FILES]
    files += [(name, c.file, c.pattern) for name, c in zip(console_names, consoles, strict=True)]
    for name, file, pattern in files:
        prefix = f"log4j.appender.{name}"
        lines += [
            f"{prefix}=org.apache.log4j.DailyRollingFileAppender",
            f"{prefix}.DatePattern='.'yyyy-MM-dd-HH",
            f"{prefix}.File=${{kafka.logs.dir}}/{file}",
            f"{prefix}.layout=org.apache.log4j.PatternLayout",
            f"{prefix}.layout.ConversionPattern={pattern}",
        ]
    lines += ["log4j.logger.kafka=INFO", "log4j.logger.org.apache.kafka=INFO"]
    for logger, level, appender in _ROUTED:
        lines += [
            f"log4j.logger.{logger}={level}, {', '.join([appender, *console_names])}",
            f"log4j.additivity.{logger}=false",
        ]
    return "\n".join(lines) + "\n"


def _log4j2_config(consoles: tuple[ConsoleLayout, ...]) -> str:
    lines = [f"property.logPattern = {LOG_PATTERN}"]
    console_names = [f"Console{index}" for index in range(len(consoles))]
    for name, console in zip(console_names, consoles, strict=True):
        prefix = f"appender.{name}"
        lines += [
            f"{prefix}.type = File",
            f"{prefix}.name = {name}",
            f"{prefix}.fileName = ${{sys:kafka.logs.dir}}/{console.file}",
            f"{prefix}.layout.type = PatternLayout",
            f"{prefix}.layout.pattern = {console.pattern}",
        ]
    for name, file in KAFKA_LOG_FILES:
        prefix = f"appender.{name}"
        lines += [
            f"{prefix}.type = RollingFile",
            f"{prefix}.name = {name}",
            f"{prefix}.fileName = ${{sys:kafka.logs.dir}}/{file}",
            f"{prefix}.filePattern = ${{sys:kafka.logs.dir}}/{file}.%d{{yyyy-MM-dd-HH}}",
            f"{prefix}.layout.type = PatternLayout",
            f"{prefix}.layout.pattern = ${{logPattern}}",
            f"{prefix}.policy.type = TimeBasedTriggeringPolicy",
            f"{prefix}.policy.modulate = true",
        ]
    lines += ["rootLogger.level = INFO", "rootLogger.appenderRef.main.ref = KafkaAppender"]
    lines += [f"rootLogger.appenderRef.{name}.ref = {name}" for name in console_names]
    for index, (logger, level, appender) in enumerate(_ROUTED):
        prefix = f"logger.routed{index}"
        lines += [
            f"{prefix}.name = {logger}",
            f"{prefix}.level = {level}",
            f"{prefix}.additivity = false",
            f"{prefix}.appenderRef.file.ref = {appender}",
        ]
        lines += [f"{prefix}.appenderRef.{name}.ref = {name}" for name in console_names]
    return "\n".join(lines) + "\n"


def zookeeper_log_config() -> str:
    """ZooKeeper's server log, one file (``zookeeper.log``) in the same pattern."""
    return (
        "log4j.rootLogger=INFO, ZooKeeperAppender\n"
        "log4j.appender.ZooKeeperAppender=org.apache.log4j.FileAppender\n"
        "log4j.appender.ZooKeeperAppender.File=${zookeeper.log.dir}/zookeeper.log\n"
        "log4j.appender.ZooKeeperAppender.layout=org.apache.log4j.PatternLayout\n"
        f"log4j.appender.ZooKeeperAppender.layout.ConversionPattern={LOG_PATTERN}\n"
    )
