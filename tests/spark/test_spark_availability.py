import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from spark_queries.availability import (
    controller_anomalies,
    controller_timeline,
    offline_timeline,
    under_min_isr_timeline,
)
from tests.spark.conftest import at, local, sample

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def isr_frame(lake_df):
    u, a, o = "UnderMinIsrPartitionCount", "AtMinIsrPartitionCount", "OfflinePartitionsCount"
    return lake_df(
        [
            sample(u, 0, at(0, 0), broker=1),
            sample(u, 2, at(0, 30), broker=1),
            sample(u, 1, at(1, 0), broker=1),
            sample(u, 0, at(1, 30), broker=1),
            sample(a, 3, at(0, 0), broker=1),
            sample(u, 0, at(0, 0), broker=2),
            sample(u, 0, at(0, 30), broker=2),
            sample(u, 0, at(1, 0), broker=2),
            sample(o, 0, at(0, 0), broker=1),
            sample(o, 4, at(0, 30), broker=1),
            sample(o, 0, at(1, 0), broker=1),
            sample(o, 0, at(0, 0), broker=2),
        ]
    )


def test_under_min_isr_timeline(isr_frame):
    expected = [
        Row("c1", local(at(0)), 1, 2.0, 3.0),
        Row("c1", local(at(0)), 2, 0.0, None),
        Row("c1", local(at(1)), 1, 1.0, None),
        Row("c1", local(at(1)), 2, 0.0, None),
    ]
    assertDataFrameEqual(under_min_isr_timeline(isr_frame), expected)


def test_offline_timeline(isr_frame):
    expected = [
        Row("c1", local(at(0)), 4.0, 2.0),
        Row("c1", local(at(1)), 0.0, 1.0),
    ]
    assertDataFrameEqual(offline_timeline(isr_frame), expected)


@pytest.fixture(scope="module")
def controller_frame(lake_df):
    m = "ActiveControllerCount"
    rows = []
    for minute, values in {
        0: {1: 1, 2: 0, 3: 0},  # fine
        1: {2: 0, 3: 0},  # broker 1 steps down, nobody takes over
        2: {1: 0, 2: 1, 3: 1},  # split brain
        3: {2: 1},  # fine again
        5: {2: 0, 3: 0},  # (minute 4 missing) none again
    }.items():
        rows += [sample(m, v, at(minute), broker=b) for b, v in values.items()]
    rows += [sample(m, 1, at(1, 0), broker=1), sample(m, 0, at(1, 30), broker=1)]
    return lake_df(rows)


def test_controller_timeline(controller_frame):
    expected = [
        Row("c1", local(at(0)), 1.0, [1], 3, False),
        Row("c1", local(at(1)), 0.0, [], 3, True),
        Row("c1", local(at(2)), 2.0, [2, 3], 3, True),
        Row("c1", local(at(3)), 1.0, [2], 1, False),
        Row("c1", local(at(5)), 0.0, [], 2, True),
    ]
    assertDataFrameEqual(controller_timeline(controller_frame), expected)


def test_controller_anomalies(controller_frame):
    expected = [
        Row("c1", local(at(1)), local(at(3)), 2, 0.0, 2.0),
        Row("c1", local(at(5)), local(at(6)), 1, 0.0, 0.0),
    ]
    assertDataFrameEqual(controller_anomalies(controller_frame), expected)
