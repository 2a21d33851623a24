#!/usr/bin/env python3
"""Load benchmark: concurrent signed /kafka slash commands into one channel, under Slack's rate limits.

Starts the local Slack Web API stand-in (tests/slack/slack_stand_in.py) in this process, with Slack's
per-channel limit switched on (a burst of 3, then about one chat.postMessage a second per channel,
429 + Retry-After beyond it; --no-rate-limit turns it off), and the real app in a child process,
exactly as `kbot serve` runs it (HTTP mode, Bolt, signature checks, audit log, RBAC). Then it fires
N signed slash commands at once into one channel and reports:

  * ack latency (HTTP response to the slash command; Slack's limit is 3 s, our target p99 < 300 ms)
  * answers delivered: a threaded answer, or (the same question asked while it was being answered)
    a private pointer to the thread that answers it; answered privately for any other reason (must
    be 0) and 429s the stand-in answered
  * time from the burst to the last answer
  * machine info (nproc, CPU model, load), so the figures can be compared

    .venv/bin/python scripts/bench_slack_load.py                      # 50: 10 why URP, 40 over 6 other questions
    .venv/bin/python scripts/bench_slack_load.py -n 200 --why 50
    .venv/bin/python scripts/bench_slack_load.py -n 50 --distinct     # no coalescing: the queue alone

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
sys.path.insert(0, str(ROOT / "tests"))  # block_limits, which the stand-in checks every post with
sys.path.insert(0, str(ROOT))

from slack_stand_in import APP_ID, TEAM, StandIn, start  # noqa: E402

from bot.slack_answer import POINTER  # noqa: E402  - what the private pointer to a thread says
from tools.machine import cpu_model  # noqa: E402

BOT_TOKEN = "xoxb-bench-0000-standin"
SIGNING_SECRET = "bench-signing-secret-0123456789ab"
CHANNEL = "C0BENCH"


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
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": sig,
    }


async def start_app(stand: StandIn, state_dir: str, port: int) -> asyncio.subprocess.Process:
    env = {
        **os.environ,
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": f"{stand.url}/api",
        "KBOT_STATE_DIR": state_dir,
        "KBOT_PORT": str(port),
        "KBOT_ALLOWED_TEAM_IDS": TEAM,
        "KBOT_ALLOWED_API_APP_IDS": APP_ID,
        "KBOT_LOG_LEVEL": "WARNING",
    }
    for var in ("SLACK_APP_TOKEN", "KBOT_RBAC_FILE", "KBOT_DIGEST_SCHEDULES", "KBOT_AUDIT_TOPIC"):
        env.pop(var, None)
    code = (
        "import argparse, sys; from bot.slack_app import register, run; p = argparse.ArgumentParser(); "
        "register(p.add_subparsers(dest='command')); sys.exit(run(p.parse_args(['serve', '--host', '127.0.0.1'])))"
    )
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
    body = urlencode(
        {
            "token": "legacy",
            "team_id": TEAM,
            "channel_id": CHANNEL,
            "user_id": user,
            "command": "/kafka",
            "text": text,
            "api_app_id": APP_ID,
            "response_url": "http://127.0.0.1:9/unused",
            "trigger_id": "1.2.3",
        }
    )
    headers = signed(body)
    started = time.perf_counter()
    async with http.post(url, data=body, headers=headers) as resp:
        await resp.read()
        return resp.status, time.perf_counter() - started


# The non-'why URP' requests cycle over these (KB-only questions: no cluster needed).
OTHER_QUESTIONS = [
    "help",
    "runbook hanging transaction",
    "why offline",
    "why NotEnoughReplicas",
    "runbook PRODUCER_FENCED",
    "help why",
]


def answered(stand: StandIn) -> tuple[int, int, int, int]:
    """(working messages, of them with a threaded answer, private pointers to a thread, other private answers)."""
    working = [c for c in stand.called("chat.postMessage") if not c.args.get("thread_ts")]
    threads = {c.args["thread_ts"] for c in stand.called("chat.postMessage") if c.args.get("thread_ts")}
    private = stand.called("chat.postEphemeral") + stand.called("response_url")
    pointers = sum(1 for c in private if POINTER in str(c.args))
    return len(working), sum(1 for c in working if c.result.get("ts") in threads), pointers, len(private) - pointers


def delivered(stand: StandIn) -> int:
    _, threaded, pointers, _ = answered(stand)
    return threaded + pointers


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--requests", type=int, default=50, help="concurrent slash commands (default 50)")
    ap.add_argument(
        "--why",
        type=int,
        default=10,
        help="how many of them are 'why URP' (the rest cycle over 6 other questions; default 10)",
    )
    ap.add_argument("--target-ms", type=float, default=300.0, help="p99 ack target in ms (default 300)")
    ap.add_argument(
        "--distinct",
        action="store_true",
        help="every request a different question ('why URP case-N'): nothing coalesces, every answer "
        "is built and posted, so this measures the delivery queue against the rate limit alone",
    )
    ap.add_argument("--no-rate-limit", action="store_true", help="the stand-in answers every post (no 429s)")
    args = ap.parse_args()
    if args.requests < 1 or not 0 <= args.why <= args.requests:
        ap.error("need -n >= 1 and 0 <= --why <= -n")

    load_before = os.getloadavg()[0]
    stand = StandIn()
    if not args.no_rate_limit:
        stand.pace_channels(burst=3, per_s=1.0)
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
                # Past the coalescing window, so the warm-up's 'help' thread does not answer the burst's.
                await asyncio.sleep(31)
                stand.calls.clear()

                others = [OTHER_QUESTIONS[i % len(OTHER_QUESTIONS)] for i in range(args.requests - args.why)]
                texts = ["why URP"] * args.why + others
                if args.distinct:
                    texts = [f"why URP case-{i}" for i in range(args.requests)]
                started = time.perf_counter()
                results = await asyncio.gather(
                    *(slash(http, url, t, users[i % len(users)]) for i, t in enumerate(texts))
                )
                acked = time.perf_counter() - started
                try:
                    await stand.wait_for(lambda: delivered(stand) >= args.requests, timeout_s=600)
                except AssertionError:
                    pass
                last_answer = time.perf_counter() - started
        finally:
            app.send_signal(signal.SIGTERM)
            await asyncio.wait_for(app.wait(), 30)
    await stand_runner.cleanup()

    statuses = [s for s, _ in results]
    lat_ms = [t * 1000 for _, t in results]
    working, threaded, pointers, private = answered(stand)
    limited = sum(1 for c in stand.calls if c.status == 429)
    posts = stand.called("chat.postMessage")
    p50, p95, p99 = (percentile(lat_ms, p) for p in (50, 95, 99))
    load = f"{load_before:.2f} before the run, now " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"machine: nproc={os.cpu_count()} cpu='{cpu_model()}' python={platform.python_version()} "
        f"{platform.system()} {platform.release()} loadavg(1/5/15 min)={load}"
    )
    mix = (
        f"{args.requests} different questions"
        if args.distinct
        else f"{args.why} 'why URP', {args.requests - args.why} over {min(len(OTHER_QUESTIONS), args.requests - args.why)} other questions"
    )
    print(
        f"requests: {args.requests} concurrent signed slash commands in one channel ({mix}); "
        f"rate limit {'off' if args.no_rate_limit else 'on (burst 3, then 1 chat.postMessage/s per channel)'}; "
        f"HTTP statuses: {sorted(set(statuses))}"
    )
    print(
        f"ack latency ms: p50={p50:.1f} p95={p95:.1f} p99={p99:.1f} max={max(lat_ms):.1f} "
        f"mean={statistics.mean(lat_ms):.1f} (all {args.requests} acked within {acked * 1000:.0f} ms)"
    )
    print(
        f"answers delivered: {threaded + pointers}/{args.requests} ({threaded} threads of {working} working messages, "
        f"{pointers} pointers to a thread already answering the same question); answered privately otherwise: {private}"
    )
    print(
        f"Slack traffic: {len(posts)} chat.postMessage, {limited} answered 429 and sent again after Retry-After; "
        f"last answer {last_answer:.2f} s after the burst started"
    )
    ok = (
        statuses == [200] * args.requests
        and threaded + pointers == args.requests
        and private == 0
        and p99 < args.target_ms
    )
    print(
        f"result: {'PASS' if ok else 'FAIL'} (target p99 < {args.target_ms:.0f} ms, every request answered, none privately)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
