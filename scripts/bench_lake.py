#!/usr/bin/env python
"""Benchmark: the Delta Lake lake (lake.service.LakeService) vs DuckDB on the same Parquet
files, side by side in one run (medians; machine load printed).

Parts
-----
(a) 15-minute incident window (why URP's question, ``window_queries.urp.URP_QUESTION``, and
    hot-partitions' ranking, ``window_queries.hot.ask_hot``: top 10 on the window mean with the
    chart of the first 5, the questions the bot asks during an incident) at ``--partitions``
    partitions: the bot's own path, answered in its process (``LakeService.ask_window``: delta-rs
    reads the Delta snapshot's files of the window's hours, DuckDB runs the questions' SQL), and
    DuckDB alone (``read_parquet`` of the same files, the same partition and ts filters,
    equivalent SQL).  Then an hour and 30 minutes of hot partitions in process, from the minute
    rollup with a raw tail (what ``ask_hot`` picks) and from the raw samples, beside DuckDB; and
    the digest's day of hot partitions (top 5 on the mean) in process beside DuckDB.
(b) 7-day trend of one partition (``history LogEndOffset --topic T --partition P --since 7d``:
    3-hour buckets): Spark from the 1-hour rollup vs DuckDB on the raw Parquet.
(c) ingest throughput: landing files written as the collector writes them, ingested by the real
    ``lake.ingest.Ingestor`` (one Delta commit per batch, rollups updated), rows/s.
(d) compaction: the lake ingested in many small batches has many small files per hour; file
    count and the in-process window's time (as (a)) before and after ``OPTIMIZE ... ZORDER BY
    (topic, partition)``.

Data: ``tools.synthetic`` (UnderReplicatedPartitions and LogEndOffset only, ``leo_replicas=1``,
6 brokers, 30 s resolution, a broker loss and a hot key at the end of the last day).  The
issue's 30,000 partitions x 7 days needs tens of minutes to generate on 2 cores: pick a size the
machine can build in a few minutes (``--partitions``, ``--days``); the report prints the size.
Before any OPTIMIZE every file of the Delta table is live, so DuckDB's ``read_parquet`` reads
exactly the rows the Delta snapshot holds.

(e) with ``--connect``: (b) again, warm through a Spark Connect server (the way ``kbot run``
    serves every bot process), DuckDB side by side in the same child process, and (a)'s
    in-process window in that process beside the remote session.  Classic and Connect sessions
    cannot share a process, so the parent stops its own Spark, starts the server
    (``lake.connect.start_server``) and runs the series in a child.

Usage::

    .venv/bin/python scripts/bench_lake.py --root /tmp/kbot-bench --partitions 3000 --days 7 [--connect]

DuckDB is only the benchmark's peer (pip install duckdb, the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from kbot_settings import load as load_settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

UTC = dt.timezone.utc
DAY0 = dt.datetime(2024, 5, 1, tzinfo=UTC)
CLUSTER = "bench"
METRICS = ["UnderReplicatedPartitions", "LogEndOffset"]


# --------------------------------------------------------------------------- machine


def machine_info() -> dict:
    import duckdb
    import pyspark

    from tools.machine import cpu_model

    cpu = cpu_model()
    mem = "?"
    try:
        kb = int(
            next(
                line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")
            ).split()[1]
        )
        mem = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, StopIteration):
        pass
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[:1]
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": mem,
        "os": platform.platform(),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "duckdb": duckdb.__version__,
        "java": java[0] if java else "?",
        "load_avg": os.getloadavg(),
    }


# --------------------------------------------------------------------------- queries


#: The chart hot-partitions draws with its ranking (commands.hot_partitions.CHART_LINES).
CHART = 5


def bot_window(lake, loop, start, end) -> dict:
    """The incident window as the bot answers it, in its process (``LakeService.ask_window``):
    why URP's question, then hot-partitions' ranking (top 10 on the window mean, as DuckDB's
    query ranks, with the chart of the first 5).  ``seconds``: each question's own time."""
    from window_queries.urp import URP_QUESTION

    t0 = time.perf_counter()
    urp = loop.run_until_complete(lake.ask_window(URP_QUESTION, start, end, timeout=3600))
    t1 = time.perf_counter()
    hot = bot_hot(lake, loop, start, end)
    t2 = time.perf_counter()
    return {
        "urp": sorted((r["broker"], r["shape"]) for r in urp["trend"]),
        **hot,
        "seconds": {"urp": t1 - t0, "hot": t2 - t1},
    }


def bot_hot(lake, loop, start, end, raw: bool = False, top: int = 10, chart: int = CHART) -> dict:
    """hot-partitions' ranking in process (``window_queries.hot.ask_hot``: the minute rollup with a
    raw tail for a long window, else raw samples); ``raw``: the raw samples whatever the window."""
    from window_queries.hot import HOT_QUESTION, ask_hot

    async def ask(question, s, e, *args):
        return await lake.ask_window(question, s, e, *args, timeout=3600)

    if raw:
        out = loop.run_until_complete(ask(HOT_QUESTION, start, end, None, top, "mean", chart))
    else:
        out = loop.run_until_complete(ask_hot(ask, start, end, None, top, "mean", chart))
    hot = out["rows"]
    return {"top": (hot[0]["topic"], hot[0]["partition"]) if hot else None, "resolution": out["resolution"]}


def spark_trend(view, start, end, topic, partition) -> dict:
    from lake.queries import q_history

    out = q_history(view, start, end, "LogEndOffset", topic, None, partition, 3 * 3600)
    return {"rows": len(out["rows"]), "resolution": out["resolution"], "checksum": sum(r["value"] for r in out["rows"])}


DUCK_SRC = (
    "read_parquet($glob, hive_partitioning = true, hive_types = {'cluster': VARCHAR, 'date': VARCHAR, 'hour': INTEGER})"
)

DUCK_URP = f"""
WITH src AS (SELECT * FROM {DUCK_SRC}
             WHERE cluster = $cluster AND date BETWEEN $d0 AND $d1 AND hour BETWEEN $h0 AND $h1
               AND ts >= to_timestamp($s) AND ts < to_timestamp($e) AND metric = 'UnderReplicatedPartitions'),
u AS (SELECT broker, ts, max(value) AS v FROM src GROUP BY broker, ts),
c AS (SELECT broker, ts, v, coalesce((v <> lag(v) OVER (PARTITION BY broker ORDER BY ts))::INT, 0) AS changed FROM u),
st AS (SELECT broker, count(*) AS samples, min(v) AS mn, max(v) AS mx, avg(v) AS mean, arg_max(v, ts) AS last,
              sum(changed) AS changes, count_if(v > 0) AS nonzero FROM c GROUP BY broker),
md AS (SELECT broker, arg_max(v, (n, v)) AS modal, max(n) AS modal_n
       FROM (SELECT broker, v, count(*) AS n FROM u WHERE v > 0 GROUP BY broker, v) GROUP BY broker)
SELECT broker, CASE WHEN mx <= 0 THEN 'zero'
                    WHEN nonzero >= 3 AND modal_n / nonzero >= 0.8 AND changes <= greatest(2.0, 0.2 * (samples - 1)) THEN 'flat'
                    ELSE 'fluctuating' END AS shape
FROM st LEFT JOIN md USING (broker) ORDER BY broker
"""

DUCK_HOT = f"""
WITH src AS (SELECT topic, partition, broker, ts, value FROM {DUCK_SRC}
             WHERE cluster = $cluster AND date BETWEEN $d0 AND $d1 AND hour BETWEEN $h0 AND $h1
               AND ts >= to_timestamp($s) AND ts < to_timestamp($e) AND metric = 'LogEndOffset'
               AND topic IS NOT NULL AND partition IS NOT NULL),
st AS (SELECT *, greatest(value - lag(value) OVER (PARTITION BY topic, partition, broker ORDER BY ts), 0) AS step
       FROM src),
rg AS (SELECT topic, partition, broker, coalesce(sum(step), 0) AS growth,
              (epoch_us(max(ts)) - epoch_us(min(ts))) / 1e6 AS elapsed, arg_max(value, ts) AS last_value,
              avg(value) AS mean_value FROM st GROUP BY topic, partition, broker),
p AS (SELECT topic, partition, max(CASE WHEN elapsed > 0 THEN growth / elapsed END) AS rps,
             arg_max(broker, (last_value, mean_value, -broker)) AS leader, count(*) AS replicas
      FROM rg GROUP BY topic, partition),
m AS (SELECT topic, median(rps) AS med FROM p GROUP BY topic)
SELECT topic, partition, leader, rps, med, rps / nullif(med, 0) AS skew,
       row_number() OVER (ORDER BY rps DESC NULLS LAST, topic, partition) AS rnk
FROM p JOIN m USING (topic) QUALIFY rnk <= 10 ORDER BY rnk
"""

DUCK_TREND = f"""
SELECT (epoch(ts)::BIGINT // 10800) * 10800 AS b, broker, max(value) AS v FROM {DUCK_SRC}
WHERE cluster = $cluster AND date BETWEEN $d0 AND $d1 AND ts >= to_timestamp($s) AND ts < to_timestamp($e)
  AND metric = 'LogEndOffset' AND topic = $topic AND partition = $partition
GROUP BY b, broker ORDER BY b, broker
"""


def _glob(path: Path) -> str:
    return f"{path}/cluster=*/date=*/hour=*/*.parquet"


def _window_params(path: Path, start: dt.datetime, end: dt.datetime) -> dict:
    last = end - dt.timedelta(microseconds=1)
    return {
        "glob": _glob(path),
        "cluster": CLUSTER,
        "d0": start.strftime("%Y-%m-%d"),
        "d1": last.strftime("%Y-%m-%d"),
        "h0": start.hour if start.date() == last.date() else 0,
        "h1": last.hour if start.date() == last.date() else 23,
        "s": start.timestamp(),
        "e": end.timestamp(),
    }


def duck_window(con, path: Path, start: dt.datetime, end: dt.datetime) -> dict:
    params = _window_params(path, start, end)
    urp = con.execute(DUCK_URP, params).fetchall()
    return {"urp": sorted((b, s) for b, s in urp), **duck_hot(con, params)}


def duck_hot(con, params: dict) -> dict:
    hot = con.execute(DUCK_HOT, params).fetchall()
    return {"top": (hot[0][0], hot[0][1]) if hot else None}


def duck_trend(con, path: Path, start, end, topic, partition) -> dict:
    params = {
        "glob": _glob(path),
        "cluster": CLUSTER,
        "d0": start.strftime("%Y-%m-%d"),
        "d1": (end - dt.timedelta(microseconds=1)).strftime("%Y-%m-%d"),
        "s": start.timestamp(),
        "e": end.timestamp(),
        "topic": topic,
        "partition": partition,
    }
    rows = con.execute(DUCK_TREND, params).fetchall()
    return {"rows": len(rows), "checksum": sum(r[2] for r in rows)}


# --------------------------------------------------------------------------- runner


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def med(times: list[float]) -> dict:
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "runs": len(times)}


def side_by_side(runs: int, named: dict) -> dict:
    """Run each named callable once untimed (warm caches), then ``runs`` times interleaved."""
    for fn in named.values():
        fn()
    times = {k: [] for k in named}
    last = {}
    for _ in range(runs):
        for k, fn in named.items():
            t, last[k] = timed(fn)
            times[k].append(t)
    return {k: med(v) for k, v in times.items()} | {"results": last}


def file_count(path: Path) -> int:
    return sum(1 for _ in path.glob("cluster=*/date=*/hour=*/*.parquet"))


def ingest_lake(spark, root: Path, partitions: int, batches: int, minutes_per_batch: int) -> dict:
    """(c) + the small-file lake for (d): synthetic rows written as landing files, one batch each."""
    from lake.collector import write_landing_file
    from lake.ingest import Ingestor, LakeLayout
    from tools.synthetic import generate

    src = root / "landing-src"
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(root / "ingest", ignore_errors=True)
    generate(
        str(src),
        cluster=CLUSTER,
        start=DAY0,
        hours=1,
        brokers=6,
        topics=max(1, partitions // 300),
        partitions_per_topic=partitions // max(1, partitions // 300),
        metrics=METRICS,
        leo_replicas=1,
        spark=spark,
        table_format="parquet",
    )
    layout = LakeLayout.from_settings(load_settings({}), lake_dir=str(root / "ingest"))
    rows = spark.read.parquet(str(src)).collect()
    per = {}
    for r in rows:
        k = int((r.ts.astimezone(UTC) - DAY0).total_seconds() // 60 // minutes_per_batch)
        per.setdefault(k, []).append(
            {
                "ts": int(r.ts.astimezone(UTC).timestamp() * 1_000_000),
                "cluster": CLUSTER,
                "broker": r.broker,
                "metric": r.metric,
                "topic": r.topic,
                "partition": r.partition,
                "labels": r.labels,
                "value": r.value,
            }
        )
    for k in sorted(per)[:batches]:
        write_landing_file(layout.landing, per[k], f"batch-{k:04d}.jsonl")
    total = sum(len(per[k]) for k in sorted(per)[:batches])
    t0 = time.perf_counter()
    report = Ingestor(spark, layout, max_files=1).run()
    secs = time.perf_counter() - t0
    return {
        "layout": layout,
        "rows": report.rows,
        "expected_rows": total,
        "batches": len(report.batches),
        "seconds": secs,
        "rows_per_s": report.rows / secs if secs else 0.0,
        "rollup_seconds": sum(b.rollup_seconds for b in report.batches),
    }


def _windows(a) -> tuple[Path, tuple[dt.datetime, dt.datetime], tuple[dt.datetime, dt.datetime]]:
    """The lake of this size and the two windows (a) and (b) ask about."""
    path = Path(a.root) / f"delta-p{a.partitions}-d{a.days}"
    last_day = DAY0 + dt.timedelta(days=a.days - 1)
    window = (last_day + dt.timedelta(hours=23, minutes=40), last_day + dt.timedelta(hours=23, minutes=55))
    te = DAY0 + dt.timedelta(days=a.days)
    return path, window, (max(DAY0, te - dt.timedelta(days=7)), te)


def run_connect_series(a) -> dict:
    """(e): a Connect server for the run, the series in a child process (see the module doc)."""
    from lake import connect

    lake_dir = Path(a.root) / "connect-server"
    t0 = time.perf_counter()
    info = connect.start_server(load_settings(), a.connect_port, lake_dir=lake_dir)
    started = time.perf_counter() - t0
    try:
        cmd = [sys.executable, __file__, "--connect-url", info.url, "--root", a.root]
        cmd += ["--partitions", str(a.partitions), "--days", str(a.days), "--runs", str(a.runs)]
        cmd += ["--duckdb-threads", str(a.duckdb_threads)]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        if res.returncode != 0:
            print("(e) the Connect series failed:", res.stderr.strip()[-2000:], flush=True)
            return {"error": res.stderr.strip()[-2000:]}
        out = json.loads(res.stdout.strip().splitlines()[-1])
    finally:
        connect.stop_server(load_settings(), lake_dir)
    out["server_start_s"] = started
    w, t = out["window"], out["trend"]
    print(
        f"(e) through Spark Connect ({info.url}, server started in {started:.0f}s): {out['days']}-day trend "
        f"from the {out['resolution']} rollup {t['rollup_connect']['median']:.3f}s vs DuckDB on raw Parquet "
        f"{t['duckdb_raw']['median']:.3f}s; beside the remote session, the 15-minute window in process "
        f"{w['in_process']['median']:.3f}s vs DuckDB {w['duckdb']['median']:.3f}s; results agree: "
        f"{out['agree']}; load during the series {out['load_avg'][0]:.1f}",
        flush=True,
    )
    return out


def connect_series(a) -> int:
    """The child of (e): one remote session, the same questions as (a) and (b), DuckDB beside it."""
    import duckdb

    from lake.service import LakeService

    path, (ws, we), (ts, te) = _windows(a)
    con = duckdb.connect()
    con.execute(f"SET threads = {int(a.duckdb_threads)}")
    lake = LakeService(str(path), master=a.connect_url, cluster=CLUSTER, query_timeout_s=3600, warm=False).start()
    loop = asyncio.new_event_loop()
    try:
        if not loop.run_until_complete(lake.wait_ready(600)):
            raise SystemExit(f"no session on {a.connect_url}: {lake.status()}")

        def q(fn, *args):
            return loop.run_until_complete(lake.query(fn, *args, timeout=3600))

        trend = side_by_side(
            a.runs,
            {
                "rollup_connect": lambda: q(spark_trend, ts, te, "topic-000", 3),
                "duckdb_raw": lambda: duck_trend(con, path, ts, te, "topic-000", 3),
            },
        )
        tres = trend.pop("results")
        # the window's questions are answered in this process whatever Spark is: beside the session
        window = side_by_side(
            a.runs,
            {"in_process": lambda: bot_window(lake, loop, ws, we), "duckdb": lambda: duck_window(con, path, ws, we)},
        )
        wres = window.pop("results")
    finally:
        lake.stop()
        loop.close()
    agree = (
        wres["in_process"]["top"] == wres["duckdb"]["top"]
        and tres["rollup_connect"]["rows"] == tres["duckdb_raw"]["rows"]
    )
    print(
        json.dumps(
            {
                "window": window,
                "trend": trend,
                "resolution": tres["rollup_connect"]["resolution"],
                "days": (te - ts).days,
                "agree": agree,
                "load_avg": os.getloadavg(),
            },
            default=str,
        )
    )
    return 0


def ingest_and_compaction(a, spark, loop, root: Path, out: dict) -> None:
    """(c) and (d)."""
    from lake.maintenance import maintain
    from lake.service import LakeService

    ing = ingest_lake(spark, root, a.ingest_partitions, a.ingest_batches, 5)
    layout = ing.pop("layout")
    out["c_ingest"] = ing
    print(
        f"(c) ingest: {ing['rows']:,} rows in {ing['batches']} batches in {ing['seconds']:.1f}s = "
        f"{ing['rows_per_s']:,.0f} rows/s (of which rollup updates {ing['rollup_seconds']:.1f}s)",
        flush=True,
    )

    small = LakeService(layout.table, cluster=CLUSTER, spark=spark, query_timeout_s=3600, warm=False).start()
    loop.run_until_complete(small.wait_ready(600))
    cs, ce = DAY0 + dt.timedelta(minutes=40), DAY0 + dt.timedelta(minutes=55)

    def window_small():
        res = bot_window(small, loop, cs, ce)
        res.pop("seconds")
        return res

    before_files = file_count(Path(layout.table))
    before = side_by_side(a.runs, {"window": window_small})
    t0 = time.perf_counter()
    rep = maintain(spark, layout.table, now=DAY0 + dt.timedelta(hours=2), lookback=dt.timedelta(days=1), vacuum=False)
    opt_s = time.perf_counter() - t0
    after = side_by_side(a.runs, {"window": window_small})
    out["d_compaction"] = {
        "files_before": rep.files_before.get("raw"),
        "files_after": rep.files_after.get("raw"),
        "parquet_files_on_disk_before": before_files,
        "optimize_seconds": opt_s,
        "window_before": before["window"],
        "window_after": after["window"],
        "same_answer": before["results"]["window"] == after["results"]["window"],
    }
    d = out["d_compaction"]
    print(
        f"(d) compaction of {a.ingest_batches} small batches: {d['files_before']} -> {d['files_after']} files "
        f"(OPTIMIZE ZORDER in {opt_s:.1f}s); 15-min window {d['window_before']['median']:.3f}s -> "
        f"{d['window_after']['median']:.3f}s; same answer: {d['same_answer']}",
        flush=True,
    )


def window_part(a, lake, loop, con, path: Path, ws: dt.datetime, we: dt.datetime) -> dict:
    """(a): the 15-minute window in process vs DuckDB, then an hour and 30 minutes of hot
    partitions in process from the minute rollup and from raw samples, vs DuckDB."""
    seconds: dict[str, list[float]] = {"urp": [], "hot": []}

    def bot():
        res = bot_window(lake, loop, ws, we)
        for k, v in res.pop("seconds").items():
            seconds[k].append(v)
        return res

    r = side_by_side(a.runs, {"in_process": bot, "duckdb": lambda: duck_window(con, path, ws, we)})
    res = r.pop("results")
    r["per_question"] = {k: med(v[1:]) for k, v in seconds.items()}  # without the warm-up run
    r["agree"] = res["in_process"]["urp"] == res["duckdb"]["urp"] and res["in_process"]["top"] == res["duckdb"]["top"]
    r["top"] = res["in_process"]["top"]
    r["files"] = file_count(path)
    r["ratio_to_duckdb"] = r["in_process"]["median"] / r["duckdb"]["median"]
    print(
        f"\n(a) 15-minute window {ws:%Y-%m-%d %H:%M}-{we:%H:%M} UTC, {a.partitions:,} partitions, "
        f"{r['files']} Parquet files: in process (URP + hot) {r['in_process']['median']:.3f}s "
        f"(URP {r['per_question']['urp']['median']:.3f}s, hot {r['per_question']['hot']['median']:.3f}s) | "
        f"DuckDB {r['duckdb']['median']:.3f}s ({r['ratio_to_duckdb']:.1f}x); results agree: {r['agree']} "
        f"(top {r['top']})",
        flush=True,
    )
    r["longer"] = {}
    for minutes in (60, 30):
        hs = we - dt.timedelta(minutes=minutes)
        h = side_by_side(
            a.runs,
            {
                "rollup": lambda hs=hs: bot_hot(lake, loop, hs, we),
                "raw": lambda hs=hs: bot_hot(lake, loop, hs, we, raw=True),
                "duckdb": lambda hs=hs: duck_hot(con, _window_params(path, hs, we)),
            },
        )
        hres = h.pop("results")
        h["resolution"] = hres["rollup"]["resolution"]
        h["agree"] = hres["rollup"]["top"] == hres["raw"]["top"] == hres["duckdb"]["top"]
        r["longer"][f"{minutes}m"] = h
        print(
            f"(a) {minutes} minutes of hot partitions in process: from the {h['resolution']} table "
            f"{h['rollup']['median']:.3f}s | from raw samples {h['raw']['median']:.3f}s | DuckDB "
            f"{h['duckdb']['median']:.3f}s; results agree: {h['agree']}",
            flush=True,
        )
    # the digest's hot partitions: a day, top 5 on the mean, no chart (from the minute rollup)
    ds = we - dt.timedelta(days=1)
    d = side_by_side(
        a.runs,
        {
            "in_process": lambda: bot_hot(lake, loop, ds, we, top=5, chart=0),
            "duckdb": lambda: duck_hot(con, _window_params(path, ds, we)),
        },
    )
    dres = d.pop("results")
    d["resolution"] = dres["in_process"]["resolution"]
    d["agree"] = dres["in_process"]["top"] == dres["duckdb"]["top"]
    r["digest_day"] = d
    print(
        f"(a) the digest's day of hot partitions in process from the {d['resolution']} table "
        f"{d['in_process']['median']:.3f}s | DuckDB on raw Parquet {d['duckdb']['median']:.3f}s; "
        f"results agree: {d['agree']}",
        flush=True,
    )
    return r


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default="/tmp/kbot-bench", help="where the lakes are generated")
    p.add_argument("--partitions", type=int, default=3000)
    p.add_argument("--days", type=int, default=7)
    p.add_argument("--ingest-partitions", type=int, default=1000, help="partitions of the ingest/compaction lake")
    p.add_argument("--ingest-batches", type=int, default=12, help="5-minute landing files ingested one batch each")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--duckdb-threads", type=int, default=os.cpu_count() or 2)
    p.add_argument("--skip-gen", action="store_true", help="reuse the lake of an earlier run")
    p.add_argument(
        "--rebuild-rollups",
        action="store_true",
        help="with --skip-gen: rebuild the reused lake's rollups (a lake made before a rollup column existed)",
    )
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--skip-ingest", action="store_true", help="leave out (c) ingest and (d) compaction")
    p.add_argument(
        "--connect",
        action="store_true",
        help="also time (b) warm through a Spark Connect server (started for the run, in a child process), and "
        "(a) in process beside it",
    )
    p.add_argument("--connect-port", type=int, default=15702, help="the Connect server's port for --connect")
    p.add_argument("--connect-url", help=argparse.SUPPRESS)  # the child process of --connect
    a = p.parse_args(argv)
    if a.connect_url:
        return connect_series(a)

    import duckdb

    from lake.rollups import rebuild
    from lake.service import LakeService, _session_conf
    from lake.spark import build_session
    from tools.synthetic import broker_loss, generate, hot_key

    info = machine_info()
    print("machine:", json.dumps(info), flush=True)
    print(
        f"settings: Spark {a.master}, driver memory {a.driver_memory}; DuckDB threads {a.duckdb_threads}; "
        f"{a.runs} timed runs per query after one warm-up run; medians",
        flush=True,
    )
    spark = build_session(
        a.master, app_name="kbot-bench", conf=_session_conf(a.master, {"spark.driver.memory": a.driver_memory})
    )
    spark.sparkContext.setLogLevel("ERROR")
    loop = asyncio.new_event_loop()
    con = duckdb.connect()
    con.execute(f"SET threads = {int(a.duckdb_threads)}")
    root = Path(a.root)
    path, (ws, we), (ts, te) = _windows(a)
    out: dict = {"machine": info, "size": {"partitions": a.partitions, "days": a.days}}
    last_day = DAY0 + dt.timedelta(days=a.days - 1)
    incident = last_day + dt.timedelta(hours=23, minutes=20)
    try:
        if not a.skip_gen:
            shutil.rmtree(path, ignore_errors=True)
            topics = max(1, a.partitions // 300)
            t0 = time.perf_counter()
            g = generate(
                str(path),
                cluster=CLUSTER,
                start=DAY0,
                hours=24 * a.days,
                brokers=6,
                topics=topics,
                partitions_per_topic=a.partitions // topics,
                metrics=METRICS,
                leo_replicas=1,
                spark=spark,
                incidents=[
                    broker_loss(2, incident, dt.timedelta(minutes=30)),
                    hot_key("topic-000", 3, incident, "40m"),
                ],
                rollups=False,
                progress=lambda s: print("  gen", s, flush=True),
            )
            gen_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            rb = rebuild(spark, str(path))
            out["generate"] = {
                "rows": g.rows,
                "seconds": gen_s,
                "rollup_seconds": time.perf_counter() - t0,
                "rollup_hours": rb["hours"],
            }
            print(
                f"generated {a.partitions:,} partitions x {a.days} day(s): {g.rows:,} rows in {gen_s:.0f}s; "
                f"rollups of {rb['hours']} hours in {out['generate']['rollup_seconds']:.0f}s",
                flush=True,
            )
        elif a.rebuild_rollups:
            t0 = time.perf_counter()
            rb = rebuild(spark, str(path))
            out["rollups_rebuilt"] = {"hours": rb["hours"], "seconds": time.perf_counter() - t0}
            print(f"rebuilt the rollups of {rb['hours']} hours in {out['rollups_rebuilt']['seconds']:.0f}s", flush=True)
        lake = LakeService(str(path), cluster=CLUSTER, spark=spark, query_timeout_s=3600, warm=False).start()
        loop.run_until_complete(lake.wait_ready(600))

        def q(fn, *args):
            return loop.run_until_complete(lake.query(fn, *args, timeout=3600))

        out["a_window"] = window_part(a, lake, loop, con, path, ws, we)

        r = side_by_side(
            a.runs,
            {
                "rollup": lambda: q(spark_trend, ts, te, "topic-000", 3),
                "duckdb_raw": lambda: duck_trend(con, path, ts, te, "topic-000", 3),
            },
        )
        res = r.pop("results")
        r["resolution"] = res["rollup"]["resolution"]
        r["agree"] = res["rollup"]["rows"] == res["duckdb_raw"]["rows"] and abs(
            res["rollup"]["checksum"] - res["duckdb_raw"]["checksum"]
        ) < 1e-6 * max(1, res["duckdb_raw"]["checksum"])
        out["b_trend"] = r
        print(
            f"(b) {(te - ts).days}-day trend of topic-000-3 (3 h buckets): Spark from {r['resolution']} rollup "
            f"{r['rollup']['median']:.3f}s | DuckDB on raw Parquet {r['duckdb_raw']['median']:.3f}s; "
            f"results agree: {r['agree']}",
            flush=True,
        )

        if not a.skip_ingest:
            ingest_and_compaction(a, spark, loop, root, out)
    finally:
        loop.close()
        spark.stop()
    if a.connect:
        out["e_connect"] = run_connect_series(a)
    out["load_avg_end"] = os.getloadavg()
    print("machine load average at the end:", out["load_avg_end"], flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
