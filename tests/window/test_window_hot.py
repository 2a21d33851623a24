"""Hot partitions answered in process (window_queries.hot), on hand-made samples: the raw
samples' ranking (the minute rollup's is tests/window/test_window_hot_rollup.py)."""

import pytest

from tests.window.windowkit import at, sample, window_of
from window_queries.hot import hot_partitions

EVIL = "x'; DROP TABLE t; --"
LEO = "LogEndOffset"


def series(metric, topic, partition, broker, values):
    return [sample(metric, v, at(i), broker=broker, topic=topic, partition=partition) for i, v in enumerate(values)]


def pick(rows, *names):
    return [tuple(r[n] for n in names) for r in rows]


def points(row):
    return [(p["minute"], p["records_per_sec"]) for p in row["minute_rates"]]


@pytest.fixture(scope="module")
def frame():
    return (
        series(LEO, "orders", 0, 1, [0, 600, 1200])  # leader, 10/s
        + series(LEO, "orders", 0, 2, [0, 590, 1190])  # follower trails
        + series(LEO, "orders", 1, 2, [1000, 1600, 2200])  # leader b2, 10/s
        + series(LEO, "orders", 1, 1, [995, 1595, 2195])
        + series(LEO, "orders", 2, 1, [0, 1200, 2400])  # 20/s, follower caught up: tie
        + series(LEO, "orders", 2, 2, [0, 1200, 2400])
        + series(LEO, "orders", 3, 2, [0, 24000, 48000])  # hot: 400/s
        + series(LEO, "orders", 3, 1, [0, 23000, 47000])
        + series("Size", "orders", 0, 1, [0, 60000, 120000])  # 1000 B/s
        + series("Size", "orders", 1, 2, [0, 30000, 60000])  # 500 B/s
        + series("Size", "orders", 3, 2, [1e6, 1.6e6, 0.5e6])  # retention drop ignored
        + series(LEO, EVIL, 0, 1, [0, 60, 120])  # 1/s
    )


COLUMNS = (
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
)


def test_hot_partitions_ranked_with_skew(frame):
    out = hot_partitions(window_of(frame))
    assert list(out[0]) == list(COLUMNS)
    assert pick(out, *COLUMNS[:10]) == [
        ("c1", "orders", 3, 2, 2, 400.0, 5000.0, 15.0, 400 / 15, 1),
        ("c1", "orders", 2, 1, 2, 20.0, None, 15.0, 20 / 15, 2),
        ("c1", "orders", 0, 1, 2, 10.0, 1000.0, 15.0, 10 / 15, 3),
        ("c1", "orders", 1, 2, 2, 10.0, 500.0, 15.0, 10 / 15, 4),
        ("c1", EVIL, 0, 1, 1, 1.0, None, 1.0, 1.0, 5),
    ]
    # every row carries the cluster's newest sample: the third minute's
    assert {r["data_end"] for r in out} == {at(2)}


def test_a_short_burst_ranks_by_its_peak_minute():
    """The issue's case: a partition idle most of the window with one minute at 700 rec/s has a
    small window mean (ranked below a steady one by mean) but the highest peak."""
    steady = [i * 60 * 100 for i in range(16)]  # 100/s for 15 minutes
    burst = [0] * 10 + [42000] * 6  # nothing, then 42,000 records in minute 10: 700/s
    rows = (
        series(LEO, "orders", 0, 1, steady) + series(LEO, "orders", 1, 1, burst) + series(LEO, "orders", 2, 1, [0] * 16)
    )
    by_mean = hot_partitions(window_of(rows))
    assert pick(by_mean, "partition", "records_per_sec", "peak_records_per_sec", "rank") == [
        (0, 100.0, 100.0, 1),
        (1, 42000 / 900, 700.0, 2),
        (2, 0.0, 0.0, 3),
    ]
    by_peak = hot_partitions(window_of(rows), rank_by="peak")
    assert pick(by_peak, "partition", "peak_at", "topic_median_rate", "skew", "rank") == [
        (1, at(10), 100.0, 7.0, 1),
        (0, at(1), 100.0, 1.0, 2),
        (2, at(0), 100.0, 0.0, 3),
    ]
    with pytest.raises(ValueError, match="rank_by"):
        hot_partitions(window_of(rows), rank_by="loudest")


def test_the_ranking_carries_each_partitions_minute_by_minute_chart():
    """Per minute, one replica's growth over 60 s - the replica that never trailed, so a burst its
    follower copied a minute later is drawn once - with the ranking."""
    burst = [0] * 10 + [42000] * 6  # 42,000 records in minute 10: 700/s there, 0 elsewhere
    follower = [0] * 11 + [42000] * 5  # trails by a minute: the leader's minute wins
    rows = (
        series(LEO, "orders", 1, 1, burst)
        + series(LEO, "orders", 1, 2, follower)
        + series(LEO, "orders", 0, 1, [i * 600 for i in range(16)])
        + series(LEO, EVIL, 0, 1, [0, 60, 120])
    )
    out = {(r["topic"], r["partition"]): points(r) for r in hot_partitions(window_of(rows), minutes=True)}
    orders = out[("orders", 1)]
    assert [m for m, _ in orders] == [at(i) for i in range(1, 16)]  # the first minute has no step in
    assert dict(orders)[at(10)] == 700.0
    assert sum(v for _, v in orders) == 700.0  # the burst once, in its own minute
    assert out[(EVIL, 0)] == [(at(1), 1.0), (at(2), 1.0)]
    assert [v for _, v in out[("orders", 0)]] == [10.0] * 15
    assert "minute_rates" not in hot_partitions(window_of(rows))[0]  # only when asked for


def test_a_minute_seen_in_part_is_rated_over_the_time_seen():
    """Seen live: "peak 71.6 rec/s at 15:19 (1-min), mean 88.9 rec/s" for a partition written at
    a steady 89/s - its series began 12 s into 15:19, and that minute's growth was divided by a
    whole minute.  A steady rate reads the same as peak, mean and every chart point, whether the
    minute is the series' first, the one still in progress, or one with a missed scrape in it; a
    minute seen for under half its length counts as half a minute (one 10 s step is noise)."""
    seconds = [20, 30, 40, 50, 60, 70, 80, 90, 110, 120, 130, 140, 150, 160, 170, 180, 190, 200]  # 100 s: no scrape
    steady = [sample(LEO, 90 * (s - 20), at(0, s), topic="orders", partition=0) for s in seconds]
    # a series seen for one 10 s step only, at 90/s: over half a minute that is 30/s
    short = [sample(LEO, 900 * i, at(3, 10 * i), topic="orders", partition=1) for i in (0, 1)]
    out = {r["partition"]: r for r in hot_partitions(window_of(steady + short), minutes=True)}
    assert out[0]["records_per_sec"] == pytest.approx(90.0)
    assert out[0]["peak_records_per_sec"] == pytest.approx(90.0)
    assert [v for _, v in points(out[0])] == pytest.approx([90.0, 90.0, 90.0])
    assert out[1]["records_per_sec"] == pytest.approx(90.0)
    assert out[1]["peak_records_per_sec"] == pytest.approx(30.0)


def test_hot_partitions_topic_filter_and_top(frame):
    out = hot_partitions(window_of(frame), topic="orders", top=2)
    assert pick(out, "partition", "rank") == [(3, 1), (2, 2)]


def test_topic_name_with_sql_is_a_plain_value(frame):
    out = hot_partitions(window_of(frame), topic=EVIL)
    assert pick(out, "topic", "partition", "records_per_sec", "skew", "rank") == [(EVIL, 0, 1.0, 1.0, 1)]
    # and something that would be true if it were spliced into SQL matches nothing
    assert hot_partitions(window_of(frame), topic="orders' OR '1'='1") == []


def test_leader_is_the_replica_that_never_trailed():
    """Both replicas end at the same LEO; the follower trailed mid-window (lower mean), so the
    other broker is the leader even though the follower has the lower id.  A broker with only
    Size samples is never picked nor counted as a replica."""
    rows = (
        series(LEO, "pay", 0, 1, [0, 100, 600, 1200])  # follower: fell behind, caught up
        + series(LEO, "pay", 0, 3, [0, 600, 900, 1200])  # leader
        + series("Size", "pay", 0, 9, [0, 9e9, 9e10, 9e11])
    )  # bytes only: neither leader nor replica
    out = hot_partitions(window_of(rows))
    assert pick(out, "leader_broker", "replicas", "records_per_sec") == [(3, 2, 1200 / 180)]


def test_kraft_metadata_log_is_ranked_only_when_asked_for():
    rows = series(LEO, "__cluster_metadata", 0, 1, [0, 6000, 12000]) + series(LEO, "orders", 0, 2, [0, 60, 120])
    assert [r["topic"] for r in hot_partitions(window_of(rows))] == ["orders"]
    assert [r["topic"] for r in hot_partitions(window_of(rows), topic="__cluster_metadata")] == ["__cluster_metadata"]


def test_clusters_are_ranked_apart_and_an_empty_window_has_no_rows():
    rows = [
        *[sample(LEO, 60 * i, at(i), topic="t", partition=0, cluster="a") for i in range(3)],
        *[sample(LEO, 120 * i, at(i), topic="t", partition=0, cluster="b") for i in range(3)],
        *[sample(LEO, 600 * i, at(i), topic="t", partition=1, cluster="b") for i in range(3)],
    ]
    out = hot_partitions(window_of(rows), top=1)
    assert pick(out, "cluster", "partition", "records_per_sec", "rank") == [("a", 0, 1.0, 1), ("b", 1, 10.0, 1)]
    assert hot_partitions(window_of([])) == []
