"""Collectors: the bridges that feed the two input topics from a real Kafka cluster.

* ``isrwatch collect logs`` tails broker log files (``log_lines`` parses them, with the
  wordings of each Kafka version in ``log_messages``; ``log_translator`` turns the parsed
  lines into controller events, ``log_follower`` reads the files across rotation and
  restarts, ``log_collector`` runs them);
* ``isrwatch collect admin`` polls a cluster with kafka-python's admin client
  (``admin_source`` takes snapshots, ``admin_poller`` turns two snapshots into events);
* ``isrwatch collect metadata-log`` replays a KRaft cluster's ``__cluster_metadata`` log
  from a broker's disk (``metadata_log``: the record decoder, the replay into controller
  events, the collector that follows the directory and resumes).

Both publish through ``publisher`` (every event is checked against the contract before
it leaves) and expose their own Prometheus metrics (``metrics``). ``cli`` holds the
``collect`` command group.
"""
