#!/usr/bin/env python
"""Benchmark: the warm Spark lake (lake.service.LakeService) vs DuckDB on the same Parquet files.

Two queries, run side by side on each lake size:

(a) incident window: the last-15-minutes questions the bot asks during an incident,
    ``urp_trend`` and ``hot_partitions(top=10)`` over a 15-minute window.  Spark goes
    through the bot's own path (LakeService.query -> LakeView.window, which lists and opens
    only the hour directories of the window); DuckDB reads
    ``read_parquet('<lake>/**/*.parquet', hive_partitioning)`` with the same window as
    partition (cluster/date/hour) and ts filters, equivalent SQL.
(b) full-history scan: per-partition max LogEndOffset over the whole lake (Spark:
    ``read_lake`` of the root; DuckDB: the same glob), all result rows fetched.  Next to it,
    the *floor*: the same filter and one global max, no grouping: the cheapest full scan
    either engine can do, which bounds how close any full-history query can get.

Data: ``lake.synthetic`` with only the metrics the queries need (UnderReplicatedPartitions,
LogEndOffset), ``leo_replicas=1`` (only the leader reports LogEndOffset: one row per partition
and sample instead of three, to keep 7 days x 30,000 partitions tractable on a small machine),
6 brokers, 30 s resolution, a broker loss and a hot key at the end of day 1 and of the last day.
Each size is grown a day at a time in its own directory, so (a) is measured on the *same*
window (end of day 1) after 1 day and after all days: that shows how (a) depends on history
length.  If generating the large size would exceed ``--gen-budget-min``, generation stops after
the last whole day that fits and the report says so.

Usage::

    .venv/bin/python scripts/bench_lake.py --root /tmp/kbot-bench              # everything
    .venv/bin/python scripts/bench_lake.py --root /tmp/kbot-bench --skip-gen   # reuse the data

DuckDB is only the benchmark's peer (pip install duckdb, the ``bench`` extra).

Last measured (2-core AMD EPYC VM, 24 GB; Spark local[2], DuckDB 2 threads; medians of 5;
7 days x 30,000 partitions = 504 files, 3.2 GB): (a) urp_trend 0.31-0.34 s, hot_partitions
0.72-0.76 s, the same after 1 day and after 7 (DuckDB 0.02 s / 0.11-0.13 s); (b) full scan
34.7 s vs 5.6 s = 6.2x, floor 10.2 s vs 2.4 s = 4.4x: Spark's plain filtered scan of these
files is already further than 3x from DuckDB's on this machine.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

UTC = dt.timezone.utc
DAY0 = dt.datetime(2024, 5, 1, tzinfo=UTC)
CLUSTER = "bench"
METRICS = "UnderReplicatedPartitions,LogEndOffset"


# --------------------------------------------------------------------------- machine


def machine_info() -> dict:
    import duckdb
    import pyspark

    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        kb = int(next(l for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal")).split()[1])
        mem = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, StopIteration):
        pass
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[:1]
    return {
        "cpu": cpu, "cores": os.cpu_count(), "memory": mem, "os": platform.platform(),
        "python": platform.python_version(), "pyspark": pyspark.__version__, "duckdb": duckdb.__version__,
        "java": java[0] if java else "?", "load_avg": os.getloadavg(),
    }


# --------------------------------------------------------------------------- data


def incidents_for(day: int) -> list[str]:
    """A broker loss and a hot key in the last hour of ``day`` (0-based)."""
    d = DAY0 + dt.timedelta(days=day)
    at = (d + dt.timedelta(hours=23, minutes=20)).strftime("%Y-%m-%dT%H:%M")
    return [f"broker_loss:broker=2,at={at},duration=30m", f"hot_key:topic=topic-000,partition=3,at={at},duration=40m"]


def generate_day(path: Path, day: int, partitions: int, days_total: int, master: str, memory: str) -> float:
    topics = max(1, partitions // 300)
    incidents = incidents_for(0) + (incidents_for(days_total - 1) if days_total > 1 else [])
    cmd = [sys.executable, "-m", "lake.synthetic", "--out", str(path), "--cluster", CLUSTER,
           "--start", (DAY0 + dt.timedelta(days=day)).strftime("%Y-%m-%dT%H:%M"), "--hours", "24",
           "--brokers", "6", "--topics", str(topics), "--partitions-per-topic", str(partitions // topics),
           "--resolution", "30", "--metrics", METRICS, "--leo-replicas", "1", "--master", master]
    for inc in incidents:
        cmd += ["--incident", inc]
    env = dict(os.environ, PYSPARK_SUBMIT_ARGS=f"--driver-memory {memory} pyspark-shell")
    t0 = time.monotonic()
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"generation failed: {out.stderr[-2000:]}")
    return time.monotonic() - t0


def lake_stats(path: Path) -> dict:
    files = list(path.glob("cluster=*/date=*/hour=*/*.parquet"))
    days = sorted({f.parent.parent.name for f in files})
    return {"files": len(files), "bytes": sum(f.stat().st_size for f in files), "days": len(days)}


# --------------------------------------------------------------------------- queries


def spark_window(view, start, end) -> dict:
    from spark_queries.hot import hot_partitions
    from spark_queries.urp import urp_trend

    t0 = time.perf_counter()
    w = view.window(start, end)
    urp = urp_trend(w).collect()
    t1 = time.perf_counter()
    hot = hot_partitions(view.window(start, end), top=10).collect()
    t2 = time.perf_counter()
    return {"urp_s": t1 - t0, "hot_s": t2 - t1, "urp": sorted((r.broker, r.shape) for r in urp),
            "top": (hot[0].topic, hot[0].partition) if hot else None}


def spark_full(view) -> dict:
    from pyspark.sql import functions as F

    rows = (view.all().filter(F.col("metric") == F.lit("LogEndOffset"))
            .groupBy("topic", "partition").agg(F.max("value").alias("max_leo")).collect())
    return {"rows": len(rows), "checksum": sum(r.max_leo for r in rows)}


def spark_floor(view) -> dict:
    """The cheapest full scan there is: one filter, one global max, no grouping."""
    from pyspark.sql import functions as F

    row = view.all().filter(F.col("metric") == F.lit("LogEndOffset")).agg(F.max("value").alias("m")).collect()[0]
    return {"rows": 1, "checksum": row.m}


DUCK_SRC = ("read_parquet($glob, hive_partitioning = true, "
            "hive_types = {'cluster': VARCHAR, 'date': VARCHAR, 'hour': INTEGER})")

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

DUCK_FULL = f"""
SELECT topic, partition, max(value) AS max_leo FROM {DUCK_SRC}
WHERE metric = 'LogEndOffset' GROUP BY topic, partition
"""


def duck_window(con, path: Path, start: dt.datetime, end: dt.datetime) -> dict:
    last = end - dt.timedelta(microseconds=1)
    params = {"glob": f"{path}/cluster=*/date=*/hour=*/*.parquet", "cluster": CLUSTER,
              "d0": start.strftime("%Y-%m-%d"), "d1": last.strftime("%Y-%m-%d"),
              "h0": start.hour if start.date() == last.date() else 0,
              "h1": last.hour if start.date() == last.date() else 23,
              "s": start.timestamp(), "e": end.timestamp()}
    t0 = time.perf_counter()
    urp = con.execute(DUCK_URP, params).fetchall()
    t1 = time.perf_counter()
    hot = con.execute(DUCK_HOT, params).fetchall()
    t2 = time.perf_counter()
    return {"urp_s": t1 - t0, "hot_s": t2 - t1, "urp": sorted((b, s) for b, s in urp),
            "top": (hot[0][0], hot[0][1]) if hot else None}


def duck_full(con, path: Path) -> dict:
    rows = con.execute(DUCK_FULL, {"glob": f"{path}/cluster=*/date=*/hour=*/*.parquet"}).fetchall()
    return {"rows": len(rows), "checksum": sum(r[2] for r in rows)}


DUCK_FLOOR = f"SELECT max(value) FROM {DUCK_SRC} WHERE metric = 'LogEndOffset'"


def duck_floor(con, path: Path) -> dict:
    row = con.execute(DUCK_FLOOR, {"glob": f"{path}/cluster=*/date=*/hour=*/*.parquet"}).fetchone()
    return {"rows": 1, "checksum": row[0]}


# --------------------------------------------------------------------------- runner


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def summary(times: list[float]) -> dict:
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "runs": len(times)}


def bench_size(name: str, path: Path, lake, loop, con, windows: dict[str, tuple], runs: int, full: bool) -> dict:
    result: dict = {"size": name, "lake": lake_stats(path), "window": {}, "full": None}

    async def q(fn, *a):
        return await lake.query(fn, *a, timeout=3600)

    for wname, (start, end) in windows.items():
        # one untimed run each to warm caches (file footers, OS page cache, plans)
        loop.run_until_complete(q(spark_window, start, end))
        duck_window(con, path, start, end)
        s_tot, d_tot, s_hot, d_hot, s_urp, d_urp = [], [], [], [], [], []
        check = None
        for _ in range(runs):  # interleaved, side by side
            dt_s, s = timed(lambda: loop.run_until_complete(q(spark_window, start, end)))
            dt_d, d = timed(duck_window, con, path, start, end)
            s_tot.append(dt_s), d_tot.append(dt_d)
            s_hot.append(s["hot_s"]), d_hot.append(d["hot_s"]), s_urp.append(s["urp_s"]), d_urp.append(d["urp_s"])
            check = {"spark_top": s["top"], "duckdb_top": d["top"], "same_top": s["top"] == d["top"],
                     "same_urp_shapes": s["urp"] == d["urp"], "urp_shapes": s["urp"]}
        result["window"][wname] = {
            "window": f"{start:%Y-%m-%d %H:%M}-{end:%H:%M} UTC",
            "spark": summary(s_tot), "duckdb": summary(d_tot),
            "spark_urp": summary(s_urp), "spark_hot": summary(s_hot),
            "duckdb_urp": summary(d_urp), "duckdb_hot": summary(d_hot),
            "check": check,
        }
    if full:
        for key, spark_fn, duck_fn in (("full", spark_full, duck_full), ("floor", spark_floor, duck_floor)):
            loop.run_until_complete(q(spark_fn))
            duck_fn(con, path)
            s_t, d_t = [], []
            check = None
            for _ in range(runs):
                dt_s, s = timed(lambda: loop.run_until_complete(q(spark_fn)))
                dt_d, d = timed(duck_fn, con, path)
                s_t.append(dt_s), d_t.append(dt_d)
                check = {"rows": s["rows"], "same_rows": s["rows"] == d["rows"],
                         "same_checksum": abs(s["checksum"] - d["checksum"]) < 1e-6 * max(1.0, abs(d["checksum"]))}
            result[key] = {"spark": summary(s_t), "duckdb": summary(d_t), "check": check}
    return result


def fmt(x: float) -> str:
    return f"{x:7.3f}s" if x < 100 else f"{x:7.1f}s"


def print_result(r: dict) -> None:
    st = r["lake"]
    print(f"\n== {r['size']}: {st['days']} day(s), {st['files']} files, {st['bytes'] / 1e9:.2f} GB", flush=True)
    print(f"   {'query':<46}{'Spark (median)':>16}{'DuckDB (median)':>17}{'Spark/DuckDB':>14}   Spark min..max")
    for wname, w in r["window"].items():
        s, d = w["spark"]["median"], w["duckdb"]["median"]
        label = f"(a) 15-min window {wname} [{w['window']}]"
        print(f"   {label:<46}{fmt(s):>16}{fmt(d):>17}{s / d:>13.2f}x   {fmt(w['spark']['min'])}..{fmt(w['spark']['max'])}")
        print(f"   {'    of which urp_trend':<46}{fmt(w['spark_urp']['median']):>16}{fmt(w['duckdb_urp']['median']):>17}")
        print(f"   {'    of which hot_partitions':<46}{fmt(w['spark_hot']['median']):>16}{fmt(w['duckdb_hot']['median']):>17}")
        c = w["check"]
        print(f"   {'    results agree':<46}{'top partition ' + ('yes' if c['same_top'] else 'NO ' + str(c)):>33}"
              f", URP shapes {'yes' if c['same_urp_shapes'] else 'NO'}")
    if r["full"]:
        f = r["full"]
        s, d = f["spark"]["median"], f["duckdb"]["median"]
        print(f"   {'(b) full scan: max LogEndOffset per partition':<46}{fmt(s):>16}{fmt(d):>17}{s / d:>13.2f}x   "
              f"{fmt(f['spark']['min'])}..{fmt(f['spark']['max'])}")
        c = f["check"]
        print(f"   {'    results agree':<46}{str(c['rows']) + ' rows, ' + ('same' if c['same_rows'] and c['same_checksum'] else 'DIFFERENT'):>33}")
    if r.get("floor"):
        f = r["floor"]
        s, d = f["spark"]["median"], f["duckdb"]["median"]
        print(f"   {'(b) floor: max LogEndOffset, no grouping':<46}{fmt(s):>16}{fmt(d):>17}{s / d:>13.2f}x   "
              f"{fmt(f['spark']['min'])}..{fmt(f['spark']['max'])}")
        print(f"   {'    results agree':<46}{'same' if f['check']['same_checksum'] else 'DIFFERENT':>33}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default="/tmp/kbot-bench", help="where the lakes are generated")
    p.add_argument("--small-partitions", type=int, default=3000)
    p.add_argument("--large-partitions", type=int, default=30000)
    p.add_argument("--days", type=int, default=7)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--duckdb-threads", type=int, default=os.cpu_count() or 2)
    p.add_argument("--gen-budget-min", type=float, default=20.0, help="stop generating the large size after this")
    p.add_argument("--skip-gen", action="store_true", help="reuse lakes generated by an earlier run")
    p.add_argument("--only", choices=["small", "large"], help="one size only")
    p.add_argument("--json", help="also write the results here")
    a = p.parse_args(argv)

    import duckdb

    from lake.service import LakeService, _session_conf
    from lake.spark import build_session

    info = machine_info()
    print("machine:", json.dumps(info), flush=True)
    print(f"settings: Spark {a.master}, driver memory {a.driver_memory}; DuckDB threads {a.duckdb_threads}; "
          f"{a.runs} timed runs per query after one warm-up run; medians shown", flush=True)
    root = Path(a.root)
    sizes = [("small", a.small_partitions), ("large", a.large_partitions)]
    if a.only:
        sizes = [s for s in sizes if s[0] == a.only]

    # the settings LakeService uses for this master (one shuffle partition per local core)
    spark = build_session(a.master, app_name="kbot-bench",
                          conf=_session_conf(a.master, {"spark.driver.memory": a.driver_memory}))
    spark.sparkContext.setLogLevel("ERROR")
    loop = asyncio.new_event_loop()
    con = duckdb.connect()
    con.execute(f"SET threads = {int(a.duckdb_threads)}")
    results, notes = [], []
    day1_window = (DAY0 + dt.timedelta(hours=23, minutes=40), DAY0 + dt.timedelta(hours=23, minutes=55))
    try:
        for name, partitions in sizes:
            path = root / f"p{partitions}"
            lake = LakeService(str(path), cluster=CLUSTER, spark=spark, query_timeout_s=3600, warm=False).start()
            loop.run_until_complete(lake.wait_ready(600))
            if not a.skip_gen:
                # grow the lake a day at a time: measure after day 1, then after the last day generated
                shutil.rmtree(path, ignore_errors=True)
                secs = generate_day(path, 0, partitions, a.days, a.master, a.driver_memory)
                gen_total, per_day = secs, secs
                print(f"generated {name} day 1: {partitions:,} partitions in {secs:.0f}s", flush=True)
                r1 = bench_size(f"{name} ({partitions:,} partitions) after 1 day", path, lake, loop, con,
                                {"end of day 1": day1_window}, a.runs, full=True)
                print_result(r1)
                results.append(r1)
                for day in range(1, a.days):
                    spent_min = gen_total / 60
                    if spent_min + per_day / 60 > a.gen_budget_min:
                        notes.append(f"{name}: stopped generating after {day} day(s): day {day + 1} would exceed the "
                                     f"{a.gen_budget_min:g}-minute budget ({spent_min:.1f} min spent, ~{per_day / 60:.1f} min/day)")
                        print(notes[-1], flush=True)
                        break
                    secs = generate_day(path, day, partitions, a.days, a.master, a.driver_memory)
                    gen_total += secs
                    per_day = max(per_day, secs)
                    print(f"generated {name} day {day + 1}: {secs:.0f}s (total {gen_total / 60:.1f} min)", flush=True)
                notes.append(f"{name}: generated {lake_stats(path)['days']} day(s) in {gen_total / 60:.1f} min")
            days = lake_stats(path)["days"]
            if days > 1 or a.skip_gen:
                last_day = DAY0 + dt.timedelta(days=days - 1)
                windows = {"end of day 1": day1_window}
                if days > 1:
                    windows[f"end of day {days}"] = (last_day + dt.timedelta(hours=23, minutes=40),
                                                     last_day + dt.timedelta(hours=23, minutes=55))
                r = bench_size(f"{name} ({partitions:,} partitions) after {days} day(s)", path, lake, loop, con,
                               windows, a.runs, full=True)
                print_result(r)
                results.append(r)
            lake._owns_session = False
            lake.stop()
    finally:
        loop.close()
        spark.stop()

    print("\n== summary")
    for r in results:
        for wname, w in r["window"].items():
            for q in ("urp", "hot"):
                s = w[f"spark_{q}"]["median"]
                print(f"   {r['size']:<45} (a) {wname:<14} {q}: Spark {s:6.3f}s  DuckDB {w[f'duckdb_{q}']['median']:6.3f}s  "
                      f"{'<= 1 s' if s <= 1 else '> 1 s'}")
        if r["full"]:
            ratio = r["full"]["spark"]["median"] / r["full"]["duckdb"]["median"]
            print(f"   {r['size']:<45} (b) full scan     Spark {r['full']['spark']['median']:6.2f}s  "
                  f"DuckDB {r['full']['duckdb']['median']:6.2f}s  ratio {ratio:.2f}x {'(within 3x)' if ratio <= 3 else '(over 3x)'}")
        if r.get("floor"):
            ratio = r["floor"]["spark"]["median"] / r["floor"]["duckdb"]["median"]
            print(f"   {r['size']:<45} (b) floor scan    Spark {r['floor']['spark']['median']:6.2f}s  "
                  f"DuckDB {r['floor']['duckdb']['median']:6.2f}s  ratio {ratio:.2f}x (no grouping: the engines' scan speed)")
    for n in notes:
        print("   note:", n)
    print("   machine load average at the end:", os.getloadavg())
    if a.json:
        Path(a.json).write_text(json.dumps({"machine": info, "results": results, "notes": notes}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
