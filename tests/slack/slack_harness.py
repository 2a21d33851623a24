"""The harness: the real Bolt app over HTTP on a random port, signed requests, and what the stand-in saw."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from pathlib import Path
from urllib.parse import urlencode

import aiohttp
from aiohttp import web
from slack_fakes import PROGRESSING, FakeAction, FakeDigest, router_with
from slack_stand_in import APP_ID, TEAM, StandIn

from bot.slack_bot import KafkaBot
from bot.slack_settings import SlackSettings
from framework.context import Context
from gate.rbac import Policy
from kbot_settings import load as load_settings
from runbook_kb import default_kb

BOT_TOKEN = "xoxb-1111-2222-standinbottoken"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
OPS, INCIDENTS, RANDOM = "C0OPS", "C0INC", "C0RANDOM"

POLICY = {
    "channels": [OPS, INCIDENTS, "C0NOTIN", "C0KAFKAOPS"],
    "read_only": "open",
    "grants": [
        {"name": "oncall-alice", "users": ["U0ALICE"], "commands": ["fake-bump", "fake-abort"]},
        {"name": "oncall-group", "groups": ["S0ONCALL"], "commands": ["fake-bump", "fake-abort"]},
    ],
    "deny": [{"name": "no-mallory", "users": ["U0MALLORY"], "commands": ["*"]}],
}


class FakeClock:
    def __init__(self, now: float = 1_750_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def sign(body: str, ts: str, secret: str = SIGNING_SECRET) -> str:
    """Slack's request signature: v0=HMAC-SHA256(secret, 'v0:' + timestamp + ':' + body)."""
    return "v0=" + hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()


class Harness:
    def __init__(self, stand: StandIn, state_dir: Path):
        self.stand = stand
        self.state_dir = state_dir
        self.bump = FakeAction("fake-bump")
        self.abort = FakeAction("fake-abort", high_risk=True)
        self.digest = FakeDigest()
        self.router = router_with(self.bump.command(), self.abort.command(), self.digest.command(), PROGRESSING)
        self.clock = FakeClock()
        self.bot: KafkaBot | None = None
        self.url = ""
        self.port = 0
        self._runner: web.AppRunner | None = None
        self.session = aiohttp.ClientSession()

    def settings(self, **overrides) -> SlackSettings:
        base = dict(
            bot_token=BOT_TOKEN,
            signing_secret=SIGNING_SECRET,
            api_url=self.stand.url + "/api/",
            allowed_team_ids=frozenset({TEAM}),
            allowed_api_app_ids=frozenset({APP_ID}),
            state_dir=self.state_dir,
            confirm_ttl_s=900,
            # the rest of the bot's settings (alert routes, clusters, the health address): this test
            # process's environment, loaded here - the harness is the test's process edge
            kbot=load_settings(),
        )
        return SlackSettings(**{**base, **overrides})

    async def start_bot(
        self, policy: dict | None = POLICY, *, audit=None, host: str = "127.0.0.1", **overrides
    ) -> KafkaBot:
        """Start (or restart, as after a crash) the real app on a random port of ``host``
        ("0.0.0.0": every address, as `kbot serve` listens); ``url`` reaches it over 127.0.0.1."""
        if self._runner is not None:
            await self._runner.cleanup()
        self.bot = KafkaBot(
            self.settings(**overrides),
            ctx=Context(kb=default_kb()),
            router=self.router,
            policy=Policy.from_dict(policy) if policy is not None else None,
            clock=self.clock,
            audit=audit,
        )
        self._runner = web.AppRunner(self.bot.web_app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/slack/events"
        return self.bot

    async def post(
        self,
        body: str,
        content_type: str,
        *,
        ts: str | None = None,
        secret: str = SIGNING_SECRET,
        signature: str | None = None,
        headers: dict | None = None,
    ):
        ts = ts or str(int(time.time()))
        hdrs = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": signature or sign(body, ts, secret),
            **(headers or {}),
        }
        started = time.monotonic()
        async with self.session.post(self.url, data=body.encode(), headers=hdrs) as resp:
            text = await resp.text()
            return resp.status, text, time.monotonic() - started

    async def slash(
        self,
        text: str,
        *,
        user: str = "U0ALICE",
        channel: str = OPS,
        team: str = TEAM,
        app: str = APP_ID,
        enterprise: str | None = None,
        **kw,
    ):
        grid = {"enterprise_id": enterprise, "enterprise_name": "Grid"} if enterprise else {}
        body = urlencode(
            {
                "token": "legacy-verification",
                "team_id": team,
                "team_domain": "standin",
                **grid,
                "channel_id": channel,
                "channel_name": "ops",
                "user_id": user,
                "user_name": user.lower(),
                "command": "/kafka",
                "text": text,
                "api_app_id": app,
                "is_enterprise_install": "false",
                "response_url": f"{self.stand.url}/response/{user}",
                "trigger_id": "13345224609.738474920.8088930838d88f008e0",
            }
        )
        return await self.post(body, "application/x-www-form-urlencoded", **kw)

    async def click(
        self,
        button: dict,
        message: dict,
        *,
        user: str = "U0ALICE",
        channel: str = OPS,
        team: str = TEAM,
        app: str = APP_ID,
        enterprise: str | None = None,
        action_ts: str | None = None,
        headers: dict | None = None,
    ):
        payload = {
            "type": "block_actions",
            "team": {"id": team, "domain": "standin"},
            "enterprise": {"id": enterprise, "name": "Grid"} if enterprise else None,
            "user": {"id": user, "username": user.lower(), "team_id": team},
            "api_app_id": app,
            "token": "legacy-verification",
            "trigger_id": "1.2.3",
            "container": {"type": "message", "message_ts": message["ts"], "channel_id": channel, "is_ephemeral": False},
            "channel": {"id": channel, "name": "ops"},
            "message": message,
            "response_url": f"{self.stand.url}/response/{user}",
            "actions": [{**button, "block_id": "b1", "action_ts": action_ts or str(time.time())}],
        }
        return await self.post(
            urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded", headers=headers
        )

    async def event(self, event: dict, *, team: str = TEAM, event_id: str | None = None, headers: dict | None = None):
        """An Events API delivery; a redelivery of the same event (Slack's retries) has its event_id."""
        body = json.dumps(
            {
                "token": "legacy-verification",
                "team_id": team,
                "api_app_id": APP_ID,
                "type": "event_callback",
                "event_id": event_id or "Ev" + str(time.monotonic_ns()),
                "event_time": int(time.time()),
                "event": event,
            }
        )
        return await self.post(body, "application/json", headers=headers)

    def previews(self) -> list[tuple[dict, dict]]:
        """(message, buttons by label) for every thread reply that carries buttons."""
        out = []
        for c in self.stand.thread_replies():
            buttons = {
                e["text"]["text"]: e
                for b in c.args.get("blocks") or []
                if b["type"] == "actions"
                for e in b["elements"]
            }
            if buttons:
                out.append(
                    (
                        {
                            "ts": c.result["ts"],
                            "thread_ts": c.args["thread_ts"],
                            "text": c.args.get("text"),
                            "blocks": c.args["blocks"],
                            "type": "message",
                        },
                        buttons,
                    )
                )
        return out

    async def preview(self, text: str, user: str = "U0ALICE") -> tuple[dict, dict]:
        before = len(self.previews())
        status, _, _ = await self.slash(text, user=user)
        assert status == 200
        await self.stand.wait_for(lambda: len(self.previews()) > before)
        await self.bot.drain(60)
        return self.previews()[-1]

    def audit(self, event: str | None = None) -> list[dict]:
        recs = self.bot.audit.read()
        return [r for r in recs if event is None or r["event"] == event]

    async def close(self) -> None:
        if self.bot is not None:
            await self.bot.drain(60)
        if self._runner is not None:
            await self._runner.cleanup()
        await self.session.close()
