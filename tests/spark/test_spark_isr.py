import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from spark_queries.isr import isr_churn
from tests.spark.conftest import at, sample

pytestmark = pytest.mark.spark


def counter(metric, broker, values):
    return [sample(metric, v, at(i), broker=broker) for i, v in enumerate(values)]


def test_isr_churn(lake_df):
    rows = (
        # broker 1: shrinking, never expanding
        counter("IsrShrinksPerSec", 1, [100, 103, 107, 110])
        + counter("IsrExpandsPerSec", 1, [50, 50, 50, 50])
        # broker 2 restarted between minute 1 and 2: both counters start again from 0
        + counter("IsrShrinksPerSec", 2, [10, 15, 3, 5])
        + counter("IsrExpandsPerSec", 2, [10, 14, 2, 4])
        # broker 3: quiet
        + counter("IsrShrinksPerSec", 3, [0, 0, 0, 0])
        + counter("IsrExpandsPerSec", 3, [0, 0, 0, 0])
        # broker 4: a single sample is no increase
        + counter("IsrShrinksPerSec", 4, [7])
    )
    expected = [
        Row("c1", 1, 10.0, 0.0, 10.0, 0, True),
        Row("c1", 2, 10.0, 8.0, 2.0, 2, False),
        Row("c1", 3, 0.0, 0.0, 0.0, 0, False),
        Row("c1", 4, 0.0, 0.0, 0.0, 0, False),
    ]
    out = isr_churn(lake_df(rows))
    assert out.columns == [
        "cluster",
        "broker",
        "shrinks",
        "expands",
        "net_shrinks",
        "resets",
        "shrinks_without_expands",
    ]
    assertDataFrameEqual(out, expected)


def test_isr_churn_keeps_clusters_apart(lake_df):
    rows = [
        sample("IsrShrinksPerSec", 1, at(0), cluster="a"),
        sample("IsrShrinksPerSec", 4, at(1), cluster="a"),
        sample("IsrShrinksPerSec", 100, at(0), cluster="b"),
        sample("IsrShrinksPerSec", 100, at(1), cluster="b"),
        sample("IsrExpandsPerSec", 0, at(0), cluster="b"),
        sample("IsrExpandsPerSec", 1, at(1), cluster="b"),
    ]
    assertDataFrameEqual(
        isr_churn(lake_df(rows)),
        [Row("a", 1, 3.0, 0.0, 3.0, 0, True), Row("b", 1, 0.0, 1.0, -1.0, 0, False)],
    )
