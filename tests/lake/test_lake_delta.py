"""The lake on Delta Lake, end to end through the real ingest: rollups kept in step, history
from the coarsest table (a 7-day trend without raw samples), compaction of closed hours that
readers do not notice, retention, VACUUM, `kbot lake maintain --json`, and the freshness line."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os

import pytest
from lakekit import clock_at, hhmm

from commands.registry import answer
from framework.context import Context
from kbot_settings import load as load_settings
from lake.collector import write_landing_file
from lake.ingest import Ingestor, LakeLayout

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc
DAY0 = dt.datetime(2024, 5, 1, tzinfo=UTC)


def us(t: dt.datetime) -> int:
    return int(t.timestamp() * 1_000_000)


def urp_row(t, broker, value, cluster="dl"):
    return {
        "ts": us(t),
        "cluster": cluster,
        "broker": broker,
        "metric": "UnderReplicatedPartitions",
        "topic": None,
        "partition": None,
        "labels": None,
        "value": float(value),
    }


@pytest.fixture(scope="module")
def week_lake(spark, tmp_path_factory):
    """8 days of hourly URP samples of brokers 1 and 2, ingested for real (one landing file a
    day, so one batch a day): broker 2 reports 3 from day 5 on, broker 1 always 0."""
    state = tmp_path_factory.mktemp("week")
    layout = LakeLayout.from_settings(load_settings({}), lake_dir=str(state / "state"))
    for day in range(8):
        rows = []
        for h in range(24):
            t = DAY0 + dt.timedelta(days=day, hours=h)
            rows += [urp_row(t, 1, 0), urp_row(t, 2, 3 if day >= 5 else 0)]
        write_landing_file(layout.landing, rows, f"day{day}.jsonl")
    report = Ingestor(spark, layout, max_files=4).run()
    assert report.rows == 8 * 24 * 2 and len(report.batches) == 2
    return layout


def test_rollups_count_every_sample_once(spark, week_lake):
    raw = spark.read.format("delta").load(week_lake.table).count()
    minutes = spark.read.format("delta").load(week_lake.rollup("1m")).agg({"count": "sum"}).first()[0]
    hours = spark.read.format("delta").load(week_lake.rollup("1h")).agg({"count": "sum"}).first()[0]
    assert raw == minutes == hours == 8 * 24 * 2


async def test_a_7_day_trend_reads_hour_rollups_and_never_raw_samples(spark, week_lake):
    from lake.service import LakeService

    lake = LakeService(week_lake.table, spark=spark, warm=False).start()
    moved = week_lake.table + ".moved"
    os.rename(week_lake.table, moved)  # no raw table at all while the question is answered
    try:
        reply = (
            await answer("history URP --since 7d", Context(lake=lake, clock=clock_at(DAY0 + dt.timedelta(days=8))))
        ).reply
    finally:
        os.rename(moved, week_lake.table)
    assert "1-hour rollups; no raw samples were read" in " ".join(reply.notes)
    assert reply.verdict.startswith("UnderReplicatedPartitions: newest 21:00 UTC (data 60 min old) b1 0, b2 3;")
    assert "; peak 3 on b2" in reply.verdict
    lines = reply.sections[0].lines
    assert reply.sections[0].heading == "Per 3 h (UTC), newest first"
    assert len(lines) == 56  # 7 days of 3-hour buckets
    # a 1-hour window is answered from the minute rollups
    short = (
        await answer("history URP --since 1h", Context(lake=lake, clock=clock_at(DAY0 + dt.timedelta(days=8))))
    ).reply
    assert "Resolution: 1-minute rollups" in " ".join(short.notes)


async def test_window_rows_go_through_the_service(spark, week_lake):
    """The digest's and triage's way in: a Spark window query through LakeService.query (its time
    limit), and a question answered in process (the URP shapes) through LakeService.ask_window."""
    from diagnosis.lake_evidence import window_rows
    from lake.service import LakeService

    lake = LakeService(week_lake.table, spark=spark, warm=False).start()
    ctx = Context(lake=lake, clock=clock_at(DAY0 + dt.timedelta(days=8)))
    rows = await window_rows(ctx, "dl", 2, lambda df: df.groupBy("broker").count())
    assert sorted(r["broker"] for r in rows) == [1, 2]
    assert lake.status()["queries"] == 1
    rows = await window_rows(ctx, "dl", 2, "urp_trend")
    assert sorted((r["broker"], r["shape"] == "zero", r["max"]) for r in rows) == [(1, True, 0), (2, False, 3)]
    assert (lake.status()["queries"], lake.status()["window_queries"]) == (1, 1)
    assert await window_rows(Context(lake=None), "dl", 2, "urp_trend") is None


def _files(spark, path, date, hour):
    from pyspark.sql import functions as F

    df = spark.read.format("delta").load(path).filter((F.col("date") == date) & (F.col("hour") == hour))
    return df.select("_metadata.file_path").distinct().count()


def test_compaction_retention_and_vacuum(spark, tmp_path):
    """Three batches into one hour make three files; OPTIMIZE of the closed hour leaves one with
    the same rows, and a reader of the snapshot before it still reads its files; the retention
    deletes whole days of raw samples (rollups are kept longer); VACUUM removes the unreferenced
    files of snapshots older than its horizon."""
    from delta.tables import DeltaTable

    from lake.maintenance import expire, maintain, optimize_closed

    layout = LakeLayout.from_settings(load_settings({}), lake_dir=str(tmp_path / "state"))
    t = DAY0 + dt.timedelta(hours=10)
    for i in range(3):
        write_landing_file(layout.landing, [urp_row(t + dt.timedelta(minutes=i), b, i) for b in (1, 2)], f"f{i}.jsonl")
    write_landing_file(layout.landing, [urp_row(DAY0 + dt.timedelta(days=8, hours=1), 1, 9)], "later.jsonl")
    Ingestor(spark, layout, max_files=1).run()
    assert _files(spark, layout.table, "2024-05-01", 10) == 3
    before = DeltaTable.forPath(spark, layout.table).history(1).first()["version"]

    now = DAY0 + dt.timedelta(days=8, hours=2)  # hour 10 of day 0 is long closed; day 8 hour 1 too
    parts = ["cluster", "date", "hour"]
    assert optimize_closed(spark, layout.table, parts, now, lookback=dt.timedelta(days=9)) == (1, 3, 1)
    assert _files(spark, layout.table, "2024-05-01", 10) == 1
    assert spark.read.format("delta").load(layout.table).count() == 7
    old_snapshot = spark.read.format("delta").option("versionAsOf", before).load(layout.table)
    assert old_snapshot.count() == 7  # snapshot isolation: its three small files are still there
    # a second run has nothing left to compact
    assert optimize_closed(spark, layout.table, parts, now, lookback=dt.timedelta(days=9)) == (0, 0, 0)

    assert expire(spark, layout.table, dt.timedelta(days=7), now) == "2024-05-02"
    assert [r["date"] for r in spark.read.format("delta").load(layout.table).select("date").distinct().collect()] == [
        "2024-05-09"
    ]

    # the whole schedule once: rollups keep 90 days, so their rows of 2024-05-01 stay
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        rep = maintain(spark, layout.table, now=now, vacuum=True, vacuum_hours=0)
    finally:
        spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "true")
    assert rep.expired_before == {"raw": "2024-05-02", "1m": "2024-02-09", "1h": "2024-02-09"}
    assert rep.vacuumed == ["raw", "1m", "1h"]
    assert spark.read.format("delta").load(layout.rollup("1m")).filter("date = '2024-05-01'").count() == 6
    parquet = [f for d, _, fs in os.walk(layout.table) for f in fs if f.endswith(".parquet")]
    assert len(parquet) == 1  # only the live file of 2024-05-09 is left on disk


def test_bad_retention_is_a_clear_error():
    from lake.errors import BadRetention
    from lake.maintenance import parse_retention

    assert parse_retention("rollups=12w")["rollups"] == dt.timedelta(weeks=12)
    for bad in ("raw=7", "raw=7d,cold=1d", "raw=2h", "raw"):
        with pytest.raises(BadRetention, match="KBOT_LAKE_RETENTION"):
            parse_retention(bad)


def test_maintain_via_cli_json(spark, tmp_path, monkeypatch, capsys):
    from lake import cli

    class Borrowed:  # the shared test session must outlive the command's spark.stop()
        def __getattr__(self, name):
            return getattr(spark, name)

        def stop(self):
            pass

    monkeypatch.setattr(cli, "_session", lambda master, settings: Borrowed())
    p = argparse.ArgumentParser(prog="kbot")
    cli.register(p.add_subparsers(dest="command"))
    args = p.parse_args(["lake", "maintain", "--lake-dir", str(tmp_path), "--json", "--no-vacuum"])
    assert cli.run(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["optimized"] == {"raw": 0, "1m": 0, "1h": 0} and out["table"] == str(tmp_path / "samples")
    args = p.parse_args(["lake", "maintain", "--lake-dir", str(tmp_path), "--retention", "raw=1"])
    assert cli.run(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: KBOT_LAKE_RETENTION: expected") and err.count("\n") == 1


async def test_a_lake_that_stopped_before_the_symptom_says_so(ctx_at):
    """The synthetic lake ends at 12:00; asked at 12:20 about the last 30 minutes, its quiet
    minutes before 12:00 are no evidence that all is well now."""
    reply = (await answer("why under min ISR --since 30m", ctx_at(hhmm(12, 20)))).reply
    lake = [e for e in reply.evidence if e.source.startswith("lake:")]
    assert lake[0].value.startswith("lake data ends 11:59:30 UTC, 20 min before this answer: it cannot show")
    assert not any(e.status == "ok" for e in lake)
    fresh = (await answer("why under min ISR --since 30m", ctx_at(hhmm(11, 50)))).reply
    assert not any("lake data ends" in e.value for e in fresh.evidence)
