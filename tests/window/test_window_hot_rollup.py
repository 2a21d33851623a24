"""Hot partitions from the minute rollup (window_queries.hot), on hand-made samples whose rollup
rows the ingest's own rollup (``spark_queries.rollup.minute_rollup``) makes: the same ranking as
the raw samples', and which path ``ask_hot`` takes."""

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

from lake.embedded import ROLLUP_COLUMNS, Window
from lake.schema import partition_values
from spark_queries.schema import SAMPLE_SCHEMA
from tests.window.windowkit import SCHEMA, at, sample, window_of
from window_queries.hot import (
    HOT_QUESTION,
    HOT_ROLLUP_QUESTION,
    ask_hot,
    hot_partitions,
    hot_partitions_from_rollup,
    rollup_span,
)

pytestmark = pytest.mark.spark

EVIL = "x'; DROP TABLE t; --"
LEO = "LogEndOffset"


def series(metric, topic, partition, broker, values, every_s=60, start=0):
    return [
        sample(metric, v, at(start, every_s * i), broker=broker, topic=topic, partition=partition)
        for i, v in enumerate(values)
    ]


class Rolled:
    """A rollup table in memory, read as ``lake.embedded.WindowReader.read`` reads one (its
    columns, the rows whose bucket starts in [start, end))."""

    def __init__(self, table: pa.Table):
        self.table = table

    def read(self, start, end, cluster, metrics, where=None):
        assert where is None  # the hot ranking narrows by metric only
        keep = (pc.field("bucket") >= start) & (pc.field("bucket") < end) & pc.field("metric").isin(list(metrics))
        if cluster is not None:
            keep = keep & (pc.field("cluster") == cluster)
        return ds.dataset(self.table).to_table(columns=list(ROLLUP_COLUMNS), filter=keep)


@pytest.fixture(scope="module")
def minute_rollup(spark):
    """rows (windowkit samples) -> their minute rollup rows as Arrow, made by the ingest's rollup."""
    from spark_queries.rollup import minute_rollup as rollup

    def make(rows, until=None):
        spark_rows = [
            (r["ts"], r["broker"], r["metric"], r["topic"], r["partition"], None, r["value"], r["cluster"])
            + partition_values(r["ts"])
            for r in rows
        ]
        table = rollup(spark.createDataFrame(spark_rows, SAMPLE_SCHEMA)).toArrow()
        if until is not None:
            table = table.filter(pc.field("bucket") <= until)
        return table

    return make


def tail_window(rows, table, cut, end):
    """The window the rollup question is asked over: the raw samples from the cut on, and the
    minute table beside them."""
    tail = pa.Table.from_pylist([r for r in rows if cut <= r["ts"] < end], schema=SCHEMA)
    return Window.over(tail, cut, end, None, {"1m": Rolled(table)})


def from_rollup(minute_rollup, rows, cut, table_until=None, start=0, **options):
    """The window starting at minute ``start``, ranked from the minute rollup of ``rows`` (only up
    to the minute ``table_until``: a table that is behind) and the raw samples from minute ``cut``
    on."""
    table = minute_rollup(rows, None if table_until is None else at(table_until))
    return hot_partitions_from_rollup(tail_window(rows, table, at(cut), at(start + 16)), at(start), **options)


def without(rows, name):
    return [{k: v for k, v in r.items() if k != name} for r in rows]


def minutes_from(start=0):
    """A sample a minute at the minute's start, 16 minutes from minute ``start``: the raw
    ranking's first sample and the rollup's baseline (the last sample of the window's first
    minute) are then the same sample, so both rankings must agree to the last digit.  A burst,
    its follower a minute late, a steady partition, an idle one with a Size series, and a topic
    named like SQL."""
    return (
        series(LEO, "orders", 1, 1, [0] * 10 + [42000] * 6, start=start)
        + series(LEO, "orders", 1, 2, [0] * 11 + [42000] * 5, start=start)
        + series(LEO, "orders", 0, 1, [i * 600 for i in range(16)], start=start)
        + series(LEO, "orders", 0, 2, [i * 590 for i in range(16)], start=start)
        + series(LEO, "orders", 2, 3, [7] * 16, start=start)
        + series("Size", "orders", 0, 1, [i * 6e4 for i in range(16)], start=start)
        + series(LEO, EVIL, 0, 1, [i * 60 for i in range(16)], start=start)
    )


@pytest.fixture(scope="module")
def minutely():
    return minutes_from(0)


@pytest.mark.parametrize("rank_by", ["peak", "mean"])
def test_the_minute_rollup_ranks_like_the_raw_samples(minute_rollup, minutely, rank_by):
    """Minutes 0-11 from the table, 12-15 from raw samples seeded with the table's newest
    sample: the same ranks, rates, peaks, leaders, data end and charts as the raw ranking,
    and every row says the table reached the cut."""
    options = {"rank_by": rank_by, "minutes": True}
    rolled = from_rollup(minute_rollup, minutely, cut=12, **options)
    assert {r["rollup_end"] for r in rolled} == {at(15)}  # the table's newest minute
    expected = hot_partitions(window_of(minutely), **options)
    assert without(rolled, "rollup_end") == expected and len(expected) == 4
    # the burst's own minute is drawn at its rate, and the tail's first minute got its step in
    chart = {(r["topic"], r["partition"]): r["minute_rates"] for r in rolled}
    assert {p["minute"]: p["records_per_sec"] for p in chart[("orders", 1)]}[at(10)] == 700.0
    assert [p["records_per_sec"] for p in chart[("orders", 0)]] == [10.0] * 15
    topic_only = from_rollup(minute_rollup, minutely, cut=12, topic=EVIL, top=1)
    assert without(topic_only, "rollup_end") == hot_partitions(window_of(minutely), topic=EVIL, top=1)


@pytest.mark.parametrize("start", [49, 55])
def test_a_window_across_hours_ranks_alike(minute_rollup, start):
    """The table is read an hour at a time: a window from 10:49 (the cut at 11:01, its seeds from
    10:59: both hours) or 10:55 (the burst in the second hour) ranks as the raw samples do, its
    charts drawn from both hours."""
    rows = minutes_from(start)
    options = {"rank_by": "peak", "minutes": True}
    rolled = from_rollup(minute_rollup, rows, cut=start + 12, start=start, **options)
    assert {r["rollup_end"] for r in rolled} == {at(start + 15)}
    expected = hot_partitions(window_of(rows), **options)
    assert without(rolled, "rollup_end") == expected and len(expected) == 4
    assert expected[0]["peak_at"] == at(start + 10) and len(expected[0]["minute_rates"]) == 15


def test_a_minute_back_after_an_outage_reads_alike_from_the_rollup(minute_rollup):
    """A partition written at 90/s whose replica went unseen for over STALE_S and came back 12 s
    into minute 8: that minute was seen for 38 s. The rollup row keeps those seconds, so it is
    rated 90/s as the raw samples rate it; a row written before the rollups kept them (null
    there) is taken as a whole minute (57/s).  A table that has no such column at all (written
    before it existed, and never since) does not answer: the raw samples do."""
    seen = [*range(0, 110, 10), *range(492, 500, 8), *range(500, 720, 10)]
    rows = [sample(LEO, 90 * s, at(0, s), topic="orders", partition=0) for s in seen]

    def minute_8(out):
        [row] = out
        return {p["minute"]: p["records_per_sec"] for p in row["minute_rates"]}[at(8)]

    assert minute_8(hot_partitions(window_of(rows), minutes=True)) == pytest.approx(90.0)
    table = minute_rollup(rows)
    assert minute_8(hot_partitions_from_rollup(tail_window(rows, table, at(10), at(16)), at(0), minutes=True)) == (
        pytest.approx(90.0)
    )
    nulls = table.set_column(table.schema.get_field_index("seconds"), "seconds", pa.nulls(len(table), pa.float64()))
    older = hot_partitions_from_rollup(tail_window(rows, nulls, at(10), at(16)), at(0), minutes=True)
    assert minute_8(older) == pytest.approx(90.0 * 38 / 60)
    no_column = table.drop_columns(["seconds"])
    assert hot_partitions_from_rollup(tail_window(rows, no_column, at(10), at(16)), at(0)) is None


def test_a_minute_table_behind_the_cut_says_so(minute_rollup, minutely):
    """The table holds minutes up to 9 only: 10 and 11 are in neither part, so the ranking would
    miss the burst; every row says the table did not reach the cut, for the caller to ask the
    raw samples instead.  Holding the cut's minute is enough."""
    rows = from_rollup(minute_rollup, minutely, cut=12, table_until=9)
    assert rows and {r["rollup_end"] for r in rows} == {None}
    rows = from_rollup(minute_rollup, minutely, cut=12, table_until=12)
    assert {r["rollup_end"] for r in rows} == {at(12)}


def test_without_a_minute_table_the_rollup_does_not_answer():
    window = Window.over(pa.Table.from_pylist([], schema=SCHEMA), at(12), at(16))
    assert hot_partitions_from_rollup(window, at(0)) is None


# --------------------------------------------------------------------------- which path answers


@pytest.fixture(scope="module")
def hour():
    """An hour (10:00-11:00) of 30 s samples: a steady partition, and a burst at 10:40."""
    return series(LEO, "orders", 0, 1, [i * 300 for i in range(120)], every_s=30) + series(
        LEO, "orders", 1, 1, [0] * 80 + [36000] * 40, every_s=30
    )


def asker(rows, table):
    """``ask(question, start, end, *args)`` as ``LakeService.ask_window`` answers it, over ``rows``
    and the minute ``table`` (None: the lake has none); records what was asked."""
    asked = []

    async def ask(question, start, end, *args):
        asked.append((question.name, start, end))
        raw = pa.Table.from_pylist([r for r in rows if start <= r["ts"] < end], schema=SCHEMA)
        rollups = {} if table is None else {"1m": Rolled(table)}
        return question.answer(Window.over(raw, start, end, None, rollups), *args)

    return ask, asked


async def test_a_long_window_is_ranked_from_the_rollup_and_a_short_one_from_raw_samples(minute_rollup, hour):
    table = minute_rollup(hour)
    start, end = at(0), at(60)
    ask, asked = asker(hour, table)
    rolled = await ask_hot(ask, start, end, None, 10, "peak", 2)
    assert asked == [("hot_partitions_1m", at(55), end)]
    assert (rolled["resolution"], rolled["raw_from"]) == ("1m", at(55))
    raw = await ask_hot(asker(hour, None)[0], start, end, None, 10, "peak", 2)  # no minute table
    assert (raw["resolution"], raw["raw_from"]) == ("raw", None)
    for facts in (rolled, raw):
        assert [(r["partition"], r["rank"]) for r in facts["rows"]] == [(1, 1), (0, 2)]
        assert facts["rows"][0]["peak_at"] == at(40) and facts["rows"][0]["peak_records_per_sec"] == 600.0
        assert facts["data_end"] == at(59, 30).timestamp()
        assert set(facts["rows"][0]) == {
            "cluster", "topic", "partition", "leader_broker", "replicas", "records_per_sec", "bytes_per_sec",
            "topic_median_rate", "skew", "rank", "peak_records_per_sec", "peak_at", "peak_skew",
        }  # fmt: skip
    assert rolled["series"] == raw["series"] and len(rolled["series"]) == 2 * 59
    assert rolled["series"][0] == {
        "cluster": "c1",
        "topic": "orders",
        "partition": 1,
        "minute": at(1),
        "records_per_sec": 0.0,
    }
    # a rollup behind the cut: asked, then the raw samples answer
    ask, asked = asker(hour, minute_rollup(hour, at(50)))
    behind = await ask_hot(ask, start, end, None, 10, "peak", 0)
    assert [name for name, *_ in asked] == ["hot_partitions_1m", "hot_partitions"]
    assert behind["resolution"] == "raw" and behind["rows"] == raw["rows"] and behind["series"] == []
    # under HOT_ROLLUP_FROM_S: the raw samples, asked once
    ask, asked = asker(hour, table)
    short = await ask_hot(ask, at(45), end, None, 10, "mean", 0)
    assert asked == [("hot_partitions", at(45), end)] and short["resolution"] == "raw"


def test_the_rollup_span():
    assert rollup_span(at(0), at(29, 59)) is None
    assert rollup_span(at(0, 10), at(30, 50)) == (at(0), at(25))
    assert rollup_span(at(0, 10), at(60)) == (at(0), at(55))
    assert HOT_QUESTION.metrics == HOT_ROLLUP_QUESTION.metrics == ("LogEndOffset", "Size")
    assert rollup_span(at(0) - dt.timedelta(days=1), at(0)) == (at(0) - dt.timedelta(days=1), at(-5))
