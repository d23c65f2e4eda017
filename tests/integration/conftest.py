"""Shared fixtures of the integration tests: one embedded broker, one Spark session."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from streaming.tools.embedded_broker import EmbeddedBroker


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    """A Tansu broker for the whole test session (memory storage, a free port)."""
    with EmbeddedBroker() as running:
        running.start()
        yield running


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local[2] Spark session whose Python workers run this interpreter."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("isrwatch-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    yield session
    session.stop()
