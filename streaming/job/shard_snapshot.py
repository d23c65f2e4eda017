"""What a state shard keeps between micro-batches: its model and the job's own facts.

The job stores it in Spark's group state in the versioned format of
``streaming.job.state_format``; releases up to 9711ad5 pickled it, and those pickles are
read once (``ShardSnapshot.__setstate__`` and ``migrate_routed_v1`` for the oldest ones).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from state import ReplicationModel
from streaming.job.routing import signed_digest

SIGNATURES = "columns-splitmix64"
LEGACY_SIGNATURES = "repr-blake2b"


@dataclass
class ShardSnapshot:
    """What a shard keeps between micro-batches."""

    model: ReplicationModel
    clock_ms: int = -1  # the largest event time this shard has applied
    signatures: dict[str, int] = field(default_factory=dict)  # key -> health last emitted
    # signed_digest(stable_hash(record text)) -> ts: as routing's ``digest`` column
    seen_controller_events: dict[int, int] = field(default_factory=dict)
    # Events applied since the job first started, checkpointed with the state: after a
    # restart they count each event once, however often a batch was re-run.
    # applied_total["FetchResponse"] + fetch_error_responses_total is every valid fetch
    # response. A snapshot of routed-v1 counted error responses inside "FetchResponse";
    # restored, they stay there and fetch_error_responses_total counts from the upgrade.
    applied_total: Counter[str] = field(default_factory=Counter)
    fetch_error_responses_total: int = 0
    # How ``signatures`` were computed: SIGNATURES (state.health_signature), or
    # LEGACY_SIGNATURES in a snapshot pickled before it (state_format.legacy_signatures).
    signature_scheme: str = SIGNATURES

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickle; a snapshot of the release before ``routed-v2`` is migrated first."""
        if "fetch_error_responses_total" not in state:
            state = migrate_routed_v1(state)
        self.__dict__.update({"signature_scheme": LEGACY_SIGNATURES, **state})


def migrate_routed_v1(state: dict[str, Any]) -> dict[str, Any]:
    """A snapshot pickled by the release before ``routed-v2`` (it had no
    ``fetch_error_responses_total``), as this release keeps it.

    * ``seen_controller_events`` was keyed by the unsigned ``stable_hash`` of the record
      text; routing now hands the shards the same hash as a signed 64-bit ``long``. A key
      at or above 2**63 is converted, or a producer's retry of an event applied before the
      upgrade would be applied again after it.
    * ``applied_total["FetchResponse"]`` counted fetch responses answered with an error;
      how many is not known, so they stay counted there (once) and the separate total of
      error responses starts at 0: the sum of both is exact across the upgrade.
    The model's own classes (``state/``) read their older pickles themselves.
    """
    seen: dict[int, int] = state.get("seen_controller_events", {})
    return {
        **state,
        "seen_controller_events": {signed_digest(key): ts for key, ts in seen.items()},
        "fetch_error_responses_total": 0,
    }
