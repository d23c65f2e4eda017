"""``KafkaAdminSource`` describes the cluster (DescribeCluster, Metadata) from one broker,
poll after poll, and turns to another only when that one fails to answer
(streaming/feeds/collectors/admin_source.py, ``_ask_describing_broker``).

On a stand-in of kafka-python's admin client and connection manager, whose least loaded
broker changes at every call as kafka-python's does (it shuffles the idle ones): no
broker needed to see which broker each request goes to.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from itertools import cycle
from typing import Any

import kafka.errors as errors
import pytest

from streaming.config import IsrwatchConfig
from streaming.feeds.collectors.admin_source import BrokerSilentError, KafkaAdminSource


@dataclass(frozen=True)
class Node:
    node_id: int


@dataclass
class Cache:
    ids: tuple[int, ...]

    def brokers(self) -> list[Node]:
        return [Node(i) for i in self.ids]


@dataclass
class Manager:
    """Answers each request with the id of the broker it went to, unless that broker is
    hung (``failing``): then the send fails, as a request past its timeout does."""

    least_loaded: Iterator[int]
    cluster: Cache
    failing: set[int] = field(default_factory=set)
    refusal: Exception | None = None  # what every broker answers instead, if set
    asked: list[int | None] = field(default_factory=list)

    def least_loaded_node(self) -> int:
        return next(self.least_loaded)

    async def send(self, request: Any, node_id: int | None = None) -> str:
        self.asked.append(node_id)
        if node_id in self.failing:
            raise TimeoutError(f"request to {node_id} timed out")
        if self.refusal is not None:
            raise self.refusal
        return f"{request} answered by {node_id}"

    def run(self, coroutine: Callable[[], Coroutine[Any, Any, str]]) -> str:
        return asyncio.run(coroutine())


@dataclass
class Admin:
    _manager: Manager


Gaps = list[tuple[str, Exception]]


def source_over(manager: Manager, gaps: Gaps, monkeypatch: pytest.MonkeyPatch) -> KafkaAdminSource:
    monkeypatch.setattr("kafka.KafkaAdminClient", lambda **options: Admin(manager))
    config = IsrwatchConfig.model_validate({"kafka": {"bootstrap_servers": "localhost:9092"}})
    return KafkaAdminSource(config.kafka, on_unavailable=lambda api, e: gaps.append((api, e)))


def a_poll(source: KafkaAdminSource) -> str:
    """What one poll's Metadata request is answered with: a new poll starts with no
    broker silent, as ``snapshot`` does."""
    source._silent = set()
    return str(source._ask_describing_broker("metadata", lambda: "Metadata"))


def test_every_poll_asks_the_broker_that_answered_the_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    manager = Manager(cycle([2, 3, 1]), Cache((1, 2, 3)))
    source = source_over(manager, [], monkeypatch)
    answers = [a_poll(source) for _ in range(4)]
    assert answers == ["Metadata answered by 2"] * 4
    assert manager.asked == [2, 2, 2, 2]
    assert source.describing_broker == 2


def test_a_broker_that_does_not_answer_hands_over_within_the_poll(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gaps: Gaps = []
    manager = Manager(cycle([2, 3]), Cache((1, 2, 3)))
    source = source_over(manager, gaps, monkeypatch)
    a_poll(source)
    manager.failing = {2}  # the describing broker hangs
    assert a_poll(source) == "Metadata answered by 3"
    [(api, error)] = gaps
    assert api == "metadata"
    assert isinstance(error, BrokerSilentError)
    assert error.broker == 2
    assert source._silent == {2}  # not asked again in this poll (ListOffsets, configs)
    manager.failing = set()  # back: the collector stays with the broker that answered
    assert [a_poll(source) for _ in range(2)] == ["Metadata answered by 3"] * 2
    assert manager.asked == [2, 2, 3, 3, 3]


def test_a_least_loaded_broker_silent_this_poll_is_passed_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # kafka-python's least loaded is the hung broker again (connected, nothing in
    # flight once its request timed out): the lowest id of the others answers
    manager = Manager(cycle([3]), Cache((1, 2, 3)), failing={3})
    source = source_over(manager, [], monkeypatch)
    assert a_poll(source) == "Metadata answered by 1"
    assert manager.asked == [3, 1]


def test_the_poll_fails_when_the_second_broker_fails_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gaps: Gaps = []
    manager = Manager(cycle([1, 2]), Cache((1, 2, 3)), failing={1, 2})
    source = source_over(manager, gaps, monkeypatch)
    with pytest.raises(TimeoutError, match="request to 2"):
        a_poll(source)
    assert manager.asked == [1, 2]
    assert [api for api, _ in gaps] == ["metadata"]  # the first; the second fails the poll
    assert source.describing_broker is None  # the next poll chooses again


@pytest.mark.parametrize(
    "refusal",
    [
        # a ZooKeeper-mode broker asked DescribeQuorum (Kafka 3.9 in the lab)
        errors.IncompatibleBrokerVersion("no DescribeQuorumRequest"),
        errors.ClusterAuthorizationFailedError("DescribeQuorum"),
    ],
)
def test_a_refusal_any_broker_would_give_is_no_reason_to_turn(
    refusal: Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    gaps: Gaps = []
    manager = Manager(cycle([1, 2]), Cache((1, 2, 3)))
    source = source_over(manager, gaps, monkeypatch)
    a_poll(source)
    manager.refusal = refusal
    with pytest.raises(type(refusal)):
        source._ask_describing_broker("describe_quorum", lambda: "DescribeQuorum")
    assert manager.asked == [1, 1]
    assert source._silent == set()  # broker 1 answered: its ListOffsets are asked
    assert gaps == []  # the caller reports the refusal, once
    manager.refusal = None
    assert a_poll(source) == "Metadata answered by 1"


def test_a_forwarded_request_that_times_out_keeps_its_broker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DescribeQuorum is answered by the active controller, which the describing broker
    forwards it to: its timeout (a controller being replaced) says nothing of the broker,
    which stays, and is asked for the rest of the poll."""
    gaps: Gaps = []
    manager = Manager(cycle([1, 2]), Cache((1, 2, 3)))
    source = source_over(manager, gaps, monkeypatch)
    a_poll(source)
    manager.failing = {1}
    with pytest.raises(TimeoutError, match="request to 1"):
        source._ask_describing_broker(
            "describe_quorum", lambda: "DescribeQuorum", answered_by_it=False
        )
    assert manager.asked == [1, 1]  # not asked of another
    assert source._silent == set()
    assert source.describing_broker == 1
    assert gaps == []  # the caller reports it, once
