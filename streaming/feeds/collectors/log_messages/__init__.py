"""The wordings of Kafka's log messages, one module per family of lines, each named after
the Kafka code that logs it:

* ``state_changes``: ``state.change.logger`` (``ReplicaManager``, ``MetadataCache``): the
  partition states a broker received from the controller;
* ``isr_changes``: ``kafka.cluster.Partition``: the leader's ISR proposals, commits and
  cancels;
* ``controller``: ``kafka.controller`` and KRaft's ``QuorumController``: elections, brokers
  and topics, and the broker registration whose epoch the controller caches.

Each module holds its records, the patterns of every wording by Kafka version, and the
markers that send a message to its parser; ``wording`` holds the pieces they share.
``log_lines`` reads a line's header and hands the message to them.
"""
