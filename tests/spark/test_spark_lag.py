import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from spark_queries.lag import group_lag_status, partition_lag_status
from tests.spark.conftest import at, local, sample

pytestmark = pytest.mark.spark

EVIL_GROUP = "g'; DROP TABLE t; --"


def commits(group, partition, offsets, lags, minutes=None, topic="t"):
    minutes = minutes if minutes is not None else range(len(offsets))
    rows = []
    for m, off, lag in zip(minutes, offsets, lags):
        labels = {"group": group}
        rows.append(sample("CommittedOffset", off, at(m), broker=-1, topic=topic, partition=partition, labels=labels))
        if lag is not None:
            rows.append(sample("ConsumerLag", lag, at(m), broker=-1, topic=topic, partition=partition, labels=labels))
    return rows


@pytest.fixture(scope="module")
def frame(lake_df):
    return lake_df(
        commits("g1", 0, [100, 110, 120, 130, 140], [5, 0, 3, 4, 6])  # lag hit zero: OK
        + commits("g1", 1, [100, 110, 120, 130, 140], [10, 12, 15, 20, 30])  # moving, lag never down: WARN
        + commits("g1", 2, [100, 110, 120, 130, 140], [30, 20, 25, 10, 5])  # catching up: OK
        + commits("g1", 3, [100] * 5, [10, 20, 30, 40, 50])  # same offset again and again: STALL
        + commits("g1", 4, [100, 110], [50, 60], minutes=[0, 1])  # no commits for 3 min: STOP
        + commits("g1", 5, [100, 110, 120, 80, 90], [10, 10, 10, 60, 60])  # went back: REWIND
        + commits("g1", 6, [100, 110, 120, 80, 130], [10, 12, 14, 70, 20])  # went back, recovered: OK
        + commits("g1", 7, [100, 110], [5, 0], minutes=[0, 1])  # stopped but no lag: OK
        + commits("g1", 8, [100, 110, 120, 130, 140], [None, 12, None, 20, 30])  # nil lags skipped: WARN
        + commits("g2", 0, [10, 20, 30], [1, 2, 3])
        + commits(EVIL_GROUP, 0, [10, 20, 30], [0, 0, 0])
    )


def test_partition_verdicts(frame):
    out = partition_lag_status(frame).select("group", "partition", "commits", "current_lag", "status", "severity")
    expected = [
        Row("g1", 0, 5, 6.0, "OK", 1),
        Row("g1", 1, 5, 30.0, "WARN", 2),
        Row("g1", 2, 5, 5.0, "OK", 1),
        Row("g1", 3, 5, 50.0, "STALL", 5),
        Row("g1", 4, 2, 60.0, "STOP", 4),
        Row("g1", 5, 5, 60.0, "REWIND", 6),
        Row("g1", 6, 5, 20.0, "OK", 1),
        Row("g1", 7, 2, 0.0, "OK", 1),
        Row("g1", 8, 5, 30.0, "WARN", 2),
        Row("g2", 0, 3, 3.0, "WARN", 2),
        Row(EVIL_GROUP, 0, 3, 0.0, "OK", 1),
    ]
    assertDataFrameEqual(out, expected)


def test_partition_status_columns(frame):
    out = partition_lag_status(frame).filter("`group` = 'g1' AND partition = 4")
    assert out.columns == [
        "cluster",
        "group",
        "topic",
        "partition",
        "commits",
        "first_commit",
        "last_commit",
        "last_offset",
        "current_lag",
        "max_lag",
        "status",
        "severity",
    ]
    assertDataFrameEqual(out, [Row("c1", "g1", "t", 4, 2, local(at(0)), local(at(1)), 110.0, 60.0, 60.0, "STOP", 4)])


def test_explicit_now_makes_a_quiet_partition_stopped(frame):
    out = partition_lag_status(frame, now=at(20)).filter("`group` = 'g1' AND partition IN (1, 7)")
    assertDataFrameEqual(out.select("partition", "status"), [Row(1, "STOP"), Row(7, "OK")])


def test_allowed_lag(frame):
    out = partition_lag_status(frame, allowed_lag=5).filter("`group` = 'g2'")
    assertDataFrameEqual(out.select("status"), [Row("OK")])


def test_group_status(frame):
    expected = [
        Row("c1", "g1", "ERR", "REWIND", 9, 5, 261.0, "t", 5, 60.0),
        Row("c1", "g2", "WARN", "WARN", 1, 1, 3.0, "t", 0, 3.0),
        Row("c1", EVIL_GROUP, "OK", "OK", 1, 0, 0.0, "t", 0, 0.0),
    ]
    assertDataFrameEqual(group_lag_status(partition_lag_status(frame)), expected)
