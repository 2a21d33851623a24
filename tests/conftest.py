"""Shared fixtures: one real local Kafka cluster per test run (started on first use, healed after
each test that used it, removed at the end), and one local SparkSession per run, for every folder
of tests that needs them."""

import pytest

from localkafka.testing import kafka_autoheal, kafka_cluster  # noqa: F401


@pytest.fixture(scope="session")
def spark():
    from lake.spark import build_session

    session = build_session(
        "local[2]",
        app_name="kbot-tests",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "1g",
            "spark.sql.ansi.enabled": "true",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
