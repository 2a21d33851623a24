"""LakeService: warm session, async queries with a timeout that cancels Spark work, clear
Unavailable errors, window reads that open only the hours they need."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest
from lakekit import hhmm
from waiting import async_wait_until

from kbot_settings import load as load_settings
from lake import service as svc_mod
from lake.errors import LakeUnavailable as Unavailable
from lake.service import LakeService, LakeView

pytestmark = pytest.mark.spark


async def test_query_runs_fn_with_a_view_and_counts(lake_service):
    def count(view, start, end):
        return view.window(start, end).count()

    before = lake_service.status()["queries"]
    n = await lake_service.query(count, hhmm(10, 0), hhmm(10, 1))
    assert n > 0
    st = lake_service.status()
    assert st["state"] == "ready" and st["queries"] == before + 1 and st["spark_version"].startswith("4.")
    assert st["last_query_seconds"] is not None


def test_window_opens_only_the_hours_it_needs(lake_service, synthetic_lake):
    view = lake_service.view()
    dirs = view.hour_dirs(hhmm(10, 50), hhmm(11, 5))
    assert [d.rsplit("/", 2)[-2:] for d in dirs] == [["date=2024-05-01", "hour=10"], ["date=2024-05-01", "hour=11"]]
    assert view.hour_dirs(hhmm(10, 0), hhmm(11, 0)) == dirs[:1]  # end is exclusive
    assert view.hour_dirs(hhmm(10, 0), hhmm(10, 5), cluster="other") == []
    assert view.window(hhmm(13, 0), hhmm(14, 0)).count() == 0


def test_a_delta_window_reads_only_the_files_of_its_hours(lake_service):
    """On the Delta table the window's date/hour predicate prunes the snapshot's file list."""
    view = lake_service.view()
    assert view.is_delta() and view.is_delta("1m") and view.is_delta("1h")
    files = view.window(hhmm(10, 50), hhmm(11, 5)).select("_metadata.file_path").distinct().collect()
    hours = {f[0].split("/hour=")[1].split("/")[0] for f in files}
    assert hours == {"10", "11"}
    assert (
        view.resolution_for(60) == "1m" and view.resolution_for(3 * 3600) == "1h" and view.resolution_for(30) == "raw"
    )


def test_missing_lake_is_empty_not_an_error(spark, tmp_path):
    view = LakeView(spark, str(tmp_path / "nothing-here"))
    assert view.window(hhmm(10, 0), hhmm(11, 0)).count() == 0
    assert view.all().count() == 0
    os.makedirs(tmp_path / "empty")
    assert LakeView(spark, str(tmp_path / "empty")).all().count() == 0


async def test_timeout_cancels_the_spark_job(spark, synthetic_lake):
    lake = LakeService(synthetic_lake, spark=spark, query_timeout_s=1.5, warm=False)
    lake.start()

    def forever(view):
        # minutes of work on 2 cores if nobody stopped it
        return view.spark.range(0, 10**12, 1, 2).selectExpr("sum(id % 7)").collect()

    t0 = time.monotonic()
    with pytest.raises(Unavailable, match="did not answer within 2 s; the query was cancelled"):
        await lake.query(forever)
    assert time.monotonic() - t0 < 5
    tracker = spark.sparkContext.statusTracker()
    await async_wait_until(
        lambda: not tracker.getActiveJobsIds(),
        20,
        "the cancelled query's Spark jobs to end",
        detail=lambda: f"active jobs: {tracker.getActiveJobsIds()}",
    )
    assert lake.status()["timeouts"] == 1


async def test_spark_that_cannot_start_is_unavailable_with_the_reason(monkeypatch, tmp_path):
    def broken(*a, **k):
        raise RuntimeError("Java gateway process exited before sending its port number")

    monkeypatch.setattr("lake.service.build_session", broken)
    lake = LakeService(str(tmp_path), master="local[2]")
    lake.start()
    assert not await lake.wait_ready(10)
    with pytest.raises(Unavailable, match="Spark did not start .*Java is missing or broken"):
        await lake.query(lambda view: 1)
    st = lake.status()
    assert st["state"] == "failed" and "Java gateway" in st["error"]


async def test_a_query_waits_for_the_warm_up(monkeypatch, spark, tmp_path):
    release = threading.Event()

    def slow_start(*a, **k):
        release.wait(60)  # Spark is starting until the test lets it finish
        return spark

    monkeypatch.setattr("lake.service.build_session", slow_start)
    lake = LakeService(str(tmp_path), master="local[2]", warm=False).start()
    assert lake.state == "starting"
    asked = asyncio.ensure_future(lake.query(lambda view: view.spark.range(3).count()))
    await asyncio.sleep(0)  # the query is asked while Spark is starting
    release.set()
    assert await asked == 3
    lake._owns_session = False  # the shared test session stays up


async def test_still_starting_after_the_budget(monkeypatch, spark, tmp_path):
    release = threading.Event()

    def slow_start(*a, **k):
        release.wait(60)  # Spark is starting until the query has given up on it
        return spark

    monkeypatch.setattr("lake.service.build_session", slow_start)
    lake = LakeService(str(tmp_path), master="local[2]", warm=False).start()
    with pytest.raises(Unavailable, match="still starting.*`kbot lake serve` keeps one Spark warm"):
        await lake.query(lambda view: 1, timeout=0.2)
    release.set()
    assert await lake.wait_ready(10)
    lake._owns_session = False


async def test_a_one_shot_ask_does_not_warm_an_in_process_spark_up(monkeypatch, spark, tmp_path):
    """A long-running bot warms its in-process Spark up at boot (the lake's query paths run once
    before it is ready); a one-shot `kbot ask` (``make_context(lake=False)`` with KBOT_LAKE=1 and
    no Connect server) does not: its own question is the first query, and waiting for the
    warm-up first cost it a quarter of a cold answer."""
    from bot.app import close_context, make_context

    monkeypatch.setattr("lake.service.build_session", lambda *a, **k: spark)
    env = {"HOME": str(tmp_path), "KBOT_HOME": str(tmp_path / "home"), "KBOT_LAKE_DIR": str(tmp_path / "lake")}
    for one_shot in (True, False):
        ctx = make_context(load_settings({**env, "KBOT_LAKE": "1"}), lake=not one_shot)
        try:
            assert ctx.lake is not None and ctx.lake.master == "local[*]"
            assert await ctx.lake.wait_ready(120)
            warmed = ctx.lake.status()["warmup_seconds"] is not None
            assert warmed is not one_shot, one_shot
        finally:
            ctx.lake._owns_session = False  # the shared test session stays up
            await close_context(ctx)


async def test_an_in_process_fallback_keeps_the_callers_warm_up_choice(monkeypatch, spark, tmp_path):
    """A Connect server named in server.json that does not answer: the service starts an
    in-process Spark instead, warmed up unless its caller said not to."""

    def build(master, **kwargs):
        if master.startswith("sc://"):
            raise ConnectionRefusedError("connection refused")
        return spark

    monkeypatch.setattr("lake.service.build_session", build)
    for warm, warmed in ((None, True), (False, False)):
        lake = LakeService(str(tmp_path), master="sc://127.0.0.1:1", fallback_master="local[*]", warm=warm).start()
        assert await lake.wait_ready(120)
        lake._owns_session = False
        assert lake.master == "local[*]" and (lake.status()["warmup_seconds"] is not None) is warmed, warm


def test_spark_gone_is_recognised():
    class Py4JNetworkError(Exception):
        pass

    try:
        try:
            raise Py4JNetworkError("Answer from Java side is empty")
        except Py4JNetworkError as inner:
            raise RuntimeError("query failed") from inner
    except RuntimeError as exc:
        assert svc_mod._unavailable_cause(exc)
    assert not svc_mod._unavailable_cause(ValueError("a bug"))


def test_from_env(tmp_path):
    lake = LakeService.from_settings(
        load_settings(
            {
                "KBOT_LAKE_DIR": str(tmp_path),
                "KBOT_SPARK_MASTER": "sc://spark:15002",
                "KBOT_LAKE_CLUSTER": "prod",
                "KBOT_LAKE_TIMEOUT_S": "12",
                "KBOT_SPARK_CONF": "spark.driver.memory=2g; spark.jars.packages=a:b:1,c:d:2",
            }
        )
    )
    assert (lake.path, lake.master, lake.cluster, lake.query_timeout_s) == (
        str(tmp_path / "samples"),
        "sc://spark:15002",
        "prod",
        12.0,
    )
    assert lake.conf == {"spark.driver.memory": "2g", "spark.jars.packages": "a:b:1,c:d:2"}
    assert lake.state == "new"


def test_lake_from_env(tmp_path):
    from lake.service import lake_from_settings

    assert (
        lake_from_settings(
            load_settings({"HOME": str(tmp_path), "KBOT_LAKE_DIR": str(tmp_path / "nope"), "KBOT_LAKE": "0"})
        )
        is None
    )
    lake = lake_from_settings(load_settings({"KBOT_LAKE_DIR": str(tmp_path)}), start=False)
    assert lake is not None and lake.path == str(tmp_path / "samples") and lake.state == "new"


def test_local_sessions_get_one_shuffle_partition_per_core():
    from lake.service import _session_conf

    assert _session_conf("local[4]", {}) == {"spark.sql.shuffle.partitions": "4"}
    assert _session_conf("local[4]", {"spark.sql.shuffle.partitions": "9"}) == {"spark.sql.shuffle.partitions": "9"}
    assert _session_conf("sc://spark:15002", {}) == {}


def test_sessions_get_delta_and_connect_clients_only_runtime_sql_settings():
    from lake.jars import jar_paths
    from lake.spark import session_settings

    local = session_settings("local[2]", {"spark.jars": "/opt/extra.jar"})
    assert local["spark.jars"].split(",") == ["/opt/extra.jar", *map(str, jar_paths())]
    assert local["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    remote = session_settings("sc://spark:15002")
    assert remote["spark.sql.session.timeZone"] == "UTC"
    assert not {"spark.jars", "spark.sql.extensions", "spark.sql.catalog.spark_catalog"} & set(remote)
