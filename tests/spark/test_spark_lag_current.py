"""Burrow's current lag in the lake: the latest log end offset minus the last commit, not the lag
frozen at the last commit (issue 8: a stopped group read 158 in the lake and 2,438 live)."""

import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from spark_queries.lag import group_lag_status, latest_log_ends, partition_lag_status
from tests.spark.conftest import at, local, sample

pytestmark = pytest.mark.spark


def commit(group, partition, offset, lag, minute, topic="orders"):
    labels = {"group": group}
    return [
        sample("CommittedOffset", offset, at(minute), broker=-1, topic=topic, partition=partition, labels=labels),
        sample("ConsumerLag", lag, at(minute), broker=-1, topic=topic, partition=partition, labels=labels),
    ]


def log_end(partition, value, minute, broker, topic="orders"):
    return sample("LogEndOffset", value, at(minute), broker=broker, topic=topic, partition=partition)


@pytest.fixture(scope="module")
def stopped(lake_df):
    """Group g10 committed at minutes 0 and 1, then its consumers stopped; producers kept
    writing and the brokers' LogEndOffset samples (leader and a trailing follower) kept rising."""
    rows = commit("g10", 0, 1000, 150, 0) + commit("g10", 0, 1042, 158, 1)
    for minute in range(0, 11):
        rows.append(log_end(0, 1200 + 143.8 * minute, minute, broker=101))  # the leader
        rows.append(log_end(0, 1200 + 143.8 * minute - 7, minute, broker=102))  # a follower, behind
    # a partition whose only LogEndOffset samples predate its last commit: the commit's lag stands
    rows += commit("g10", 1, 500, 20, 4) + [log_end(1, 510, 2, broker=101)]
    return lake_df(rows)


def test_latest_log_end_is_the_leaders_at_the_last_instant(stopped):
    out = latest_log_ends(stopped).filter("partition = 0").select("log_end_ts", "log_end")
    assertDataFrameEqual(out, [Row(local(at(10)), 1200 + 1438.0)])


def test_stopped_group_current_lag_follows_the_log_end(stopped):
    out = partition_lag_status(stopped, now=at(10)).select(
        "partition", "last_offset", "current_lag", "max_lag", "status"
    )
    # partition 0: 2,638 (log end at minute 10) - 1,042 (last commit) = 1,596, not the 158 of the
    # last commit; partition 1: no log end sample after its last commit, so the commit's own lag
    assertDataFrameEqual(out, [Row(0, 1042.0, 1596.0, 1596.0, "STOP"), Row(1, 500.0, 20.0, 20.0, "STOP")])


def test_group_total_is_the_sum_of_current_lags(stopped):
    out = group_lag_status(partition_lag_status(stopped, now=at(10))).select("status", "worst_status", "total_lag")
    assertDataFrameEqual(out, [Row("ERR", "STOP", 1616.0)])


def test_lag_per_minute_grows_after_the_consumers_stop(stopped):
    """The chart of `lag <group>`: per minute, the newest log end minus the newest commit so far,
    both carried into minutes without samples, summed over the partitions that have both by then."""
    from spark_queries.lag import lag_per_minute

    out = {r["minute"]: (r["lag"], r["partitions"]) for r in lag_per_minute(stopped).collect()}
    assert sorted(out) == [local(at(m)) for m in range(11)]
    leader = lambda m: 1200 + 143.8 * m  # noqa: E731
    assert out[local(at(0))] == (pytest.approx(leader(0) - 1000), 1)  # partition 1 has no commit yet
    assert out[local(at(3))] == (pytest.approx(leader(3) - 1042), 1)  # partition 0 stopped at 1,042
    # partition 1 commits 500 at minute 4; its log end (510, seen at minute 2) is carried forward
    assert out[local(at(4))] == (pytest.approx(leader(4) - 1042 + 10), 2)
    assert out[local(at(10))] == (pytest.approx(leader(10) - 1042 + 10), 2)
