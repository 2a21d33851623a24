#!/usr/bin/env python
"""Benchmark: `history` in the bot's process (DuckDB over the Delta snapshot) vs DuckDB alone on
the same rollup files vs Spark, on a synthetic lake; and where the in-process read stops fitting
in a second (the crossover ``window_queries.history.BUDGET_BYTES`` is set from).

What is timed (medians of ``--runs`` after one warm-up, interleaved; machine load printed):

* ``answer``: the whole command as the bot answers it (``commands.registry.answer`` of
  ``history <metric> --since ...``: the engine choice, the read, the young-lake check, the reply),
  the lake a ``LakeService`` over the generated lake;
* ``in_process``: the question alone (``LakeService.ask_window(HISTORY_QUESTION, ...)``,
  no budget: it is also timed past the crossover);
* ``duckdb``: DuckDB alone, ``read_parquet`` of the same rollup files with the same partition,
  time and series filters and the same aggregation (the floor for the same work);
* ``spark`` (with ``--spark``): ``lake.queries.q_history`` through a warm classic ``local[2]``
  session, the engine past the crossover.

Cases: URP (per broker: 6 series) and LogEndOffset of one partition over 1 d (15-minute buckets,
the 1-minute rollup) and 7 d (3-hour buckets, the hour rollup plus its open hours from the
minutes), and LogEndOffset of every partition over 1 h, 6 h and 1 d (the heavy reads that find
the crossover: every row of the files' metric matches).

Data: ``tools.synthetic`` (UnderReplicatedPartitions and LogEndOffset, ``leo_replicas=1``, 6
brokers, 30 s samples), rollups built by ``lake.rollups.rebuild``; ``--partitions`` x ``--days``.

Usage::

    .venv/bin/python scripts/bench_history.py --root /tmp/kbot-hist --partitions 3000 --days 1 --spark --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

UTC = dt.timezone.utc
DAY0 = dt.datetime(2024, 5, 1, tzinfo=UTC)
CLUSTER = "bench"
METRICS = ["UnderReplicatedPartitions", "LogEndOffset"]

DUCK_SRC = "read_parquet($glob, hive_partitioning = true, hive_types = {'cluster': VARCHAR, 'date': VARCHAR})"
GLOBS = {"1m": "cluster=*/date=*/hour=*/*.parquet", "1h": "cluster=*/date=*/*.parquet"}
# the gauge history (max per bucket and broker) from one rollup table, as window_queries.history does
DUCK_GAUGE = f"""
SELECT epoch_us(bucket) // 1000000 // $bucket_s * $bucket_s AS b, broker, max("max") AS v, sum("count") AS n
FROM {DUCK_SRC}
WHERE cluster = $cluster AND date BETWEEN $d0 AND $d1 AND bucket >= to_timestamp($s) AND bucket < to_timestamp($e)
  AND metric = $metric AND ($topic IS NULL OR topic = $topic) AND ($partition IS NULL OR partition = $partition)
GROUP BY ALL ORDER BY b, broker
"""


def load() -> float:
    return os.getloadavg()[0]


def med(times: list[float]) -> dict:
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "runs": len(times)}


def side_by_side(runs: int, named: dict) -> dict:
    """Each callable once untimed (warm), then ``runs`` times interleaved; loads sampled."""
    last = {k: fn() for k, fn in named.items()}
    times: dict[str, list[float]] = {k: [] for k in named}
    loads = []
    for _ in range(runs):
        for k, fn in named.items():
            t0 = time.perf_counter()
            last[k] = fn()
            times[k].append(time.perf_counter() - t0)
            loads.append(load())
    out: dict = {k: med(v) for k, v in times.items()}
    out["load"] = {"min": min(loads), "mean": statistics.mean(loads), "max": max(loads)}
    out["results"] = last
    return out


def duck_gauge(con, table: str, pieces, metric, topic, partition, bucket_s) -> list:
    """``pieces``: (resolution suffix, start, end); the rows of each read, unioned in Python like
    the in-process path unions its reads (a bucket is in one piece only at these widths)."""
    rows = []
    for suffix, s, e in pieces:
        last = e - dt.timedelta(microseconds=1)
        rows += con.execute(
            DUCK_GAUGE,
            {
                "glob": f"{table}_{suffix}/{GLOBS[suffix]}",
                "cluster": CLUSTER,
                "d0": s.strftime("%Y-%m-%d"),
                "d1": last.strftime("%Y-%m-%d"),
                "s": s.timestamp(),
                "e": e.timestamp(),
                "metric": metric,
                "topic": topic,
                "partition": partition,
                "bucket_s": bucket_s,
            },
        ).fetchall()
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default="/tmp/kbot-hist", help="where the lake is generated")
    p.add_argument("--partitions", type=int, default=3000)
    p.add_argument("--days", type=int, default=1)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--skip-gen", action="store_true", help="reuse the lake of an earlier run")
    p.add_argument("--spark", action="store_true", help="also time Spark (lake.queries.q_history, warm local session)")
    p.add_argument("--json", help="also write the results here")
    a = p.parse_args(argv)

    import duckdb

    from commands.registry import answer
    from framework.context import Context
    from lake.schema import RAW, table_path
    from lake.service import LakeService
    from window_queries.history import BUDGET_BYTES, HISTORY_QUESTION

    path = str(Path(a.root) / "samples")
    end = DAY0 + dt.timedelta(days=a.days)
    now = end.timestamp()
    out: dict = {"size": {"partitions": a.partitions, "days": a.days}, "load_start": os.getloadavg()}
    print(f"machine load at the start: {os.getloadavg()}", flush=True)
    spark = None
    if not a.skip_gen or a.spark:
        from lake.service import _session_conf
        from lake.spark import build_session

        spark = build_session(
            a.master, app_name="kbot-bench-history", conf=_session_conf(a.master, {"spark.driver.memory": "3g"})
        )
        spark.sparkContext.setLogLevel("ERROR")
    if not a.skip_gen:
        from lake.rollups import rebuild
        from tools.synthetic import generate

        assert spark is not None
        for resolution in (RAW, "1m", "1h"):
            shutil.rmtree(table_path(path, resolution), ignore_errors=True)
        topics = max(1, a.partitions // 300)
        t0 = time.perf_counter()
        g = generate(
            path,
            cluster=CLUSTER,
            start=DAY0,
            hours=24 * a.days,
            brokers=6,
            topics=topics,
            partitions_per_topic=a.partitions // topics,
            metrics=METRICS,
            leo_replicas=1,
            spark=spark,
            rollups=False,
            progress=lambda s: print("  gen", s, flush=True),
        )
        gen_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        rb = rebuild(spark, path)
        out["generate"] = {"rows": g.rows, "seconds": gen_s, "rollup_seconds": time.perf_counter() - t0}
        print(
            f"generated {g.rows:,} rows in {gen_s:.0f}s, rollups of {rb['hours']} h in {out['generate']['rollup_seconds']:.0f}s",
            flush=True,
        )

    lake = LakeService(path, cluster=CLUSTER, spark=spark, query_timeout_s=3600, warm=False)
    if spark is not None:
        lake.start()
        assert lake.wait_ready_sync(600), lake.status()
    loop = asyncio.new_event_loop()
    con = duckdb.connect()
    con.execute("SET threads = 2")
    ctx = Context(lake=lake, clock=lambda: now)

    def in_process(metric, topic, partition, since, bucket_s):
        facts = loop.run_until_complete(
            lake.ask_window(
                HISTORY_QUESTION, end - since, end, metric, topic, None, partition, bucket_s, now, None, timeout=3600
            )
        )
        return facts

    def product(text):
        result = loop.run_until_complete(answer(text, ctx))
        return result.reply

    def spark_history(metric, topic, partition, since, bucket_s):
        from lake.queries import q_history

        return loop.run_until_complete(
            lake.query(q_history, end - since, end, metric, topic, None, partition, bucket_s, now, timeout=3600)
        )

    cut = dt.datetime.fromtimestamp(int(now) // 3600 * 3600 - 3600, UTC)
    cases = [
        ("URP 1d", "UnderReplicatedPartitions", None, None, dt.timedelta(days=1), 900, "history URP --since 1d"),
        ("URP 7d", "UnderReplicatedPartitions", None, None, dt.timedelta(days=7), 10800, "history URP --since 7d"),
        (
            "LEO topic-000/3 1d",
            "LogEndOffset",
            "topic-000",
            3,
            dt.timedelta(days=1),
            900,
            "history LogEndOffset --topic topic-000 --partition 3 --since 1d",
        ),
        (
            "LEO topic-000/3 7d",
            "LogEndOffset",
            "topic-000",
            3,
            dt.timedelta(days=7),
            10800,
            "history LogEndOffset --topic topic-000 --partition 3 --since 7d",
        ),
    ]
    out["cases"] = {}
    for name, metric, topic, partition, since, bucket_s, text in cases:
        s = end - since
        pieces = [("1m", s, end)] if bucket_s % 3600 else [("1h", s, cut), ("1m", cut, end)]
        named = {
            "answer": lambda text=text: product(text),
            "in_process": lambda m=metric, t=topic, pt=partition, si=since, b=bucket_s: in_process(m, t, pt, si, b),
            "duckdb": lambda m=metric, t=topic, pt=partition, pcs=pieces, b=bucket_s: duck_gauge(
                con, path, pcs, m, t, pt, b
            ),
        }
        if a.spark:
            named["spark"] = lambda m=metric, t=topic, pt=partition, si=since, b=bucket_s: spark_history(
                m, t, pt, si, b
            )
        r = side_by_side(a.runs, named)
        res = r.pop("results")
        mine = res["in_process"]
        r["rows"] = len(mine["rows"])
        r["resolution"] = mine["resolution"]
        r["read"] = mine["read"]
        duck = {(b, k): v for b, k, v, _n in res["duckdb"]}
        r["agree_duckdb"] = duck == {(x["bucket"], x["broker"]): x["value"] for x in mine["rows"]}
        if a.spark:
            r["agree_spark"] = [(x["bucket"], x["broker"], x["value"], x["samples"]) for x in res["spark"]["rows"]] == [
                (x["bucket"], x["broker"], x["value"], x["samples"]) for x in mine["rows"]
            ]
        engine = [e.value for e in res["answer"].evidence if e.label == "Read by"]
        r["answer_engine"] = engine[0] if engine else None
        r["ratio_to_duckdb"] = r["answer"]["median"] / r["duckdb"]["median"]
        out["cases"][name] = r
        print(
            f"{name}: answer {r['answer']['median']:.3f}s, in process {r['in_process']['median']:.3f}s, "
            f"DuckDB {r['duckdb']['median']:.3f}s ({r['ratio_to_duckdb']:.1f}x)"
            + (f", Spark {r['spark']['median']:.3f}s" if a.spark else "")
            + f"; {r['rows']} rows from {r['resolution']} ({r['read']['files']} files, {r['read']['bytes'] / 1e6:.1f} MB); "
            f"agree DuckDB {r['agree_duckdb']}"
            + (f", Spark {r['agree_spark']}" if a.spark else "")
            + f"; load {r['load']['mean']:.1f} ({r['load']['min']:.1f}-{r['load']['max']:.1f}); engine: {r['answer_engine']}",
            flush=True,
        )

    # the crossover: every partition's LogEndOffset (every row of the files' metric matches)
    out["crossover"] = []
    for since, bucket_s in ((dt.timedelta(hours=1), 60), (dt.timedelta(hours=6), 180), (dt.timedelta(days=1), 900)):
        r = side_by_side(
            max(3, a.runs // 2),
            {"in_process": lambda si=since, b=bucket_s: in_process("LogEndOffset", None, None, si, b)},
        )
        facts = r.pop("results")["in_process"]
        mb = facts["read"]["bytes"] / 1e6
        point = {
            "since_h": since.total_seconds() / 3600,
            "mb": mb,
            "files": facts["read"]["files"],
            "seconds": r["in_process"]["median"],
            "mb_per_s": mb / r["in_process"]["median"],
            "load": r["load"]["mean"],
        }
        out["crossover"].append(point)
        print(
            f"crossover: every partition's LogEndOffset over {point['since_h']:.0f} h: {mb:.1f} MB in "
            f"{point['files']} files, {point['seconds']:.3f}s in process ({point['mb_per_s']:.0f} MB/s, load {point['load']:.1f})",
            flush=True,
        )
    out["budget_bytes"] = BUDGET_BYTES
    out["load_end"] = os.getloadavg()
    print(f"budget {BUDGET_BYTES / 1e6:.0f} MB; machine load at the end: {out['load_end']}", flush=True)
    loop.close()
    lake.stop()
    if spark is not None:
        spark.stop()
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
