#!/usr/bin/env python
"""Benchmark: how long after the live part of `why URP` its metric-lake part arrives, in the
minutes after a broker dies (issue 26: <= 2 s at idle, <= 5 s at load ~15, never a timeout in the
10 minutes after a fault, and the live part never held back by the lake).

On a real local Kafka cluster (1 controller + 3 brokers with the JMX exporter; reused when it runs
at --cluster-dir, else started and stopped at the end) with a few RF=3 topics and a little producer
traffic, the lake runs in this process as `kbot run` runs it: the collector (a round every 10 s,
the exporters' samples into the landing folder), ``ContinuousIngest`` committing each landing file
as it appears (rollups at most once a minute), and a ``LakeService`` built from the settings (the
product's default 30 s lake time limit).  The Context is the bot's (``bot.app.make_context``: the
packaged runbook, the live cluster, the gate), with that lake.

After --warmup-s of collection one broker is SIGKILLed (``faults.kill_broker``, as the fault
tests do), and for --after-s `why URP --since 5m` is asked every --every-s through
``framework.dispatch.answer(..., early=True)``, as the terminal and Slack ask it: the live part
first, the lake's part from ``reply.later``.  Per ask it records the seconds to the live part,
the seconds from the live part to the lake part (0 when the lake part came with the live part),
whether the lake part timed out or was missing, and the 1-minute load average.  Asks during the
warm-up are recorded too (phase "before"), apart from the figures after the kill.

Usage::

    .venv/bin/python scripts/bench_lake_after_live.py --port-base 22090 --cluster-dir /tmp/h4-cluster \\
        --lake-dir /tmp/h4-lake [--warmup-s 150] [--after-s 600] [--every-s 15] [--json]

At the end the killed broker is restarted, the topics it made are deleted (and the cluster stopped
when this run started it), and the lake it wrote is kept in --lake-dir (a temporary folder,
removed, without it).  Ctrl-C or SIGTERM ends the run the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kbot_settings import load as load_settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))  # bench_freshness: the load sampler and the percentile

QUESTION = "why URP --since 5m"
CLUSTER_NAME = "bench"
#: `kbot run`'s collection (cli/run.py start_collection: `lake collect --interval 10 --ingest-follow`)
INTERVAL_S = 10.0
#: the lake's notes when its part did not come: its query past the time limit, or no part at all
TIMEOUT_MARKS = ("did not answer within", "ran past its time limit", "query was cancelled")
MISSING_MARKS = ("still coming", "could not be added", "has no lake evidence")
TARGET_IDLE_S = 2.0
TARGET_LOADED_S = 5.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port-base", type=int, default=22090, help="port base of the local cluster (default 22090)")
    p.add_argument(
        "--cluster-dir",
        default="/tmp/kbot-bench-lake-after-live",
        help="its folder (used if the cluster there runs, else started there and stopped at the end)",
    )
    p.add_argument(
        "--lake-dir",
        help="folder for the lake and the bot's state (kept; its lake/ is emptied first). Default: temporary",
    )
    p.add_argument("--warmup-s", type=float, default=150.0, help="seconds of collection before the kill (default 150)")
    p.add_argument("--after-s", type=float, default=600.0, help="seconds of asking after the kill (default 600)")
    p.add_argument("--every-s", type=float, default=15.0, help="seconds between asks (default 15)")
    p.add_argument("--kill", type=int, default=102, choices=(101, 102, 103), help="the broker to SIGKILL (default 102)")
    p.add_argument("--topics", type=int, default=3, help="RF=3 topics (default 3)")
    p.add_argument("--partitions", type=int, default=6, help="partitions per topic (default 6)")
    p.add_argument("--rate", type=float, default=20.0, help="records/s produced into each topic (default 20)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    args = p.parse_args(argv)
    if args.warmup_s < 0 or args.after_s <= 0 or args.every_s <= 0:
        p.error("--warmup-s >= 0, --after-s > 0 and --every-s > 0")
    if args.topics < 1 or args.partitions < 1 or args.rate < 0:
        p.error("--topics >= 1, --partitions >= 1 and --rate >= 0")
    # the cluster uses port base .. base + 13 (listeners, then the exporters at +10); stay below
    # Linux's ephemeral range, where a client's outgoing port could take one first
    if not 1024 <= args.port_base <= 32768 - 14:
        p.error("--port-base must be 1024..32754 (its ports stay below 32768)")
    return args


# --------------------------------------------------------------------------- the machine


def machine() -> dict[str, Any]:
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = round(int(line.split()[1]) / 1024**2, 1)
                break
    except OSError:
        pass
    return {"cores": os.cpu_count(), "model": model, "memory_gib": mem_gib}


# --------------------------------------------------------------------------- one ask


@dataclass
class Ask:
    phase: str  # "before" (the warm-up) or "after" (the kill)
    t_s: float  # seconds after the kill (negative before it)
    live_s: float  # seconds until answer(..., early=True) returned: the live part
    # seconds from the live part to the lake part (0: they came together), or to the note that
    # replaced it when it is missing; None when not even that came
    gap_s: float | None
    lake_late: bool  # the lake part came after the live part (reply.later)
    timed_out: bool  # the lake's query ran past its time limit
    missing: bool  # the answer has no lake part (timed out, unavailable, or it never came)
    load_1m: float
    verdict: str
    lake_freshness: str | None  # the lake's own header: "data to HH:MM:SS UTC, N s before this answer"
    lake_note: str | None  # the lake's note when its part timed out or is missing


def judge(reply: Any) -> tuple[bool, bool, str | None, str | None]:
    """(timed out, missing, the lake's note about it, the lake's freshness line) of a complete reply."""
    notes = [n for n in reply.notes if "lake" in n.lower()]
    timed_out = any(m in n for n in notes for m in TIMEOUT_MARKS)
    lake_lines = [e for e in reply.evidence if str(e.source).startswith("lake")]
    missing = timed_out or not lake_lines or any(m in n for n in notes for m in MISSING_MARKS)
    note = next((n for n in notes if any(m in n for m in (*TIMEOUT_MARKS, *MISSING_MARKS))), None)
    fresh = next((e.value for e in lake_lines if e.source == "lake: freshness"), None)
    return timed_out, missing, note, fresh


async def ask_once(ctx: Any, phase: str, t_s: float, lake_budget_s: float) -> Ask:
    """One `why URP` as a transport asks it (bot/console.py _answer_and_emit): the live part, then
    the lake's part when it was not ready with it."""
    from commands.registry import answer
    from framework.dispatch import complete

    t0 = time.monotonic()
    result = await answer(QUESTION, ctx, user=getattr(ctx.gate, "acting_user", None), early=True)
    live_s = time.monotonic() - t0
    late = result.reply.later is not None
    gap: float | None = 0.0
    final = result
    if late:
        t1 = time.monotonic()
        try:
            # the lake's own limit is inside (LakeTimeout -> a note); this only guards the benchmark
            final = await asyncio.wait_for(complete(result), lake_budget_s + 60)
            gap = time.monotonic() - t1
        except asyncio.TimeoutError:
            gap = None
    timed_out, missing, note, fresh = judge(final.reply)
    if gap is None:
        missing, note = True, f"no lake part within {lake_budget_s + 60:.0f} s of the live part"
    return Ask(
        phase=phase,
        t_s=round(t_s, 1),
        live_s=round(live_s, 3),
        gap_s=None if gap is None else round(gap, 3),
        lake_late=late,
        timed_out=timed_out,
        missing=missing,
        load_1m=round(os.getloadavg()[0], 2),
        verdict=" ".join(final.reply.verdict.split())[:100],
        lake_freshness=fresh,
        lake_note=note,
    )


def progress(a: Ask) -> None:
    lake = (
        "lake TIMED OUT"
        if a.timed_out
        else "lake MISSING"
        if a.missing
        else f"lake +{a.gap_s:.2f} s"
        if a.lake_late
        else "lake with it"
    )
    print(
        f"  {a.phase:<6} {a.t_s:+7.0f} s  live {a.live_s:6.2f} s  {lake:<15} load {a.load_1m:5.2f}  {a.verdict[:70]}",
        file=sys.stderr,
        flush=True,
    )


# --------------------------------------------------------------------------- the run


async def measure(args: argparse.Namespace, cluster: Any, env: dict[str, str], lake_dir: Path) -> dict[str, Any]:
    """The lake as `kbot run` runs it, the warm-up, the kill and the asks. Returns the asks and the
    load samples of the part after the kill."""
    from lake.ingest import LakeLayout
    from lake.spark import build_session

    layout = LakeLayout.from_settings(load_settings(env))
    # what `lake collect --ingest-follow` starts without KBOT_SPARK_MASTER; Spark's JVM writes its
    # start-up lines to a file, not between the asks' lines
    spark = build_session("local[2]", app_name="kbot-lake-ingest", log_path=lake_dir / "spark.log")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        return await _measure(args, cluster, env, spark, layout)
    finally:
        spark.stop()


async def _measure(
    args: argparse.Namespace, cluster: Any, env: dict[str, str], spark: Any, layout: Any
) -> dict[str, Any]:
    from bench_freshness import LoadSampler

    from bot.app import close_context, make_context
    from lake.collector import Collector, targets_from_urls
    from lake.ingest import ContinuousIngest, Ingestor
    from lake.service import LakeService

    follower = ContinuousIngest(Ingestor(spark, layout, rollup_every_s=60)).start()
    collector = Collector(
        targets_from_urls(cluster.metrics_urls), layout.landing, CLUSTER_NAME, interval_s=INTERVAL_S, source="exporters"
    )
    # the bot's context (KBOT_LAKE=0: make_context starts no lake of its own), with the lake as
    # the settings make it (KBOT_LAKE_TIMEOUT_S's default) over this process's Spark session
    ctx = make_context(load_settings({**env, "KBOT_LAKE": "0"}), lake=False)
    ctx.lake = LakeService.from_settings(load_settings(env), spark=spark, warm=False).start()
    lake_budget_s = float(ctx.lake.query_timeout_s)
    stop = asyncio.Event()
    collecting = asyncio.create_task(collector.run(stop=stop, on_round=lambda report: follower.notify()))
    asks: list[Ask] = []
    out: dict[str, Any] = {"lake_timeout_s": lake_budget_s, "asks": asks}

    async def ask_until(phase: str, end: float, zero: float) -> None:
        next_at = time.monotonic()
        while time.monotonic() < end:
            a = await ask_once(ctx, phase, time.monotonic() - zero, lake_budget_s)
            asks.append(a)
            progress(a)
            next_at += args.every_s
            now = time.monotonic()
            if next_at < now:  # an ask took longer than the interval: the next one starts now
                next_at = now
            await asyncio.sleep(max(0.0, min(next_at, end) - now))

    try:
        began = time.monotonic()
        print(f"warm-up: collecting for {args.warmup_s:.0f} s, asking every {args.every_s:g} s", file=sys.stderr)
        await ask_until("before", began + args.warmup_s, began + args.warmup_s)
        await asyncio.sleep(max(0.0, began + args.warmup_s - time.monotonic()))
        killed = await asyncio.to_thread(cluster.faults.kill_broker, args.kill)
        killed_at = time.monotonic()
        out["killed"] = killed
        print(f"SIGKILLed broker {args.kill} (pid {killed['pid']}); asking for {args.after_s:.0f} s", file=sys.stderr)
        with LoadSampler() as load:
            await ask_until("after", killed_at + args.after_s, killed_at)
        out["load_samples"] = load.samples
        out["ingest"] = {"runs": follower.runs, "rollup_runs": follower.rollup_runs, "last_error": follower.last_error}
    finally:
        stop.set()
        try:
            await asyncio.wait_for(collecting, 60)
        except (asyncio.TimeoutError, Exception) as exc:  # noqa: BLE001 - the shutdown goes on
            print(f"stopping the collector: {type(exc).__name__}: {exc}", file=sys.stderr)
        await asyncio.to_thread(follower.stop)
        await close_context(ctx)  # the live pool; the lake leaves the session it was given
    return out


def percentile(values: list[float], q: float) -> float:
    from bench_freshness import percentile as nearest_rank

    return float(nearest_rank(values, q))


def summarize(asks: list[Ask], load: list[float], cores: int) -> dict[str, Any]:
    after = [a for a in asks if a.phase == "after"]
    before = [a for a in asks if a.phase == "before"]
    gaps = [a.gap_s for a in after if a.gap_s is not None and not a.missing]  # the lake parts that came
    live = [a.live_s for a in after]
    load = load or [a.load_1m for a in after]
    out: dict[str, Any] = {
        "asks": len(after),
        "lake_late": sum(a.lake_late for a in after),
        "timeouts": sum(a.timed_out for a in after),
        "missing": sum(a.missing for a in after),
        "gap_p50_s": round(statistics.median(gaps), 2) if gaps else None,
        "gap_p95_s": round(percentile(gaps, 95), 2) if gaps else None,
        "gap_max_s": round(max(gaps), 2) if gaps else None,
        "live_p50_s": round(statistics.median(live), 2) if live else None,
        "live_p95_s": round(percentile(live, 95), 2) if live else None,
        "live_max_s": round(max(live), 2) if live else None,
        "load_1m": {
            "min": round(min(load), 2) if load else None,
            "mean": round(statistics.mean(load), 2) if load else None,
            "max": round(max(load), 2) if load else None,
        },
        "before_kill": {
            "asks": len(before),
            "gap_max_s": max(
                (round(a.gap_s, 2) for a in before if a.gap_s is not None and not a.missing), default=None
            ),
            "live_p50_s": round(statistics.median([a.live_s for a in before]), 2) if before else None,
            "missing": sum(a.missing for a in before),
        },
    }
    mean_load = out["load_1m"]["mean"] or 0.0
    # the two loads: idle (no run queue beyond the cores) and ~15; in between the
    # lenient limit applies
    applies = "idle" if mean_load <= cores else "load ~15"
    limit = TARGET_IDLE_S if applies == "idle" else TARGET_LOADED_S
    gap_max = out["gap_max_s"]
    out["targets"] = {
        "applies": applies,
        "gap_limit_s": limit,
        "gap_met": gap_max is not None and gap_max <= limit and out["missing"] == 0,
        "gap_idle_met": gap_max is not None and gap_max <= TARGET_IDLE_S and out["missing"] == 0,
        "gap_loaded_met": gap_max is not None and gap_max <= TARGET_LOADED_S and out["missing"] == 0,
        "no_timeouts_met": out["timeouts"] == 0 and out["missing"] == 0,
    }
    return out


def print_report(doc: dict[str, Any]) -> None:
    m, s, cfg = doc["machine"], doc["summary"], doc["config"]
    print(
        f"why URP's lake part after its live part: broker {cfg['kill']} SIGKILLed after {cfg['warmup_s']:.0f} s of "
        f"collection, `{QUESTION}` every {cfg['every_s']:g} s for {cfg['after_s']:.0f} s "
        f"(lake time limit {doc['lake_timeout_s']:g} s)"
    )
    print(f"machine: {m['cores']} cores, {m['model']}, {m['memory_gib']} GiB")
    print()
    print(f"{'phase':<7}{'t (s)':>7}{'live (s)':>10}{'lake +(s)':>11}  {'load':>6}  verdict / lake note")
    for a in doc["asks"]:
        lake = "timeout" if a["timed_out"] else "MISSING" if a["missing"] else f"{a['gap_s']:.2f}"
        if a["missing"] and a["gap_s"] is not None:
            lake += f" {a['gap_s']:.0f}"
        what = a["lake_note"] if a["missing"] else a["verdict"]
        print(
            f"{a['phase']:<7}{a['t_s']:>7.0f}{a['live_s']:>10.2f}{lake:>11}  {a['load_1m']:>6.2f}  {(what or '')[:80]}"
        )
    print()
    load = s["load_1m"]
    t = s["targets"]
    print(
        f"after the kill: {s['asks']} asks; lake part after the live part p50 {s['gap_p50_s']} s, p95 "
        f"{s['gap_p95_s']} s, max {s['gap_max_s']} s (later than the live part in {s['lake_late']}, with it in "
        f"the rest); live part p50 {s['live_p50_s']} s, p95 {s['live_p95_s']} s, max {s['live_max_s']} s"
    )
    print(f"lake timeouts {s['timeouts']} (target 0), lake part missing {s['missing']}")
    print(
        f"1-minute load during the asks: min {load['min']}, mean {load['mean']}, max {load['max']} ({m['cores']} cores)"
    )
    b = s["before_kill"]
    print(
        f"before the kill: {b['asks']} asks, lake part after the live part max {b['gap_max_s']} s, live p50 "
        f"{b['live_p50_s']} s, lake part missing {b['missing']}"
    )

    def ok(flag: bool) -> str:
        return "met" if flag else "NOT MET"

    print(
        f"targets: lake part <= {TARGET_IDLE_S:g} s after the live part at idle: {ok(t['gap_idle_met'])}; "
        f"<= {TARGET_LOADED_S:g} s at load ~15: {ok(t['gap_loaded_met'])} (this run's load: the "
        f"{t['applies']} target, {ok(t['gap_met'])}); no lake timeout after the fault: {ok(t['no_timeouts_met'])}"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM ends the run as Ctrl-C does: the broker restarted, everything started stopped
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    from bot.app import local_settings
    from kbot_settings import KbotSettings
    from localkafka.cluster import LocalCluster
    from localkafka.common import ClusterError

    lake_dir = Path(args.lake_dir) if args.lake_dir else Path(tempfile.mkdtemp(prefix="kbot-lake-after-live-"))
    lake_dir = lake_dir.resolve()
    shutil.rmtree(lake_dir / "lake", ignore_errors=True)  # each run's lake starts empty: the warm-up is its past
    shutil.rmtree(lake_dir / "home", ignore_errors=True)
    (lake_dir / "home").mkdir(parents=True, exist_ok=True)

    cluster = LocalCluster(name=CLUSTER_NAME, base_dir=args.cluster_dir, port_base=args.port_base)
    started = not any(n["alive"] for n in cluster.status()["nodes"])
    print(
        f"{'starting' if started else 'reusing'} the local cluster in {cluster.base_dir} (port base {args.port_base})",
        file=sys.stderr,
        flush=True,
    )
    topics = [f"after-live-{uuid.uuid4().hex[:6]}-{i}" for i in range(args.topics)]
    doc: dict[str, Any] | None = None
    error: str | None = None
    try:
        cluster.up(timeout=300)  # nodes that already run are left as they are
        faults = cluster.faults
        for topic in topics:
            # a plain producer (no key is hot: hot_ratio 0) into a new RF=3 topic, stopped by heal()
            faults.hot_key_producer(topic, rate=args.rate, hot_ratio=0.0, partitions=args.partitions)
        # the bot's configuration as `kbot run` makes it for the local cluster, in this run's folders;
        # nothing of the caller's bot settings (KBOT_*, SLACK_*) leaks in
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("KBOT_", "SLACK_")) or k in ("KBOT_CACHE_DIR", "KBOT_SPARK_LOG")
        }
        env.update(local_settings(KbotSettings(), cluster, CLUSTER_NAME).child_environ())
        env.update(
            {
                "KBOT_HOME": str(lake_dir / "home"),
                "KBOT_LAKE_DIR": str(lake_dir / "lake"),
                "KBOT_LAKE_CLUSTER": CLUSTER_NAME,
                "KBOT_SPARK_MASTER": "local[2]",
            }
        )
        out = asyncio.run(measure(args, cluster, env, lake_dir))
        asks = [asdict(a) for a in out["asks"]]
        info = machine()
        doc = {
            "command": [Path(sys.argv[0]).name, *(sys.argv[1:] if argv is None else argv)],
            "machine": info,
            "config": {
                "warmup_s": args.warmup_s,
                "after_s": args.after_s,
                "every_s": args.every_s,
                "kill": args.kill,
                "topics": args.topics,
                "partitions": args.partitions,
                "rate": args.rate,
                "collect_interval_s": INTERVAL_S,
                "cluster_started": started,
                "lake_dir": str(lake_dir),
            },
            "lake_timeout_s": out["lake_timeout_s"],
            "killed": out.get("killed"),
            "ingest": out.get("ingest"),
            "asks": asks,
            "summary": summarize(out["asks"], out.get("load_samples", []), info["cores"] or 1),
        }
    except KeyboardInterrupt:
        error = "interrupted"
    except (ClusterError, OSError) as exc:
        error = " ".join(str(exc).split())[:300]
    finally:
        print("cleaning up: restarting the killed broker, stopping the producers", file=sys.stderr, flush=True)
        try:
            cluster.faults.heal(timeout=240)  # restarts dead nodes, stops the producers, waits for full ISRs
        except Exception as exc:  # noqa: BLE001 - the rest of the cleanup goes on
            print(f"heal: {' '.join(str(exc).split())[:300]}", file=sys.stderr)
        try:  # the next run on this cluster dir starts with its own topics only
            fs = cluster.admin().delete_topics(topics, request_timeout=30)
            for f in fs.values():
                f.result(30)
        except Exception as exc:  # noqa: BLE001 - a topic left behind is no failure of the run
            print(f"deleting the topics: {' '.join(str(exc).split())[:200]}", file=sys.stderr)
        if started:
            cluster.down()
        if not args.lake_dir:
            shutil.rmtree(lake_dir, ignore_errors=True)
    if doc is None:
        print(f"error: {error or 'the run ended without figures'}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print_report(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
