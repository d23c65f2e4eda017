"""What the wordings of every family share: the markers that route a message to its parser,
and the pieces of Kafka's wordings that several families use (broker lists, topic-partition
names)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

RecordT = TypeVar("RecordT", covariant=True)

IDS: Final = r"\d+(?:,\d+)*"
"""A broker id list as Kafka writes it: ``1,2,3``."""


class MalformedError(Exception):
    """Raised inside the parsers: the message has its kind's marker but not its shape."""


@dataclass(frozen=True, slots=True)
class NoFact:
    """A parser's answer for a message of its kind that carries no fact (not malformed)."""


NO_FACT: Final = NoFact()


@dataclass(frozen=True, slots=True)
class Marker(Generic[RecordT]):
    """Text found in the messages of one kind: a message that contains it is expected to
    match one of that kind's wordings (``parse`` returns None, or raises
    :class:`MalformedError` or ``ValueError``, when it does not)."""

    text: str
    record: type[RecordT]
    parse: Callable[[int, str], RecordT | NoFact | None]
    shared: bool = False
    """The text is common in other messages too: one that does not match is not this kind's
    (ignored, not malformed)."""


def split_topic_partition(text: str) -> tuple[str, int]:
    """``"my-topic-3"`` (Kafka's TopicPartition.toString) or ``"[my-topic,3]"``
    (TopicAndPartition, 0.10 to 0.11) -> ``("my-topic", 3)``."""
    if text.startswith("[") and text.endswith("]"):  # "[my-topic,3]": 0.10 to 0.11
        topic, sep, partition = text[1:-1].rpartition(",")
    else:
        topic, sep, partition = text.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise MalformedError(f"not a topic-partition: {text!r}")
    return topic, int(partition)


def ids(text: str) -> tuple[int, ...]:
    """A broker id list, with or without brackets: ``[1,2]``, ``1,2``, ``1, 2``, ``""``."""
    text = text.strip().strip("[]")
    return tuple(int(item) for item in text.split(",") if item.strip())
