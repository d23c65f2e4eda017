"""The replication model of Kafka's Partition / Replica / ReplicaManager, free of Spark.

``ReplicationModel`` applies controller events and fetch responses to the columnar state
of a shard of partitions and evaluates their health at a time ``now``. The job and the
tools import what they use from here (and the event vocabulary from ``state.events``,
the rules' settings from ``state.settings``); the modules behind it are laid out by the
rules, one module holding all of a rule:

* ``state.caught_up``: when a follower has caught up with its leader (Kafka's
  ``Replica.updateFetchState``), and the reset on a new leader epoch;
* ``state.shrink_rule``: when a follower in the ISR is out of sync, and its deadline;
* ``state.propagation_window``: how long brokers' caches may show an old ISR;
* ``state.metadata_cache``: metadata staleness, which brokers' caches show an old ISR
  and whether that is expected;
* ``state.partition_health``: the health of every partition at ``now``;
* ``state.health_record``: the health record, the typed product every reader reads;
* ``state.causes``: why followers and partitions are unhealthy.

The names are loaded on first use, so that a process that needs only the decoders
(a collector) does not import numpy, pandas and numba with them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, tuple[str, ...]] = {
    "state.apply_report": ("ApplyReport", "IsrChangeKind", "IsrTransition"),
    "state.arrays": ("BOOL", "I64"),
    "state.attribution_inputs": (
        "ClusterShape",
        "UnhealthyPartitions",
        "shape_of_model",
    ),
    "state.cause_kinds": ("NO_BROKER", "CauseKind"),
    "state.caught_up": ("NEVER", "UNKNOWN_OFFSET"),
    "state.causes": ("Attribution", "CauseCount", "annotate", "attribute", "with_causes"),
    "state.controller_decoder": ("decode_controller_events",),
    "state.controller_routing": (
        "CLUSTER_SHARD",
        "ControllerEpochSeen",
        "RoutedControllerEvent",
        "route_controller_events",
    ),
    "state.event_parser": ("parse_json_line", "parse_record"),
    "state.fetch_decoder": ("WireFetch", "decode_fetches"),
    "state.fetch_pack": (
        "decode_fetch_pack",
        "decode_fetch_records",
        "is_fetch_pack",
        "pack_time_range",
    ),
    "state.flapping": ("Flap",),
    "state.follower_fetch_state": ("WIRE_COLUMNS", "FetchBatch"),
    "state.health_signature": ("health_signatures",),
    "state.lag_time": ("LagTimeUnknown", "caught_up_known", "time_or_none"),
    "state.metadata_cache": ("MetadataState",),
    "state.model": ("ReplicationModel",),
    "state.health_record": (
        "Cause",
        "FollowerHealth",
        "HealthRecord",
        "MetadataHealth",
        "decode_record",
        "encode_record",
    ),
    "state.partition_health": ("NO_FOLLOWER", "HealthFrame"),
    "state.partition_table": ("PartitionTable",),
    "state.propagation_window": ("NO_TIME", "BlackoutWindow", "blackout_window_of"),
    "state.restart_check": ("IsrAtRisk", "RestartCheck", "check_restart", "fragile_entries"),
    "state.sharding": ("Shard", "shard_lookup", "shard_of"),
    "state.shrink_rule": ("STATUS_NAMES", "FollowerStatus", "shrink_deadline_ms"),
}
"""Module -> the names it gives the API. The imports below say the same to type checkers
(tests/unit/test_state_api.py holds them equal)."""

_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF)

if TYPE_CHECKING:
    from state.apply_report import ApplyReport as ApplyReport
    from state.apply_report import IsrChangeKind as IsrChangeKind
    from state.apply_report import IsrTransition as IsrTransition
    from state.arrays import BOOL as BOOL
    from state.arrays import I64 as I64
    from state.attribution_inputs import ClusterShape as ClusterShape
    from state.attribution_inputs import UnhealthyPartitions as UnhealthyPartitions
    from state.attribution_inputs import shape_of_model as shape_of_model
    from state.caught_up import NEVER as NEVER
    from state.caught_up import UNKNOWN_OFFSET as UNKNOWN_OFFSET
    from state.cause_kinds import NO_BROKER as NO_BROKER
    from state.cause_kinds import CauseKind as CauseKind
    from state.causes import Attribution as Attribution
    from state.causes import CauseCount as CauseCount
    from state.causes import annotate as annotate
    from state.causes import attribute as attribute
    from state.causes import with_causes as with_causes
    from state.controller_decoder import decode_controller_events as decode_controller_events
    from state.controller_routing import CLUSTER_SHARD as CLUSTER_SHARD
    from state.controller_routing import ControllerEpochSeen as ControllerEpochSeen
    from state.controller_routing import RoutedControllerEvent as RoutedControllerEvent
    from state.controller_routing import route_controller_events as route_controller_events
    from state.event_parser import parse_json_line as parse_json_line
    from state.event_parser import parse_record as parse_record
    from state.fetch_decoder import WireFetch as WireFetch
    from state.fetch_decoder import decode_fetches as decode_fetches
    from state.fetch_pack import decode_fetch_pack as decode_fetch_pack
    from state.fetch_pack import decode_fetch_records as decode_fetch_records
    from state.fetch_pack import is_fetch_pack as is_fetch_pack
    from state.fetch_pack import pack_time_range as pack_time_range
    from state.flapping import Flap as Flap
    from state.follower_fetch_state import WIRE_COLUMNS as WIRE_COLUMNS
    from state.follower_fetch_state import FetchBatch as FetchBatch
    from state.health_record import Cause as Cause
    from state.health_record import FollowerHealth as FollowerHealth
    from state.health_record import HealthRecord as HealthRecord
    from state.health_record import MetadataHealth as MetadataHealth
    from state.health_record import decode_record as decode_record
    from state.health_record import encode_record as encode_record
    from state.health_signature import health_signatures as health_signatures
    from state.lag_time import LagTimeUnknown as LagTimeUnknown
    from state.lag_time import caught_up_known as caught_up_known
    from state.lag_time import time_or_none as time_or_none
    from state.metadata_cache import MetadataState as MetadataState
    from state.model import ReplicationModel as ReplicationModel
    from state.partition_health import NO_FOLLOWER as NO_FOLLOWER
    from state.partition_health import HealthFrame as HealthFrame
    from state.partition_table import PartitionTable as PartitionTable
    from state.propagation_window import NO_TIME as NO_TIME
    from state.propagation_window import BlackoutWindow as BlackoutWindow
    from state.propagation_window import blackout_window_of as blackout_window_of
    from state.restart_check import IsrAtRisk as IsrAtRisk
    from state.restart_check import RestartCheck as RestartCheck
    from state.restart_check import check_restart as check_restart
    from state.restart_check import fragile_entries as fragile_entries
    from state.sharding import Shard as Shard
    from state.sharding import shard_lookup as shard_lookup
    from state.sharding import shard_of as shard_of
    from state.shrink_rule import STATUS_NAMES as STATUS_NAMES
    from state.shrink_rule import FollowerStatus as FollowerStatus
    from state.shrink_rule import shrink_deadline_ms as shrink_deadline_ms


def __getattr__(name: str) -> Any:
    """Load an exported name's module on first use (PEP 562)."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'state' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
