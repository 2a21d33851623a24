"""A small synthetic lake (2 h, 4 brokers, 20 partitions) and the incidents the queries must find.

Topology (see tools.synthetic): replica i of partition p of topic k is on broker
(k + p + i) % 4 + 1.  With 4 topics x 5 partitions, each residue (k + p) % 4
occurs 5 times, so:
  * broker 2 is a replica of the partitions with residues 0 ([1,2,3]),
    1 ([2,3,4]) and 3 ([4,1,2]); while it is away they are led by brokers
    1, 3 and 4 respectively: 5 under-replicated partitions each.
  * broker 3 follows residues 0 (led by 1) and 1 (led by 2) and leads residue 2.
"""

import datetime as dt

import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from lake.embedded import WindowReader
from spark_queries.schema import read_lake
from tools import synthetic as S
from window_queries.hot import HOT_QUESTION, hot_partitions
from window_queries.lag import GROUP_LAG_QUESTION, group_lag_status, partition_lag_status
from window_queries.txn import HANGING_QUESTION, last_stable_offset_lag, late_transactions
from window_queries.urp import URP_QUESTION, isr_churn, urp_trend

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc
START = dt.datetime(2024, 5, 1, 10, tzinfo=UTC)


def hhmm(h, m):
    return dt.datetime(2024, 5, 1, h, m, tzinfo=UTC)


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("synthetic") / "lake")
    report = S.generate(
        path,
        cluster="syn",
        start=START,
        hours=2,
        brokers=4,
        topics=4,
        partitions_per_topic=5,
        resolution_s=30,
        incidents=[
            S.broker_loss(2, hhmm(10, 10), dt.timedelta(minutes=40)),
            S.hot_key("topic-001", 2, hhmm(10, 5), "30m"),
            S.slow_follower(3, hhmm(11, 0), "60m"),
            S.hanging_transaction("topic-000", 1, hhmm(11, 10), late_after="10m"),
            S.rebalance_storm("topic-003-consumers", hhmm(11, 30), "10m"),
        ],
        seed=7,
        spark=spark,
    )
    return report, read_lake(spark, path), path


def window(lake, start, end, cluster=None):
    """The window as the bot reads it in process: delta-rs over the Delta table Spark wrote."""
    return WindowReader(lake[2]).open(start, end, cluster, URP_QUESTION.metrics)


def pick(rows, *names):
    return [tuple(r[n] for n in names) for r in rows]


def test_report_counts_what_was_written(lake):
    report, df, _ = lake
    assert report.hours == 2
    assert df.count() == report.rows
    assert df.select("cluster").distinct().collect() == [Row(cluster="syn")]
    assert sorted(r.hour for r in df.select("hour").distinct().collect()) == [10, 11]


def test_broker_loss_is_flat_urp_on_the_survivors(lake):
    w = window(lake, hhmm(10, 0), hhmm(11, 0), cluster="syn")
    assert pick(urp_trend(w), "broker", "samples", "max", "modal_value", "shape") == [
        (1, 120, 5.0, 5.0, "flat"),
        (2, 40, 0.0, None, "zero"),  # away 10:10-10:50: 20 + 20 samples
        (3, 120, 5.0, 5.0, "flat"),
        (4, 120, 5.0, 5.0, "flat"),
    ]
    assert pick(isr_churn(w), "broker", "shrinks", "expands", "resets", "shrinks_without_expands") == [
        (1, 5.0, 5.0, 0, False),
        (2, 0.0, 0.0, 2, False),  # restarted: both counters reset
        (3, 5.0, 5.0, 0, False),
        (4, 5.0, 5.0, 0, False),
    ]
    # the window ends where its last sample is, and another cluster's name finds nothing
    assert w.data_end() == (hhmm(11, 0) - dt.timedelta(seconds=30)).timestamp()
    assert urp_trend(window(lake, hhmm(10, 0), hhmm(11, 0), cluster="other")) == []


def test_slow_follower_is_fluctuating_urp_and_shrinks_without_expands(lake):
    # across the end of the lake's data: the hour after it has no partition to read
    w = window(lake, hhmm(11, 0), hhmm(12, 30))
    assert pick(urp_trend(w), "broker", "shape") == [
        (1, "fluctuating"),
        (2, "fluctuating"),
        (3, "fluctuating"),
        (4, "zero"),
    ]
    assert pick(isr_churn(w), "broker", "shrinks_without_expands") == [(1, False), (2, False), (3, True), (4, False)]


def test_hot_key_is_the_hottest_partition_of_its_topic(lake):
    w = WindowReader(lake[2]).open(hhmm(10, 5), hhmm(10, 35), None, HOT_QUESTION.metrics)
    out = hot_partitions(w, topic="topic-001", top=1)
    assert pick(out, "topic", "partition", "leader_broker", "rank") == [("topic-001", 2, 4, 1)]
    assert out[0]["skew"] > 5


def test_hanging_transaction(lake):
    w = WindowReader(lake[2]).open(hhmm(11, 0), hhmm(12, 0), None, HANGING_QUESTION.metrics)
    growing = [r for r in last_stable_offset_lag(w) if r["growing"]]
    assert pick(growing, "topic", "partition", "leader_broker") == [("topic-000", 1, 2)]
    late = [r for r in late_transactions(w) if r["late"]]
    assert pick(late, "broker", "first_late_ts") == [(2, hhmm(11, 20))]
    # what `why` asks of the window: the same partition and broker
    facts = HANGING_QUESTION.answer(w)
    assert (pick(facts["growing"], "topic", "partition"), pick(facts["late"], "broker")) == ([("topic-000", 1)], [(2,)])


def test_rebalance_storm(lake):
    w = WindowReader(lake[2]).open(hhmm(11, 30), hhmm(11, 40), None, GROUP_LAG_QUESTION.metrics)
    partition_lag_status(w)
    assert pick(group_lag_status(w), "group", "status", "worst_status", "partitions_not_ok") == [
        ("topic-000-consumers", "OK", "OK", 0),
        ("topic-001-consumers", "OK", "OK", 0),
        ("topic-002-consumers", "OK", "OK", 0),
        ("topic-003-consumers", "ERR", "REWIND", 5),
    ]
    # what `lag topic-003-consumers` asks of the window: the same verdict, evaluated at its end
    facts = GROUP_LAG_QUESTION.answer(w, "topic-003-consumers")
    assert pick(facts["group"], "status", "worst_status", "partitions_not_ok") == [("ERR", "REWIND", 5)]
    assert {r["status"] for r in facts["partitions"]} == {"REWIND"} and len(facts["trend"]) >= 9


def test_metric_subset_and_leader_only(spark, tmp_path):
    report = S.generate(
        str(tmp_path / "lake"),
        cluster="x",
        start=START,
        hours=1,
        brokers=3,
        topics=2,
        partitions_per_topic=3,
        resolution_s=60,
        metrics=["LogEndOffset"],
        leo_replicas=1,
        spark=spark,
    )
    df = read_lake(spark, str(tmp_path / "lake"))
    assert report.rows == 6 * 60
    assertDataFrameEqual(df.groupBy("metric").count(), [Row("LogEndOffset", 360)])


def test_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError):
        S.generate(str(tmp_path), start=START, resolution_s=7)
    with pytest.raises(ValueError):
        S.generate(str(tmp_path), start=START, metrics=["NoSuchMetric"])
    with pytest.raises(ValueError):
        S.generate(str(tmp_path), start=START, incidents=[S.rebalance_storm("nope", START, 60)])


def test_cli_incident_syntax():
    inc = S._parse_incident("hot_key:topic=topic-001,partition=3,at=2024-05-01T10:00,duration=20m")
    assert inc == S.HotKey("topic-001", 3, START.timestamp(), START.timestamp() + 1200, 20.0)
