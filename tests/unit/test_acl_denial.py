"""A refused request is named by its ACL, and the name survives the trip through Spark's
error text (the supervisor reads it back: ``connection_errors.explain_failure``)."""

from __future__ import annotations

import json
from pathlib import Path

from streaming.acl_denial import Denial, denial_in
from streaming.job.connection_errors import ConnectionFailure, ConnectionProblem, explain_failure
from streaming.job.source_status import SupervisedStatus


def test_a_denial_names_the_principal_the_operation_and_the_resource() -> None:
    denial = Denial.on_topic("the job", "Write", "partition-health")
    assert str(denial) == (
        "not authorized: the job's principal needs Write on Topic:partition-health "
        "(Kafka answered TOPIC_AUTHORIZATION_FAILED; docs/security.md#acls)"
    )
    cluster = Denial.on_cluster("the collector", "DescribeConfigs")
    assert "DescribeConfigs on Cluster:kafka-cluster (Kafka answered CLUSTER_AUTHORIZATION" in (
        str(cluster)
    )


def test_a_denial_in_a_failed_querys_text_is_the_authorization_reason() -> None:
    denial = Denial.on_topic("the job", "Write", "isrwatch-dead-letters")
    text = (
        "An exception was raised by the Python Proxy. Return Message: Traceback ...\n"
        "streaming.job.sinks.DeliveryError: 1 of 4 records not written (first error: "
        f"KafkaError{{code=TOPIC_AUTHORIZATION_FAILED,val=29}}); {denial}\n"
    )
    assert denial_in(text) == denial
    problem = explain_failure(text)
    assert problem == ConnectionProblem(ConnectionFailure.AUTHORIZATION, str(denial))
    assert problem.describe("k1:9093") == (
        f"a request was refused by Kafka at k1:9093: {denial} (grant the ACL named, or "
        "check kafka.sasl_username (the principal))"
    )
    assert explain_failure("java.lang.OutOfMemoryError: Java heap space") is None


def test_the_supervisors_status_of_the_connector_reads_as_the_readers(tmp_path: Path) -> None:
    path = tmp_path / "source-status.json"
    path.write_text(json.dumps({"consecutive_failures": 7}))  # an earlier run's
    status = SupervisedStatus(path, "k1:9093,k2:9093")
    assert json.loads(path.read_text())["consecutive_failures"] == 0
    status.failed(ConnectionProblem(ConnectionFailure.AUTHORIZATION, "denied"))
    status.failed(None)
    written = json.loads(path.read_text())
    assert written["bootstrap_servers"] == ["k1:9093", "k2:9093"]
    assert (written["consecutive_failures"], written["failures_total"]) == (2, 2)
    assert written["last_error_reason"] is None  # the last failure's: not about Kafka
    status.progressed(None)  # no batch yet: nothing to say
    assert json.loads(path.read_text())["consecutive_failures"] == 2
    status.progressed({"id": "q", "runId": "r", "timestamp": "2026-11-27T09:00:00Z"})
    written = json.loads(path.read_text())
    assert (written["consecutive_failures"], written["failures_total"]) == (0, 2)
    assert written["last_success_at"] is not None
