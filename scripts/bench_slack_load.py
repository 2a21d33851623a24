#!/usr/bin/env python3
"""Load benchmark: concurrent signed /kafka slash commands against the real Slack app.

Starts the local Slack Web API stand-in (tests/slack/slack_stand_in.py) in this process and the
real app in a child process, exactly as `kbot serve` runs it (HTTP mode, Bolt, signature checks,
audit log, RBAC), then fires N signed slash commands at once and reports:

  * ack latency (HTTP response to the slash command; Slack's limit is 3 s, our target p99 < 300 ms)
  * that every request was answered: a working message and a threaded answer recorded by the stand-in
  * machine info (nproc, CPU model), so the figures can be compared

    .venv/bin/python scripts/bench_slack_load.py                 # 50 requests: 40 help, 10 why URP
    .venv/bin/python scripts/bench_slack_load.py -n 200 --why 50

Exit code 0 when p99 < the target and every request was answered, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import os
import platform
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "slack"))
sys.path.insert(0, str(ROOT))

from slack_stand_in import APP_ID, TEAM, StandIn, start  # noqa: E402

BOT_TOKEN = "xoxb-bench-0000-standin"
SIGNING_SECRET = "bench-signing-secret-0123456789ab"
CHANNEL = "C0BENCH"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile: the smallest value with at least p% of the sample at or below it."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))  # ceil
    return ordered[int(rank) - 1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def signed(body: str) -> dict:
    ts = str(int(time.time()))
    sig = "v0=" + hmac.new(SIGNING_SECRET.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"Content-Type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sig}


async def start_app(stand: StandIn, state_dir: str, port: int) -> asyncio.subprocess.Process:
    env = {**os.environ, "SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET,
           "SLACK_API_URL": f"{stand.url}/api", "KBOT_STATE_DIR": state_dir, "KBOT_PORT": str(port),
           "KBOT_ALLOWED_TEAM_IDS": TEAM, "KBOT_ALLOWED_API_APP_IDS": APP_ID, "KBOT_LOG_LEVEL": "WARNING"}
    for var in ("SLACK_APP_TOKEN", "KBOT_RBAC_FILE", "KBOT_DIGEST_SCHEDULES", "KBOT_AUDIT_TOPIC"):
        env.pop(var, None)
    code = ("import argparse, sys; from bot.slack_app import register, run; p = argparse.ArgumentParser(); "
            "register(p.add_subparsers(dest='command')); sys.exit(run(p.parse_args(['serve', '--host', '127.0.0.1'])))")
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code, cwd=ROOT, env=env)
    async with aiohttp.ClientSession() as http:
        for _ in range(600):
            try:
                async with http.get(f"http://127.0.0.1:{port}/healthz") as r:
                    if r.status == 200:
                        return proc
            except aiohttp.ClientError:
                pass
            if proc.returncode is not None:
                raise SystemExit(f"the app exited with {proc.returncode} before it listened")
            await asyncio.sleep(0.1)
    proc.kill()
    raise SystemExit("the app did not listen within 60 s")


async def slash(http: aiohttp.ClientSession, url: str, text: str, user: str) -> tuple[int, float]:
    body = urlencode({"token": "legacy", "team_id": TEAM, "channel_id": CHANNEL, "user_id": user, "command": "/kafka",
                      "text": text, "api_app_id": APP_ID, "response_url": "http://127.0.0.1:9/unused", "trigger_id": "1.2.3"})
    headers = signed(body)
    started = time.perf_counter()
    async with http.post(url, data=body, headers=headers) as resp:
        await resp.read()
        return resp.status, time.perf_counter() - started


def answered(stand: StandIn) -> tuple[int, int]:
    """(working messages posted in the channel, how many of them have a threaded answer)."""
    working = [c for c in stand.called("chat.postMessage") if not c.args.get("thread_ts")]
    threads = {c.args["thread_ts"] for c in stand.called("chat.postMessage") if c.args.get("thread_ts")}
    return len(working), sum(1 for c in working if c.result.get("ts") in threads)


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--requests", type=int, default=50, help="concurrent slash commands (default 50)")
    ap.add_argument("--why", type=int, default=10, help="how many of them are 'why URP' (the rest 'help'; default 10)")
    ap.add_argument("--target-ms", type=float, default=300.0, help="p99 ack target in ms (default 300)")
    args = ap.parse_args()

    load_before = os.getloadavg()[0]
    stand = StandIn()
    users = [f"U0BENCH{i:02d}" for i in range(10)]
    for u in users:
        stand.add_user(u)
    stand_runner = await start(stand)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="kbot-bench-") as state_dir:
        app = await start_app(stand, state_dir, port)
        url = f"http://127.0.0.1:{port}/slack/events"
        try:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
                # Warm-up: Bolt's one-off auth.test and the first import-time costs are not what we measure.
                await slash(http, url, "help", users[0])
                await stand.wait_for(lambda: answered(stand)[1] >= 1, timeout_s=30)
                stand.calls.clear()

                texts = ["why URP"] * args.why + ["help"] * (args.requests - args.why)
                started = time.perf_counter()
                results = await asyncio.gather(*(slash(http, url, t, users[i % len(users)]) for i, t in enumerate(texts)))
                acked = time.perf_counter() - started
                try:
                    await stand.wait_for(lambda: answered(stand) == (args.requests, args.requests), timeout_s=120)
                except AssertionError:
                    pass
                all_answered = time.perf_counter() - started
        finally:
            app.send_signal(signal.SIGTERM)
            await asyncio.wait_for(app.wait(), 30)
    await stand_runner.cleanup()

    statuses = [s for s, _ in results]
    lat_ms = [t * 1000 for _, t in results]
    working, threaded = answered(stand)
    p50, p95, p99 = (percentile(lat_ms, p) for p in (50, 95, 99))
    load = f"{load_before:.2f} before the run, now " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"machine: nproc={os.cpu_count()} cpu='{cpu_model()}' python={platform.python_version()} "
          f"{platform.system()} {platform.release()} loadavg(1/5/15 min)={load}")
    print(f"requests: {args.requests} concurrent signed slash commands ({args.why} 'why URP', "
          f"{args.requests - args.why} 'help'); HTTP statuses: {sorted(set(statuses))}")
    print(f"ack latency ms: p50={p50:.1f} p95={p95:.1f} p99={p99:.1f} max={max(lat_ms):.1f} "
          f"mean={statistics.mean(lat_ms):.1f} (all {args.requests} acked within {acked * 1000:.0f} ms)")
    print(f"answered: {threaded}/{args.requests} with a threaded answer ({working} working messages); "
          f"all answers posted {all_answered:.2f} s after the burst started")
    ok = statuses == [200] * args.requests and threaded == args.requests and p99 < args.target_ms
    print(f"result: {'PASS' if ok else 'FAIL'} (target p99 < {args.target_ms:.0f} ms, every request answered)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
