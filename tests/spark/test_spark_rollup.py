"""Rollups (spark_queries.rollup): minutes from raw samples, hours from minutes, history from rollups."""

import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from lake.schema import ROLLUP_COLUMNS
from spark_queries.history import metric_history
from spark_queries.rollup import coarser_rollup, minute_rollup, rollup_history
from tests.spark.conftest import at, local, sample

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def raw(lake_df):
    rows = [
        # a gauge, two samples a minute
        sample("UnderReplicatedPartitions", 0, at(0)),
        sample("UnderReplicatedPartitions", 4, at(0, 30)),
        sample("UnderReplicatedPartitions", 2, at(1)),
        sample("UnderReplicatedPartitions", 1, at(1, 30)),
        # a counter that restarts in minute 1 (a broker bounce): 10 -> 25 | -> 5 -> 9
        sample("IsrShrinksPerSec", 10, at(0)),
        sample("IsrShrinksPerSec", 25, at(0, 30)),
        sample("IsrShrinksPerSec", 5, at(1)),
        sample("IsrShrinksPerSec", 9, at(1, 30)),
        # a labelled series stays its own series
        sample("RequestQueueTimeMs", 3, at(0), labels={"request": "Produce", "quantile": "0.99"}),
        sample("RequestQueueTimeMs", 7, at(0), labels={"request": "Fetch", "quantile": "0.99"}),
        # log end offsets of one partition, truncated in minute 1: growth ignores the drop
        sample("LogEndOffset", 0, at(0), topic="t", partition=0),
        sample("LogEndOffset", 600, at(0, 30), topic="t", partition=0),
        sample("LogEndOffset", 500, at(1), topic="t", partition=0),
        sample("LogEndOffset", 2300, at(1, 30), topic="t", partition=0),
    ]
    return lake_df(rows)


def test_minute_rollup_aggregates_each_series(raw):
    out = minute_rollup(raw)
    assert out.columns == ROLLUP_COLUMNS
    got = out.select("bucket", "metric", "labels", "min", "max", "sum", "count", "last", "inc", "growth", "resets")
    expected = [
        Row(local(at(0)), "UnderReplicatedPartitions", None, 0.0, 4.0, 4.0, 2, 4.0, 4.0, 4.0, 0),
        # a gauge's inc/resets mean nothing (every drop reads as a restart); queries use min..last
        Row(local(at(1)), "UnderReplicatedPartitions", None, 1.0, 2.0, 3.0, 2, 1.0, 3.0, 0.0, 2),
        Row(local(at(0)), "IsrShrinksPerSec", None, 10.0, 25.0, 35.0, 2, 25.0, 15.0, 15.0, 0),
        # the restart: the step 25 -> 5 counts 5 (counted from 0), 5 -> 9 counts 4
        Row(local(at(1)), "IsrShrinksPerSec", None, 5.0, 9.0, 14.0, 2, 9.0, 9.0, 4.0, 1),
        Row(
            local(at(0)),
            "RequestQueueTimeMs",
            {"request": "Produce", "quantile": "0.99"},
            3.0,
            3.0,
            3.0,
            1,
            3.0,
            None,
            None,
            0,
        ),
        Row(
            local(at(0)),
            "RequestQueueTimeMs",
            {"request": "Fetch", "quantile": "0.99"},
            7.0,
            7.0,
            7.0,
            1,
            7.0,
            None,
            None,
            0,
        ),
        Row(local(at(0)), "LogEndOffset", None, 0.0, 600.0, 600.0, 2, 600.0, 600.0, 600.0, 0),
        Row(local(at(1)), "LogEndOffset", None, 500.0, 2300.0, 2800.0, 2, 2300.0, 2300.0, 1800.0, 1),
    ]
    assertDataFrameEqual(got, expected)
    part = out.select("cluster", "date", "hour").distinct().collect()
    assert [tuple(r) for r in part] == [("c1", "2024-05-01", 10)]


def test_hours_from_minutes_compose(raw):
    hours = coarser_rollup(minute_rollup(raw), 3600)
    got = hours.filter("metric = 'IsrShrinksPerSec'").select(
        "bucket", "min", "max", "sum", "count", "last", "inc", "resets"
    )
    assertDataFrameEqual(got, [Row(local(at(0)), 5.0, 25.0, 49.0, 4, 9.0, 24.0, 1)])


def test_history_from_a_rollup_equals_history_from_raw(raw):
    """A gauge's per-minute max and a counter's per-second rate are the same from either table
    (the counter's first bucket: raw history has no earlier sample, the rollup neither)."""
    minutes = minute_rollup(raw)
    for metric in ("UnderReplicatedPartitions", "IsrShrinksPerSec"):
        from_raw = metric_history(raw, metric, bucket_s=60).select("bucket", "broker", "value")
        from_rollup = rollup_history(minutes, metric, bucket_s=60).select("bucket", "broker", "value")
        assertDataFrameEqual(from_rollup, from_raw)
    two_min = rollup_history(minutes, "UnderReplicatedPartitions", bucket_s=120, agg="avg").select("value", "samples")
    assertDataFrameEqual(two_min, [Row(7.0 / 4, 4)])
    # a counter over two minutes: 15 in the first 30 s seen, then 9 in the next 60 s (restart)
    from_raw = metric_history(raw, "IsrShrinksPerSec", bucket_s=120).select("value", "samples")
    from_minutes = rollup_history(minutes, "IsrShrinksPerSec", bucket_s=120).select("value", "samples")
    assertDataFrameEqual(from_raw, [Row(24.0 / 90, 4)])
    assertDataFrameEqual(from_minutes, from_raw)
    # rows of a table written before `seconds` existed count as whole minutes
    older = rollup_history(minutes.drop("seconds"), "IsrShrinksPerSec", bucket_s=120).select("value")
    assertDataFrameEqual(older, [Row(24.0 / 120)])


def test_a_bucket_keeps_the_seconds_its_steps_span(raw):
    """The counter's first minute was seen for one 30 s step, its second for two; the hour adds
    them up, so its rate is the increase over the 90 s seen."""
    minutes = minute_rollup(raw).filter("metric = 'IsrShrinksPerSec'").select("bucket", "seconds")
    assertDataFrameEqual(minutes, [Row(local(at(0)), 30.0), Row(local(at(1)), 60.0)])
    hour = coarser_rollup(minute_rollup(raw), 3600).filter("metric = 'IsrShrinksPerSec'").select("seconds")
    assertDataFrameEqual(hour, [Row(90.0)])
    older = coarser_rollup(minute_rollup(raw).drop("seconds"), 3600).filter("metric = 'IsrShrinksPerSec'")
    assertDataFrameEqual(older.select("seconds"), [Row(120.0)])
    # the readers assume the column and ask again when a table lacks it (lake.queries)
    from lake.queries import _without_seconds

    with pytest.raises(Exception) as failed:
        coarser_rollup(minute_rollup(raw).drop("seconds"), 3600, assume_seconds=True).collect()
    assert _without_seconds(failed.value)
