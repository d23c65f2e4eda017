"""News of a leader: telling "the follower is behind" from "the monitor has heard nothing".

docs/domain.md#silent-leader.

A follower's lag time is ``now - last_caught_up_ms`` (``state.lag_time``): between two
fetches the monitor carries it forward as the leader would, since a follower that does
not fetch is not catching up. That is Kafka's own view only while the leader is running.
A leader that is hung (paused, stuck in a long GC, cut off from the monitor) runs no
``isr-expiration`` task (``ReplicaManager.maybeShrinkIsr``, scheduled every T / 2 on the
leader itself): it removes nobody. Kafka then acts through the controller instead: it
fences the broker once its session lapses (``broker.session.timeout.ms`` in KRaft, the
ZooKeeper session timeout before), and elects new leaders from the ISR. Or the leader
comes back before that and, at its first check, removes every follower that is not at its
log end and last caught up more than T ago.

The monitor's news of a partition is the latest fetch its leader served to any of its
followers (``last_fetch_time_ms``), or the election that made it leader, which sets that
time too (``state.caught_up``: the controller heard from it). Both sources of fetches
give news of a running leader regularly: ``collect admin`` asks each leader at every poll,
and the simulator's followers fetch continuously. When **every** follower of a partition
falls silent at once, the one thing they share is the leader (or the monitor's way to
it); one follower alone falling silent is that follower. So a partition's leader is
**silent** when the partition has at least two followers on live brokers and its latest
news is more than T / 2 old (strictly), T the leader's ``replica.lag.time.max.ms``:

* more than T / 2, so that a collector polling at most every T / 2 never finds a running
  leader silent between two polls;
* no more than T / 2, so that a follower of a hung leader, caught up at the leader's last
  news, cannot pass T, and be named SHRINK_ELIGIBLE, before its leader is found silent
  (found by the real-Kafka scoreboard, docs/real-kafka.md: a paused 3.9 leader's follower,
  one record behind at the last poll, named while Kafka changed nothing until it fenced
  the leader 20 s later).

With one follower (replication factor 2) a silent leader and a silent follower look the
same from the partition. There, the news is of the leader's broker itself, where the
monitor has it: in KRaft mode, when that broker last caught up with the metadata log, as
the quorum's leader reports every broker (DescribeQuorum's ``LastCaughtUpTimestamp``,
KIP-836, which ``collect admin`` publishes at each poll as ``MetadataLogProgress``). A
running broker fetches the metadata log continuously (the controller appends a
``NoOpRecord`` every ``metadata.max.idle.interval.ms``, 500 ms by default) and is caught
up at every fetch; a hung one stops, and its report stays where it stopped. The same T / 2
applies. Where no report names the broker (ZooKeeper mode, or no DescribeQuorum), the news
is the last admin poll the broker answered (``BrokersAnswered``, which ``collect admin``
publishes at each poll without a quorum report); without either (a collector that sends
neither) the partition is not judged, and its follower's lag runs on as before.
Partitions with two followers or more keep their own news: their leader's broker
fetching the metadata log, or answering the monitor, says that it runs, not that it
serves its followers (a leader cut off from them on the replication listener goes on
fetching from the controllers).

Both rules read what every shard holds alike (the partition's own rows, the quorum
report and the answered polls, which go to every shard), so every shard, and replay,
which holds every partition, judge a partition the same.

While its leader is silent, a follower of the ISR is never SHRINK_ELIGIBLE or
SHRINK_OVERDUE (``state.shrink_rule.classify``): nobody is going to run the check it is
eligible for. It is still LAGGING past ``warn_ratio x T``, since the leader, if it comes
back before its fence, removes it at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from state.arrays import BOOL, I64, values_of
from state.caught_up import NEVER

if TYPE_CHECKING:
    from state.propagation_window import QuorumProgress

MIN_FOLLOWERS_TO_JUDGE = 2
"""Followers on live brokers a partition needs for their common silence to be its
leader's (module doc)."""


def partition_news_ms(last_fetch_time_ms: I64, heard_from: BOOL) -> I64:
    """Per partition (row), its latest news: the latest fetch time among the replica slots
    of ``heard_from`` (its followers), ``NEVER`` without any."""
    news: I64 = np.where(heard_from, last_fetch_time_ms, NEVER).max(axis=1, initial=NEVER)
    return news


def broker_news_ms(
    brokers: I64, quorum: QuorumProgress | None, answered_ms: Mapping[int, int]
) -> I64:
    """For each broker id of ``brokers`` (any shape: the partitions' leaders, their replica
    slots), the latest news of that broker itself: when it last caught up with the
    metadata log, by the quorum's reports (Kafka's own view, KRaft); where no report
    names it (ZooKeeper mode), the last admin poll it answered (``answered_ms``);
    ``NEVER`` where neither tells."""
    flat = np.ravel(brokers)
    caught_up = values_of(flat, quorum.last_caught_up_ms if quorum is not None else {}, NEVER)
    answered = values_of(flat, answered_ms, NEVER)
    news: I64 = np.where(caught_up != NEVER, caught_up, answered).reshape(np.shape(brokers))
    return news


def broker_silent(news_ms: I64, now_ms: int, lag_time_max_ms: I64) -> BOOL:
    """Where a broker's own news (``broker_news_ms``) is known and more than T / 2 old:
    ``2 (now - news) > T``, as for a leader (module doc)."""
    silent: BOOL = (news_ms != NEVER) & _older_than_half_t(news_ms, now_ms, lag_time_max_ms)
    return silent


def _older_than_half_t(news_ms: I64, now_ms: int, lag_time_max_ms: I64) -> BOOL:
    """``2 (now - news) > T`` in integers (exact for an odd T)."""
    older: BOOL = 2 * (now_ms - news_ms) > lag_time_max_ms
    return older


def judged_by_followers(live_followers: I64) -> BOOL:
    """Where the partition's own news tells of its leader: at least
    :data:`MIN_FOLLOWERS_TO_JUDGE` followers on live brokers."""
    judged: BOOL = live_followers >= MIN_FOLLOWERS_TO_JUDGE
    return judged


def leader_news_ms(live_followers: I64, partition_news: I64, broker_news: I64) -> I64:
    """Per partition, the news its leader is judged by: the partition's own where its
    followers can tell, else its leader's broker's (``NEVER``: none)."""
    news: I64 = np.where(judged_by_followers(live_followers), partition_news, broker_news)
    return news


def leader_silent(live_followers: I64, news_ms: I64, now_ms: int, lag_time_max_ms: I64) -> BOOL:
    """Where the leader's news (``leader_news_ms``) is known and more than T / 2 old at
    ``now_ms``: ``2 (now - news) > T`` in integers (exact for an odd T). The partition's
    own news is judged with :data:`MIN_FOLLOWERS_TO_JUDGE` followers on live brokers or
    more, whatever it is; the broker's only where a report named it."""
    known = judged_by_followers(live_followers) | (news_ms != NEVER)
    silent: BOOL = known & _older_than_half_t(news_ms, now_ms, lag_time_max_ms)
    return silent
