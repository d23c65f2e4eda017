"""Planned maintenance (state/maintenance.py) by hand, and on the rolling-restart scenario:
a controlled shutdown is planned, a crash is not until the broker is back."""

from __future__ import annotations

from state.maintenance import Maintenance, MaintenanceLog, MaintenanceState
from tests.unit.builders import leader_and_isr
from tests.unit.test_causes_simulated import attribution_of, simulate, simulate_model

GRACE, MAX = 300_000, 1_800_000
LIVE = {1: 10, 2: 11, 3: 12}


def test_the_controller_taking_a_registered_broker_out_is_a_controlled_shutdown() -> None:
    log = MaintenanceLog()
    log.isr_changed([2], [], by_controller=True, registered=LIVE, ts=1_000)
    log.isr_changed([2], [], by_controller=True, registered=LIVE, ts=1_500)  # keeps the first
    assert log.at(2_000, GRACE, MAX) == {2: Maintenance(MaintenanceState.SHUTTING_DOWN, 1_000)}
    # planned for at most MAX: at 1 000 + MAX still, 1 ms later no longer
    assert 2 in log.at(1_000 + MAX, GRACE, MAX)
    assert log.at(1_001 + MAX, GRACE, MAX) == {}


def test_a_crash_or_a_leaders_own_shrink_is_no_controlled_shutdown() -> None:
    log = MaintenanceLog()
    # the controller removes broker 4 after its registration vanished (onBrokerFailure)
    log.isr_changed([4], [], by_controller=True, registered=LIVE, ts=1_000)
    # the leader drops a lagging follower (IsrChange): not the controller
    log.isr_changed([2], [], by_controller=False, registered=LIVE, ts=1_000)
    # before any BrokerChange nobody is known to be registered
    log.isr_changed([3], [], by_controller=True, registered=None, ts=1_000)
    assert log.at(2_000, GRACE, MAX) == {}


def test_registration_starts_the_grace_period_and_ends_a_shutdown() -> None:
    log = MaintenanceLog()
    log.isr_changed([2], [], by_controller=True, registered=LIVE, ts=1_000)
    log.registered([2], 20_000)
    assert log.at(20_000 + GRACE, GRACE, MAX) == {
        2: Maintenance(MaintenanceState.RESTARTED, 20_000)
    }
    assert log.at(20_001 + GRACE, GRACE, MAX) == {}  # grace over, shutdown ended


def test_rejoining_an_isr_ends_a_shutdown() -> None:
    # a bounce: onBrokerFailure right after the re-registration takes it out while it is
    # registered again; once it rejoins an ISR it is shutting down no more
    log = MaintenanceLog()
    log.registered([2], 1_000)
    log.isr_changed([2], [], by_controller=True, registered=LIVE, ts=1_000)
    log.isr_changed([], [2], by_controller=False, registered=LIVE, ts=9_000)
    assert log.at(2_000 + GRACE, GRACE, MAX) == {}


def test_the_model_sees_a_controlled_shutdown_in_its_leader_and_isr() -> None:
    from state import ReplicationModel
    from state.events import BrokerChange, BrokerRegistration
    from state.settings import RuleSettings

    model = ReplicationModel(RuleSettings())
    live = tuple(BrokerRegistration(id=b, epoch=e) for b, e in LIVE.items())
    model.apply(
        [
            (0, BrokerChange(ts=0, live=live)),
            (1, leader_and_isr(0)),
            (2, leader_and_isr(5_000, epoch=1, isr=(1, 3))),
        ]
    )
    assert model.maintenance.at(6_000, GRACE, MAX) == {
        2: Maintenance(MaintenanceState.SHUTTING_DOWN, 5_000)
    }


def test_a_rolling_restart_is_planned_and_a_crash_is_not() -> None:
    # rolling-restart: broker 1's controlled shutdown at 20 s, back at 35.5 s; broker 4
    # crashes at 170 s, its session expires at 176 s, it restarts at 200 s.
    for at_s, broker, kind in [(25, 1, "planned_maintenance"), (178, 4, "broker_down")]:
        model, now = simulate_model("rolling-restart", at_s)
        attribution = attribution_of(model, now)
        assert {(c.kind, c.broker) for c in attribution.partition_cause} == {(kind, broker)}
        under = int(attribution.partitions.under_replicated.sum())
        assert under > 0
        planned = sum(attribution.planned_under_replicated().values())
        assert planned == (under if kind == "planned_maintenance" else 0)
    # broker 4 re-registered at 200.3 s: catching up within the grace period is planned
    model, now = simulate_model("rolling-restart", 200.5)
    assert model.maintenance.at(now, GRACE, MAX)[4].state is MaintenanceState.RESTARTED
    # three shards attribute the rolling restart as one model does
    whole, sharded, _ = simulate("rolling-restart", 75)
    assert {(c.kind, c.broker) for c in whole.partition_cause} == {("planned_maintenance", 2)}
    assert sharded.causes_by_partition() == whole.causes_by_partition()
