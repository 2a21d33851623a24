"""Socket Mode against the stand-in's websocket, and `kbot serve` as a process, end to end."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

import aiohttp
from slack_harness import BOT_TOKEN, OPS, SIGNING_SECRET, sign
from slack_stand_in import APP_ID, TEAM
from waiting import async_wait_until

from bot.slack_app import EXIT_NOT_CONFIGURED, register, run
from kbot_settings import load as load_settings

ROOT = Path(__file__).resolve().parents[2]


async def test_socket_mode_acks_and_answers_in_a_thread(slack):
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

    bot = await slack.start_bot(app_token="xapp-1-A0KBOT-123-standin")
    handler = AsyncSocketModeHandler(bot.app, "xapp-1-A0KBOT-123-standin")
    await handler.connect_async()
    try:
        payload = {
            "token": "legacy",
            "team_id": TEAM,
            "channel_id": OPS,
            "user_id": "U0ALICE",
            "command": "/kafka",
            "text": "help",
            "api_app_id": APP_ID,
            "response_url": f"{slack.stand.url}/response/x",
            "trigger_id": "1.2.3",
        }
        sent = time.monotonic()
        envelope = await slack.stand.socket_send("slash_commands", payload)
        acked_at, _ = await slack.stand.wait_for(lambda: slack.stand.socket_ack(envelope))
        assert acked_at - sent < 3.0
        replies = await slack.stand.wait_for(lambda: slack.stand.thread_replies())
        await bot.drain(60)
        assert "Kafka incident bot" in json.dumps(replies[0].args["blocks"])
        assert slack.stand.called("apps.connections.open")[0].args["_token_kind"] == "xapp"
    finally:
        await handler.close_async()


def test_serve_without_tokens_says_so_and_exits_3(capsys, monkeypatch):
    for var in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    assert run(parser.parse_args(["serve"]), load_settings()) == EXIT_NOT_CONFIGURED
    assert "Slack is not configured" in capsys.readouterr().err
    assert run(parser.parse_args(["serve", "--check"]), load_settings()) == EXIT_NOT_CONFIGURED


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_serve_process_answers_signed_requests_and_stops_on_sigterm(stand, tmp_path):
    port = _free_port()
    env = {
        **os.environ,
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": f"{stand.url}/api",
        "KBOT_STATE_DIR": str(tmp_path),
        "KBOT_PORT": str(port),
        "KBOT_ALLOWED_TEAM_IDS": TEAM,
        "KBOT_LOG_LEVEL": "DEBUG",
        "KBOT_BOOTSTRAP": "",
    }
    env.pop("SLACK_APP_TOKEN", None)
    code = (
        "import argparse, sys; from bot.slack_app import register, run; p = argparse.ArgumentParser(); "
        "register(p.add_subparsers(dest='command')); import logging; logging.basicConfig(level='DEBUG'); "
        "from kbot_settings import load; sys.exit(run(p.parse_args(['serve', '--host', '127.0.0.1']), load()))"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        async with aiohttp.ClientSession() as http:

            async def healthy() -> bool:
                async with http.get(f"http://127.0.0.1:{port}/healthz") as r:
                    return r.status == 200

            # the process imports the KB and Bolt first
            await async_wait_until(
                healthy, 30, "`kbot serve` to answer /healthz", interval=0.1, ignore=(aiohttp.ClientError,)
            )
            body = f"team_id={TEAM}&channel_id={OPS}&user_id=U0ALICE&command=%2Fkafka&text=help&api_app_id={APP_ID}"
            ts = str(int(time.time()))
            headers = {
                "Content-Type": "application/x-www-form-urlencoded",
                "X-Slack-Request-Timestamp": ts,
                "X-Slack-Signature": sign(body, ts),
            }
            async with http.post(f"http://127.0.0.1:{port}/slack/events", data=body, headers=headers) as r:
                assert r.status == 200
            async with http.post(
                f"http://127.0.0.1:{port}/slack/events",
                data=body,
                headers={**headers, "X-Slack-Signature": "v0=" + "1" * 64},
            ) as r:
                assert r.status == 401
        await stand.wait_for(lambda: stand.thread_replies(), timeout_s=30)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()[-2000:]
    logs = err.decode()
    assert "Sending a request" in logs  # DEBUG logging was on...
    assert BOT_TOKEN not in logs and SIGNING_SECRET not in logs  # ...and still no secret in it
    assert any(json.loads(line)["event"] == "answer" for line in (tmp_path / "audit.jsonl").read_text().splitlines())


def test_configured_tells_run_which_way_to_go():
    from bot.slack_app import configured

    assert configured(load_settings({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"}))
    assert configured(load_settings({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}))
    assert not configured(load_settings({})) and not configured(load_settings({"SLACK_SIGNING_SECRET": "s"}))
