"""``isrwatch lab``: a real Apache Kafka cluster on loopback, watched by isrwatch.

The real-cluster counterpart of ``isrwatch demo`` (docs/real-kafka.md). Its parts, one
concern each:

* ``distribution``: which Kafka release line runs, and where its jars are (Maven fills
  ``.cache/jvm``; nothing is fetched at run time from anywhere else);
* ``node_config``: each node's ``server.properties`` and Kafka's default log layout;
* ``cluster``: the running cluster (start, stop, the active controller, ``cluster.json``);
* ``faults``: what ``isrwatch lab fault`` does to one broker, from any process;
* ``workload``: the producers (``acks=1`` and ``acks=all``) that keep partitions busy;
* ``scenarios``: named sequences of faults;
* ``session``: the lab itself: cluster, collectors, job, ``/metrics`` and the live view.
"""
