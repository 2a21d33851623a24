import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from spark_queries.txn import last_stable_offset_lag, late_transactions
from tests.spark.conftest import at, local, sample

pytestmark = pytest.mark.spark


def lso(topic, partition, broker, values):
    return [
        sample("LastStableOffsetLag", v, at(i), broker=broker, topic=topic, partition=partition)
        for i, v in enumerate(values)
    ]


def test_last_stable_offset_lag(lake_df):
    rows = (
        lso("pay", 0, 1, [2, 1, 3, 10, 20, 30, 40, 50, 60])  # hanging: climbs and never comes down
        + lso("pay", 1, 1, [5, 8, 3, 9, 4, 7, 2, 6, 5])  # normal transactional jitter
        + lso("pay", 2, 2, [0, 10, 20, 30, 40, 50, 60, 70, 65])  # came down at the end
    )
    expected = [
        Row("c1", "pay", 0, 9, 2.0, 60.0, 60.0, 7, 58 / 480, True, 1),
        Row("c1", "pay", 1, 9, 5.0, 5.0, 9.0, 0, 0.0, False, 1),
        Row("c1", "pay", 2, 9, 0.0, 65.0, 70.0, 0, 65 / 480, False, 2),
    ]
    out = last_stable_offset_lag(lake_df(rows))
    assert out.columns == [
        "cluster",
        "topic",
        "partition",
        "samples",
        "first_lag",
        "last_lag",
        "max_lag",
        "increases_since_last_decrease",
        "growth_per_sec",
        "growing",
        "leader_broker",
    ]
    assertDataFrameEqual(out, expected)


def test_late_transactions(lake_df):
    m = "PartitionsWithLateTransactionsCount"
    rows = [sample(m, v, at(i), broker=1) for i, v in enumerate([0, 0, 1, 1])] + [
        sample(m, 0, at(i), broker=2) for i in range(4)
    ]
    expected = [
        Row("c1", 1, 1.0, 1.0, 2, local(at(2)), True),
        Row("c1", 2, 0.0, 0.0, 0, None, False),
    ]
    assertDataFrameEqual(late_transactions(lake_df(rows)), expected)
