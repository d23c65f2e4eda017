"""The followers' replica fetchers (Kafka's ReplicaFetcherThread, one session per follower
and leader) and the leader's side of a fetch (ReplicaManager.fetchMessages).

A follower fetches every partition it follows from one leader in one request, a round
trip (plus any slowness the scenario gives it) after the previous response. The leader
reads the fetch as it arrives: it updates its view of the follower, may expand the ISR and
move the high watermark, and writes one ``fetch-responses`` record per partition. With
nothing to return it holds the fetch until data arrives or ``replica.fetch.wait.max.ms``
passes.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from streaming.feeds.simulator.partition import NO_LEADER, Partition
from streaming.feeds.wire_encoding import fetch_response

if TYPE_CHECKING:
    from streaming.feeds.simulator.cluster import ClusterSimulator

__all__ = ["FETCH_RETRY_BACKOFF_MS", "ReplicaFetchers"]

FETCH_RETRY_BACKOFF_MS = 1_000  # replica.fetch.backoff.ms


class ReplicaFetchers:
    """Every fetch session of the cluster, keyed by (follower, leader); a session's token
    tells a task scheduled for an ended session (it does nothing) from a live one."""

    def __init__(self, cluster: ClusterSimulator) -> None:
        self._cluster = cluster
        self._loop = cluster.loop
        self._sessions: dict[tuple[int, int], int] = {}  # (follower, leader) -> token
        self._tokens = 0
        # leader -> follower -> (session token, hold): the fetches a leader is holding
        self._held: dict[int, dict[int, tuple[int, int]]] = defaultdict(dict)
        self._holds = 0
        self._pairs: dict[tuple[int, int], list[Partition]] | None = None
        self._stopping: set[int] = set()  # in controlled shutdown: fetches nothing

    # ------------------------------------------------------------------ sessions

    def forget_pairs(self) -> None:
        """Leaders or partitions changed: which partitions a session carries is recomputed."""
        self._pairs = None

    def _pair_partitions(self, follower: int, leader: int) -> list[Partition]:
        if self._pairs is None:
            pairs: dict[tuple[int, int], list[Partition]] = defaultdict(list)
            for p in self._cluster.partitions.values():
                if p.leader != NO_LEADER:
                    for replica in p.replicas:
                        if replica != p.leader:
                            pairs[(replica, p.leader)].append(p)
            self._pairs = pairs
        return self._pairs.get((follower, leader), [])

    def ensure_fetcher(self, follower: int, leader: int) -> None:
        if (follower, leader) in self._sessions or not self._cluster.brokers[follower].alive:
            return
        if follower in self._stopping:
            return
        self._tokens += 1
        self._sessions[(follower, leader)] = self._tokens
        rtt = self._loop.between(self._loop.scenario.fetch.round_trip_ms)
        delay = self._cluster.brokers[follower].delay_to(leader)
        self._loop.schedule(
            self._loop.now + rtt + delay, self._fetch_request, follower, leader, self._tokens
        )

    def _end_session(self, follower: int, leader: int) -> None:
        self._sessions.pop((follower, leader), None)
        self._held[leader].pop(follower, None)

    def broker_down(self, broker_id: int) -> None:
        """A crashed broker's sessions end, as a follower and as a leader."""
        for key in [k for k in self._sessions if broker_id in k]:
            self._end_session(*key)

    def stop_fetching(self, broker_id: int) -> None:
        """The controller's StopReplica in a controlled shutdown: it fetches no more."""
        self._stopping.add(broker_id)
        for key in [k for k in self._sessions if k[0] == broker_id]:
            self._end_session(*key)

    def resume_fetching(self, broker_id: int) -> None:
        """A restarted broker fetches again."""
        self._stopping.discard(broker_id)

    def refetch(self, follower_id: int, leader: int | None) -> None:
        """The follower is back to normal: a stalled fetcher retries at once rather than
        after its stall (from ``leader``; None: from every leader)."""
        for follower, from_leader in [k for k in self._sessions if k[0] == follower_id]:
            if leader in (None, from_leader):
                self._end_session(follower, from_leader)
                self.ensure_fetcher(follower, from_leader)

    # ------------------------------------------------------------------ fetches

    def _has_data(self, follower: int, leader: int) -> bool:
        return any(
            p.logs[leader] > p.logs[follower] for p in self._pair_partitions(follower, leader)
        )

    def wake(self, leader: int) -> None:
        """New data on the leader: it answers the held fetches it now has data for."""
        for follower, (token, _) in list(self._held[leader].items()):
            if self._has_data(follower, leader):
                self._respond(follower, leader, token)

    def _fetch_request(self, follower: int, leader: int, token: int) -> None:
        if self._sessions.get((follower, leader)) != token:
            return
        brokers = self._cluster.brokers
        if not brokers[follower].alive or not self._pair_partitions(follower, leader):
            self._end_session(follower, leader)
            return
        if not brokers[leader].alive:  # connection refused: back off and retry
            self._loop.schedule(
                self._loop.now + FETCH_RETRY_BACKOFF_MS,
                self._fetch_request,
                follower,
                leader,
                token,
            )
            return
        has_data = self._read_follower_positions(follower, leader)
        if has_data:
            self._respond(follower, leader, token)
        else:  # the leader holds an empty fetch until data arrives or wait_max passes
            self._holds += 1
            self._held[leader][follower] = (token, self._holds)
            self._loop.schedule(
                self._loop.now + self._loop.scenario.fetch.wait_max_ms,
                self._fetch_timeout,
                follower,
                leader,
                (token, self._holds),
            )

    def _fetch_timeout(self, follower: int, leader: int, hold: tuple[int, int]) -> None:
        if self._held[leader].get(follower) == hold:  # not answered since, nor held anew
            self._respond(follower, leader, hold[0])

    def _read_follower_positions(self, follower: int, leader: int) -> bool:
        """The leader reads a fetch as it arrives (ReplicaManager.fetchMessages): it updates
        each follower's fetch state from the fetch offsets, may expand the ISR and move the
        HW, one fetch-responses record per partition; True if there is data to return."""
        fetch = self._loop.scenario.fetch
        now = self._loop.now
        max_records = self._cluster.brokers[follower].max_records_from(leader, fetch.max_records)
        has_data = False
        for p in self._pair_partitions(follower, leader):
            offset = p.logs[follower]
            leader_leo = p.logs[leader]
            returned = max(0, min(leader_leo - offset, max_records))
            has_data = has_data or returned > 0
            p.remote[follower].update_fetch_state(offset, leader_leo, now)
            self._cluster.broker_tasks.maybe_expand_isr(p, follower, offset)
            p.maybe_increment_high_watermark()
            self._loop.emit(
                fetch_response(
                    ts=now,
                    topic=p.topic,
                    partition=p.partition,
                    leader=leader,
                    follower=follower,
                    leader_epoch=p.leader_epoch,
                    fetch_offset=offset,
                    leader_leo=leader_leo,
                    high_watermark=p.high_watermark,
                    log_start_offset=0,
                    bytes=returned * fetch.record_bytes,
                )
            )
        return has_data

    def _respond(self, follower: int, leader: int, token: int) -> None:
        """The response reaches the follower: it appends what the leader has now."""
        self._held[leader].pop(follower, None)
        if self._sessions.get((follower, leader)) != token:
            return
        fetch = self._loop.scenario.fetch
        broker = self._cluster.brokers[follower]
        max_records = broker.max_records_from(leader, fetch.max_records)
        for p in self._pair_partitions(follower, leader):
            p.logs[follower] += max(0, min(p.logs[leader] - p.logs[follower], max_records))
        rtt = self._loop.between(fetch.round_trip_ms)
        delay = broker.delay_to(leader)
        self._loop.schedule(
            self._loop.now + rtt + delay, self._fetch_request, follower, leader, token
        )
