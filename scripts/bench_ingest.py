#!/usr/bin/env python
"""Benchmark: ingest at the issue's scale - B brokers x S series scraped every 15 s - through the
real ``lake.ingest.Ingestor``, on one Spark core (``local[1]``), phase by phase.

Each scrape round is one landing file of B x S rows, written by the collector's own writer
(``lake.landing.write_landing_file``), as ``kbot run`` writes one file per round.  The run
replays them as ``kbot run`` would, back to back: one batch per round, and the deferred rollups
of the minutes touched since every ``--rollup-every`` rounds (60 s of data, ``kbot run``'s
``rollup_every_s``).  Reported, each as rows/s:

* validate: the ingest's check of a landing file (``scan_landing_file``: pyarrow, a block at a
  time on up to 4 threads; pin the run to one core with ``taskset -c 0``), timed alone on the
  same files before the run;
* commit: the batches (validation, which also stages the parsed rows as Parquet for Spark,
  then the Delta append: one commit per round, or per ``--files-per-batch`` rounds, as the
  ingest batches the landing files waiting when it is behind);
* rollups: the rollup runs (the minutes touched, from their raw samples and the previous
  minutes' rollup rows; each touched hour from its minute rows), with each run's seconds
  (a run's cost should not grow as the lake fills);
* hour row: writing the hour rollup once the hour has closed (``flush_rollups(final=True)``),
  timed on the minutes so far and scaled to a whole hour (60 minute rows per series), then
  spread over the hour's 240 rounds;
* sustained: rows over commit + rollups + the rounds' share of the hour row; a round arrives
  every 15 s, so the ingest keeps up when one round takes less than that.

Each phase also reports the CPU seconds it cost (the Spark JVM's, from ``/proc/<pid>/stat``, plus
this process's, pyarrow's threads included) and rows per CPU second: on a shared 2-core machine
the wall-clock figures move with the load (the header line prints it before and after), the CPU
cost per row much less.  ``sustained_per_cpu_s`` is the sustained rate if the ingest had one whole
core to itself: what it can keep up with on an idle core, and, divided by the share of a core it
gets, on a loaded one.

A rollup run reads the touched minutes' raw samples and, before them, up to
``lake.rollups.STALE_S`` of minute rows (5 per series): its cost stops growing after 20 rounds.

Usage::

    .venv/bin/python scripts/bench_ingest.py [--brokers 100] [--series 10000] [--rounds 4] [--json F]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCRAPE_S = 15
UTC = dt.timezone.utc


def round_rows(r: int, brokers: int, series: int, t0: dt.datetime):
    """One scrape round: per broker, ``series`` partition series (LogEndOffset and Size of
    series/2 partitions, as the JMX exporter reports them), values growing round by round."""
    ts = int((t0 + dt.timedelta(seconds=SCRAPE_S * r)).timestamp() * 1_000_000)
    parts = max(1, series // 2)
    for b in range(1, brokers + 1):
        for p in range(parts):
            topic, partition = f"topic-{p // 100:03d}", p % 100
            base = {"ts": ts, "cluster": "bench", "broker": b, "topic": topic, "partition": partition, "labels": None}
            yield {**base, "metric": "LogEndOffset", "value": float(r * 150 + p)}
            yield {**base, "metric": "Size", "value": float((r * 150 + p) * 1024)}


def load() -> float:
    return round(os.getloadavg()[0], 2)


class CpuClock:
    """CPU seconds (user + system) of this process and of the Spark JVM it started (a classic
    master: the JVM is this process' child, which ``os.times`` counts only once it has exited)."""

    def __init__(self, spark) -> None:
        self.jvm_stat: Path | None = None
        try:
            pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
            self.jvm_stat = Path(f"/proc/{pid}/stat")
            self.jvm_stat.read_text()
        except Exception:  # noqa: BLE001 - Spark Connect, or no /proc: the JVM is not counted
            self.jvm_stat = None
        self.tick = os.sysconf("SC_CLK_TCK")

    def __call__(self) -> float:
        t = os.times()
        total = t.user + t.system
        if self.jvm_stat is not None:
            fields = self.jvm_stat.read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / self.tick  # utime, stime
        return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", type=int, default=100)
    ap.add_argument("--series", type=int, default=10_000, help="series per broker and round (default 10,000)")
    ap.add_argument("--rounds", type=int, default=4, help="scrape rounds, one landing file and batch each")
    ap.add_argument("--rollup-every", type=int, default=4, help="rounds between rollup runs (default 4: 60 s)")
    ap.add_argument(
        "--files-per-batch",
        type=int,
        default=1,
        help="landing files per commit (default 1: keeping up; more: an ingest that is behind takes what waits)",
    )
    ap.add_argument("--master", default="local[1]", help="Spark master (default local[1]: one core)")
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--root", help="work directory (default: a new temporary one, removed after)")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args(argv)
    if min(a.brokers, a.series, a.rounds, a.rollup_every, a.files_per_batch) < 1:
        ap.error("--brokers, --series, --rounds, --rollup-every and --files-per-batch must be >= 1")

    from lake.ingest import Ingestor, IngestReport, LakeLayout, scan_landing_file
    from lake.landing import write_landing_file
    from lake.spark import build_session
    from tools.machine import cpu_model

    root = Path(a.root or tempfile.mkdtemp(prefix="kbot-bench-ingest-"))
    shutil.rmtree(root / "lake", ignore_errors=True)
    layout = LakeLayout.from_env({}, lake_dir=str(root / "lake"))
    layout.make_dirs()
    t0 = dt.datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    per_round = a.brokers * max(1, a.series // 2) * 2
    out: dict = {
        "machine": {"cores": os.cpu_count(), "cores_usable": len(os.sched_getaffinity(0)), "cpu": cpu_model()},
        "scale": {"brokers": a.brokers, "series": a.series, "rounds": a.rounds, "rows_per_round": per_round},
        "rollup_every_rounds": a.rollup_every,
        "files_per_batch": a.files_per_batch,
        "master": a.master,
        "needed_rows_per_s": round(per_round / SCRAPE_S),
    }
    print(f"generating {a.rounds} rounds of {per_round:,} rows ...", file=sys.stderr, flush=True)
    g0 = time.perf_counter()
    files = [
        write_landing_file(layout.landing, round_rows(r, a.brokers, a.series, t0), f"round-{r:04d}.jsonl")
        for r in range(a.rounds)
    ]
    out["generate_s"] = round(time.perf_counter() - g0, 1)
    out["landing_mb"] = round(sum(f.stat().st_size for f in files) / 1e6, 1)

    v0, vc0 = time.perf_counter(), os.times()
    checked = sum(scan_landing_file(f)[0] for f in files)
    validate_s = time.perf_counter() - v0
    vc1 = os.times()
    validate_cpu = (vc1.user + vc1.system) - (vc0.user + vc0.system)

    spark = build_session(a.master, app_name="kbot-bench-ingest", conf={"spark.driver.memory": a.driver_memory})
    try:
        ingestor = Ingestor(spark, layout, max_files=a.files_per_batch, rollup_every_s=3600.0)
        # warm-up, not timed: the JVM's code paths, the table's creation, a first rollup (one
        # small round an hour before the timed ones, its rollups flushed)
        held = layout.state_dir / "held"
        held.mkdir(exist_ok=True)
        for f in files:
            os.replace(f, held / f.name)
        write_landing_file(layout.landing, round_rows(-240, 2, 100, t0), "warm-up.jsonl")
        ingestor.run(rollups=False)
        ingestor.flush_rollups()
        cpu = CpuClock(spark)
        out["load_before"] = load()
        commit_s, commit_cpu, rollup_runs, rollup_cpu, batches = 0.0, 0.0, [], 0.0, []
        for i, f in enumerate(files):
            os.replace(held / f.name, f)
            if (i + 1) % a.files_per_batch == 0 or i == len(files) - 1:
                c0, cc0 = time.perf_counter(), cpu()
                batches += ingestor.run(rollups=False).batches
                commit_s += time.perf_counter() - c0
                commit_cpu += cpu() - cc0
            if (i + 1) % a.rollup_every == 0 or i == len(files) - 1:
                r0, rc0 = time.perf_counter(), cpu()
                ingestor.flush_rollups(final=False)  # as kbot run's rollup thread
                rollup_runs.append(time.perf_counter() - r0)
                rollup_cpu += cpu() - rc0
        rollup_s = sum(rollup_runs)
        # the hour row, written once an hour has closed: timed here on the minutes so far and
        # scaled to a whole hour below
        h0, hc0 = time.perf_counter(), cpu()
        ingestor.flush_rollups(final=True)
        close_s = time.perf_counter() - h0
        close_cpu = cpu() - hc0
        out["load_after"] = load()
    finally:
        spark.stop()
    report = IngestReport(batches)
    rows = report.rows
    if rows != checked or rows != per_round * a.rounds:
        print(f"ingested {rows:,} rows, expected {per_round * a.rounds:,}", file=sys.stderr)
        return 1
    out["rows"] = rows
    out["batches"] = [round(b.seconds, 2) for b in report.batches]
    out["validate"] = {
        "seconds": round(validate_s, 2),
        "rows_per_s": round(rows / validate_s),
        "cpu_s": round(validate_cpu, 2),
        "rows_per_cpu_s": round(rows / max(validate_cpu, 1e-9)),
    }
    out["commit"] = {
        "seconds": round(commit_s, 2),
        "rows_per_s": round(rows / commit_s),
        "cpu_s": round(commit_cpu, 2),
        "rows_per_cpu_s": round(rows / max(commit_cpu, 1e-9)),
    }
    out["rollups"] = {
        "seconds": round(rollup_s, 2),
        "rows_per_s": round(rows / rollup_s),
        "cpu_s": round(rollup_cpu, 2),
        "rows_per_cpu_s": round(rows / max(rollup_cpu, 1e-9)),
        "runs": len(rollup_runs),
        "runs_s": [round(x, 2) for x in rollup_runs],
    }
    minutes = -(-a.rounds * SCRAPE_S // 60)
    minute_rows = per_round * minutes  # one row per series and minute
    close_per_round = close_s * (60 / minutes) / (3600 / SCRAPE_S)  # a full hour's, spread over its rounds
    out["hour_close"] = {
        "seconds": round(close_s, 2),
        "minute_rows": minute_rows,
        "rows_per_s": round(minute_rows / close_s),
        "full_hour_s": round(close_s * 60 / minutes, 1),
        "per_round_s": round(close_per_round, 2),
        "cpu_s": round(close_cpu, 2),
    }
    sustained = rows / (commit_s + rollup_s + close_per_round * a.rounds)
    out["sustained_rows_per_s"] = round(sustained)  # with each round's share of its hour's close
    out["ratio_to_needed"] = round(sustained / out["needed_rows_per_s"], 3)
    close_cpu_per_round = close_cpu * (60 / minutes) / (3600 / SCRAPE_S)
    sustained_cpu = rows / (commit_cpu + rollup_cpu + close_cpu_per_round * a.rounds)
    out["sustained_per_cpu_s"] = round(sustained_cpu)
    if not a.root:
        shutil.rmtree(root, ignore_errors=True)

    print(
        f"ingest of {a.rounds} rounds x {per_round:,} rows ({a.brokers} brokers x {a.series:,} series, "
        f"{a.files_per_batch} landing file(s) per commit, "
        f"{out['landing_mb']} MB of landing files), Spark {a.master}, {len(os.sched_getaffinity(0))} of {os.cpu_count()} cores ({cpu_model()}), "
        f"load {out['load_before']} -> {out['load_after']}"
    )
    for phase in ("validate", "commit", "rollups"):
        print(
            f"  {phase:9s} {out[phase]['seconds']:8.2f} s  {out[phase]['rows_per_s']:>10,} rows/s   "
            f"{out[phase]['cpu_s']:8.2f} CPU s  {out[phase]['rows_per_cpu_s']:>10,} rows per CPU s"
        )
    print(
        f"  batches   {min(out['batches'])}-{max(out['batches'])} s each (a round arrives every {SCRAPE_S} s); "
        f"rollup runs {out['rollups']['runs_s']} s"
    )
    print(
        f"  hour row  {close_s:8.2f} s for {minutes} minute(s) of minute rows: a full hour's "
        f"{out['hour_close']['full_hour_s']} s once an hour, {close_per_round:.2f} s a round"
    )
    print(
        f"  sustained {sustained:,.0f} rows/s against {out['needed_rows_per_s']:,} needed "
        f"({out['ratio_to_needed']:.2f}x); {sustained_cpu:,.0f} rows per CPU second"
    )
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
