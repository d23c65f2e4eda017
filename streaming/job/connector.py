"""Spark's own Kafka source (spark-sql-kafka-0-10) for ``kafka.source_format: kafka``.

PySpark's wheel does not carry it. ``make spark-kafka`` resolves it with Maven from
``jvm/spark-kafka/pom.xml`` into ``.cache/jvm/spark-kafka/lib`` (the connector, its
token provider, kafka-clients and commons-pool2: what it needs that PySpark lacks), and
the job names those jars in ``spark.jars`` when it starts its Spark session, so that
spark-submit puts them on the driver's and the executors' classpath. An image that put
the connector into PySpark's own jars (the ``Dockerfile``'s ``spark-kafka`` stage does,
from the same POM) needs nothing from the cache. Nothing is fetched at run time: a
missing or mismatched connector is an error that says how to install the right one.
"""

from __future__ import annotations

from pathlib import Path

from streaming.jvm_cache import cache_root

__all__ = ["CONNECTOR_ARTIFACT", "ConnectorMissingError", "connector_jars", "connector_lib"]

CONNECTOR_ARTIFACT = "spark-sql-kafka-0-10_2.13"


class ConnectorMissingError(Exception):
    """Spark's Kafka connector of PySpark's version is not installed; the message says how
    to install it."""


def connector_lib() -> Path:
    """Where ``make spark-kafka`` copies the connector's jars."""
    return cache_root() / "spark-kafka" / "lib"


def pyspark_jars() -> Path:
    """PySpark's own jars: Spark's classpath before ``spark.jars``."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def connector_jars(spark_version: str, shipped: Path | None = None) -> list[Path]:
    """The jars ``spark.jars`` must add for Spark's Kafka source of ``spark_version``:
    none when ``shipped`` (PySpark's own jars) already holds the connector, else every jar
    of ``connector_lib()``, whose connector must be of that very version (it calls Spark's
    internal APIs, which change between releases)."""
    shipped = pyspark_jars() if shipped is None else shipped
    if any(shipped.glob(f"{CONNECTOR_ARTIFACT}-{spark_version}.jar")):
        return []
    lib = connector_lib()
    jars = sorted(lib.glob("*.jar"))
    if any(jar.name == f"{CONNECTOR_ARTIFACT}-{spark_version}.jar" for jar in jars):
        return jars
    found = [jar.name for jar in jars if jar.name.startswith(CONNECTOR_ARTIFACT)]
    raise ConnectorMissingError(
        f"kafka.source_format: kafka needs Spark's Kafka connector "
        f"{CONNECTOR_ARTIFACT} {spark_version} (PySpark's version), and "
        + (f"{lib} holds {', '.join(found)} instead" if found else f"{lib} has none")
        + ": run `make spark-kafka` in the checkout (the container image built from the"
        " Dockerfile has them), or set kafka.source_format: python"
    )
