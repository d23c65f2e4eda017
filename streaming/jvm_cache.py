"""Where the project's JVM artifacts live once Maven has resolved them.

``jvm/<name>/pom.xml`` names what to resolve; ``make kafka`` and ``make spark-kafka``
(and ``.ci/run``, through ``make test``) copy each into ``.cache/jvm/<name>/lib``, which
git ignores: Apache Kafka's releases for the lab (``streaming/tools/lab/distribution.py``)
and Spark's Kafka connector for the job (``streaming/job/connector.py``). Nothing reads
a jar from anywhere else, and nothing is fetched at run time.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root", "project_root"]


def project_root() -> Path:
    """The checkout: the Maven definitions live in its ``jvm/``."""
    return Path(__file__).resolve().parents[1]


def cache_root() -> Path:
    """Where Maven copies the jars: ``$LAB_JVM_CACHE``, else the checkout's
    ``.cache/jvm``."""
    configured = os.environ.get("LAB_JVM_CACHE")
    return Path(configured) if configured else project_root() / ".cache" / "jvm"
