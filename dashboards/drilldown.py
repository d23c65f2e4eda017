"""Dashboard 2, one partition and its followers: lag against the shrink thresholds, status
over time, the propagation window, and the high watermark against the leader's LEO.

isrwatch exports per-partition and per-follower series only while the partition is
unhealthy, so the panels show data for the stretches when it was.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders.common import GraphThresholdsStyleConfig
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models.common import GraphThresholdsStyleMode

from dashboards.panels import (
    BLUE,
    GREEN,
    ORANGE,
    PURPLE,
    RED,
    YELLOW,
    base_dashboard,
    build_sections,
    multi_variable,
    query_variable,
    stat_panel,
    state_timeline,
    target,
    targets,
    thresholds,
    time_series,
    value_map,
)
from dashboards.promql import label_eq, series
from state import FollowerStatus
from state.shrink_rule import SHRINK_DEADLINE_FORMULA

UID = "isrwatch-partition"
TITLE = "isrwatch / Partition drill-down"

PARTITION = ('topic="$topic"', 'partition="$partition"')
FOLLOWER = (*PARTITION, 'broker=~"$broker"')

STATUS_COLOURS = {
    FollowerStatus.LAGGING: YELLOW,
    FollowerStatus.SHRINK_ELIGIBLE: ORANGE,
    FollowerStatus.SHRINK_OVERDUE: RED,
    FollowerStatus.CATCHING_UP: BLUE,
    FollowerStatus.OUT_OF_SYNC: PURPLE,
    FollowerStatus.OFFLINE: RED,
}
"""Every status a follower series can have (IN_SYNC followers have none)."""

CONDITION_COLOURS = {
    "under_replicated": ORANGE,
    "under_min_isr": RED,
    "offline": RED,
    "predicted_under_replicated": YELLOW,
    "metadata_stale_expected": BLUE,
    "metadata_stale_overdue": RED,
}
"""The ``condition`` values of ``isrwatch_partition_condition``."""

LAG_TIME_MAX = series("isrwatch_partition_replica_lag_time_max_seconds", *PARTITION)
CLOCK = f"scalar(max({series('isrwatch_last_event_time_seconds')}))"


def follower_status_expr() -> str:
    """Each follower's status as its ``FollowerStatus`` number, one series per broker.

    A follower series carries its status as a label; the state timeline needs it as a
    value, so each status's series become that status's number.
    """
    codes = []
    for status in STATUS_COLOURS:
        # isrwatch_follower_status: every follower not IN_SYNC has it, lag time or not
        present = series("isrwatch_follower_status", *FOLLOWER, label_eq("status", status.name))
        codes.append(f"(0 * {present} + {status.value})")
    return f"max by (broker) ({' or '.join(codes)})"


def build() -> model.Dashboard:
    dashboard = (
        base_dashboard(
            UID,
            TITLE,
            "One Kafka partition as isrwatch sees it: each follower's lag against Kafka's "
            "shrink thresholds, statuses over time, the metadata propagation window, and the "
            "high watermark against the leader's log end offset.",
        )
        .with_variable(
            query_variable("topic", 'label_values(isrwatch_partitions{job="$job"}, topic)').label(
                "Topic"
            )
        )
        .with_variable(
            query_variable(
                "partition",
                'label_values(isrwatch_partition_leader_leo{job="$job", topic="$topic"}, '
                "partition)",
            )
            .label("Partition")
            .description("Partitions of the topic that were unhealthy in the time range")
        )
        .with_variable(
            multi_variable(
                "broker",
                'label_values(isrwatch_follower_status{job="$job", topic="$topic", '
                'partition="$partition"}, broker)',
                "Follower",
            )
        )
    )
    sections: list[tuple[str, list[Builder[model.Panel]]]] = [
        ("Followers", _followers()),
        ("Partition", _partition()),
    ]
    return build_sections(dashboard, sections)


def _dashed(colour: str) -> list[model.DynamicConfigValue]:
    return [
        model.DynamicConfigValue(id_val="color", value={"mode": "fixed", "fixedColor": colour}),
        model.DynamicConfigValue(
            id_val="custom.lineStyle", value={"fill": "dash", "dash": [10, 10]}
        ),
    ]


def _followers() -> list[Builder[model.Panel]]:
    lag = series("isrwatch_follower_lag_time_seconds", *FOLLOWER)
    deadline = series("isrwatch_follower_shrink_deadline_seconds", *FOLLOWER)
    messages = series("isrwatch_follower_lag_messages", *FOLLOWER)
    return [
        time_series(
            "Follower lag time against the shrink thresholds",
            "Each follower's lag time (now - last caught up) while it is not IN_SYNC, "
            "against its leader's replica.lag.time.max.ms T. Past T the follower is out of "
            "sync and Kafka removes it from the ISR at the next ISR expiration check, by "
            f"{SHRINK_DEADLINE_FORMULA}. A line above 1.5 T while still in the ISR for more "
            "than T/2 is an overdue shrink: the "
            "leader failed to act. A line approaching T is the time to fix the follower's "
            "broker (fetchers, disk, network). A follower that has not caught up since its "
            "leader's election has no lag time, so no line: its status is below.",
            targets(
                (f"max by (broker, leader) ({lag})", "follower {{broker}} (leader {{leader}})"),
                (f"max({LAG_TIME_MAX})", "T: out of sync past this"),
                (f"1.5 * max({LAG_TIME_MAX})", "1.5 x T: removed from the ISR by this"),
            ),
            unit="s",
            width=16,
            height=9,
        )
        .override_by_query("B", _dashed(ORANGE))
        .override_by_query("C", _dashed(RED)),
        stat_panel(
            "Kafka removes the follower",
            "When each SHRINK_ELIGIBLE or SHRINK_OVERDUE follower leaves the ISR by Kafka's "
            f"rule: {SHRINK_DEADLINE_FORMULA}. A time in the past means Kafka is overdue: "
            "check the leader broker's ISR expiration and its ZooKeeper or controller link.",
            f"1000 * max by (broker) ({deadline})",
            legend="follower {{broker}}",
            unit="dateTimeFromNow",
            steps=((None, ORANGE),),
            width=8,
            height=9,
            no_value="no shrink due",
        ),
        state_timeline(
            "Follower status over time",
            "The status of each follower that was not IN_SYNC (a gap is IN_SYNC, or no "
            "data). LAGGING: past warn_ratio x T; SHRINK_ELIGIBLE: past T, Kafka will "
            "remove it; SHRINK_OVERDUE: past 1.5 x T and still in the ISR; CATCHING_UP: "
            "out of the ISR, rejoins at its next fetch; OUT_OF_SYNC: out of the ISR and "
            "behind the high watermark; OFFLINE: its broker is down.",
            [target(follower_status_expr(), "follower {{broker}}")],
            value_map({str(s.value): (s.name, colour) for s, colour in STATUS_COLOURS.items()}),
        ),
        time_series(
            "Messages behind the leader",
            "Each follower's distance to the leader's log end offset, in messages. A "
            "falling line is a follower catching up; a rising one is falling behind: its "
            "fetch throughput is lower than the produce rate.",
            [target(f"max by (broker) ({messages})", "follower {{broker}}")],
            width=24,
        ),
    ]


def _partition() -> list[Builder[model.Panel]]:
    conditions = series("isrwatch_partition_condition", *PARTITION)
    hw = series("isrwatch_partition_high_watermark", *PARTITION)
    leo = series("isrwatch_partition_leader_leo", *PARTITION)
    earliest = series("isrwatch_partition_blackout_earliest_seconds", *PARTITION)
    latest = series("isrwatch_partition_blackout_latest_seconds", *PARTITION)
    timeline = state_timeline(
        "Partition conditions over time",
        "Which conditions held and when: under-replicated, under min ISR, offline, "
        "predicted under-replicated, and metadata stale (expected: inside the propagation "
        "window; overdue: past it). Read it against the follower timeline above to see "
        "which follower caused which condition.",
        [target(f"max by (condition) ({conditions})", "{{condition}}")],
        value_map({"1": ("holds", RED)}),
        height=7,
    )
    for condition, colour in CONDITION_COLOURS.items():
        timeline = timeline.override_by_name(
            condition,
            [
                model.DynamicConfigValue(
                    id_val="mappings", value=value_map({"1": ("holds", colour)})
                )
            ],
        )
    return [
        timeline,
        time_series(
            "Propagation window, seconds from the monitor's clock",
            "While brokers' cached ISR lags the controller's, Kafka's predicted propagation "
            "window: the change cannot reach the brokers before it opens and should have by "
            "the time it closes. Both are shown relative to the monitor's clock (the newest "
            "event time). Churn on the leader pushes the window out (the lines jump up). A "
            "closing time below zero (plus the overdue slack) is STALE_OVERDUE: check the "
            "controller.",
            targets(
                (f"max({earliest}) - {CLOCK}", "until the window opens"),
                (f"max({latest}) - {CLOCK}", "until the window closes"),
            ),
            unit="s",
            minimum=None,
        )
        .thresholds_style(GraphThresholdsStyleConfig().mode(GraphThresholdsStyleMode.DASHED))
        .thresholds(thresholds((None, GREEN), (0, GREEN))),
        time_series(
            "High watermark and leader LEO",
            "The partition's high watermark (what consumers can read: the smallest log end "
            "offset in the ISR) and the leader's log end offset. A growing gap means an ISR "
            "follower holds the high watermark back and acks=all produce latency grows, "
            "until Kafka removes that follower from the ISR.",
            targets((f"max({hw})", "high watermark"), (f"max({leo})", "leader LEO")),
            minimum=None,
        ),
    ]
