"""The consumer lag question answered in process (window_queries.lag), on hand-made samples: Burrow's
rules per partition and group, the current lag from the brokers' log end offsets (issue 8: a
stopped group read 158 in the lake and 2,438 live), and the lag per minute."""

import pyarrow as pa
import pytest

from lake.embedded import Window
from tests.window.windowkit import SCHEMA, at, sample, window_of
from window_queries.lag import GROUP_LAG_QUESTION, group_lag_status, lag_per_minute, partition_lag_status

EVIL_GROUP = "g'; DROP TABLE t; --"


def pick(rows, *names):
    return [tuple(r[n] for n in names) for r in rows]


def commits(group, partition, offsets, lags, minutes=None, topic="t"):
    minutes = minutes if minutes is not None else range(len(offsets))
    rows = []
    for m, off, lag in zip(minutes, offsets, lags):
        labels = {"group": group}
        rows.append(sample("CommittedOffset", off, at(m), broker=-1, topic=topic, partition=partition, labels=labels))
        if lag is not None:
            rows.append(sample("ConsumerLag", lag, at(m), broker=-1, topic=topic, partition=partition, labels=labels))
    return rows


FRAME = (
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

PARTITION_COLUMNS = (
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
)


def test_partition_verdicts():
    out = partition_lag_status(window_of(FRAME))
    assert list(out[0]) == list(PARTITION_COLUMNS)
    assert sorted(pick(out, "group", "partition", "commits", "current_lag", "status", "severity")) == sorted(
        [
            ("g1", 0, 5, 6.0, "OK", 1),
            ("g1", 1, 5, 30.0, "WARN", 2),
            ("g1", 2, 5, 5.0, "OK", 1),
            ("g1", 3, 5, 50.0, "STALL", 5),
            ("g1", 4, 2, 60.0, "STOP", 4),
            ("g1", 5, 5, 60.0, "REWIND", 6),
            ("g1", 6, 5, 20.0, "OK", 1),
            ("g1", 7, 2, 0.0, "OK", 1),
            ("g1", 8, 5, 30.0, "WARN", 2),
            ("g2", 0, 3, 3.0, "WARN", 2),
            (EVIL_GROUP, 0, 3, 0.0, "OK", 1),
        ]
    )


def test_partition_status_columns():
    out = [r for r in partition_lag_status(window_of(FRAME)) if (r["group"], r["partition"]) == ("g1", 4)]
    assert pick(out, *PARTITION_COLUMNS) == [("c1", "g1", "t", 4, 2, at(0), at(1), 110.0, 60.0, 60.0, "STOP", 4)]


def test_explicit_now_makes_a_quiet_partition_stopped():
    out = partition_lag_status(window_of(FRAME), now=at(20))
    assert [(r["partition"], r["status"]) for r in out if r["group"] == "g1" and r["partition"] in (1, 7)] == [
        (1, "STOP"),
        (7, "OK"),
    ]


def test_allowed_lag():
    out = partition_lag_status(window_of(FRAME), allowed_lag=5)
    assert [r["status"] for r in out if r["group"] == "g2"] == ["OK"]


def test_group_status():
    window = window_of(FRAME)
    partition_lag_status(window)
    names = (
        "cluster",
        "group",
        "status",
        "worst_status",
        "partitions",
        "partitions_not_ok",
        "total_lag",
        "max_lag_topic",
        "max_lag_partition",
        "max_lag",
    )
    out = group_lag_status(window)
    assert list(out[0]) == list(names)
    assert sorted(pick(out, *names)) == sorted(
        [
            ("c1", "g1", "ERR", "REWIND", 9, 5, 261.0, "t", 5, 60.0),
            ("c1", "g2", "WARN", "WARN", 1, 1, 3.0, "t", 0, 3.0),
            ("c1", EVIL_GROUP, "OK", "OK", 1, 0, 0.0, "t", 0, 0.0),
        ]
    )


def test_the_group_is_a_value_not_sql():
    """Asked for one group, only its commits count; a group name that reads as SQL is just a name."""
    for group, expected in (("g2", [("g2", 0, "WARN")]), (EVIL_GROUP, [(EVIL_GROUP, 0, "OK")]), ("g1' OR '1'='1", [])):
        out = partition_lag_status(window_of(FRAME), group)
        assert pick(out, "group", "partition", "status") == expected


# --------------------------------------------------------------------------- the current lag


def commit(group, partition, offset, lag, minute, topic="orders"):
    labels = {"group": group}
    return [
        sample("CommittedOffset", offset, at(minute), broker=-1, topic=topic, partition=partition, labels=labels),
        sample("ConsumerLag", lag, at(minute), broker=-1, topic=topic, partition=partition, labels=labels),
    ]


def log_end(partition, value, minute, broker, topic="orders"):
    return sample("LogEndOffset", value, at(minute), broker=broker, topic=topic, partition=partition)


def stopped_rows():
    """Group g10 committed at minutes 0 and 1, then its consumers stopped; producers kept
    writing and the brokers' LogEndOffset samples (leader and a trailing follower) kept rising."""
    rows = commit("g10", 0, 1000, 150, 0) + commit("g10", 0, 1042, 158, 1)
    for minute in range(0, 11):
        rows.append(log_end(0, 1200 + 143.8 * minute, minute, broker=101))  # the leader
        rows.append(log_end(0, 1200 + 143.8 * minute - 7, minute, broker=102))  # a follower, behind
    # a partition whose only LogEndOffset samples predate its last commit: the commit's lag stands
    rows += commit("g10", 1, 500, 20, 4) + [log_end(1, 510, 2, broker=101)]
    return rows


def test_stopped_group_current_lag_follows_the_log_end():
    out = partition_lag_status(window_of(stopped_rows()), now=at(10))
    # partition 0: 2,638 (log end at minute 10, the leader's) - 1,042 (last commit) = 1,596, not
    # the 158 of the last commit; partition 1: no log end sample after its last commit, so the
    # commit's own lag
    assert pick(out, "partition", "last_offset", "current_lag", "max_lag", "status") == [
        (0, 1042.0, pytest.approx(1596.0), pytest.approx(1596.0), "STOP"),
        (1, 500.0, 20.0, 20.0, "STOP"),
    ]


def test_group_total_is_the_sum_of_current_lags():
    window = window_of(stopped_rows())
    partition_lag_status(window, now=at(10))
    assert pick(group_lag_status(window), "status", "worst_status", "total_lag") == [
        ("ERR", "STOP", pytest.approx(1616.0))
    ]


def test_lag_per_minute_grows_after_the_consumers_stop():
    """The chart of `lag <group>`: per minute, the newest log end minus the newest commit so far,
    both carried into minutes without samples, summed over the partitions that have both by then."""
    out = {r["minute"]: (r["lag"], r["partitions"]) for r in lag_per_minute(window_of(stopped_rows()))}
    assert sorted(out) == [at(m) for m in range(11)]
    leader = lambda m: 1200 + 143.8 * m  # noqa: E731
    assert out[at(0)] == (pytest.approx(leader(0) - 1000), 1)  # partition 1 has no commit yet
    assert out[at(3)] == (pytest.approx(leader(3) - 1042), 1)  # partition 0 stopped at 1,042
    # partition 1 commits 500 at minute 4; its log end (510, seen at minute 2) is carried forward
    assert out[at(4)] == (pytest.approx(leader(4) - 1042 + 10), 2)
    assert out[at(10)] == (pytest.approx(leader(10) - 1042 + 10), 2)


def test_other_groups_and_partitions_stay_out_of_the_chart():
    """The log end offsets of partitions the group does not consume, and another group's
    commits, are not the group's lag."""
    rows = stopped_rows() + commit("other", 0, 0, 9999, 5) + [log_end(7, 10**6, m, broker=101) for m in range(11)]
    out = {r["minute"]: (r["lag"], r["partitions"]) for r in lag_per_minute(window_of(rows), "g10")}
    assert out[at(5)] == (pytest.approx(1200 + 143.8 * 5 - 1042 + 10), 2)
    assert {r["group"] for r in lag_per_minute(window_of(rows))} == {"g10", "other"}


# --------------------------------------------------------------------------- the question


def window_between(rows, start, end):
    return Window.over(pa.Table.from_pylist(rows, schema=SCHEMA), start, end)


def test_the_question_is_the_partitions_worst_first_the_group_and_its_trend():
    """What `lag <group>` asks, evaluated at the window's end: its partitions worst first (then by
    topic and partition), the group's verdict, its lag per minute."""
    facts = GROUP_LAG_QUESTION.answer(window_between(FRAME, at(-10), at(4, seconds=30)), "g1")
    assert set(facts) == {"partitions", "group", "trend"}
    assert pick(facts["partitions"], "partition", "status", "severity") == [
        (5, "REWIND", 6),
        (3, "STALL", 5),
        (4, "STOP", 4),
        (1, "WARN", 2),
        (8, "WARN", 2),
        (0, "OK", 1),
        (2, "OK", 1),
        (6, "OK", 1),
        (7, "OK", 1),
    ]
    assert pick(facts["group"], "group", "status", "worst_status", "partitions", "partitions_not_ok") == [
        ("g1", "ERR", "REWIND", 9, 5)
    ]
    # no LogEndOffset samples: the chart has nothing to subtract the commits from
    assert facts["trend"] == []


def test_the_question_evaluates_at_the_windows_end():
    """A group that stopped committing long before the window's end is STOPPED, whatever the other
    groups did; the chart of a stopped group keeps growing with the log end."""
    rows = stopped_rows() + commits("g2", 0, [10, 20, 30], [1, 2, 3], minutes=[8, 9, 10])
    facts = GROUP_LAG_QUESTION.answer(window_between(rows, at(-5), at(10, seconds=30)), "g10")
    assert pick(facts["partitions"], "partition", "status", "current_lag") == [
        (0, "STOP", pytest.approx(1596.0)),
        (1, "STOP", 20.0),
    ]
    assert pick(facts["group"], "group", "status", "worst_status", "total_lag") == [
        ("g10", "ERR", "STOP", pytest.approx(1616.0))
    ]
    assert [r["minute"] for r in facts["trend"]] == [at(m) for m in range(11)]
    assert facts["trend"][-1]["lag"] == pytest.approx(1200 + 1438 - 1042 + 10)
    g2 = GROUP_LAG_QUESTION.answer(window_between(rows, at(-5), at(10, seconds=30)), "g2")
    assert pick(g2["partitions"], "partition", "status") == [(0, "WARN")]


def test_a_window_without_the_group():
    assert GROUP_LAG_QUESTION.answer(window_of(FRAME), "nobody") == {"partitions": [], "group": [], "trend": []}
    assert GROUP_LAG_QUESTION.answer(window_of([]), "g1") == {"partitions": [], "group": [], "trend": []}
