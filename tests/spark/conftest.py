"""One local SparkSession for the whole test run, plus tiny-frame helpers."""

from __future__ import annotations

import datetime as dt

import pytest

from lake.schema import partition_values
from spark_queries.schema import SAMPLE_SCHEMA

T0 = dt.datetime(2024, 5, 1, 10, 0, tzinfo=dt.timezone.utc)


def at(minutes: float = 0, seconds: float = 0) -> dt.datetime:
    """T0 + offset, aware UTC (what we put into frames)."""
    return T0 + dt.timedelta(minutes=minutes, seconds=seconds)


def local(ts: dt.datetime) -> dt.datetime:
    """How PySpark hands a TimestampType value back: naive, process-local time."""
    return ts.astimezone().replace(tzinfo=None)


def sample(metric, value, ts, broker=1, topic=None, partition=None, labels=None, cluster="c1"):
    """One lake row (as a tuple in SAMPLE_SCHEMA order)."""
    date, hour = partition_values(ts)
    return (ts, broker, metric, topic, partition, labels, float(value), cluster, date, hour)


@pytest.fixture(scope="session")
def lake_df(spark):
    """Factory: rows made with :func:`sample` -> DataFrame in the lake schema."""

    def make(rows):
        return spark.createDataFrame(rows, SAMPLE_SCHEMA)

    return make
