"""The input schemas (conf/schemas/, docs/event-contract.md) describe the typed events
exactly: every event type and every field the parser builds is in the schema, and every
field the schema requires is one the event holds."""

from __future__ import annotations

import json
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

import pytest

from state.events import (
    CONTROLLER_EVENT_TYPES,
    BrokerRegistration,
    ControllerEvent,
    FetchResponse,
    MetadataPartitionState,
    ReplicaProgress,
    TopicPartition,
)
from state.fetch_decoder import WireFetch

SCHEMAS = Path(__file__).resolve().parents[2] / "conf" / "schemas"
CONTROLLER = json.loads((SCHEMAS / "controller-events.schema.json").read_text())
FETCH = json.loads((SCHEMAS / "fetch-responses.schema.json").read_text())
COMMON = {f.name for f in fields(ControllerEvent)}  # type, ts, controller id and epoch


def names(cls: type[Any]) -> set[str]:
    return {f.name for f in fields(cls)}


def required(cls: type[Any]) -> set[str]:
    return {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}


def test_every_event_type_has_its_branch() -> None:
    assert CONTROLLER["properties"]["type"]["enum"] == list(CONTROLLER_EVENT_TYPES)
    branches = {
        branch["if"]["properties"]["type"]["const"]: branch["then"]["$ref"]
        for branch in CONTROLLER["allOf"]
    }
    assert branches == {name: f"#/$defs/{name}" for name in CONTROLLER_EVENT_TYPES}


def test_the_common_fields_are_the_schemas() -> None:
    assert set(CONTROLLER["properties"]) - {"type"} == COMMON
    assert set(CONTROLLER["required"]) == {"type", "ts"}


@pytest.mark.parametrize("name", list(CONTROLLER_EVENT_TYPES))
def test_a_controller_event_has_the_fields_of_its_schema(name: str) -> None:
    cls, definition = CONTROLLER_EVENT_TYPES[name], CONTROLLER["$defs"][name]
    own = names(cls) - COMMON
    assert set(definition.get("properties", {})) == own
    assert required(cls) - COMMON <= set(definition["required"])
    assert set(definition["required"]) <= names(cls)


@pytest.mark.parametrize(
    ("cls", "definition"),
    [
        (MetadataPartitionState, CONTROLLER["$defs"]["metadataPartitionState"]),
        (BrokerRegistration, CONTROLLER["$defs"]["brokerRegistration"]),
        (TopicPartition, CONTROLLER["$defs"]["topicPartition"]),
        (
            ReplicaProgress,
            CONTROLLER["$defs"]["MetadataLogProgress"]["properties"]["replicas"]["items"],
        ),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_a_nested_part_has_the_fields_of_its_schema(
    cls: type[Any], definition: dict[str, Any]
) -> None:
    assert set(definition["properties"]) == names(cls)
    assert set(definition["required"]) == required(cls)


def test_a_fetch_response_has_the_fields_of_its_schema() -> None:
    assert set(FETCH["properties"]) == names(FetchResponse)
    assert set(FETCH["required"]) == required(FetchResponse)


def test_the_bulk_decoder_reads_the_fields_of_the_schema() -> None:
    assert set(WireFetch.__struct_fields__) == set(FETCH["properties"])
