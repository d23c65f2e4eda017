"""Dashboard 3, the monitor's own health: is isrwatch reading, keeping up, and dropping
anything?"""

from __future__ import annotations

from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models import dashboard as model

from dashboards.panels import (
    BLUE,
    GREEN,
    ORANGE,
    RED,
    YELLOW,
    base_dashboard,
    build_sections,
    stat_panel,
    target,
    targets,
    time_series,
    value_map,
)
from dashboards.promql import series

UID = "isrwatch-monitor"
TITLE = "isrwatch / Monitor health"

EVENTS = series("isrwatch_events_total")
DEAD_LETTERS = series("isrwatch_dead_letters_total")
LAST_EVENT = series("isrwatch_last_event_time_seconds")
EVENT_TIME_LAG = series("isrwatch_event_time_lag_seconds")
SINCE_LAST_BATCH = series("isrwatch_seconds_since_last_batch")
BATCH_BUCKETS = (
    f"sum by (le) (rate({series('isrwatch_batch_duration_seconds_bucket')}[$__rate_interval]))"
)
BATCH_SUM = f"sum(rate({series('isrwatch_batch_duration_seconds_sum')}[$__rate_interval]))"
BATCH_COUNT = f"sum(rate({series('isrwatch_batch_duration_seconds_count')}[$__rate_interval]))"
SOURCE_UP = series("isrwatch_source_up")
SOURCE_FAILURES = series("isrwatch_source_failures_total")
SOURCE_FAILING = series("isrwatch_source_consecutive_failures")
SOURCE_LAST_SUCCESS = series("isrwatch_source_last_success_time_seconds")
PARTITIONS = series("isrwatch_partitions")
APPLIED = series("isrwatch_state_events_applied")

LAG_STEPS = ((None, GREEN), (60, YELLOW), (300, RED))


def build() -> model.Dashboard:
    dashboard = base_dashboard(
        UID,
        TITLE,
        "isrwatch's own health: input rates, dead letters, micro-batch duration, how far "
        "its event-time clock is behind, and the Kafka source. If this dashboard is wrong, "
        "the other isrwatch dashboards are too.",
    )
    sections: list[tuple[str, list[Builder[model.Panel]]]] = [
        ("Now", _now()),
        ("Input", _input()),
        ("Processing", _processing()),
        ("Kafka source", _source()),
    ]
    return build_sections(dashboard, sections)


def _now() -> list[Builder[model.Panel]]:
    return [
        stat_panel(
            "Last event applied",
            "Event time of the newest event applied: the time at which isrwatch evaluates "
            "every partition. If it is old, the cluster's collectors stopped publishing or "
            "the job stopped reading: see Kafka source and Input below.",
            f"1000 * max({LAST_EVENT})",
            unit="dateTimeFromNow",
            steps=((None, BLUE),),
            no_value="never",
        ),
        stat_panel(
            "Event-time lag",
            "Wall clock minus the newest event time applied (the watermark lag): how far "
            "behind reality the health isrwatch reports is. A few trigger intervals is "
            "normal; minutes means the job cannot keep up (see batch duration) or the input "
            "stopped.",
            f"max({EVENT_TIME_LAG})",
            unit="s",
            steps=LAG_STEPS,
            no_value="no events yet",
        ),
        stat_panel(
            "Since the last micro-batch",
            "Wall time since the streaming job finished a micro-batch. Batches run every "
            "trigger interval (5 s by default) with or without input; a growing value means "
            "the Spark query is stuck or failing: check the job's logs.",
            f"max({SINCE_LAST_BATCH})",
            unit="s",
            steps=((None, GREEN), (30, YELLOW), (120, RED)),
        ),
        stat_panel(
            "Kafka source",
            "Whether the Kafka source's last offset request and the driver's last "
            "reachability check (every quarter trigger) were answered. DOWN means "
            "isrwatch cannot reach the brokers of its input topics: check the "
            "bootstrap servers, credentials and network; it retries with back-off.",
            f"min({SOURCE_UP})",
            steps=((None, RED), (1, GREEN)),
            no_value="unknown",
        ).mappings(value_map({"0": ("DOWN", RED), "1": ("UP", GREEN)})),
        stat_panel(
            "Dead letters in range",
            "Input records not applied in the selected time range (bad JSON, contract "
            "violations, stale epochs, late or duplicate events). A few stale-epoch ones "
            "are normal around elections; see Dead letters by reason for the rest.",
            f"sum(increase({DEAD_LETTERS}[$__range]))",
            steps=((None, GREEN), (1, YELLOW)),
        ),
        stat_panel(
            "Partitions monitored",
            "Partitions in isrwatch's state. Zero while events arrive means no "
            "LeaderAndIsr or TopicChange was seen yet: the controller-events collector "
            "may be missing.",
            f"sum({PARTITIONS})",
            steps=((None, RED), (1, BLUE)),
        ),
    ]


def _input() -> list[Builder[model.Panel]]:
    return [
        time_series(
            "Input events by source and result",
            "Events per second read from each input topic, by result: applied, "
            "error_response (a fetch answered with an error: valid, changes nothing) or "
            "dead_letter. fetch-responses should follow the cluster's follower fetch rate; "
            "a drop to zero means the collectors stopped.",
            [
                target(
                    f"sum by (source, result) (rate({EVENTS}[$__rate_interval]))",
                    "{{source}} {{result}}",
                )
            ],
            unit="cps",
        ),
        time_series(
            "Dead letters by reason",
            "Records not applied, per second by reason. Parser reasons (invalid_json, "
            "missing_field, wrong_type, ...) are a producer breaking the event contract: "
            "fix the collector. stale_* and not_leader are what Kafka itself would ignore "
            "(expected around elections). late: events older than the watermark delay; "
            "duplicate: a producer retrying without idempotence.",
            [
                target(
                    f"sum by (reason) (rate({DEAD_LETTERS}[$__rate_interval])) > 0",
                    "{{reason}}",
                )
            ],
            unit="cps",
        ),
        time_series(
            "Events applied to the state, by type",
            "Events applied since the job first started (checkpointed: each event counts "
            "once across restarts). A flat line for FetchResponse while the cluster is "
            "serving traffic means no fetch reaches the state.",
            [target(f"sum by (type) ({APPLIED})", "{{type}}")],
            width=24,
        ),
    ]


def _processing() -> list[Builder[model.Panel]]:
    return [
        time_series(
            "Micro-batch duration",
            "Wall time of a micro-batch, sinks included. Batches longer than the trigger "
            "interval (5 s by default) mean the job falls behind its input: add Spark "
            "cores, raise streaming.state_shards, or raise the trigger interval.",
            targets(
                (f"histogram_quantile(0.5, {BATCH_BUCKETS})", "p50"),
                (f"histogram_quantile(0.99, {BATCH_BUCKETS})", "p99"),
                (f"{BATCH_SUM} / {BATCH_COUNT}", "mean"),
            ),
            unit="s",
        ),
        time_series(
            "Micro-batches per minute",
            "Completed micro-batches per minute. It should be steady at 60 / trigger "
            "interval; a drop to zero is a stuck query (see Since the last micro-batch).",
            [target(f"60 * {BATCH_COUNT}", "batches")],
            unit="cpm",
        ),
        time_series(
            "Event-time lag (watermark lag)",
            "Wall clock minus the newest event time applied. isrwatch evaluates health at "
            "that event time, so this is how stale its view is. Rising steadily while "
            "events arrive means the job cannot keep up; rising while no events arrive "
            "means the input stopped.",
            [target(f"max({EVENT_TIME_LAG})", "event-time lag")],
            unit="s",
        ),
        time_series(
            "Time since the last micro-batch",
            "Wall time since the last micro-batch ended. A sawtooth below the trigger "
            "interval is healthy; a ramp is a stuck or failing query.",
            [target(f"max({SINCE_LAST_BATCH})", "since last batch")],
            unit="s",
        ),
    ]


def _source() -> list[Builder[model.Panel]]:
    return [
        time_series(
            "Kafka source failures",
            "Offset requests to Kafka that failed: in a row now, and per minute. The "
            "source retries with back-off; failures that persist mean the brokers are "
            "unreachable or refuse the client (TLS, SASL, ACLs).",
            targets(
                (f"max({SOURCE_FAILING})", "consecutive failures"),
                (f"60 * sum(rate({SOURCE_FAILURES}[$__rate_interval]))", "failures per minute"),
            ),
        )
        .override_by_query(
            "A",
            [model.DynamicConfigValue(id_val="color", value={"mode": "fixed", "fixedColor": RED})],
        )
        .override_by_query(
            "B",
            [
                model.DynamicConfigValue(
                    id_val="color", value={"mode": "fixed", "fixedColor": ORANGE}
                )
            ],
        ),
        stat_panel(
            "Last answer from Kafka",
            "When Kafka last answered the source's offset request. More than a few trigger "
            "intervals ago means the source is failing: see Kafka source failures.",
            f"1000 * max({SOURCE_LAST_SUCCESS})",
            unit="dateTimeFromNow",
            steps=((None, BLUE),),
            no_value="never",
            width=12,
            height=8,
        ),
    ]
