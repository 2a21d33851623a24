"""Benchmark: `why URP` against what a human runs today, on a cluster with one broker down.

    .venv/bin/python scripts/bench_why_urp.py [--partitions 5000] [--runs 5] [--bootstrap HOST:PORT]

Without --bootstrap it starts its own local cluster ("bench", port base 27090 or --port-base), creates topics
totalling --partitions partitions at RF=3, kills one broker and waits until every partition that
had a replica there is under-replicated. Then, side by side in one run and interleaved:

  bot      `why URP` through the bot's dispatch in a warm process (what a running bot does:
           metadata read, classification, runbook lookup, rendering to Block Kit);
  bot-cli  `kbot ask "why URP"` as a fresh process (includes Python start-up and imports);
  cli      `kafka-topics --describe --under-replicated-partitions`, i.e. TopicCommand from the
           same Kafka jars, as an operator runs it.

Targets (from the issue): bot p50 under 1 s and at least 5x faster than the CLI.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from kbot_settings import load as load_settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.render_slack import render_blocks  # noqa: E402
from commands.registry import answer  # noqa: E402
from framework.context import Context  # noqa: E402
from live.pool import GatewayPool  # noqa: E402
from localkafka.cluster import LocalCluster  # noqa: E402
from localkafka.fetch import ensure_jars  # noqa: E402


def machine() -> str:
    from bench_lake import machine_info  # the benchmarks describe the machine the same way

    m = machine_info()
    return (
        f"{platform.node()}: {m['cores']} cores, {m['cpu']}, {m['memory']}, {m['java']}, Python {m['python']}, "
        f"load average {', '.join(f'{x:.1f}' for x in m['load_avg'])}"
    )


def prepare(cluster: LocalCluster, partitions: int, victim: int) -> int:
    per_topic = 100
    topics = max(1, partitions // per_topic)
    print(f"creating {topics} topics x {per_topic} partitions (RF=3)...", flush=True)
    for i in range(topics):
        cluster.faults.create_topic(f"bench-{i:03d}", partitions=per_topic, replication_factor=3, timeout=120)
    print(f"killing broker {victim}...", flush=True)
    cluster.faults.kill_broker(victim)

    def shrunk():
        described = cluster.faults.describe([f"bench-{i:03d}" for i in range(topics)], timeout=30)
        urp = sum(1 for parts in described.values() for p in parts if victim not in p["isr"])
        return urp if urp == topics * per_topic else None

    urp = cluster.faults.wait_for(shrunk, 180, "every partition to lose the killed broker from its ISR", interval=2)
    return urp


async def time_bot(ctx: Context) -> float:
    t0 = time.perf_counter()
    result = await answer("why URP", ctx)
    render_blocks(result.reply)
    elapsed = time.perf_counter() - t0
    assert result.reply.diagnoses[0].entry_id == "broker-loss", result.reply.verdict
    return elapsed


def time_process(cmd: list[str], env: dict | None = None, expect: str = "") -> float:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    elapsed = time.perf_counter() - t0
    if out.returncode != 0 or (expect and expect not in out.stdout):
        raise RuntimeError(f"{cmd[0]} failed ({out.returncode}): {out.stderr[-800:]}")
    return elapsed


def summary(name: str, xs: list[float]) -> str:
    return f"{name:<8} p50 {statistics.median(xs):7.3f} s   min {min(xs):7.3f}   max {max(xs):7.3f}   runs {len(xs)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bootstrap", help="use an existing cluster (already degraded) instead of starting one")
    ap.add_argument("--keep", action="store_true", help="leave the bench cluster running")
    ap.add_argument("--port-base", type=int, default=27090, help="ports of the bench cluster (default 27090)")
    args = ap.parse_args()

    cluster = None
    if args.bootstrap:
        bootstrap = args.bootstrap
        urp = None
    else:
        cluster = LocalCluster(name="bench", port_base=args.port_base)
        cluster.destroy()
        print("starting the bench cluster...", flush=True)
        cluster.up(timeout=240)
        bootstrap = cluster.bootstrap_servers
        urp = prepare(cluster, args.partitions, victim=103)
    try:
        env = {**os.environ, "KBOT_BOOTSTRAP": bootstrap}
        pool = GatewayPool(load_settings({"KBOT_BOOTSTRAP": bootstrap, "KBOT_ADMIN_TIMEOUT_S": "30"}))
        ctx = Context(live=pool)
        loop = asyncio.new_event_loop()
        loop.run_until_complete(time_bot(ctx))  # first call opens the admin connection: not timed
        libs = ensure_jars()  # the libs directory
        cli_cmd = [
            "java",
            "-Xmx512m",
            "-cp",
            f"{libs}/*",
            "org.apache.kafka.tools.TopicCommand",
            "--bootstrap-server",
            bootstrap,
            "--describe",
            "--under-replicated-partitions",
        ]
        bot_cli_cmd = [str(ROOT / ".venv" / "bin" / "kbot"), "ask", "why URP"]
        times: dict[str, list[float]] = {"bot": [], "bot-cli": [], "cli": []}
        for i in range(args.runs):
            times["bot"].append(loop.run_until_complete(time_bot(ctx)))
            times["bot-cli"].append(time_process(bot_cli_cmd, env, expect="Broker loss"))
            times["cli"].append(time_process(cli_cmd, expect="Topic:"))
            print(
                f"run {i + 1}: bot {times['bot'][-1]:.3f} s, bot-cli {times['bot-cli'][-1]:.3f} s, "
                f"cli {times['cli'][-1]:.3f} s",
                flush=True,
            )
        loop.run_until_complete(pool.close())
        loop.close()
        print()
        print(f"machine: {machine()}")
        print(
            f"cluster: 3 brokers (one killed), {args.partitions:,} partitions at RF=3"
            + (f", {urp:,} under-replicated" if urp is not None else f" at {bootstrap}")
        )
        for name, xs in times.items():
            print(summary(name, xs))
        ratio = statistics.median(times["cli"]) / statistics.median(times["bot"])
        ratio_cold = statistics.median(times["cli"]) / statistics.median(times["bot-cli"])
        print(f"ratio cli/bot (warm bot): {ratio:.1f}x   cli/bot-cli (cold process): {ratio_cold:.1f}x")
        p50 = statistics.median(times["bot"])
        print(
            f"targets: bot p50 < 1 s: {'met' if p50 < 1 else 'NOT met'} ({p50:.3f} s); "
            f">= 5x faster than the CLI: {'met' if ratio >= 5 else 'NOT met'} ({ratio:.1f}x)"
        )
        return 0
    finally:
        if cluster is not None and not args.keep:
            cluster.destroy()


if __name__ == "__main__":
    raise SystemExit(main())
