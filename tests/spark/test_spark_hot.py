import pytest
from pyspark.sql import Row
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from spark_queries._common import ts_lit
from spark_queries.hot import hot_partitions, hot_partitions_from_rollup
from spark_queries.rollup import minute_rollup, newest_samples
from tests.spark.conftest import at, local, sample

pytestmark = pytest.mark.spark

EVIL = "x'; DROP TABLE t; --"


def series(metric, topic, partition, broker, values):
    return [sample(metric, v, at(i), broker=broker, topic=topic, partition=partition) for i, v in enumerate(values)]


@pytest.fixture(scope="module")
def frame(lake_df):
    leo = "LogEndOffset"
    rows = (
        series(leo, "orders", 0, 1, [0, 600, 1200])  # leader, 10/s
        + series(leo, "orders", 0, 2, [0, 590, 1190])  # follower trails
        + series(leo, "orders", 1, 2, [1000, 1600, 2200])  # leader b2, 10/s
        + series(leo, "orders", 1, 1, [995, 1595, 2195])
        + series(leo, "orders", 2, 1, [0, 1200, 2400])  # 20/s, follower caught up: tie
        + series(leo, "orders", 2, 2, [0, 1200, 2400])
        + series(leo, "orders", 3, 2, [0, 24000, 48000])  # hot: 400/s
        + series(leo, "orders", 3, 1, [0, 23000, 47000])
        + series("Size", "orders", 0, 1, [0, 60000, 120000])  # 1000 B/s
        + series("Size", "orders", 1, 2, [0, 30000, 60000])  # 500 B/s
        + series("Size", "orders", 3, 2, [1e6, 1.6e6, 0.5e6])  # retention drop ignored
        + series(leo, EVIL, 0, 1, [0, 60, 120])  # 1/s
    )
    return lake_df(rows)


def test_hot_partitions_ranked_with_skew(frame):
    expected = [
        Row("c1", "orders", 3, 2, 2, 400.0, 5000.0, 15.0, 400 / 15, 1),
        Row("c1", "orders", 2, 1, 2, 20.0, None, 15.0, 20 / 15, 2),
        Row("c1", "orders", 0, 1, 2, 10.0, 1000.0, 15.0, 10 / 15, 3),
        Row("c1", "orders", 1, 2, 2, 10.0, 500.0, 15.0, 10 / 15, 4),
        Row("c1", EVIL, 0, 1, 1, 1.0, None, 1.0, 1.0, 5),
    ]
    out = hot_partitions(frame)
    assert out.columns == [
        "cluster",
        "topic",
        "partition",
        "leader_broker",
        "replicas",
        "records_per_sec",
        "bytes_per_sec",
        "topic_median_rate",
        "skew",
        "rank",
        "peak_records_per_sec",
        "peak_at",
        "peak_skew",
        "data_end",
    ]
    assertDataFrameEqual(
        out.drop("peak_records_per_sec", "peak_at", "peak_skew", "data_end"), expected, checkRowOrder=True
    )
    # every row carries the cluster's newest sample: the third minute's
    assert {r["data_end"] for r in out.collect()} == {local(at(2))}


def test_a_short_burst_ranks_by_its_peak_minute(lake_df):
    """The issue's case: a partition idle most of the window with one minute at 700 rec/s has a
    small window mean (ranked below a steady one by mean) but the highest peak."""
    leo = "LogEndOffset"
    steady = [i * 60 * 100 for i in range(16)]  # 100/s for 15 minutes
    burst = [0] * 10 + [42000] * 6  # nothing, then 42,000 records in minute 10: 700/s
    rows = (
        series(leo, "orders", 0, 1, steady) + series(leo, "orders", 1, 1, burst) + series(leo, "orders", 2, 1, [0] * 16)
    )
    frame = lake_df(rows)
    by_mean = hot_partitions(frame).select("partition", "records_per_sec", "peak_records_per_sec", "rank")
    assertDataFrameEqual(
        by_mean, [Row(0, 100.0, 100.0, 1), Row(1, 42000 / 900, 700.0, 2), Row(2, 0.0, 0.0, 3)], checkRowOrder=True
    )
    by_peak = hot_partitions(frame, rank_by="peak").select("partition", "peak_at", "topic_median_rate", "skew", "rank")
    assertDataFrameEqual(
        by_peak,
        [
            Row(1, local(at(10)), 100.0, 7.0, 1),
            Row(0, local(at(1)), 100.0, 1.0, 2),
            Row(2, local(at(0)), 100.0, 0.0, 3),
        ],
        checkRowOrder=True,
    )
    with pytest.raises(ValueError, match="rank_by"):
        hot_partitions(frame, rank_by="loudest")


def test_the_ranking_carries_each_partitions_minute_by_minute_chart(lake_df):
    """Per minute, one replica's growth over 60 s - the replica that never trailed, so a burst its
    follower copied a minute later is drawn once - in the same query as the ranking."""
    leo = "LogEndOffset"
    burst = [0] * 10 + [42000] * 6  # 42,000 records in minute 10: 700/s there, 0 elsewhere
    follower = [0] * 11 + [42000] * 5  # trails by a minute: the leader's minute wins
    rows = (
        series(leo, "orders", 1, 1, burst)
        + series(leo, "orders", 1, 2, follower)
        + series(leo, "orders", 0, 1, [i * 600 for i in range(16)])
        + series(leo, EVIL, 0, 1, [0, 60, 120])
    )
    out = {
        (r["topic"], r["partition"]): r["minute_rates"] for r in hot_partitions(lake_df(rows), minutes=True).collect()
    }
    orders = [(p["minute"], p["records_per_sec"]) for p in out[("orders", 1)]]
    assert [m for m, _ in orders] == [local(at(i)) for i in range(1, 16)]  # the first minute has no step in
    assert dict(orders)[local(at(10))] == 700.0
    assert sum(v for _, v in orders) == 700.0  # the burst once, in its own minute
    assert [(p["minute"], p["records_per_sec"]) for p in out[(EVIL, 0)]] == [(local(at(1)), 1.0), (local(at(2)), 1.0)]
    assert [p["records_per_sec"] for p in out[("orders", 0)]] == [10.0] * 15
    assert "minute_rates" not in hot_partitions(lake_df(rows)).columns  # only when asked for


def test_a_minute_seen_in_part_is_rated_over_the_time_seen(lake_df):
    """Seen live: "peak 71.6 rec/s at 15:19 (1-min), mean 88.9 rec/s" for a partition written at
    a steady 89/s - its series began 12 s into 15:19, and that minute's growth was divided by a
    whole minute.  A steady rate reads the same as peak, mean and every chart point, whether the
    minute is the series' first, the one still in progress, or one with a missed scrape in it; a
    minute seen for under half its length counts as half a minute (one 10 s step is noise)."""
    leo = "LogEndOffset"
    seconds = [20, 30, 40, 50, 60, 70, 80, 90, 110, 120, 130, 140, 150, 160, 170, 180, 190, 200]  # 100 s: no scrape
    steady = [sample(leo, 90 * (s - 20), at(0, s), topic="orders", partition=0) for s in seconds]
    # a series seen for one 10 s step only, at 90/s: over half a minute that is 30/s
    short = [sample(leo, 900 * i, at(3, 10 * i), topic="orders", partition=1) for i in (0, 1)]
    out = {r["partition"]: r for r in hot_partitions(lake_df(steady + short), minutes=True).collect()}
    assert out[0]["records_per_sec"] == pytest.approx(90.0)
    assert out[0]["peak_records_per_sec"] == pytest.approx(90.0)
    assert [p["records_per_sec"] for p in out[0]["minute_rates"]] == pytest.approx([90.0, 90.0, 90.0])
    assert out[1]["records_per_sec"] == pytest.approx(90.0)
    assert out[1]["peak_records_per_sec"] == pytest.approx(30.0)


def test_hot_partitions_topic_filter_and_top(frame):
    out = hot_partitions(frame, topic="orders", top=2).select("partition", "rank")
    assertDataFrameEqual(out, [Row(3, 1), Row(2, 2)], checkRowOrder=True)


def test_topic_name_with_sql_is_a_plain_value(frame):
    out = hot_partitions(frame, topic=EVIL).select("topic", "partition", "records_per_sec", "skew", "rank")
    assertDataFrameEqual(out, [Row(EVIL, 0, 1.0, 1.0, 1)])
    # and something that would be true if it were spliced into SQL matches nothing
    assert hot_partitions(frame, topic="orders' OR '1'='1").count() == 0


def test_leader_is_the_replica_that_never_trailed(lake_df):
    """Both replicas end at the same LEO; the follower trailed mid-window (lower mean), so the
    other broker is the leader even though the follower has the lower id.  A broker with only
    Size samples is never picked (its null ordering is skipped) nor counted as a replica."""
    leo = "LogEndOffset"
    rows = (
        series(leo, "pay", 0, 1, [0, 100, 600, 1200])  # follower: fell behind, caught up
        + series(leo, "pay", 0, 3, [0, 600, 900, 1200])  # leader
        + series("Size", "pay", 0, 9, [0, 9e9, 9e10, 9e11])
    )  # bytes only: neither leader nor replica
    out = hot_partitions(lake_df(rows)).select("leader_broker", "replicas", "records_per_sec").collect()
    assert [tuple(r) for r in out] == [(3, 2, 1200 / 180)]


def test_kraft_metadata_log_is_ranked_only_when_asked_for(lake_df):
    rows = series("LogEndOffset", "__cluster_metadata", 0, 1, [0, 6000, 12000]) + series(
        "LogEndOffset", "orders", 0, 2, [0, 60, 120]
    )
    frame = lake_df(rows)
    assert [r.topic for r in hot_partitions(frame).collect()] == ["orders"]
    assert [r.topic for r in hot_partitions(frame, topic="__cluster_metadata").collect()] == ["__cluster_metadata"]


# --------------------------------------------------------------------------- from the minute rollup


def from_rollup(frame, cut: int, table_until: int | None = None, **options):
    """``hot_partitions_from_rollup`` fed as ``lake.queries`` feeds it, the window starting at
    minute 0: the minute rollup of ``frame`` (only up to the minute ``table_until``: a table that
    is behind), and the raw samples from ``cut`` on with the table's newest samples of the two
    minutes before."""
    rolled = minute_rollup(frame)
    table = rolled if table_until is None else rolled.filter(F.col("bucket") <= ts_lit(at(table_until)))
    seeds = newest_samples(table.filter((F.col("bucket") >= ts_lit(at(cut - 2))) & (F.col("bucket") < ts_lit(at(cut)))))
    tail = frame.filter(F.col("ts") >= ts_lit(at(cut))).select(*seeds.columns).unionByName(seeds)
    return hot_partitions_from_rollup(table, tail, at(0), at(cut), **options)


@pytest.fixture(scope="module")
def minutely(lake_df):
    """A sample a minute at the minute's start: the raw ranking's first sample and the rollup's
    baseline (the last sample of the window's first minute) are then the same sample, so both
    rankings must agree to the last digit.  A burst, its follower a minute late, a steady
    partition, an idle one with a Size series, and a topic named like SQL."""
    leo = "LogEndOffset"
    return lake_df(
        series(leo, "orders", 1, 1, [0] * 10 + [42000] * 6)
        + series(leo, "orders", 1, 2, [0] * 11 + [42000] * 5)
        + series(leo, "orders", 0, 1, [i * 600 for i in range(16)])
        + series(leo, "orders", 0, 2, [i * 590 for i in range(16)])
        + series(leo, "orders", 2, 3, [7] * 16)
        + series("Size", "orders", 0, 1, [i * 6e4 for i in range(16)])
        + series(leo, EVIL, 0, 1, [i * 60 for i in range(16)])
    )


@pytest.mark.parametrize("rank_by", ["peak", "mean"])
def test_the_minute_rollup_ranks_like_the_raw_samples(minutely, rank_by):
    """Minutes 0-11 from the table, 12-15 from raw samples seeded with the table's newest
    sample: the same ranks, rates, peaks, leaders, data end and charts as the raw ranking,
    and every row says the table reached the cut."""
    options = {"rank_by": rank_by, "minutes": True}
    rolled = from_rollup(minutely, cut=12, **options)
    assert {r["rollup_end"] for r in rolled.collect()} == {local(at(15))}  # the table's newest minute
    expected = hot_partitions(minutely, **options)
    assertDataFrameEqual(rolled.drop("rollup_end"), expected, checkRowOrder=True)
    # the burst's own minute is drawn at its rate, and the tail's first minute got its step in
    chart = {(r["topic"], r["partition"]): r["minute_rates"] for r in rolled.collect()}
    assert dict((p["minute"], p["records_per_sec"]) for p in chart[("orders", 1)])[local(at(10))] == 700.0
    assert [p["records_per_sec"] for p in chart[("orders", 0)]] == [10.0] * 15
    topic_only = from_rollup(minutely, cut=12, topic=EVIL, top=1).drop("rollup_end")
    assertDataFrameEqual(topic_only, hot_partitions(minutely, topic=EVIL, top=1), checkRowOrder=True)


def test_a_minute_back_after_an_outage_reads_alike_from_the_rollup(lake_df):
    """A partition written at 90/s whose replica went unseen for over STALE_S and came back 12 s
    into minute 8: that minute was seen for 38 s. The rollup row keeps those seconds, so it is
    rated 90/s as the raw samples rate it; a table written before the rollups kept them takes it
    as a whole minute (57/s)."""
    leo = "LogEndOffset"
    seen = [*range(0, 110, 10), *range(492, 500, 8), *range(500, 720, 10)]
    frame = lake_df([sample(leo, 90 * s, at(0, s), topic="orders", partition=0) for s in seen])

    def minute_8(df):
        [row] = df.collect()
        return {p["minute"]: p["records_per_sec"] for p in row["minute_rates"]}[local(at(8))]

    assert minute_8(hot_partitions(frame, minutes=True)) == pytest.approx(90.0)
    assert minute_8(from_rollup(frame, cut=10, minutes=True)) == pytest.approx(90.0)
    rolled = minute_rollup(frame).drop("seconds")
    seeds = newest_samples(rolled.filter((F.col("bucket") >= ts_lit(at(8))) & (F.col("bucket") < ts_lit(at(10)))))
    tail = frame.filter(F.col("ts") >= ts_lit(at(10))).select(*seeds.columns).unionByName(seeds)
    older = hot_partitions_from_rollup(rolled, tail, at(0), at(10), minutes=True, has_seconds=False)
    assert minute_8(older) == pytest.approx(90.0 * 38 / 60)


def test_a_minute_table_behind_the_cut_says_so(minutely):
    """The table holds minutes up to 9 only: 10 and 11 are in neither part, so the ranking would
    miss the burst; every row says the table did not reach the cut, for the caller to ask the
    raw samples instead.  Holding the cut's minute is enough."""
    rows = from_rollup(minutely, cut=12, table_until=9).collect()
    assert rows and {r["rollup_end"] for r in rows} == {None}
    rows = from_rollup(minutely, cut=12, table_until=12).collect()
    assert {r["rollup_end"] for r in rows} == {local(at(12))}
