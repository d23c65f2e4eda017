"""The Spark job: the only code that imports pyspark (source, routing, shards, sinks, exporter)."""
