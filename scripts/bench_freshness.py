#!/usr/bin/env python
"""Benchmark: how long from a scrape until its samples are queryable in the lake (p50 / p95).

A sample's *scrape time* is its round's timestamp (every row of a collector round carries it,
and its landing file is named after it); it is *queryable* once the Delta commit that holds its
landing file exists (a reader loads the newest snapshot on every query; ``userMetadata`` of each
ingest commit lists its files).  Latency = commit time - scrape time, one value per landing
file, on a real local Kafka cluster (1 controller + 3 brokers with the JMX exporter).

Modes (``--mode``, both by default, one after the other on the same cluster):

* ``timer``: what ``kbot run`` starts today (cli/run.py): ``lake collect --interval 10
  --ingest-every 60`` in a child process, ingest inline after a round once 60 s have passed;
* ``follow``: the collector every 10 s with ``lake.ingest.ContinuousIngest``: a batch as soon as
  a landing file appears, in a worker thread, rollups deferred to at most once a minute.

The machine's load (1-minute average, sampled every 5 s) and core count are printed with the
figures: on 2 shared cores the numbers move with whatever else runs.

Usage::

    .venv/bin/python scripts/bench_freshness.py --port-base 26090 --cluster-dir /tmp/kbot-prom-cluster \\
        --samples 30 [--mode follow] [--json]

The cluster at ``--cluster-dir`` is used if it is up, else started (and stopped at the end).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kbot_settings import load as load_settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

INTERVAL_S = 10.0


def file_ts(name: str) -> float:
    """The scrape time (epoch seconds) a landing file's name starts with."""
    stamp = name.split("Z-", 1)[0]
    return dt.datetime.strptime(stamp, "%Y%m%dT%H%M%S.%f").replace(tzinfo=dt.timezone.utc).timestamp()


def latencies(table: str) -> list[tuple[float, float, float]]:
    """(scrape time, seconds until committed, commit time) per landing file of the table's
    ingest commits, oldest scrape first."""
    from lake import delta

    out = []
    for commit in delta.local_commits(table):
        committed = (commit.get("timestamp_ms") or 0) / 1000
        for name in commit.get("files", []):
            scraped = file_ts(name)
            out.append((scraped, committed - scraped, committed))
    return sorted(out)


def warm(lat: list[tuple[float, float, float]]) -> list[tuple[float, float, float]]:
    """Samples scraped after the first commit: the steady state, once the JVM is warm (the first
    batch pays for Spark's start, code generation and the table's first log)."""
    if not lat:
        return []
    first_commit = min(c for _, _, c in lat)
    return [x for x in lat if x[0] >= first_commit]


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(q / 100 * len(s) + 0.5)) - 1))
    return s[k]


class LoadSampler:
    def __init__(self, every_s: float = 5.0):
        self.every_s = every_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(self.every_s)

    def __enter__(self) -> "LoadSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def wait_samples(table: str, n: int, deadline: float, alive=lambda: True) -> None:
    while time.monotonic() < deadline and alive():
        if len(warm(latencies(table))) >= n:
            return
        time.sleep(1.0)


def run_timer(lake_dir: Path, targets: str, n: int, max_s: float) -> list[tuple[float, float, float]]:
    """`kbot run`'s collection as it is started today: a child `lake collect` process."""
    cmd = [
        sys.executable,
        "-m",
        "lake.cli",
        "collect",
        "--targets",
        targets,
        "--interval",
        f"{INTERVAL_S:g}",
        "--ingest-every",
        "60",
        "--lake-dir",
        str(lake_dir),
        "--cluster",
        "bench",
        "--json",
    ]
    log = open(lake_dir.parent / f"{lake_dir.name}.log", "w")
    child = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    table = str(lake_dir / "samples")
    try:
        wait_samples(table, n, time.monotonic() + max_s, alive=lambda: child.poll() is None)
    finally:
        child.terminate()  # the figures are read from the Delta log, not from its output
        try:
            child.wait(120)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        log.close()
    if child.returncode not in (0, -15):
        print(f"timer mode: the collector exited with {child.returncode}; see {log.name}", file=sys.stderr)
    return latencies(table)


def run_follow(lake_dir: Path, targets: str, n: int, max_s: float) -> list[tuple[float, float, float]]:
    """The collector with ContinuousIngest, in this process."""
    from lake.cli import _session
    from lake.collector import Collector, parse_targets
    from lake.ingest import ContinuousIngest, Ingestor, LakeLayout

    layout = LakeLayout.from_settings(load_settings({}), lake_dir=str(lake_dir))
    spark = _session(None, load_settings())  # KBOT_SPARK_MASTER of this process, else local[2]
    follower = ContinuousIngest(Ingestor(spark, layout, rollup_every_s=60.0)).start()
    collector = Collector(parse_targets(targets), layout.landing, "bench", interval_s=INTERVAL_S, source="exporters")
    table = layout.table

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(collector.run(stop=stop, on_round=lambda r: follower.notify()))
        deadline = time.monotonic() + max_s
        while time.monotonic() < deadline and not task.done():
            if len(warm(await asyncio.to_thread(latencies, table))) >= n:
                break
            await asyncio.sleep(1.0)
        stop.set()
        await task

    try:
        asyncio.run(main())
    finally:
        follower.stop()
        spark.stop()
    return latencies(table)


def summarize(mode: str, lat: list[tuple[float, float, float]], load: list[float], n: int) -> dict:
    steady = [s for _, s, _ in warm(lat)][:n]
    cold = [s for _, s, _ in lat][:n]  # from the collector's start: includes the cold first batch
    out: dict = {"mode": mode, "samples": len(steady)}
    if steady:
        out.update(
            p50_s=round(statistics.median(steady), 1),
            p95_s=round(percentile(steady, 95), 1),
            max_s=round(max(steady), 1),
        )
        # a growing backlog shows as latencies that grow round after round: the halves' medians and
        # the least-squares slope of latency over the rounds (s per round; ~0 when it keeps up)
        half = len(steady) // 2
        if half:
            out.update(
                first_half_p50_s=round(statistics.median(steady[:half]), 1),
                second_half_p50_s=round(statistics.median(steady[half:]), 1),
            )
        if len(steady) >= 3:
            xs = range(len(steady))
            mx, my = statistics.mean(xs), statistics.mean(steady)
            out["trend_s_per_round"] = round(
                sum((x - mx) * (y - my) for x, y in zip(xs, steady)) / sum((x - mx) ** 2 for x in xs), 3
            )
    if cold:
        out.update(first_n_p95_s=round(percentile(cold, 95), 1), first_batch_s=round(lat[0][1], 1))
    out.update(
        load_1m_min=round(min(load), 2) if load else None,
        load_1m_mean=round(statistics.mean(load), 2) if load else None,
        load_1m_max=round(max(load), 2) if load else None,
        cores=os.cpu_count(),
    )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("timer", "follow", "both"), default="both")
    p.add_argument("--samples", type=int, default=30, help="landing files (rounds) to measure per mode")
    p.add_argument(
        "--port-base", type=int, default=26090, help="port base of the local cluster (pick one nobody else uses)"
    )
    p.add_argument(
        "--cluster-dir",
        default="/tmp/kbot-bench-cluster",
        help="its folder (used if it runs, else started and stopped)",
    )
    p.add_argument("--work", help="folder for the lakes (default: a temporary one, removed)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.samples < 2:
        p.error("--samples must be at least 2")

    from localkafka.cluster import LocalCluster

    cluster = LocalCluster(name="bench", base_dir=args.cluster_dir, port_base=args.port_base)
    started = not any(n["alive"] for n in cluster.status()["nodes"])
    try:
        cluster.up(timeout=300)  # nodes that already run are left as they are
    except Exception as exc:  # noqa: BLE001 - one line, not a traceback
        print(f"error: the local cluster did not start: {' '.join(str(exc).split())[:300]}", file=sys.stderr)
        return 1
    targets = ",".join(f"{n}={u}" for n, u in sorted(cluster.metrics_urls.items()))
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="kbot-freshness-"))
    work.mkdir(parents=True, exist_ok=True)
    max_s = args.samples * INTERVAL_S * 2 + 180  # generous: a loaded machine stretches rounds
    results = []
    try:
        for mode in ("timer", "follow") if args.mode == "both" else (args.mode,):
            lake_dir = work / mode
            shutil.rmtree(lake_dir, ignore_errors=True)
            with LoadSampler() as load:
                lat = (run_timer if mode == "timer" else run_follow)(lake_dir, targets, args.samples, max_s)
            res = summarize(mode, lat, load.samples, args.samples)
            results.append(res)
            if not args.json:
                print(
                    f"{mode:>6}: {res['samples']} samples after warm-up, scrape -> queryable p50 {res.get('p50_s')} s, "
                    f"p95 {res.get('p95_s')} s, max {res.get('max_s')} s (the first {args.samples} from the start, "
                    f"cold JVM included: p95 {res.get('first_n_p95_s')} s; first sample {res.get('first_batch_s')} s); "
                    f"load {res['load_1m_mean']} mean / {res['load_1m_max']} max on {res['cores']} cores; "
                    f"backlog: p50 {res.get('first_half_p50_s')} s in the first half, {res.get('second_half_p50_s')} s "
                    f"in the second, trend {res.get('trend_s_per_round')} s per round",
                    flush=True,
                )
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
        if started:
            cluster.down()
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
