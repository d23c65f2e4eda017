"""A request Kafka's authorizer refused, in the words of docs/security.md#acls: which
principal, which operation on which resource, so that an operator knows the one ACL to
grant.

Kafka answers a request its authorizer refuses with an error code, not with the ACL it
wanted: TOPIC_AUTHORIZATION_FAILED (29) names the topic, CLUSTER_AUTHORIZATION_FAILED
(31) the cluster. The operation is the one the request needs (Kafka 4.1's
``KafkaApis``: Produce needs Write on the topic, Fetch Read, Metadata and ListOffsets
Describe, DescribeConfigs DescribeConfigs, DescribeQuorum Describe on the cluster); the
component that sent the request knows it, and says it with :class:`Denial`. Read and
Write imply Describe, so a principal without Read on a topic is refused its metadata
too. A principal that may not describe a topic gets TOPIC_AUTHORIZATION_FAILED whether
the topic exists or not: Kafka does not tell it which.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CLUSTER_AUTHORIZATION_FAILED",
    "CLUSTER_RESOURCE",
    "TOPIC_AUTHORIZATION_FAILED",
    "Denial",
    "DeniedError",
    "denial_in",
    "undescribable_topics",
]

TOPIC_AUTHORIZATION_FAILED = 29
CLUSTER_AUTHORIZATION_FAILED = 31
#: The one name of the CLUSTER resource (Kafka's ``Resource.CLUSTER_NAME``).
CLUSTER_RESOURCE = "kafka-cluster"
_ERROR_NAMES = {
    TOPIC_AUTHORIZATION_FAILED: "TOPIC_AUTHORIZATION_FAILED",
    CLUSTER_AUTHORIZATION_FAILED: "CLUSTER_AUTHORIZATION_FAILED",
}


@dataclass(frozen=True)
class Denial:
    """``who``'s principal lacks ``operation`` (Kafka's ACL operation name: Read, Write,
    Describe, DescribeConfigs) on ``resource_type`` (Topic, Cluster) ``resource``."""

    who: str  # "the job", "the collector", "check restart"
    operation: str
    resource_type: str
    resource: str

    @classmethod
    def on_topic(cls, who: str, operation: str, topic: str) -> Denial:
        return cls(who, operation, "Topic", topic)

    @classmethod
    def on_cluster(cls, who: str, operation: str) -> Denial:
        return cls(who, operation, "Cluster", CLUSTER_RESOURCE)

    @property
    def error(self) -> str:
        topic = self.resource_type == "Topic"
        return _ERROR_NAMES[TOPIC_AUTHORIZATION_FAILED if topic else CLUSTER_AUTHORIZATION_FAILED]

    def __str__(self) -> str:
        return (
            f"not authorized: {self.who}'s principal needs {self.operation} on "
            f"{self.resource_type}:{self.resource} (Kafka answered {self.error}; "
            "docs/security.md#acls)"
        )


class DeniedError(Exception):
    """A request Kafka's authorizer refused; the message is the :class:`Denial`."""

    def __init__(self, denial: Denial) -> None:
        super().__init__(str(denial))
        self.denial = denial


_SAID = re.compile(
    r"not authorized: (?P<who>.+?)'s principal needs (?P<operation>\w+) on "
    r"(?P<type>Topic|Cluster):(?P<resource>\S+) \(Kafka answered"
)


def denial_in(text: str) -> Denial | None:
    """The first denial ``text`` says in :class:`Denial`'s words (an error that went
    through Spark, say), or None."""
    found = _SAID.search(text)
    if found is None:
        return None
    return Denial(found["who"], found["operation"], found["type"], found["resource"])


def undescribable_topics(client_options: Mapping[str, Any], topics: Sequence[str]) -> list[str]:
    """Which of ``topics`` Kafka answers TOPIC_AUTHORIZATION_FAILED for in a Metadata
    request made with ``client_options`` (kafka-python's, ``kafka_python_options``): the
    topics the principal may not describe, and so not read or write either. Used to name
    the topic when the client that was refused does not (the Java client's admin, which
    Spark's connector lists offsets with, says "Topic authorization failed." alone)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(**client_options)
    try:
        described = admin.describe_topics(list(topics))
    finally:
        admin.close()
    return [
        str(topic["name"])
        for topic in described
        if topic.get("error_code") == TOPIC_AUTHORIZATION_FAILED and topic.get("name") in topics
    ]
