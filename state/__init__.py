"""The replication model of Kafka's Partition / Replica / ReplicaManager, free of Spark.

``ReplicationModel`` (state.model) applies controller events and fetch responses to the
columnar state of a shard of partitions and evaluates their health at a time ``now``.
"""
