"""Eligible Leader Replicas (KIP-966): the replicas Kafka may still elect cleanly after
the ISR fell below ``min.insync.replicas``.

Kafka 4.0 added the ELR; a cluster formatted by 4.1 has it on (the feature
``eligible.leader.replicas.version`` is 1 from metadata version 4.1-IV0), and
``kafka-storage format --feature eligible.leader.replicas.version=0`` turns it off. Its
rules are the controller's (``PartitionChangeBuilder``, 4.1.1):

* **Below min ISR, the ISR still shrinks**, even to empty, and a replica it loses moves
  to the ELR (``maybePopulateTargetElr``: ELR = (ELR + ISR before) - ISR after, less the
  replicas that shut down uncleanly). ``LastKnownElr`` keeps the ones that left both.
* **At or above min ISR** (the topic's ``min.insync.replicas``, at most its replication
  factor: ``getTopicEffectiveMinIsr``), the ELR and the last known ELR are empty.
* **Election**: a replica is a clean leader if it is in the ISR, or, when the ISR is
  empty, in the ELR (``isValidNewLeader``). Elected from the ELR, it becomes the whole
  ISR and leaves the ELR.
* **ClearElrRecord** (written when ``min.insync.replicas`` changes, 4.0+) empties both
  lists of one topic, or of every topic when it names none.

The model takes the ELR as the controller states it: the KRaft metadata log carries it
on every ``PartitionRecord`` and ``PartitionChangeRecord`` from metadata version 4.0-IV1
on, and the metadata-log collector puts it on its events. An event that does not state
it (a broker's log line, ZooKeeper mode, an earlier Kafka) leaves the ELR the model
holds, changed only by the two rules above that need nothing the controller alone knows
(:func:`after_unstated_change`): a replica's unclean shutdown, which keeps it out of the
ELR, is known only to the controller. ``None`` means that no event ever stated the ELR of
the partition: the health record then has no ``elr``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class EligibleLeaders:
    """A partition's ``EligibleLeaderReplicas`` and ``LastKnownElr``, as Kafka has them."""

    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()


NONE_ELIGIBLE = EligibleLeaders()
"""Both lists empty: what the controller holds at or above min ISR, and after a
``ClearElrRecord``."""


def effective_min_isr(min_insync_replicas: int, replication_factor: int) -> int:
    """``min.insync.replicas`` as Kafka applies it: never more than the replication factor
    (``ReplicationControlManager.getTopicEffectiveMinIsr``, 4.0+)."""
    return min(min_insync_replicas, replication_factor)


def after_unstated_change(
    held: EligibleLeaders | None,
    new_isr: tuple[int, ...],
    new_leader: int,
    min_isr: int,
) -> EligibleLeaders | None:
    """The ELR after a change whose event does not state it.

    ``min_isr`` is the effective one (:func:`effective_min_isr`). The ISR at or above it
    empties both lists; a leader elected from the ELR leaves it; anything else keeps what
    the model holds (the additions of a shrink below min ISR need the controller's
    statement: only it knows which replicas shut down uncleanly).
    """
    if held is None:
        return None
    if len(new_isr) >= min_isr:
        return NONE_ELIGIBLE
    if new_leader in held.elr:
        return EligibleLeaders(
            tuple(replica for replica in held.elr if replica != new_leader),
            held.last_known_elr,
        )
    return held
