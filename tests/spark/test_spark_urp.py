import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from spark_queries.urp import urp_concentration, urp_trend
from tests.spark.conftest import at, sample

pytestmark = pytest.mark.spark

URP = "UnderReplicatedPartitions"


def series(broker, values):
    return [sample(URP, v, at(i), broker=broker) for i, v in enumerate(values)]


def test_urp_trend_shapes(lake_df):
    rows = (
        series(1, [0, 0, 5, 5, 5, 5, 5, 5, 5, 5])  # broker loss: one step up, level
        + series(2, [0, 3, 1, 4, 0, 2, 5, 1, 3, 2])  # slow follower: wobbles
        + series(3, [0] * 10)
        + series(4, [0, 4, 0, 4, 0, 4, 0, 4, 0, 4])  # one value but toggling: not flat
        + series(5, [0, 0, 6, 6, 6, 6, 6, 6, 0, 0])  # lost and back: step up, step down
        + [sample("IsrShrinksPerSec", 99, at(0), broker=1)]  # other metrics ignored
    )
    expected = [
        Row("c1", 1, 10, 0.0, 5.0, 4.0, 5.0, 2, 1, 8, 5.0, 1.0, "flat"),
        Row("c1", 2, 10, 0.0, 5.0, 2.1, 2.0, 6, 9, 8, 3.0, 0.25, "fluctuating"),
        Row("c1", 3, 10, 0.0, 0.0, 0.0, 0.0, 1, 0, 0, None, None, "zero"),
        Row("c1", 4, 10, 0.0, 4.0, 2.0, 4.0, 2, 9, 5, 4.0, 1.0, "fluctuating"),
        Row("c1", 5, 10, 0.0, 6.0, 3.6, 0.0, 2, 2, 6, 6.0, 1.0, "flat"),
    ]
    out = urp_trend(lake_df(rows))
    assert out.columns == [
        "cluster",
        "broker",
        "samples",
        "min",
        "max",
        "mean",
        "last",
        "distinct_values",
        "changes",
        "nonzero_samples",
        "modal_value",
        "modal_share",
        "shape",
    ]
    assertDataFrameEqual(out, expected)


def test_urp_duplicate_scrapes_collapse_to_max(lake_df):
    rows = series(1, [0, 2, 2, 2]) + [sample(URP, 1, at(1), broker=1)]
    out = urp_trend(lake_df(rows)).select("broker", "samples", "max", "mean", "shape")
    assertDataFrameEqual(out, [Row(1, 4, 2.0, 1.5, "flat")])


def test_urp_modal_value_tie_goes_to_the_larger_value_and_last_is_the_newest(lake_df):
    # 2 and 3 are equally common; the newest sample is 1
    out = urp_trend(lake_df(series(1, [0, 2, 3, 2, 3, 1])))
    row = out.select("samples", "last", "distinct_values", "changes", "nonzero_samples", "modal_value", "modal_share")
    assertDataFrameEqual(row, [Row(6, 1.0, 4, 5, 5, 3.0, 0.4)])


def test_urp_concentration(lake_df):
    rows = (
        series(1, [0, 10, 10])
        + [sample(URP, 7, at(1), broker=1)]
        + series(2, [0, 5, 5])
        + series(3, [0, 0, 0])
        + series(4, [5, 5, 0])
    )
    expected = [
        Row("c1", 1, 20 / 3, 10.0, 0.5, 1),
        Row("c1", 2, 10 / 3, 5.0, 0.25, 2),
        Row("c1", 4, 10 / 3, 5.0, 0.25, 2),
        Row("c1", 3, 0.0, 0.0, 0.0, 3),
    ]
    assertDataFrameEqual(urp_concentration(lake_df(rows)), expected)


def test_urp_concentration_no_urp_has_null_share(lake_df):
    out = urp_concentration(lake_df(series(1, [0, 0])))
    assertDataFrameEqual(out, [Row("c1", 1, 0.0, 0.0, None, 1)])
