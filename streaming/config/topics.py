"""The ``topics`` section: the topics read and written."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field, model_validator

from streaming.config.errors import Problem, raise_problems
from streaming.config.field_types import FROZEN

__all__ = ["FetchResponsesForm", "TopicName", "TopicSettings"]

_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def _check_topic(name: str) -> str:
    if not _TOPIC_NAME.match(name) or name in (".", ".."):
        raise ValueError(
            "must be a Kafka topic name: 1 to 249 characters of a-z, A-Z, 0-9, '.', '_', '-'"
        )
    return name


TopicName = Annotated[str, AfterValidator(_check_topic)]


class FetchResponsesForm(StrEnum):
    """How the project's producers write fetch-responses (docs/event-contract.md)."""

    JSON = "json"  # one JSON record per fetch response
    PACKED = "packed"  # fetch packs: many fetch responses as columns in one record


class TopicSettings(BaseModel):
    """The topics read and written."""

    model_config = FROZEN

    controller_events: TopicName = Field(
        default="controller-events", description="input: the controller's ISR and leader events"
    )
    fetch_responses: TopicName = Field(
        default="fetch-responses", description="input: followers' fetch responses"
    )
    partition_health: TopicName = Field(
        default="partition-health", description="output: per-partition health records"
    )
    dead_letters: TopicName = Field(
        default="isrwatch-dead-letters", description="output: records that were not applied"
    )
    fetch_responses_form: FetchResponsesForm = Field(
        default=FetchResponsesForm.PACKED,
        description="how collect admin and the simulator write fetch-responses: packed (fetch"
        " packs, docs/event-contract.md#fetch-packs) or json (a record per fetch); the job"
        " reads both",
    )

    @model_validator(mode="after")
    def _check_distinct(self) -> TopicSettings:
        problems: list[Problem] = []
        first_of: dict[str, str] = {}
        for name, field in type(self).model_fields.items():
            if field.annotation is not str:  # not a topic name (fetch_responses_form)
                continue
            topic = getattr(self, name)
            if topic in first_of:
                why = f"same topic as topics.{first_of[topic]} ({topic!r})"
                problems.append((name, why, (name, first_of[topic])))
            else:
                first_of[topic] = name
        raise_problems(problems)
        return self
