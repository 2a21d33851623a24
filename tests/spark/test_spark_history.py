import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from spark_queries.history import metric_history
from tests.spark.conftest import at, local, sample

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def frame(lake_df):
    urp, shr, q = "UnderReplicatedPartitions", "IsrShrinksPerSec", "RequestQueueTimeMs"
    return lake_df(
        [
            sample(urp, 1, at(0, 0), broker=1),
            sample(urp, 3, at(0, 30), broker=1),
            sample(urp, 2, at(1, 0), broker=1),
            sample(urp, 5, at(0, 0), broker=2),
            sample(shr, 10, at(0, 0), broker=1),
            sample(shr, 16, at(0, 30), broker=1),
            sample(shr, 22, at(1, 0), broker=1),
            sample(shr, 4, at(1, 30), broker=1),  # restart
            sample(q, 2, at(0, 0), broker=1, labels={"request": "Produce"}),
            sample(q, 4, at(0, 0), broker=2, labels={"request": "Produce"}),
            sample(q, 9, at(0, 0), broker=1, labels={"request": "Fetch"}),
        ]
    )


def test_gauge_max_per_broker(frame):
    expected = [
        Row("c1", local(at(0)), 1, 3.0, 2),
        Row("c1", local(at(1)), 1, 2.0, 1),
        Row("c1", local(at(0)), 2, 5.0, 1),
    ]
    assertDataFrameEqual(metric_history(frame, "UnderReplicatedPartitions"), expected)


def test_gauge_avg_whole_cluster(frame):
    out = metric_history(frame, "UnderReplicatedPartitions", by=(), agg="avg", bucket_s=120)
    assertDataFrameEqual(out, [Row("c1", local(at(0)), 11 / 4, 4)])


def test_counter_becomes_rate(frame):
    expected = [
        # the first minute was seen for one 30 s step (the window holds no earlier sample)
        Row("c1", local(at(0)), 1, 6 / 30, 2),
        Row("c1", local(at(1)), 1, 10 / 60, 2),
    ]
    assertDataFrameEqual(metric_history(frame, "IsrShrinksPerSec"), expected)


def test_a_counter_reads_its_rate_in_buckets_seen_in_part_and_after_a_gap(lake_df):
    """10 events/s throughout, as seen by a collector that started at 00:30 into an hour bucket,
    was down from 01:00 to 01:40 and is still running at 02:20. Dividing each bucket's increase
    by its width read the first hour at half the rate, the last at a third, and put the outage's
    24,000 events into one minute."""
    seen = [*range(30, 61), *range(100, 141)]  # minutes: 00:30-01:00, 01:40-02:20
    frame = lake_df([sample("BytesInPerSec", 600.0 * m, at(m), broker=1) for m in seen])
    hours = metric_history(frame, "BytesInPerSec", bucket_s=3600).orderBy("bucket").collect()
    assert [r["value"] for r in hours] == pytest.approx([10.0, 10.0, 10.0])
    minutes = metric_history(frame, "BytesInPerSec", bucket_s=60).collect()
    assert max(r["value"] for r in minutes) == pytest.approx(10.0)


def test_group_by_label(frame):
    out = metric_history(frame, "RequestQueueTimeMs", by=("label:request",), agg="sum")
    assert out.columns == ["cluster", "bucket", "label_request", "value", "samples"]
    assertDataFrameEqual(out, [Row("c1", local(at(0)), "Produce", 6.0, 2), Row("c1", local(at(0)), "Fetch", 9.0, 1)])


def test_untrusted_metric_name_is_a_literal(frame):
    assert metric_history(frame, "x' OR '1'='1").count() == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"by": ("value",)},
        {"by": ("label:a b",)},
        {"agg": "drop"},
        {"bucket_s": 0},
    ],
)
def test_rejects_bad_parameters(frame, kwargs):
    with pytest.raises(ValueError):
        metric_history(frame, "UnderReplicatedPartitions", **kwargs)
