"""Dashboard 1, cluster overview: what is unhealthy now, over time, per topic and per broker."""

from __future__ import annotations

from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models import dashboard as model

from dashboards.drilldown import UID as DRILLDOWN_UID
from dashboards.panels import (
    BLUE,
    GREEN,
    ORANGE,
    YELLOW,
    base_dashboard,
    build_sections,
    drilldown_link,
    instant_table,
    multi_variable,
    stat_panel,
    target,
    targets,
    time_series,
)
from dashboards.promql import series
from state.shrink_rule import SHRINK_DEADLINE_FORMULA

UID = "isrwatch-overview"
TITLE = "isrwatch / Cluster overview"

TOPIC = 'topic=~"$topic"'
BROKER = 'broker=~"$broker"'
LEADER = 'leader=~"$broker"'
SHRINK_EXPAND = 'kind=~"shrink|expand"'
OVERDUE = 'status="SHRINK_OVERDUE"'
NOT_IN_SYNC = 'status!="IN_SYNC"'

PARTITIONS = series("isrwatch_partitions", TOPIC)
UNDER_REPLICATED = series("isrwatch_under_replicated_partitions", TOPIC)
UNDER_MIN_ISR = series("isrwatch_under_min_isr_partitions", TOPIC)
OFFLINE = series("isrwatch_offline_partitions", TOPIC)
PREDICTED = series("isrwatch_predicted_under_replicated_partitions", TOPIC)
FOLLOWERS_OVERDUE = series("isrwatch_followers", TOPIC, OVERDUE)
FOLLOWERS_NOT_IN_SYNC = series("isrwatch_followers", TOPIC, NOT_IN_SYNC)
STALE = series("isrwatch_metadata_stale_partitions", TOPIC)
STALE_EXPECTED = series("isrwatch_metadata_stale_partitions", TOPIC, 'state="expected"')
STALE_OVERDUE = series("isrwatch_metadata_stale_partitions", TOPIC, 'state="overdue"')
ISR_CHANGE_RATE = (
    f"rate({series('isrwatch_isr_changes_total', TOPIC, SHRINK_EXPAND)}[$__rate_interval])"
)
LEADER_ISR_CHANGE_RATE = (
    f"rate({series('isrwatch_isr_changes_total', LEADER, SHRINK_EXPAND)}[$__rate_interval])"
)
PROPAGATION_BUCKETS = (
    f"sum by (le) (rate({series('isrwatch_propagation_delay_seconds_bucket')}[$__rate_interval]))"
)
BROKER_FOLLOWERS = series("isrwatch_broker_followers", BROKER, NOT_IN_SYNC)
LED_UNHEALTHY = series("isrwatch_broker_led_partitions", BROKER, 'condition!="partitions"')
LED = series("isrwatch_broker_led_partitions", BROKER, 'condition="partitions"')
OVERDUE_BY_LEADER = series("isrwatch_follower_status", LEADER, OVERDUE)
BOUNCES = f"increase({series('isrwatch_broker_bounces_total', BROKER)}[$__rate_interval])"
CONDITIONS = series("isrwatch_partition_condition", TOPIC)
SHRINK_DEADLINES = series("isrwatch_follower_shrink_deadline_seconds", TOPIC, LEADER)
CAUSE_PARTITIONS = series("isrwatch_cause_partitions")
CAUSE_FOLLOWERS = series("isrwatch_cause_followers")
CAUSE_LEADERS = series("isrwatch_cause_leaders")
PLANNED = series("isrwatch_planned_under_replicated_partitions", TOPIC)
MAINTENANCE = series("isrwatch_broker_maintenance_since_seconds")
FLAP_SHRINKS = series("isrwatch_follower_isr_shrinks", TOPIC)
FLAP_PERIOD = series("isrwatch_follower_flap_period_seconds", TOPIC)

Panels = list[Builder[model.Panel]]


def build() -> model.Dashboard:
    dashboard = (
        base_dashboard(
            UID,
            TITLE,
            "Kafka replication health from isrwatch: partitions under-replicated, under "
            "min ISR, offline or about to lose a replica, ISR shrinks Kafka failed to make, "
            "and brokers' metadata lagging the controller.",
        )
        .with_variable(
            multi_variable("topic", 'label_values(isrwatch_partitions{job="$job"}, topic)', "Topic")
        )
        .with_variable(
            multi_variable(
                "broker",
                'label_values(isrwatch_broker_led_partitions{job="$job"}, broker)',
                "Broker",
            )
        )
    )
    sections = [
        ("Now", _now()),
        ("Why: the cause of each problem", _why()),
        ("Over time", _over_time()),
        ("Per topic", _per_topic()),
        ("Per broker", _per_broker()),
        ("Unhealthy partitions and followers now", _unhealthy_now()),
    ]
    return build_sections(dashboard, sections)


def _now() -> Panels:
    return [
        stat_panel(
            "Partitions",
            "Partitions isrwatch monitors in the selected topics. It should match the "
            "cluster's partition count; if it is lower, check that the controller-events "
            "collector publishes every topic's LeaderAndIsr.",
            f"sum({PARTITIONS})",
            steps=((None, BLUE),),
            width=3,
        ),
        stat_panel(
            "Under-replicated",
            "Partitions whose ISR is smaller than their replica set. Open the partition "
            "drill-down (table at the bottom) to see which follower left the ISR; check that "
            "broker's health, disk and network, and whether it is catching up (CATCHING_UP) "
            "or falling further behind (OUT_OF_SYNC).",
            f"sum({UNDER_REPLICATED})",
            steps=((None, GREEN), (1, ORANGE)),
            width=3,
        ),
        stat_panel(
            "Under min ISR",
            "Partitions with fewer in-sync replicas than min.insync.replicas: producers "
            "with acks=all get NotEnoughReplicas errors now. Bring the missing replicas' "
            "brokers back first; do not lower min.insync.replicas unless you accept losing "
            "acknowledged writes.",
            f"sum({UNDER_MIN_ISR})",
            width=3,
        ),
        stat_panel(
            "Offline",
            "Partitions without a live leader: nobody can read or write them. Find the dead "
            "leader broker (Per broker row) and restart it; if no ISR replica can come back, "
            "an unclean leader election is the last resort and loses data.",
            f"sum({OFFLINE})",
            width=3,
        ),
        stat_panel(
            "Predicted under-replicated",
            "Partitions not under-replicated yet but with an ISR follower past "
            f"replica.lag.time.max.ms (T): Kafka removes it by {SHRINK_DEADLINE_FORMULA}. "
            "Look at the "
            "follower's broker now (fetcher threads, disk, network, GC pauses) to keep it "
            "in the ISR.",
            f"sum({PREDICTED})",
            steps=((None, GREEN), (1, YELLOW)),
            width=3,
        ),
        stat_panel(
            "Overdue shrinks",
            "ISR followers lagging more than 1.5 x replica.lag.time.max.ms that Kafka has "
            "not removed: the leader's ISR expiration failed (stuck leader, failed "
            "ZooKeeper or AlterPartition write, controller trouble). Check the leader "
            "broker's logs for ISR shrink errors; moving leadership off that broker or "
            "restarting it usually unblocks it.",
            f"sum({FOLLOWERS_OVERDUE})",
            width=3,
        ),
        stat_panel(
            "Metadata stale, expected",
            "Partitions whose ISR change has not reached every broker's metadata cache yet, "
            "still inside Kafka's propagation window (in ZooKeeper mode: 5 s without ISR "
            "changes on the leader, 60 s at most). Clients may see the old ISR meanwhile; "
            "nothing to do unless it turns overdue.",
            f"sum({STALE_EXPECTED})",
            steps=((None, GREEN), (1, BLUE)),
            width=3,
        ),
        stat_panel(
            "Metadata stale, overdue",
            "Partitions whose ISR change should have reached every broker by now and has "
            "not: the controller is slow or failed to send UpdateMetadata. Check the active "
            "controller's logs and event queue, and the stale brokers named in the "
            "partition drill-down.",
            f"sum({STALE_OVERDUE})",
            width=3,
        ),
    ]


def _over_time() -> Panels:
    return [
        time_series(
            "Partition health",
            "Under-replicated, under-min-ISR, offline and predicted under-replicated "
            "partitions in the selected topics. A predicted line rising before the "
            "under-replicated one is a shrink isrwatch saw coming: act on the predicted "
            "line to avoid the shrink.",
            targets(
                (f"sum({UNDER_REPLICATED})", "under-replicated"),
                (f"sum({UNDER_MIN_ISR})", "under min ISR"),
                (f"sum({OFFLINE})", "offline"),
                (f"sum({PREDICTED})", "predicted under-replicated"),
            ),
        ),
        time_series(
            "Followers not in sync, by status",
            "Follower replicas by status (IN_SYNC left out). LAGGING is an early warning; "
            "SHRINK_ELIGIBLE will be removed from the ISR soon; SHRINK_OVERDUE should have "
            "been; CATCHING_UP rejoins at its next fetch; OUT_OF_SYNC is behind the high "
            "watermark; OFFLINE's broker is down.",
            [target(f"sum by (status) ({FOLLOWERS_NOT_IN_SYNC})", "{{status}}")],
            stacked=True,
        ),
        time_series(
            "Metadata staleness",
            "Partitions whose cached ISR on some live broker differs from the controller's: "
            "expected (inside the predicted propagation window) or overdue (past it). "
            "Expected bumps follow ISR changes; a lasting overdue count points to the "
            "controller (MetadataPropagationOverdue alert).",
            [target(f"sum by (state) ({STALE})", "{{state}}")],
            stacked=True,
        ),
        time_series(
            "ISR shrinks and expands",
            "ISR changes per minute by kind and origin (leader: the leader's own "
            "shrink/expand; controller: an election or reassignment). Shrinks and expands "
            "alternating is ISR flapping: followers hovering around replica.lag.time.max.ms; "
            "fix the followers' fetch capacity or raise T.",
            [target(f"60 * sum by (kind, origin) ({ISR_CHANGE_RATE})", "{{kind}} by {{origin}}")],
            unit="cpm",
        ),
        time_series(
            "Observed metadata propagation delay",
            "Time from an ISR change to the last live broker caching it. In ZooKeeper mode "
            "the leader waits for 5 s without ISR changes (60 s at most), so up to about "
            "62.5 s is normal under churn; longer means the controller is slow to send "
            "UpdateMetadata.",
            targets(
                (f"histogram_quantile(0.5, {PROPAGATION_BUCKETS})", "p50"),
                (f"histogram_quantile(0.99, {PROPAGATION_BUCKETS})", "p99"),
            ),
            unit="s",
            width=24,
        ),
    ]


def _per_topic() -> Panels:
    return [
        time_series(
            "Under-replicated by topic",
            "Under-replicated partitions per topic (topics with none are hidden). One topic "
            "alone points to its partitions' brokers; every topic at once points to a "
            "broker that is down.",
            [target(f"sum by (topic) ({UNDER_REPLICATED}) > 0", "{{topic}}")],
            width=8,
        ),
        time_series(
            "Under min ISR and offline by topic",
            "Partitions per topic that refuse acks=all writes (under min ISR) or all "
            "traffic (offline). Both are outages for the topic's producers: restore the "
            "missing brokers.",
            targets(
                (f"sum by (topic) ({UNDER_MIN_ISR}) > 0", "{{topic}} under min ISR"),
                (f"sum by (topic) ({OFFLINE}) > 0", "{{topic}} offline"),
            ),
            width=8,
        ),
        time_series(
            "Predicted under-replicated by topic",
            "Partitions per topic with an ISR follower Kafka will remove by "
            f"{SHRINK_DEADLINE_FORMULA}, T = replica.lag.time.max.ms. Find the follower's "
            "broker in the table at the bottom "
            "and fix it before the shrink.",
            [target(f"sum by (topic) ({PREDICTED}) > 0", "{{topic}}")],
            width=8,
        ),
        time_series(
            "Overdue shrinks by topic",
            "Followers per topic past 1.5 x replica.lag.time.max.ms and still in the ISR. "
            "Kafka failed to shrink: look at these partitions' leaders (Per broker row).",
            [target(f"sum by (topic) ({FOLLOWERS_OVERDUE}) > 0", "{{topic}}")],
            width=8,
        ),
        time_series(
            "Metadata stale by topic",
            "Partitions per topic whose brokers' metadata lags the controller, expected or "
            "overdue. Overdue ones are the controller's backlog.",
            [target(f"sum by (topic, state) ({STALE}) > 0", "{{topic}} {{state}}")],
            width=8,
        ),
        time_series(
            "ISR changes by topic",
            "Shrinks and expands per minute per topic. A topic that keeps changing has "
            "followers at the edge of replica.lag.time.max.ms (throughput spikes, slow "
            "disks): give its followers more fetch capacity or raise T.",
            [target(f"60 * sum by (topic, kind) ({ISR_CHANGE_RATE}) > 0", "{{topic}} {{kind}}")],
            unit="cpm",
            width=8,
        ),
    ]


def _per_broker() -> Panels:
    return [
        time_series(
            "Followers not in sync, by hosting broker",
            "Follower replicas per broker that hosts them, by status. One broker with many "
            "lagging or offline followers is the broker to look at: its fetcher threads, "
            "disk or network, or it is down.",
            [
                target(
                    f"sum by (broker, status) ({BROKER_FOLLOWERS}) > 0",
                    "broker {{broker}} {{status}}",
                )
            ],
            width=8,
        ),
        time_series(
            "Led partitions by condition",
            "Partitions per leader broker that are under-replicated, under min ISR, offline "
            "or predicted under-replicated (broker -1: no leader). Problems concentrated on "
            "one leader point to that leader rather than to its followers.",
            [
                target(
                    f"sum by (broker, condition) ({LED_UNHEALTHY}) > 0",
                    "broker {{broker}} {{condition}}",
                )
            ],
            width=8,
        ),
        time_series(
            "Leadership balance",
            "Partitions led per broker. A broker dropping to zero lost its leaderships "
            "(down, or bounced and not re-elected yet): once it is healthy, run a preferred "
            "leader election.",
            [target(f"sum by (broker) ({LED})", "broker {{broker}}")],
            width=8,
        ),
        time_series(
            "ISR changes by leader",
            "Shrinks and expands per minute per leader broker. The propagation window is "
            "per leader: churn on any of its partitions delays metadata for all of them. "
            "A leader that keeps shrinking and expanding raises the IsrFlapping alert.",
            [
                target(
                    f"60 * sum by (leader, kind) ({LEADER_ISR_CHANGE_RATE}) > 0",
                    "leader {{leader}} {{kind}}",
                )
            ],
            unit="cpm",
            width=8,
        ),
        time_series(
            "Overdue shrinks by leader",
            "Followers past 1.5 x replica.lag.time.max.ms that each leader has not removed "
            "from the ISR. The leader is the broker that failed to act: check its ISR "
            "expiration (logs, ZooKeeper or controller connectivity) and consider moving "
            "its leaderships away.",
            [target(f"count by (leader) ({OVERDUE_BY_LEADER})", "leader {{leader}}")],
            width=8,
        ),
        time_series(
            "Broker bounces",
            "Brokers that re-registered with a new broker epoch (restarted fast enough that "
            "the controller saw no gap). Their replicas went offline and rejoin the ISR "
            "after catching up; repeated bounces of one broker are a crash loop: check its "
            "logs and host.",
            [target(f"sum by (broker) ({BOUNCES}) > 0", "broker {{broker}}")],
            width=8,
        ),
    ]


def _why() -> Panels:
    return [
        time_series(
            "Unhealthy partitions by cause",
            "Each unhealthy partition's principal cause and the broker held responsible "
            "(none: no single broker), read from the pattern across the cluster "
            "(docs/causes.md): a broker behind on most of what it follows from many leaders, "
            "a leader whose followers lag in every partition it leads, one fetcher, a broker "
            "down, Kafka not shrinking the ISR, metadata not reaching the brokers.",
            [
                target(
                    f"sum by (kind, broker) ({CAUSE_PARTITIONS})",
                    "{{kind}} (broker {{broker}})",
                )
            ],
            width=12,
        ),
        instant_table(
            "Causes now",
            "One row per cause and responsible broker: the followers not in sync it "
            "explains, the unhealthy partitions whose principal cause it is, and from how "
            "many leaders. Act on the broker named (docs/causes.md says what each kind "
            "means); every health record carries its cause.",
            [
                target(CAUSE_FOLLOWERS, "followers", instant=True, table_format=True),
                target(CAUSE_PARTITIONS, "partitions", "B", instant=True, table_format=True),
                target(CAUSE_LEADERS, "leaders", "C", instant=True, table_format=True),
            ],
            renames={"Value #A": "followers", "Value #B": "partitions", "Value #C": "leaders"},
        ),
        time_series(
            "Under-replicated: planned and not",
            "Under-replicated partitions, and those of them whose cause is planned "
            "maintenance (a broker in controlled shutdown, or catching up after it "
            "re-registered within rules.maintenance_grace_ms). Only the difference raises "
            "UnderReplicatedPartitions: a rolling restart pages no one.",
            [
                target(f"sum({UNDER_REPLICATED})", "under-replicated"),
                target(f"sum({PLANNED})", "planned", "B"),
            ],
            width=8,
        ),
        instant_table(
            "Brokers in planned maintenance",
            "Brokers in a controlled shutdown (the controller took them out of the ISRs "
            "while still registered) or that re-registered within the grace period, and "
            "since when. A broker that stopped without a controlled shutdown is not here: "
            "it raises BrokerDown at once.",
            [target(f"1000 * {MAINTENANCE}", instant=True, table_format=True)],
            renames={"Value": "since"},
            unit="dateTimeFromNow",
            width=8,
        ),
        instant_table(
            "Flapping followers",
            "Followers removed from the ISR twice or more within rules.flapping_window_ms, "
            "with the mean time between removals. Three or more (each re-added in between) "
            "raise FollowerFlapping: look at the follower's broker and its link to the leader.",
            [
                target(FLAP_SHRINKS, "removals", instant=True, table_format=True),
                target(FLAP_PERIOD, "period", "B", instant=True, table_format=True),
            ],
            renames={"Value #A": "removals in window", "Value #B": "every (s)"},
            width=8,
        ),
    ]


def _unhealthy_now() -> Panels:
    drilldown = (
        f"/d/{DRILLDOWN_UID}?${{__url_time_range}}&${{datasource:queryparam}}"
        "&${job:queryparam}&var-topic=${__data.fields.topic}"
        "&var-partition=${__data.fields.partition}"
    )
    return [
        instant_table(
            "Unhealthy partitions",
            "Every condition holding now, one row per partition and condition (the series "
            "exist only while a partition is unhealthy). Click a row to open the partition "
            "drill-down and see which follower or broker is behind it.",
            [target(CONDITIONS, instant=True, table_format=True)],
            hidden=("Time", "__name__", "job", "instance", "Value"),
            links=[drilldown_link("Partition drill-down", drilldown)],
        ),
        instant_table(
            "Followers Kafka is about to remove, or should have",
            "SHRINK_ELIGIBLE and SHRINK_OVERDUE followers with the time Kafka removes them "
            f"from the ISR: {SHRINK_DEADLINE_FORMULA}. A deadline in the past is an overdue "
            "shrink: look at the leader. Click a row to open the partition drill-down.",
            [target(f"1000 * {SHRINK_DEADLINES}", instant=True, table_format=True)],
            renames={"Value": "removed from the ISR by", "broker": "follower"},
            unit="dateTimeFromNow",
            links=[drilldown_link("Partition drill-down", drilldown)],
        ),
    ]
