"""`history` read in process (``window_queries.history``: DuckDB over the Delta snapshot) gives
the numbers Spark gives (``lake.queries.q_history``) on the same lake, for gauges and meters, from
each table (the minute rollup, the hour rollup with its open hours from the minutes, raw samples
on a lake without rollups); the command answers without Spark, newest first, with its data's
age; and past the crossover (several clusters, the size budget) the question goes to Spark."""

from __future__ import annotations

import datetime as dt

import pytest
from lakekit import CLUSTER, START, clock_at, hhmm

from commands.registry import answer
from framework.context import Context

pytestmark = pytest.mark.spark


def _rows(facts: dict) -> list[tuple]:
    return [(r["cluster"], r["bucket"], r["broker"], r["samples"]) for r in facts["rows"]]


def assert_same(mine: dict, theirs: dict) -> None:
    """The in-process answer equals Spark's: the same rows, values and data ends to the float."""
    assert mine["resolution"] == theirs["resolution"]
    assert _rows(mine) == _rows(theirs)
    for a, b in zip(mine["rows"], theirs["rows"]):
        assert a["value"] == pytest.approx(b["value"], rel=1e-9, abs=1e-9), (a, b)
        assert a["newest"] == pytest.approx(b["newest"], abs=1e-6), (a, b)
    assert mine["data_end"] == pytest.approx(theirs["data_end"], abs=1e-6)
    assert mine["rows"], "an empty answer proves nothing"


def both(svc, at: dt.datetime, since: dt.timedelta, metric, topic, broker, partition, bucket_s, now=None):
    from lake.queries import q_history
    from window_queries.history import HISTORY_QUESTION

    now = at.timestamp() if now is None else now
    args = (metric, topic, broker, partition, bucket_s, now)

    async def go():
        mine = await svc.ask_window(HISTORY_QUESTION, at - since, at, *args, timeout=120)
        theirs = await svc.query(q_history, at - since, at, *args, timeout=120)
        return mine, theirs

    return go()


M = dt.timedelta(minutes=1)
H = dt.timedelta(hours=1)


@pytest.mark.parametrize(
    "at, since, metric, topic, broker, partition, bucket_s, resolution",
    [
        (hhmm(10, 30), 30 * M, "UnderReplicatedPartitions", None, None, None, 60, "1m"),
        (hhmm(12, 0), 3 * H, "UnderReplicatedPartitions", None, None, None, 120, "1m"),
        (hhmm(10, 30), 30 * M, "IsrShrinksPerSec", None, 1, None, 60, "1m"),
        # the window's start cuts a 5-minute bucket, and the one still filling at its end
        (hhmm(10, 37) + dt.timedelta(seconds=30), 53 * M, "IsrExpandsPerSec", None, None, None, 300, "1m"),
        (hhmm(10, 30), 10 * M, "LogEndOffset", "topic-001", None, 2, 60, "1m"),
        # the hour table for 10:00, the open hour 11:00 from the minutes (now 12:00)
        (hhmm(12, 0), 2 * H, "IsrShrinksPerSec", None, None, None, 3600, "1h"),
        (hhmm(12, 0), 2 * H, "UnderReplicatedPartitions", None, None, None, 3600, "1h"),
        (hhmm(12, 0), 2 * H, "LogEndOffset", "topic-001", None, 2, 3600, "1h"),
    ],
)
async def test_in_process_history_equals_spark(
    lake_service, at, since, metric, topic, broker, partition, bucket_s, resolution
):
    mine, theirs = await both(lake_service, at, since, metric, topic, broker, partition, bucket_s)
    assert mine["engine"] == "in process" and theirs["engine"] == "spark"
    assert mine["resolution"] == resolution
    assert_same(mine, theirs)


async def test_the_hour_table_alone_when_no_hour_is_open(lake_service):
    """Asked at 15:00, the hours 10:00 and 11:00 are closed: both read them from the hour table."""
    mine, theirs = await both(
        lake_service, hhmm(15, 0), 6 * H, "IsrShrinksPerSec", None, None, None, 3600, now=hhmm(15, 0).timestamp()
    )
    assert mine["read"]["files"] >= 1
    assert_same(mine, theirs)


@pytest.fixture(scope="module")
def raw_only_lake(spark, tmp_path_factory):
    """An hour of samples with a broker loss and no rollup tables (a lake whose rollups have not
    run): both engines read raw samples."""
    from lake.service import LakeService
    from tools import synthetic as S

    path = str(tmp_path_factory.mktemp("raw-only") / "lake")
    S.generate(
        path,
        cluster=CLUSTER,
        start=START,
        hours=1,
        brokers=3,
        topics=2,
        partitions_per_topic=3,
        seed=11,
        spark=spark,
        incidents=[S.broker_loss(2, hhmm(10, 10), dt.timedelta(minutes=20))],
        rollups=False,
    )
    svc = LakeService(path, spark=spark, query_timeout_s=120, warm=False).start()
    assert svc.wait_ready_sync(120), svc.status()
    yield svc
    svc.stop()


@pytest.mark.parametrize(
    "at, since, metric, bucket_s",
    [
        (hhmm(10, 45), 40 * M, "UnderReplicatedPartitions", 60),
        (hhmm(10, 45), 40 * M, "IsrShrinksPerSec", 60),
        (hhmm(10, 44) + dt.timedelta(seconds=15), 37 * M, "IsrExpandsPerSec", 300),
    ],
)
async def test_raw_samples_in_process_equal_spark(raw_only_lake, at, since, metric, bucket_s):
    mine, theirs = await both(raw_only_lake, at, since, metric, None, None, None, bucket_s)
    assert mine["resolution"] == "raw"
    assert_same(mine, theirs)


async def test_history_answers_without_spark_newest_first_with_its_age(synthetic_lake):
    """A lake whose Spark was never started (a one-shot `kbot ask`, or while Spark starts): the
    history is read in process; the newest minute comes first, under the age of its data."""
    from lake.service import LakeService

    lake = LakeService(synthetic_lake, warm=False)  # not started: no Spark session at all
    at = hhmm(10, 30) + dt.timedelta(seconds=40)
    result = await answer("history URP --since 30m", Context(lake=lake, clock=clock_at(at)))
    reply = result.reply
    assert result.outcome == "answered", reply.verdict
    lines = reply.sections[0].lines
    assert reply.sections[0].heading == "Per minute (UTC), newest first"
    assert lines[0].startswith("10:30  ") and lines[-1].startswith("10:00  ")
    evidence = {e.label: e.value for e in reply.evidence}
    # the newest sample is 10:30:30; the answer is asked at 10:30:40
    assert evidence["Data age"] == "newest sample 2024-05-01 10:30:30 UTC, 10 s before this answer"
    assert evidence["Read by"].startswith("in process (DuckDB over the Delta snapshot)")
    assert reply.verdict.startswith("UnderReplicatedPartitions: newest 10:30 UTC (data 10 s old) b1 ")
    assert lake.status()["state"] == "new"  # Spark was never asked for


@pytest.fixture(scope="module")
def two_cluster_lake(spark, tmp_path_factory):
    """Two clusters' hour in one lake."""
    from tools import synthetic as S

    path = str(tmp_path_factory.mktemp("two-clusters") / "lake")
    for name, seed in (("east", 1), ("west", 2)):
        S.generate(
            path,
            cluster=name,
            start=START,
            hours=1,
            brokers=3,
            topics=1,
            partitions_per_topic=3,
            seed=seed,
            spark=spark,
            incidents=[S.broker_loss(2, hhmm(10, 10), dt.timedelta(minutes=20))],
        )
    return path


async def test_several_clusters_go_to_spark_one_cluster_stays_in_process(spark, two_cluster_lake):
    from lake.service import LakeService

    lake = LakeService(two_cluster_lake, spark=spark, query_timeout_s=120, warm=False).start()
    try:
        assert lake.wait_ready_sync(120), lake.status()
        ctx = Context(lake=lake, clock=clock_at(hhmm(10, 30)))
        both_clusters = (await answer("history URP --since 30m", ctx)).reply
        by = {e.label: e.value for e in both_clusters.evidence}
        assert by["Read by"] == "Spark: the history spans 2 clusters"
        assert any("Samples from 2 clusters (east, west)" in n for n in both_clusters.notes)
        one = (await answer("history URP --since 30m --cluster east", ctx)).reply
        assert {e.label: e.value for e in one.evidence}["Read by"].startswith("in process")
        assert one.sections[0].lines[0].startswith("10:29  ")
    finally:
        lake.stop()


async def test_past_the_size_budget_the_question_refuses_before_reading(lake_service):
    from lake.embedded import PastCrossover
    from window_queries.history import HISTORY_QUESTION

    at = hhmm(12, 0)
    with pytest.raises(PastCrossover) as caught:
        await lake_service.ask_window(
            HISTORY_QUESTION, at - 2 * H, at, "UnderReplicatedPartitions", None, None, None, 120, at.timestamp(), 1
        )
    assert caught.value.budget and caught.value.files is not None and caught.value.files.bytes > 1
    assert "past the 0 MB one process reads in about a second" in caught.value.reason
