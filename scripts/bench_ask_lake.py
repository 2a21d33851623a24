#!/usr/bin/env python3
"""One-shot `kbot ask "hot-partitions"` and `kbot ask "why URP"` end to end, with the lake's Spark
Connect server running (warm) and without it (the process starts its own in-process Spark): a
fresh process each time, like a user in another terminal.

    .venv/bin/python scripts/bench_ask_lake.py [--runs 3] [--cold-runs 2] [--hours 2] [--json]

It makes a synthetic lake whose samples cover the last minutes (tools/synthetic.py, written
through the server; a hot key and a broker loss in the last half hour), in a temporary lake dir
unless --lake-dir is given, then times each question (`kbot ask --json <question>`; with no
cluster configured the answer is the lake's part alone, with --bootstrap HOST:PORT the cluster's
live part too, as beside `kbot run`) (a) through the server (`kbot lake serve`, the same code
`kbot run` uses) and (b) after `kbot lake serve --stop`. `why URP`'s lake part is answered in
process (lake.embedded), so it needs neither.  Each answer is checked to hold lake evidence.
Prints the medians, the data size and the machine's load (1-minute load average before and
after each series, and the core count): figures from a busy machine are not figures from an
idle one.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kbot_settings import load as load_settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tools/ (synthetic data) is not installed with the bot

KBOT = str(Path(sys.executable).with_name("kbot"))


def load() -> float:
    return os.getloadavg()[0]


QUESTIONS = ("hot-partitions", "why URP")


def ask_once(env: dict[str, str], timeout: float, question: str) -> tuple[float, bool, str]:
    """(seconds, answered from the lake, verdict)."""
    t0 = time.monotonic()
    proc = subprocess.run([KBOT, "ask", "--json", question], env=env, capture_output=True, text=True, timeout=timeout)
    seconds = time.monotonic() - t0
    try:
        answer = json.loads(proc.stdout)
    except ValueError:
        return seconds, False, (proc.stderr or proc.stdout).strip()[-300:]
    from_lake = any(str(e.get("source", "")).startswith("lake") for e in answer.get("evidence", []))
    return seconds, from_lake, str(answer.get("verdict", ""))


def series(name: str, runs: int, env: dict[str, str], timeout: float, question: str) -> dict:
    before = load()
    times, verdicts, lake_answers = [], [], 0
    for i in range(runs):
        s, ok, verdict = ask_once(env, timeout, question)
        times.append(s)
        verdicts.append(verdict)
        lake_answers += ok
        print(
            f"  {question} {name} run {i + 1}: {s:.2f} s, {'lake answer' if ok else 'NO lake answer'}: {verdict[:100]}",
            file=sys.stderr,
            flush=True,
        )
    return {
        "runs": runs,
        "seconds": [round(t, 2) for t in times],
        "median_s": round(statistics.median(times), 2),
        "lake_answers": lake_answers,
        "load_before": round(before, 2),
        "load_after": round(load(), 2),
    }


def lake_size(table: str) -> dict:
    files = [p for p in Path(table).rglob("*.parquet")]
    return {"parquet_files": len(files), "bytes": sum(p.stat().st_size for p in files)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="asks through the server (default 3)")
    ap.add_argument("--cold-runs", type=int, default=2, help="asks without it, each a cold Spark (default 2)")
    ap.add_argument("--hours", type=int, default=2, help="hours of synthetic samples (default 2)")
    ap.add_argument("--topics", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=6, help="partitions per topic (default 6)")
    ap.add_argument("--lake-dir", help="use this lake dir (default: a new temporary one)")
    ap.add_argument("--port", type=int, default=None, help="Connect port (default $KBOT_SPARK_CONNECT_PORT or 15002)")
    ap.add_argument("--timeout", type=float, default=600.0, help="per ask (default 600 s)")
    ap.add_argument(
        "--bootstrap",
        help="a running cluster (HOST:PORT) the asks also read live, as beside `kbot run`: the answer's live part "
        "is then the cluster's (the lake's cluster name is set to the synthetic lake's, 'bench')",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.cold_runs < 0 or args.hours < 1:
        ap.error("--runs >= 1, --cold-runs >= 0 and --hours >= 1")

    from pyspark.sql import SparkSession

    from lake import connect
    from lake.service import warm_up
    from tools import synthetic as S

    lake_dir = Path(args.lake_dir or tempfile.mkdtemp(prefix="kbot-bench-ask-")).resolve()
    env = {k: v for k, v in os.environ.items() if k != "KBOT_SPARK_MASTER"}
    env.update({"KBOT_LAKE_DIR": str(lake_dir), "KBOT_LAKE": "1"})
    if args.bootstrap:
        env.update({"KBOT_BOOTSTRAP": args.bootstrap, "KBOT_CLUSTER_NAME": "bench"})
    table = str(lake_dir / "samples")
    out: dict = {"cores": os.cpu_count(), "lake_dir": str(lake_dir), "live_cluster": args.bootstrap}
    t0 = time.monotonic()
    info = connect.start_server(load_settings(env), args.port, lake_dir=lake_dir)
    out["server_start_s"] = round(time.monotonic() - t0, 2)
    try:
        now = dt.datetime.now(dt.timezone.utc)
        start = now.replace(minute=0, second=0, microsecond=0) - dt.timedelta(hours=args.hours - 1)
        spark = SparkSession.builder.remote(info.url).create()
        try:
            t1 = time.monotonic()
            rep = S.generate(
                table,
                cluster="bench",
                start=start,
                hours=args.hours,
                brokers=3,
                topics=args.topics,
                partitions_per_topic=args.partitions,
                resolution_s=30,
                seed=3,
                spark=spark,
                incidents=[
                    S.hot_key("topic-001", 2, now - dt.timedelta(minutes=20), "30m"),
                    S.broker_loss(2, now - dt.timedelta(minutes=10), dt.timedelta(minutes=30)),
                ],
            )
            out["generate_s"] = round(time.monotonic() - t1, 2)
        finally:
            spark.stop()
        out["data"] = {"rows": rep.rows, "hours": args.hours, **lake_size(table)}
        t2 = time.monotonic()
        out["warm_up_s"] = round(warm_up(info.query_url, table), 2)  # the session the asks will join
        out["warm_up_wall_s"] = round(time.monotonic() - t2, 2)
        print(
            f"lake: {rep.rows:,} rows, {out['data']['parquet_files']} files, {out['data']['bytes'] / 1e6:.1f} MB; "
            f"server {info.url} (master {info.master})",
            file=sys.stderr,
            flush=True,
        )
        out["with_server"] = {q: series("with server", args.runs, env, args.timeout, q) for q in QUESTIONS}
    finally:
        connect.stop_server(load_settings(env), lake_dir)
    if args.cold_runs:
        out["without_server"] = {q: series("without server", args.cold_runs, env, args.timeout, q) for q in QUESTIONS}
    if not args.lake_dir:
        shutil.rmtree(lake_dir, ignore_errors=True)  # the lake this run made for itself
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        live = f", live part from {args.bootstrap}" if args.bootstrap else ", no live cluster (the lake's part alone)"
        print(
            f"kbot ask on {out['data']['rows']:,} rows ({out['data']['bytes'] / 1e6:.1f} MB, {out['cores']} cores{live})"
        )
        for q in QUESTIONS:
            for key, label in (("with_server", "with the Connect server"), ("without_server", "without (in-process)")):
                if key not in out:
                    continue
                w = out[key][q]
                print(
                    f"  {q:<15} {label:<24} median {w['median_s']:.2f} s of {w['seconds']} "
                    f"(load {w['load_before']} -> {w['load_after']}), lake answers {w['lake_answers']}/{w['runs']}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
