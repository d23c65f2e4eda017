"""docs/domain.md#eligible-leader-replicas, #offline-recovery and #frozen-high-watermark:
Kafka 4.0+'s ELR in the model, by boundary tables written from 4.1.1's
``PartitionChangeBuilder`` and ``Partition`` (the expected values by hand)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from state import IsrAtRisk
from state.eligible_leaders import (
    NONE_ELIGIBLE,
    EligibleLeaders,
    after_unstated_change,
    effective_min_isr,
)
from state.events import ClearElr, IsrChange, LeaderAndIsr, TopicConfig
from state.restart_check import breakage
from tests.unit.builders import TOPIC, apply, brokers, health, isr_change, leader_and_isr, model

E = EligibleLeaders


@pytest.mark.parametrize(
    ("configured", "replication_factor", "effective"),
    [(2, 3, 2), (3, 3, 3), (4, 3, 3), (1, 1, 1), (2, 1, 1)],
)
def test_effective_min_isr_is_never_above_the_replication_factor(
    configured: int, replication_factor: int, effective: int
) -> None:
    assert effective_min_isr(configured, replication_factor) == effective


@pytest.mark.parametrize(
    ("held", "new_isr", "new_leader", "min_isr", "after"),
    [
        # never stated: nothing to change
        (None, (1,), 1, 2, None),
        (None, (), -1, 2, None),
        # at or above min ISR: both lists empty (maybePopulateTargetElr)
        (E((2, 3), (4,)), (1, 2), 1, 2, NONE_ELIGIBLE),
        (E((2, 3), (4,)), (1, 2, 3), 1, 2, NONE_ELIGIBLE),
        (E((3,), ()), (1,), 1, 1, NONE_ELIGIBLE),  # min ISR 1: one member is enough
        # below it, a leader elected from the ELR leaves it
        (E((2, 3), (4,)), (2,), 2, 2, E((3,), (4,))),
        (E((2,), ()), (2,), 2, 3, E((), ())),
        # below it, any other change keeps what is held (additions need the controller)
        (E((2, 3), ()), (1,), 1, 2, E((2, 3), ())),
        (E((2, 3), ()), (), -1, 2, E((2, 3), ())),
        (E((), ()), (1,), 1, 2, E((), ())),
    ],
)
def test_an_unstated_change(
    held: EligibleLeaders | None,
    new_isr: tuple[int, ...],
    new_leader: int,
    min_isr: int,
    after: EligibleLeaders | None,
) -> None:
    assert after_unstated_change(held, new_isr, new_leader, min_isr) == after


def elected(ts: int, **fields: object) -> LeaderAndIsr:
    return replace(leader_and_isr(ts), **fields)  # type: ignore[arg-type]


def shrunk(ts: int, old: tuple[int, ...], new: tuple[int, ...], **fields: object) -> IsrChange:
    return replace(isr_change(ts, old, new), **fields)  # type: ignore[arg-type]


def test_the_model_takes_the_elr_the_controller_states() -> None:
    """4.1.1 with min ISR 2: broker 3 stops (ISR [1, 2], ELR empty), then broker 2 (ISR
    [1], ELR [2]); the records below are the controller's PartitionChangeRecords."""
    m = model(min_insync_replicas=2)
    apply(m, elected(0, elr=(), last_known_elr=()))
    assert (health(m, 0).elr, health(m, 0).last_known_elr) == ([], [])
    apply(m, shrunk(1_000, (1, 2, 3), (1, 2), elr=(), last_known_elr=()))
    apply(m, shrunk(2_000, (1, 2), (1,), elr=(2,), last_known_elr=()))
    record = health(m, 2_000)
    assert (record.isr, record.elr, record.last_known_elr) == ([1], [2], [])
    assert record.under_min_isr
    assert record.high_watermark_frozen


def test_without_any_statement_the_record_has_no_elr() -> None:
    m = model()
    apply(m, leader_and_isr(0), isr_change(1_000, (1, 2, 3), (1,)))
    record = health(m, 1_000)
    assert (record.elr, record.last_known_elr) == (None, None)


def test_an_unstated_expansion_to_min_isr_clears_a_stated_elr() -> None:
    m = model(min_insync_replicas=2)
    apply(
        m,
        elected(0, isr=(1,), elr=(2,), last_known_elr=(3,)),
        isr_change(1_000, (1,), (1, 2)),  # a log line: no ELR stated
    )
    assert (health(m, 1_000).elr, health(m, 1_000).last_known_elr) == ([], [])


def test_the_topics_min_isr_and_the_replication_factor_decide_the_clearing() -> None:
    """min.insync.replicas 5 on 3 replicas is 3 in effect: an ISR of 2 keeps the ELR,
    an ISR of 3 clears it."""
    m = model()
    apply(
        m,
        TopicConfig(ts=0, topic=TOPIC, min_insync_replicas=5),
        elected(0, isr=(1,), elr=(2, 3), last_known_elr=()),
        isr_change(1_000, (1,), (1, 2)),
    )
    assert health(m, 1_000).elr == [2, 3]
    apply(m, isr_change(2_000, (1, 2), (1, 2, 3)))
    assert health(m, 2_000).elr == []


@pytest.mark.parametrize(
    ("topic", "cleared"),
    [(TOPIC, {TOPIC: [], "other": [2]}), (None, {TOPIC: [], "other": []})],
)
def test_clear_elr_empties_one_topic_or_all(
    topic: str | None, cleared: dict[str, list[int]]
) -> None:
    """ClearElrRecord (4.0+): TopicName, or empty for every topic; both lists emptied."""
    m = model(min_insync_replicas=2)
    apply(
        m,
        elected(0, isr=(1,), elr=(2,), last_known_elr=(3,)),
        replace(elected(0, isr=(1,), elr=(2,), last_known_elr=(3,)), topic="other"),
        ClearElr(ts=1_000, topic=topic),
    )
    for name, elr in cleared.items():
        record = health(m, 1_000, topic=name)
        assert record.elr == elr
        assert record.last_known_elr == ([] if not elr else [3])


def test_clear_elr_leaves_a_partition_without_a_stated_elr_without_one() -> None:
    m = model()
    apply(m, leader_and_isr(0), ClearElr(ts=1_000))
    assert health(m, 1_000).elr is None


@pytest.mark.parametrize(
    ("leader", "isr", "elr", "recovery"),
    [
        (1, (1, 2), None, None),  # a live leader
        (-1, (3,), None, "ISR"),  # without the ELR, the ISR keeps the last leader
        (-1, (3,), ((2,), ()), "ISR"),
        (-1, (), ((2, 3), ()), "ELR"),
        (-1, (), ((), (2,)), "UNCLEAN_ONLY"),  # the last known ELR does not count
        (-1, (), None, "UNCLEAN_ONLY"),
    ],
)
def test_offline_recovery(
    leader: int,
    isr: tuple[int, ...],
    elr: tuple[tuple[int, ...], tuple[int, ...]] | None,
    recovery: str | None,
) -> None:
    m = model(min_insync_replicas=2)
    stated = {} if elr is None else {"elr": elr[0], "last_known_elr": elr[1]}
    apply(m, brokers(0, (1, 5), (2, 5), (3, 5)), elected(0, leader=leader, isr=isr, **stated))
    record = health(m, 0)
    assert record.offline is (leader == -1)
    assert record.offline_recovery == recovery
    assert record.conditions()["offline_unclean_only"] is (recovery == "UNCLEAN_ONLY")


@pytest.mark.parametrize(
    ("isr", "min_isr", "frozen_setting", "frozen"),
    [
        ((1, 2, 3), 2, True, False),
        ((1, 2), 2, True, False),
        ((1,), 2, True, True),
        ((1,), 2, False, False),
        ((1,), 1, True, False),
    ],
)
def test_the_high_watermark_is_frozen_under_min_isr_from_3_7(
    isr: tuple[int, ...], min_isr: int, frozen_setting: bool, frozen: bool
) -> None:
    m = model(min_insync_replicas=min_isr, high_watermark_frozen_under_min_isr=frozen_setting)
    apply(m, leader_and_isr(0, isr=isr))
    assert health(m, 0).high_watermark_frozen is frozen


def at_risk(isr: list[int], elr: list[int], min_isr: int = 2) -> IsrAtRisk:
    return IsrAtRisk(
        topic=TOPIC,
        partition=0,
        as_of_ms=0,
        leader=isr[0] if isr else -1,
        remaining_isr=isr,
        min_insync_replicas=min_isr,
        electable_elr=elr,
    )


@pytest.mark.parametrize(
    ("isr", "elr", "stopped", "becomes", "isr_after"),
    [
        ([1], [], 1, "offline", []),
        ([1], [2], 1, "under_min_isr", [2]),  # broker 2 is elected from the ELR
        ([1], [2, 3], 1, "under_min_isr", [2]),  # the first in replica order
        ([1], [2], 2, None, None),  # not in the ISR: nothing changes
        ([1, 2], [3], 1, "under_min_isr", [2]),
        ([1, 2, 3], [], 1, None, None),
    ],
)
def test_the_restart_check_elects_from_a_live_elr_member(
    isr: list[int], elr: list[int], stopped: int, becomes: str | None, isr_after: list[int] | None
) -> None:
    found = breakage(at_risk(isr, elr), stopped)
    assert (None if found is None else (found.becomes, found.isr_after)) == (
        None if becomes is None else (becomes, isr_after)
    )


def test_the_restart_check_reads_the_live_elr_of_a_record() -> None:
    """ELR [2, 3], broker 3 down: only broker 2 can be elected."""
    m = model(min_insync_replicas=2)
    apply(
        m,
        brokers(0, (1, 5), (2, 5)),
        elected(0, isr=(1,), elr=(3, 2), last_known_elr=()),
    )
    assert IsrAtRisk.of(health(m, 0)).electable_elr == [2]
