"""What ``collect admin`` publishes at each poll besides the followers' progress: the
news that each broker runs (docs/domain.md#silent-leader).

KRaft: ``MetadataLogProgress``, DescribeQuorum's report of every broker's position in the
metadata log. ZooKeeper mode has no quorum report: ``BrokersAnswered``, the brokers the
cluster lists as live that answered the poll. A broker that died is still listed until
the controller sees its session expire (``session_timeout_ms``), and it answers nothing
meanwhile: that silence is the news the model reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from state.events import BrokersAnswered

if TYPE_CHECKING:
    from streaming.feeds.simulator.cluster import ClusterSimulator

__all__ = ["AdminPolls"]


class AdminPolls:
    """``collect admin``'s polls, every ``admin_poll_interval_ms``."""

    def __init__(self, cluster: ClusterSimulator) -> None:
        self._cluster = cluster
        self._loop = cluster.loop
        self._interval_ms = cluster.scenario.cluster.admin_poll_interval_ms

    def start(self) -> None:
        self._loop.schedule(self._loop.now + self._interval_ms, self._poll)

    def _poll(self) -> None:
        if self._loop.kraft:
            self._loop.emit(self._cluster.metadata.quorum_report(self._interval_ms))
        else:
            self._loop.emit(self._answered())
        self.start()

    def _answered(self) -> BrokersAnswered:
        """The brokers the controller lists as live (as DescribeCluster gives them) that
        are running: a dead one stays listed until its session expires."""
        controller = self._cluster.controller
        brokers = self._cluster.brokers
        return BrokersAnswered(
            ts=self._loop.now,
            controller_id=controller.id,
            controller_epoch=controller.epoch,
            brokers=tuple(b for b in sorted(controller.live) if brokers[b].alive),
        )
