"""Ingest: landing JSON lines -> the Delta table, exactly once, across crashes at every step."""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import shutil
from pathlib import Path

import pytest
from waiting import wait_until

from kbot_settings import load as load_settings
from lake.collector import write_landing_file
from lake.delta import local_commits
from lake.ingest import TXN_FILE, IngestBusy, Ingestor, LakeLayout, layout_status, validate_landing_file
from spark_queries.schema import read_lake

pytestmark = pytest.mark.spark

T10 = int(dt.datetime(2024, 5, 1, 10, 59, 30, tzinfo=dt.timezone.utc).timestamp() * 1e6)
T11 = int(dt.datetime(2024, 5, 1, 11, 0, 0, tzinfo=dt.timezone.utc).timestamp() * 1e6)


def row(
    ts,
    metric="UnderReplicatedPartitions",
    broker=101,
    value=1.0,
    topic=None,
    partition=None,
    labels=None,
    cluster="dev",
):
    return {
        "ts": ts,
        "cluster": cluster,
        "broker": broker,
        "metric": metric,
        "topic": topic,
        "partition": partition,
        "labels": labels,
        "value": value,
    }


def land(layout: LakeLayout, name: str, rows) -> None:
    write_landing_file(layout.landing, rows, name)


@pytest.fixture
def layout(tmp_path) -> LakeLayout:
    lay = LakeLayout.from_settings(load_settings({}), lake_dir=str(tmp_path / "state"))
    lay.make_dirs()
    return lay


def two_hours(layout):
    """Two landing files, 7 rows, spanning hours 10 and 11 (so two Parquet files per batch)."""
    land(
        layout,
        "a.jsonl",
        [
            row(T10, value=3.0),
            row(T10, broker=102, value=0.0),
            row(T10, metric="LogEndOffset", topic="orders", partition=0, value=1200.0),
            row(T10, metric="RequestQueueTimeMs", labels={"request": "Produce", "quantile": "0.99"}, value=2.5),
        ],
    )
    land(
        layout,
        "b.jsonl",
        [
            row(T11, value=3.0),
            row(T11, metric="IsrShrinksPerSec", value=17.0),
            row(
                T11,
                metric="CommittedOffset",
                broker=-1,
                topic="orders",
                partition=0,
                labels={"group": "g"},
                value=1100.0,
            ),
        ],
    )
    return 7


def lake_rows(spark, layout):
    if not os.path.isdir(layout.table):
        return []
    return read_lake(spark, layout.table).collect()


def live_files(spark, layout):
    """The Parquet files of the table's current snapshot (what readers read), relative paths."""
    if not os.path.isdir(layout.table):
        return []
    from delta.tables import DeltaTable  # noqa: F401 - the session has Delta

    rows = spark.read.format("delta").load(layout.table).select("_metadata.file_path").distinct().collect()
    return sorted(os.path.relpath(r[0].removeprefix("file:"), layout.table) for r in rows)


def where_are(layout, names):
    """Each landing file must be in exactly one place."""
    places = {}
    for n in names:
        hits = [p for p in (layout.landing / n, layout.done / n, layout.quarantine / n) if p.exists()]
        hits += list(layout.processing.glob(f"*/{n}"))
        assert len(hits) == 1, (n, hits)
        places[n] = hits[0].parent.name if hits[0].parent.parent != layout.processing else "processing"
    return places


def test_ingest_writes_typed_partitioned_rows(spark, layout):
    n = two_hours(layout)
    report = Ingestor(spark, layout).run()
    assert (report.rows, report.files, len(report.batches)) == (n, 2, 1)
    rows = lake_rows(spark, layout)
    assert len(rows) == n
    files = live_files(spark, layout)
    assert [f.rsplit("/", 1)[0] for f in files] == [
        "cluster=dev/date=2024-05-01/hour=10",
        "cluster=dev/date=2024-05-01/hour=11",
    ]
    assert os.path.isdir(f"{layout.table}/_delta_log")
    leo = next(r for r in rows if r.metric == "LogEndOffset")
    assert (leo.topic, leo.partition, leo.value, leo.labels, leo.broker) == ("orders", 0, 1200.0, None, 101)
    # PySpark hands timestamps back naive in local time; the instant is the landing ts
    assert leo.ts.astimezone(dt.timezone.utc) == dt.datetime(2024, 5, 1, 10, 59, 30, tzinfo=dt.timezone.utc)
    assert (leo.cluster, leo.date, leo.hour) == ("dev", "2024-05-01", 10)
    q = next(r for r in rows if r.metric == "RequestQueueTimeMs")
    assert q.labels == {"request": "Produce", "quantile": "0.99"}
    assert where_are(layout, ["a.jsonl", "b.jsonl"]) == {"a.jsonl": "done", "b.jsonl": "done"}
    commits = local_commits(layout.table)
    assert [(c["batch"], c["rows"], c["files"]) for c in commits] == [
        (report.batches[0].batch_id, 7, ["a.jsonl", "b.jsonl"])
    ]
    assert report.batches[0].hours == [("dev", "2024-05-01", 10), ("dev", "2024-05-01", 11)]


def test_rerun_and_relanded_files_never_duplicate(spark, layout):
    n = two_hours(layout)
    Ingestor(spark, layout).run()
    again = Ingestor(spark, layout).run()
    assert again.batches == []
    # the same file delivered again (a collector retry, a manual copy) is recognised by name
    shutil.copy(layout.done / "a.jsonl", layout.landing / "a.jsonl")
    third = Ingestor(spark, layout).run()
    assert third.batches[0].duplicates == ["a.jsonl"] and third.rows == 0
    assert len(lake_rows(spark, layout)) == n


def test_a_repeated_txn_version_is_skipped_by_delta(spark, layout):
    """What a recovered batch's retry rests on: Delta skips a second write of (appId, version)
    even when our own bookkeeping has lost track of the batch (here: its commit is no longer the
    newest).  A batch is written under its txn when it is recovered (a crash before its commit)."""
    from lake import delta

    two_hours(layout)
    with pytest.raises(Crash):
        Ingestor(spark, layout, crash_hook=crash_at("validated")).run()
    Ingestor(spark, layout).run()
    app = layout.app_id()
    version = int(layout.last_txn_file.read_text())
    again = spark.createDataFrame(lake_rows(spark, layout)[:2], read_lake(spark, layout.table).schema)
    delta.append(again, layout.table, ["cluster", "date", "hour"], app_id=app, version=version)
    delta.append(again, layout.table, ["cluster", "date", "hour"], app_id=app, version=version - 1)
    assert len(lake_rows(spark, layout)) == 7
    delta.append(again, layout.table, ["cluster", "date", "hour"], app_id=app, version=version + 1)
    assert len(lake_rows(spark, layout)) == 9  # a new version is written


class Crash(Exception):
    pass


def crash_at(point, after=1):
    seen = {"n": 0}

    def hook(p):
        if p == point:
            seen["n"] += 1
            if seen["n"] >= after:
                raise Crash(point)

    return hook


@pytest.mark.parametrize("point", ["claimed", "validated", "committed", "rolled_up", "finished_file"])
def test_a_crash_at_any_step_loses_nothing_and_duplicates_nothing(spark, layout, point):
    n = two_hours(layout)
    with pytest.raises(Crash):
        Ingestor(spark, layout, crash_hook=crash_at(point)).run()
    # nothing lost: every file is somewhere, in flight at worst
    places = where_are(layout, ["a.jsonl", "b.jsonl"])
    assert set(places.values()) <= {"processing", "done"}
    batch_dir = next(layout.processing.iterdir())
    version = json.loads((batch_dir / TXN_FILE).read_text())["version"]
    report = Ingestor(spark, layout).run()
    assert [b.recovered for b in report.batches] == [True]
    assert report.batches[0].version == version  # retried under the same Delta txnVersion
    assert report.batches[0].already_committed == (point in ("committed", "rolled_up", "finished_file"))
    assert len(lake_rows(spark, layout)) == n
    assert len(live_files(spark, layout)) == 2
    assert where_are(layout, ["a.jsonl", "b.jsonl"]) == {"a.jsonl": "done", "b.jsonl": "done"}
    assert len(local_commits(layout.table)) == 1
    assert not list(layout.processing.iterdir())
    # the rollups count every sample once, too
    minutes = spark.read.format("delta").load(layout.rollup("1m")).agg({"count": "sum"}).first()[0]
    assert minutes == n
    # and a further run changes nothing
    assert Ingestor(spark, layout).run().batches == []
    assert len(lake_rows(spark, layout)) == n


def test_files_a_killed_writer_left_are_not_read(spark, layout):
    """What a Spark job killed mid-write leaves in the table directory (task output that no commit
    names) is invisible to readers; the retried batch writes its rows once."""
    n = two_hours(layout)
    with pytest.raises(Crash):
        Ingestor(spark, layout, crash_hook=crash_at("validated")).run()
    junk = f"{layout.table}/cluster=dev/date=2024-05-01/hour=10"
    os.makedirs(junk)
    with open(f"{junk}/part-00000-dead.snappy.parquet", "wb") as f:
        f.write(b"not parquet")
    Ingestor(spark, layout).run()
    assert len(lake_rows(spark, layout)) == n
    assert not any("dead" in f for f in live_files(spark, layout))


BAD_LINES = {
    "notjson.jsonl": ('{"ts": 1', "not valid JSON"),
    "nan.jsonl": (json.dumps(row(T10)).replace('"value": 1.0', '"value": NaN'), "not a number JSON allows"),
    "seconds.jsonl": (json.dumps(row(T10 // 1_000_000)), "ts must be epoch microseconds"),
    "strvalue.jsonl": (json.dumps(row(T10, value="3")), "value must be a finite number"),
    "negpart.jsonl": (json.dumps(row(T10, topic="t", partition=-1)), "partition must be"),
    "nometric.jsonl": (json.dumps({k: v for k, v in row(T10).items() if k != "metric"}), "metric must be"),
    "extra.jsonl": (json.dumps({**row(T10), "oops": 1}), "unknown field"),
    "labels.jsonl": (json.dumps(row(T10, labels={"a": 1})), "labels must be"),
    "array.jsonl": ("[1, 2]", "not a JSON object"),
}


def test_malformed_files_are_quarantined_with_a_reason(spark, layout):
    land(layout, "good.jsonl", [row(T10, value=5.0)])
    for name, (line, _) in BAD_LINES.items():
        (layout.landing / name).write_text(json.dumps(row(T10)) + "\n" + line + "\n")
    report = Ingestor(spark, layout).run()
    assert report.rows == 1 and report.files == 1
    assert sorted(n for n, _ in report.quarantined) == sorted(BAD_LINES)
    for name, (_, why) in BAD_LINES.items():
        assert (layout.quarantine / name).exists()
        reason = (layout.quarantine / f"{name}.reason.txt").read_text()
        assert reason.startswith("line 2: ") and why in reason, (name, reason)
    assert [r.value for r in lake_rows(spark, layout)] == [5.0]
    entry = local_commits(layout.table)[0]
    assert entry["files"] == ["good.jsonl"] and sorted(entry["quarantined"]) == sorted(BAD_LINES)


def test_validation_accepts_blank_lines_and_empty_files(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text("\n" + json.dumps(row(T10)) + "\n\n")
    assert validate_landing_file(p) == (1, None)
    p.write_text("")
    assert validate_landing_file(p) == (0, None)


def test_a_batch_claimed_without_its_version_gets_one(spark, layout):
    """A crash between creating the batch directory and writing txn.json: nothing can have been
    committed under a version that was never written down, so the batch gets a new one."""
    two_hours(layout)
    with pytest.raises(Crash):
        Ingestor(spark, layout, crash_hook=crash_at("claimed")).run()
    batch_dir = next(layout.processing.iterdir())
    (batch_dir / TXN_FILE).unlink()
    report = Ingestor(spark, layout).run()
    assert report.batches[0].version > 0 and not report.batches[0].already_committed
    assert len(lake_rows(spark, layout)) == 7


def test_one_ingest_at_a_time(spark, layout):
    two_hours(layout)
    with open(layout.lock, "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        with pytest.raises(IngestBusy):
            Ingestor(spark, layout).run()
    assert Ingestor(spark, layout).run().rows == 7


def test_batches_are_bounded_and_status_counts(spark, layout):
    for i in range(5):
        land(layout, f"f{i}.jsonl", [row(T10 + i, value=float(i))])
    st = layout_status(layout)
    assert st["landing_files"] == 5 and st["committed_batches"] == 0
    report = Ingestor(spark, layout, max_files=2).run()
    assert [b.files for b in report.batches] == [2, 2, 1]
    st = layout_status(layout)
    assert (st["landing_files"], st["done_files"], st["committed_batches"], st["ingested_rows"]) == (0, 5, 3, 5)
    assert st["clusters"] == ["dev"] and st["hour_partitions"] == 1


def test_layout_from_env(tmp_path):
    lay = LakeLayout.from_settings(
        load_settings({"KBOT_LAKE_DIR": str(tmp_path), "KBOT_LAKE_URI": "s3a://bucket/kbot/samples"})
    )
    assert lay.state_dir == tmp_path and lay.table == "s3a://bucket/kbot/samples"
    assert lay.rollup("1m") == "s3a://bucket/kbot/samples_1m" and lay.rollup("1h") == "s3a://bucket/kbot/samples_1h"
    assert LakeLayout.from_settings(load_settings({"KBOT_LAKE_DIR": str(tmp_path)})).table == str(tmp_path / "samples")


def test_an_ingest_killed_from_outside_loses_and_duplicates_nothing(spark, layout):
    """A real `kbot lake ingest` process, SIGKILLed (with its Spark JVM) as soon as it has
    claimed its batch: the files wait in processing/, and the next run ingests them once."""
    import signal
    import subprocess
    import sys

    n = two_hours(layout)
    env = dict(
        os.environ, KBOT_LAKE_DIR=str(layout.state_dir), PYSPARK_SUBMIT_ARGS="--driver-memory 512m pyspark-shell"
    )
    env.pop("KBOT_LAKE_URI", None)
    child = subprocess.Popen(
        [sys.executable, "-m", "lake.cli", "ingest", "--master", "local[1]", "--json"],
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:

        def running() -> None:  # the wait's check: an ingest that exited will never claim it
            assert child.poll() is None, child.communicate()

        wait_until(
            lambda: list(layout.processing.glob("*/" + TXN_FILE)),
            300,  # a cold Spark start on a busy 2-core machine
            "the ingest to claim its batch",
            interval=0.05,
            check=running,
        )
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)  # the process group: the Python driver and its JVM
        child.communicate()
    assert set(where_are(layout, ["a.jsonl", "b.jsonl"]).values()) <= {"processing", "done"}
    Ingestor(spark, layout).run()
    assert len(lake_rows(spark, layout)) == n
    assert where_are(layout, ["a.jsonl", "b.jsonl"]) == {"a.jsonl": "done", "b.jsonl": "done"}
    assert len(local_commits(layout.table)) == 1


def test_incremental_rollups_equal_a_rebuild_with_late_and_stale_samples(spark, layout):
    """Batch by batch, each recomputing only the minutes it touched, the rollup tables come out
    exactly as rolled up from the whole raw table at once - with a late sample that moves a
    counter's step into an earlier minute, and a gap longer than the staleness window."""
    from pyspark.testing import assertDataFrameEqual

    from lake.rollups import STALE_S
    from spark_queries.rollup import coarser_rollup, minute_rollup

    t0 = int(dt.datetime(2024, 5, 1, 10, 57, tzinfo=dt.timezone.utc).timestamp())

    def counter(offset_s, value, broker=101):
        return row((t0 + offset_s) * 1_000_000, metric="IsrShrinksPerSec", broker=broker, value=float(value))

    batches = [
        [counter(s, s) for s in range(0, 60, 15)],  # 10:57:00-10:57:45, one a second
        # 10:58:00-11:00:30 every 30 s but 10:59:30; broker 102's first sample
        [counter(s, s) for s in range(60, 240, 30) if s != 150] + [counter(0, 5, broker=102)],
        # late, 10:59:30: 11:00:00 now steps from it, so minute 11:00 changes though not touched
        [counter(150, 150)],
        [counter(255, 300), counter(255 + STALE_S + 60, 900)],  # 11:01:15, then after a stale gap
    ]
    report = None
    for i, rows in enumerate(batches):
        land(layout, f"{i}.jsonl", rows)
        report = Ingestor(spark, layout).run()
        assert report.rows == len(rows)
    assert report is not None and report.batches[0].minutes  # the last batch's minutes only
    assert len(report.batches[0].minutes) == 2

    raw = spark.read.format("delta").load(layout.table)
    expected_1m = minute_rollup(raw, stale_s=STALE_S)
    got_1m = spark.read.format("delta").load(layout.rollup("1m"))
    assertDataFrameEqual(got_1m, expected_1m)
    assertDataFrameEqual(spark.read.format("delta").load(layout.rollup("1h")), coarser_rollup(expected_1m, 3600))
    # 10:59 gained the late step (30 + 30), 11:00 lost it; after the stale gap the series starts
    # afresh (inc null), as does broker 102's first sample
    by_minute = {
        (r["bucket"].astimezone(dt.timezone.utc).strftime("%H:%M"), r["broker"]): r["inc"]
        for r in got_1m.filter("metric = 'IsrShrinksPerSec'").collect()
    }
    assert by_minute[("10:59", 101)] == 60.0 and by_minute[("10:57", 102)] is None
    stale = dt.datetime.fromtimestamp(t0 + 255 + STALE_S + 60, dt.timezone.utc).strftime("%H:%M")
    assert by_minute[(stale, 101)] is None


def test_rollup_files_keep_each_series_rows_together(spark, layout):
    """Inside every rollup file the rows are in series order (metric, topic, partition, broker,
    bucket), whatever order the samples landed in: a one-partition trend then reads a few Parquet
    pages of a day, not all of it (the speed is scripts/bench_lake.py's)."""
    import random

    import pyarrow.parquet as pq

    from lake.rollups import SERIES_ORDER

    t0 = int(dt.datetime(2024, 5, 1, 10, 0, tzinfo=dt.timezone.utc).timestamp())
    rows = [
        row((t0 + s) * 1_000_000, metric=m, broker=b, topic=t, partition=p, value=float(s))
        for s in range(0, 600, 30)
        for m in ("LogEndOffset", "Size")
        for t in ("orders", "audit")
        for p in range(3)
        for b in (101, 102)
    ]
    random.Random(7).shuffle(rows)
    land(layout, "a.jsonl", rows)
    ingestor = Ingestor(spark, layout)
    ingestor.run()
    ingestor.flush_rollups()  # the open hour's row too
    for res in ("1m", "1h"):
        files = sorted(Path(layout.rollup(res)).rglob("*.parquet"))
        assert files, res
        seen = 0
        for f in files:
            table = pq.read_table(f, columns=list(SERIES_ORDER))
            keys = list(zip(*(table.column(c).to_pylist() for c in SERIES_ORDER)))
            assert keys == sorted(keys), f"{res} file {f.name} is not in series order"
            seen += len(keys)
        assert seen == 2 * 2 * 3 * 2 * (10 if res == "1m" else 1)


def test_pending_hours_an_older_version_left_become_their_minutes(layout):
    """rollups.pending used to hold hours ("cluster|date|hour"); after an upgrade those are still
    due, as the hour and its 60 minutes, and a count kept beside a minute of the new format adds up."""
    layout.rollups_pending_file.write_text(json.dumps({"dev|2024-05-01|10": 2, "2024-05-01T10:07": 1, "junk": 3}))
    ingestor = Ingestor(None, layout, rollup_every_s=60)
    minutes = ingestor.pending_minutes()
    assert len(minutes) == 60 and minutes[0] == "2024-05-01T10:00" and minutes[-1] == "2024-05-01T10:59"
    assert ingestor._read_pending()["2024-05-01T10:07"] == 3
    assert ingestor.pending_hours() == ["2024-05-01T10"]


def test_an_open_hour_is_read_from_its_minutes_until_it_closes(spark, layout):
    """The hour rollup is written once an hour has closed; until then a 1-hour read takes the
    hour from the minute rollup, so a trend still reaches the newest minute."""
    import time

    from lake.service import LakeView

    now = time.time()
    land(
        layout,
        "a.jsonl",
        [
            row(int((now - 60) * 1e6), metric="IsrShrinksPerSec", value=1.0),
            row(int((now - 30) * 1e6), metric="IsrShrinksPerSec", value=4.0),
        ],
    )
    ingestor = Ingestor(spark, layout)  # rollups after every batch
    ingestor.run()
    hour_key = dt.datetime.fromtimestamp(now - 30, dt.timezone.utc).strftime("%Y-%m-%dT%H")
    assert hour_key in ingestor.pending_hours()  # open: its row is not written yet
    hour_rows = spark.read.format("delta").load(layout.rollup("1h")) if os.path.isdir(layout.rollup("1h")) else None
    assert hour_rows is None or hour_rows.count() == 0

    view = LakeView(spark, layout.table)
    start = dt.datetime.fromtimestamp(now - 7 * 86400, dt.timezone.utc)
    end = dt.datetime.fromtimestamp(now + 3600, dt.timezone.utc)

    def summary(df):
        r = df.filter("metric = 'IsrShrinksPerSec'").agg({"count": "sum", "inc": "sum", "max": "max"}).first()
        return r["sum(count)"], r["sum(inc)"], r["max(max)"]

    assert summary(view.rollup("1h", start, end)) == (2, 3.0, 4.0)
    # at shutdown the hour is written; read an hour later (the hour table itself) it is the same
    ingestor.flush_rollups()
    assert ingestor.pending_hours() == []
    assert summary(spark.read.format("delta").load(layout.rollup("1h"))) == (2, 3.0, 4.0)
    later = LakeView(spark, layout.table).rollup("1h", start, end + dt.timedelta(hours=3), now=now + 3 * 3600)
    assert summary(later) == (2, 3.0, 4.0)


def test_a_rollup_table_from_before_the_seconds_column_gains_it_and_still_answers(spark, layout):
    """A lake whose rollup tables an older version wrote has no `seconds` column. It must still
    answer a counter's history (its rows count as seen for their whole width), and the next
    rollup write adds the column: older rows hold null, new rows the seconds their steps span."""
    from lake.queries import q_history
    from lake.schema import ROLLUP_PARTITIONS
    from lake.service import LakeView

    t0 = int(dt.datetime(2024, 5, 1, 10, 0, tzinfo=dt.timezone.utc).timestamp())

    def counter(offset_s):  # 10 events/s, sampled every 15 s
        return row((t0 + offset_s) * 1_000_000, metric="BytesInPerSec", value=10.0 * offset_s)

    land(layout, "a.jsonl", [counter(s) for s in range(0, 180, 15)])  # 10:00-10:02
    Ingestor(spark, layout).run()
    path = layout.rollup("1m")
    older = spark.read.format("delta").load(path).drop("seconds").localCheckpoint()
    older.write.format("delta").mode("overwrite").option("overwriteSchema", "true").partitionBy(
        *ROLLUP_PARTITIONS["1m"]
    ).save(path)
    assert "seconds" not in spark.read.format("delta").load(path).columns

    start = dt.datetime.fromtimestamp(t0, dt.timezone.utc)
    end = start + dt.timedelta(minutes=10)

    def per_minute():
        out = q_history(LakeView(spark, layout.table), start, end, "BytesInPerSec", None, None, None, 60)
        assert out["resolution"] == "1m"
        return {r["bucket"] - t0: r["value"] for r in out["rows"]}

    # the first minute has three 15 s steps: taken as a whole minute it reads 450 / 60
    assert per_minute() == {0: 7.5, 60: 10.0, 120: 10.0}

    land(layout, "b.jsonl", [counter(s) for s in range(180, 300, 15)])  # 10:03-10:04
    Ingestor(spark, layout).run()
    minutes = spark.read.format("delta").load(path)
    assert "seconds" in minutes.columns
    seconds = {int(r["bucket"].timestamp()) - t0: r["seconds"] for r in minutes.collect()}
    assert seconds == {0: None, 60: None, 120: None, 180: 60.0, 240: 60.0}
    assert per_minute() == {0: 7.5, 60: 10.0, 120: 10.0, 180: 10.0, 240: 10.0}
    # rebuilt by this version, the first minute reads at the rate its 45 s were seen at
    from lake.rollups import rebuild

    rebuild(spark, layout.table)
    assert per_minute() == {0: 10.0, 60: 10.0, 120: 10.0, 180: 10.0, 240: 10.0}


def test_the_newest_commit_read_from_the_log_is_the_one_delta_reports(spark, layout):
    """The ingest reads a local table's newest commit from its JSON log (no Spark job): the
    same version and metadata as Delta's history, ours or not (another writer's has none)."""
    from delta.tables import DeltaTable

    from lake import delta

    def from_history():
        row = DeltaTable.forPath(spark, layout.table).history(1).select("version", "userMetadata").first()
        return int(row["version"]), delta._meta(row["userMetadata"])

    two_hours(layout)
    report = Ingestor(spark, layout).run()
    local = delta._local_last_commit(layout.table)
    assert local == from_history() and local[1]["batch"] == report.batches[0].batch_id
    spark.read.format("delta").load(layout.table).limit(1).write.format("delta").mode("append").save(layout.table)
    assert delta._local_last_commit(layout.table) == from_history() == (local[0] + 1, None)


def test_the_staged_rows_are_the_rows_spark_reads_from_the_json(spark, tmp_path):
    """The commit reads the rows the landing check parsed (Parquet, staged) instead of the JSON:
    they must be exactly what Spark's JSON reader makes of the same file - labels of several
    shapes (absent, null, empty, keys in any order, a key some lines lack), unicode, null
    topic/partition, integer and exponent values - over several check blocks."""
    from pyspark.testing import assertDataFrameEqual

    from lake.ingest import landing_schema, scan_landing_file

    rows = [
        row(T10 + i, metric=m, broker=b, topic=t, partition=p, labels=lab, value=v)
        for i, (m, b, t, p, lab, v) in enumerate(
            [
                ("LogEndOffset", 101, "orders", 0, None, 1200.0),
                ("RequestQueueTimeMs", 101, None, None, {"request": "Produce", "quantile": "0.99"}, 2.5),
                ("RequestQueueTimeMs", 102, None, None, {"quantile": "0.50", "request": "Fetch"}, 1e-3),
                ("CommittedOffset", -1, "zamówienia-ü", 7, {"group": "grupa-€"}, 12345678901234.0),
                ("UnderReplicatedPartitions", 2147483647, None, None, {}, -0.0),
                ("Size", 103, "t", 2147483647, None, 1.5e300),
            ]
        )
    ]
    rows += [row(T11 + i, metric="Size", topic="t", partition=i % 7, value=float(i)) for i in range(3000)]
    f = tmp_path / "a.jsonl"
    write_landing_file(tmp_path, rows, f.name)
    text = f.read_text().replace('"value":12345678901234.0', '"value":12345678901234')  # an integer literal
    f.write_text(text)
    stage = tmp_path / "stage" / "a.jsonl.parquet"
    stage.parent.mkdir()
    import lake.landing_check as lc

    n, reason, _ = lc.scan_fast(f, stage=stage, chunk_bytes=16_384)  # several blocks
    assert (n, reason) == (len(rows), None) and stage.is_file()
    from_json = spark.read.schema(landing_schema()).option("mode", "FAILFAST").json(f.as_uri())
    from_stage = spark.read.schema(landing_schema()).parquet(stage.as_uri())
    assertDataFrameEqual(from_stage, from_json)
    # a file the fast path does not vouch for (a blank line) is not staged: Spark reads its JSON
    f.write_text(text + "\n")
    assert scan_landing_file(f, stage=stage)[:2] == (len(rows), None) and not stage.exists()


def test_a_batch_of_staged_and_unstaged_files_commits_every_row_once(spark, layout):
    """One batch mixing a file the check staged with one it left to Spark's JSON reader (a
    blank line sends it to the reference check): every row once, and no stage left behind."""
    land(layout, "a.jsonl", [row(T10, value=1.0), row(T10, broker=102, value=2.0)])
    land(layout, "b.jsonl", [row(T11, value=3.0)])
    with open(layout.landing / "b.jsonl", "a") as f:
        f.write("\n")
    report = Ingestor(spark, layout).run()
    assert (report.rows, report.files) == (3, 2)
    assert sorted(r.value for r in lake_rows(spark, layout)) == [1.0, 2.0, 3.0]
    assert not list(layout.processing.iterdir())


def test_a_recovered_batch_is_found_in_the_log_when_other_commits_came_after_it(spark, layout):
    """A fresh batch is appended without Delta's txn (no commit can hold it yet; Delta 4.2 checks
    a txn by rebuilding the table's state); its commit names it.  A crash after that commit and
    another writer's commits after it: the recovery finds the batch in the log, not only as the
    newest commit, and writes nothing twice."""
    from lake import delta
    from lake.ingest import batch_committed

    two_hours(layout)
    with pytest.raises(Crash):
        Ingestor(spark, layout, crash_hook=crash_at("committed")).run()
    log = Path(layout.table) / "_delta_log"
    actions = [json.loads(line) for line in sorted(log.glob("*.json"))[-1].read_text().splitlines()]
    assert not any("txn" in a for a in actions)  # no SetTransaction
    assert any('"batch"' in (a.get("commitInfo") or {}).get("userMetadata", "") for a in actions)
    batch_id = next(layout.processing.iterdir()).name
    assert batch_committed(spark, layout.table, batch_id)
    assert not batch_committed(spark, layout.table, "b20240501T100000000000-deadbeef")
    extra = read_lake(spark, layout.table).limit(1).localCheckpoint()
    delta.append(extra, layout.table, ["cluster", "date", "hour"])  # another writer, twice
    delta.append(extra, layout.table, ["cluster", "date", "hour"])
    report = Ingestor(spark, layout).run()
    assert [(b.recovered, b.already_committed) for b in report.batches] == [(True, True)]
    assert len(lake_rows(spark, layout)) == 7 + 2
    assert where_are(layout, ["a.jsonl", "b.jsonl"]) == {"a.jsonl": "done", "b.jsonl": "done"}


def test_a_recovered_batch_not_committed_is_written_under_its_delta_txn(spark, layout):
    """A batch that crashed before its commit is written on recovery with txnAppId/txnVersion,
    so Delta itself refuses that version a second time."""
    two_hours(layout)
    with pytest.raises(Crash):
        Ingestor(spark, layout, crash_hook=crash_at("validated")).run()
    version = json.loads((next(layout.processing.iterdir()) / TXN_FILE).read_text())["version"]
    report = Ingestor(spark, layout).run()
    assert [(b.recovered, b.already_committed) for b in report.batches] == [(True, False)]
    commit = sorted((Path(layout.table) / "_delta_log").glob("*.json"))[-1].read_text()
    txn = next(a["txn"] for a in map(json.loads, commit.splitlines()) if "txn" in a)
    assert (txn["appId"], txn["version"]) == (layout.app_id(), version)


def test_a_batch_older_than_the_log_stops_the_run_instead_of_a_guess(spark, layout):
    """When the Delta log no longer reaches back to a batch's claim, whether it was committed
    cannot be told: the lookup says so instead of answering no (which would write it twice)."""
    from lake.errors import LakeError
    from lake.ingest import batch_committed

    for name in ("a", "b"):
        land(layout, f"{name}.jsonl", [row(T10, value=1.0)])
        Ingestor(spark, layout, max_files=1).run()
    (Path(layout.table) / "_delta_log" / f"{0:020d}.json").unlink()  # as Delta's log cleanup does
    with pytest.raises(LakeError, match="cannot tell whether batch"):
        batch_committed(spark, layout.table, "b20200101T000000000000-deadbeef")
