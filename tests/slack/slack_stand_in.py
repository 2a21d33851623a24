"""A local stand-in for the Slack Web API: a small aiohttp server that answers like Slack does.

Modelled on bolt-python's tests/mock_web_api_server: it records every call (method, arguments,
time) and answers with Slack-shaped JSON. It can be told to answer a method with 429 and a
Retry-After header, or with a Slack error, a number of times. It also serves a response_url
endpoint and a Socket Mode websocket (apps.connections.open hands out its URL), so the real
Bolt app, the real slack_sdk clients and our code all run unmodified against it.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import math
import time
import uuid
from dataclasses import dataclass, field
from typing import NamedTuple
from urllib.parse import parse_qsl

from aiohttp import WSMsgType, web
from block_limits import violations  # tests/block_limits.py: Slack's limits, checked on every post
from waiting import async_wait_until

TEAM = "T0TEAM"
BOT_USER = "U0BOT"
APP_ID = "A0KBOT"


@dataclass
class Call:
    method: str
    args: dict
    at: float  # time.monotonic()
    status: int = 200
    result: dict = field(default_factory=dict)  # what the stand-in answered


class Fault(NamedTuple):
    """One answer given instead of the normal one: 429 (``value`` is the Retry-After), 200 with a
    Slack error (``value`` is the error), or a 5xx whose raw ``value`` body a proxy or Slack sent."""

    status: int
    value: str
    content_type: str = "application/json"
    retry_after: str | None = None


@dataclass
class StandIn:
    users: dict[str, dict] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    # method -> faults answered, in order, before the normal answer
    faults: dict[str, list[Fault]] = field(default_factory=dict)
    url: str = ""
    pace: tuple[int, float] | None = None  # (burst, messages per second) per channel, when switched on
    _buckets: dict = field(default_factory=dict)  # channel -> (tokens, stamp)
    _ts: itertools.count = field(default_factory=lambda: itertools.count(1))
    _sockets: list = field(default_factory=list)
    _socket_acks: dict = field(default_factory=dict)
    # A 429's Retry-After holds its method (chat.postMessage: in its channel) as Slack's limits do:
    # key -> until (time.monotonic()); calls that arrive inside a window are kept in ``early``.
    _held: dict = field(default_factory=dict)
    early: list[Call] = field(default_factory=list)

    # ---- test controls ----
    def add_user(
        self,
        user_id: str,
        *,
        guest: bool = False,
        team: str = TEAM,
        deleted: bool = False,
        bot: bool = False,
        enterprise: str | None = None,
    ) -> None:
        self.users[user_id] = {
            "id": user_id,
            "team_id": team,
            "name": user_id.lower(),
            "deleted": deleted,
            "is_bot": bot,
            "is_restricted": guest,
            "is_ultra_restricted": False,
        }
        if enterprise:  # Enterprise Grid users carry their org in users.info
            self.users[user_id]["enterprise_user"] = {"id": user_id, "enterprise_id": enterprise, "teams": [team]}

    def rate_limit(self, method: str, retry_after: int = 1, times: int = 1) -> None:
        self.faults.setdefault(method, []).extend([Fault(429, str(retry_after))] * times)

    def pace_channels(self, burst: int = 3, per_s: float = 1.0) -> None:
        """Rate-limit chat.postMessage per channel as Slack does: ``burst`` at once, then ``per_s``."""
        self.pace, self._buckets = (burst, per_s), {}

    def _paced_out(self, channel: str) -> int | None:
        """Whole seconds to Retry-After when this post is over the channel's rate, else None (token taken)."""
        burst, per_s = self.pace
        now = time.monotonic()
        tokens, stamp = self._buckets.get(channel, (float(burst), now))
        tokens = min(float(burst), tokens + (now - stamp) * per_s)
        if tokens < 1.0:
            self._buckets[channel] = (tokens, now)
            return max(1, math.ceil((1.0 - tokens) / per_s))  # Slack sends whole seconds
        self._buckets[channel] = (tokens - 1.0, now)
        return None

    def fail(self, method: str, error: str, times: int = 1) -> None:
        self.faults.setdefault(method, []).extend([Fault(200, error)] * times)

    def server_error(
        self,
        method: str,
        body: str,
        *,
        status: int = 503,
        content_type: str = "text/plain",
        retry_after: str | None = None,
        times: int = 1,
    ) -> None:
        """Answer ``method`` with a 5xx and this raw body: a proxy in front of Slack (Envoy's plain
        text, a load balancer's HTML page) or Slack's own JSON."""
        self.faults.setdefault(method, []).extend([Fault(status, body, content_type, retry_after)] * times)

    def counts(self) -> dict[str, int]:
        """Calls per method, every answer counted (429s and errors too)."""
        return dict(collections.Counter(c.method for c in self.calls))

    def open_upload_slots(self) -> list[str]:
        """File ids getUploadURLExternal handed out that no completeUploadExternal completed."""
        handed = [c.result["file_id"] for c in self.called("files.getUploadURLExternal")]
        done = {
            f["id"]
            for c in self.called("files.completeUploadExternal")
            for f in (
                json.loads(c.args["files"]) if isinstance(c.args.get("files"), str) else c.args.get("files") or []
            )
        }
        return [f for f in handed if f not in done]

    @staticmethod
    def _limit_key(method: str, args: dict) -> str:
        return f"{method} {args.get('channel', '')}" if method == "chat.postMessage" else method

    def _rate_limited(self, method: str, args: dict, retry_after: str) -> None:
        try:
            seconds = float(retry_after)
        except ValueError:
            return
        key = self._limit_key(method, args)
        self._held[key] = max(self._held.get(key, 0.0), time.monotonic() + seconds)

    def called(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method and c.status == 200 and c.result.get("ok", True)]

    def thread_replies(self, thread_ts: str | None = None) -> list[Call]:
        return [
            c
            for c in self.called("chat.postMessage")
            if c.args.get("thread_ts") and (thread_ts is None or c.args["thread_ts"] == thread_ts)
        ]

    async def wait_for(self, predicate, timeout_s: float = 10.0):
        """``predicate()``'s first truthy answer, polled every 10 ms (tests/waiting.py)."""
        return await async_wait_until(
            predicate,
            timeout_s,
            "a stand-in condition",
            interval=0.01,
            detail=lambda: f"calls: {[c.method for c in self.calls]}",
        )

    # ---- the server ----
    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)
        app.router.add_post("/response/{id}", self._response_url)
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_get("/link", self._websocket)
        return app

    async def _args(self, request: web.Request) -> dict:
        args = dict(request.query)
        if request.can_read_body:
            body = await request.text()
            if request.content_type == "application/json":
                args.update(json.loads(body) if body else {})
            else:
                args.update(dict(parse_qsl(body)))
        return args

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await self._args(request)
        if request.headers.get("Authorization", "").startswith("Bearer "):
            args["_token_kind"] = request.headers["Authorization"][7:11]  # "xoxb" / "xapp": never the token itself
        if time.monotonic() < self._held.get(self._limit_key(method, args), 0.0):
            self.early.append(Call(method, args, time.monotonic()))  # inside its Retry-After window
        faults = self.faults.get(method)
        if faults:
            fault = faults.pop(0)
            if fault.status >= 500:
                self.calls.append(
                    Call(method, args, time.monotonic(), fault.status, {"ok": False, "body": fault.value})
                )
                headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else None
                return web.Response(
                    status=fault.status, text=fault.value, content_type=fault.content_type, headers=headers
                )
            body = {"ok": False, "error": "ratelimited" if fault.status == 429 else fault.value}
            self.calls.append(Call(method, args, time.monotonic(), fault.status, body))
            if fault.status == 429:
                self._rate_limited(method, args, fault.value)
                return web.json_response(body, status=429, headers={"Retry-After": fault.value})
            return web.json_response(body)
        if method == "chat.postMessage" and self.pace is not None:
            wait = self._paced_out(args.get("channel", ""))
            if wait is not None:
                body = {"ok": False, "error": "ratelimited"}
                self.calls.append(Call(method, args, time.monotonic(), 429, body))
                self._rate_limited(method, args, str(wait))
                return web.json_response(body, status=429, headers={"Retry-After": str(wait)})
        call = Call(method, args, time.monotonic())
        self.calls.append(call)
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        call.result = handler(args) if handler else {"ok": True}
        return web.json_response(call.result)

    def _new_ts(self) -> str:
        return f"1700000000.{next(self._ts):06d}"

    def _m_auth_test(self, _args):
        return {
            "ok": True,
            "url": "https://stand-in.slack/",
            "team": "Stand-in",
            "user": "kbot",
            "team_id": TEAM,
            "user_id": BOT_USER,
            "bot_id": "B0BOT",
            "is_enterprise_install": False,
        }

    def _refused_blocks(self, args) -> dict | None:
        """Slack's answer to blocks it would not accept: `msg_blocks_too_long` past the block-text
        ceiling, `invalid_blocks` for any other broken limit (tests/block_limits.py)."""
        blocks = args.get("blocks")
        if not blocks:
            return None
        blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
        problems = violations({"text": args.get("text") or "-", "blocks": blocks})
        if not problems:
            return None
        error = "msg_blocks_too_long" if any("block text" in p for p in problems) else "invalid_blocks"
        return {"ok": False, "error": error, "errors": problems}

    def _m_chat_postMessage(self, args):
        channel = args.get("channel", "")
        if channel == "C0NOTIN":
            return {"ok": False, "error": "not_in_channel"}
        refused = self._refused_blocks(args)
        if refused:
            return refused
        channel_id = "C0" + channel[1:].upper().replace("-", "") if channel.startswith("#") else channel
        ts = self._new_ts()
        return {
            "ok": True,
            "channel": channel_id,
            "ts": ts,
            "message": {
                "text": args.get("text"),
                "ts": ts,
                "thread_ts": args.get("thread_ts"),
                "blocks": args.get("blocks"),
            },
        }

    def _m_chat_update(self, args):
        refused = self._refused_blocks(args)
        if refused:
            return refused
        return {"ok": True, "channel": args.get("channel"), "ts": args.get("ts"), "text": args.get("text")}

    # files_upload_v2: getUploadURLExternal -> POST the bytes to the URL -> completeUploadExternal
    def _m_files_getUploadURLExternal(self, args):
        file_id = "F" + uuid.uuid4().hex[:10].upper()
        return {"ok": True, "file_id": file_id, "upload_url": f"{self.url}/upload/{file_id}"}

    def _m_files_completeUploadExternal(self, args):
        files = args.get("files")
        files = json.loads(files) if isinstance(files, str) else files or []
        uploaded = {c.args["file_id"]: c.args["bytes"] for c in self.calls if c.method == "file_upload"}
        missing = [f.get("id") for f in files if f.get("id") not in uploaded]
        if missing:
            return {"ok": False, "error": "file_not_found"}
        return {
            "ok": True,
            "files": [
                {
                    "id": f["id"],
                    "title": f.get("title"),
                    "size": uploaded[f["id"]],
                    "thread_ts": args.get("thread_ts"),
                    "channel": args.get("channel_id"),
                }
                for f in files
            ],
        }

    def uploads(self) -> list[Call]:
        """Completed file uploads (files_upload_v2), with their channel, thread and titles."""
        return self.called("files.completeUploadExternal")

    def _m_chat_postEphemeral(self, args):
        if args.get("channel") == "C0NOTIN":
            return {"ok": False, "error": "channel_not_found"}
        return {"ok": True, "message_ts": self._new_ts()}

    def _m_chat_getPermalink(self, args):
        return {
            "ok": True,
            "channel": args.get("channel"),
            "permalink": f"https://standin.slack.com/archives/{args.get('channel')}/p{str(args.get('message_ts')).replace('.', '')}",
        }

    def _m_users_info(self, args):
        user = self.users.get(args.get("user"))
        return {"ok": True, "user": user} if user else {"ok": False, "error": "user_not_found"}

    def _m_usergroups_users_list(self, args):
        members = self.groups.get(args.get("usergroup"))
        return {"ok": True, "users": members} if members is not None else {"ok": False, "error": "no_such_subteam"}

    def _m_views_open(self, args):
        return {
            "ok": True,
            "view": {
                "id": "V" + uuid.uuid4().hex[:8].upper(),
                **(json.loads(args["view"]) if isinstance(args.get("view"), str) else args.get("view") or {}),
            },
        }

    _m_views_update = _m_views_push = _m_views_publish = _m_views_open

    def _m_apps_connections_open(self, _args):
        return {"ok": True, "url": self.url.replace("http://", "ws://") + "/link"}

    async def _upload(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.calls.append(
            Call(
                "file_upload",
                {
                    "file_id": request.match_info["file_id"],
                    "bytes": len(body),
                    "png": body[:8] == b"\x89PNG\r\n\x1a\n",
                    "content": body,
                },
                time.monotonic(),
            )
        )
        return web.Response(text="OK - " + str(len(body)))

    async def _response_url(self, request: web.Request) -> web.Response:
        self.calls.append(Call("response_url", await self._args(request), time.monotonic()))
        return web.Response(text="ok")

    # ---- Socket Mode ----
    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.append(ws)
        await ws.send_str(json.dumps({"type": "hello", "num_connections": 1, "debug_info": {"host": "stand-in"}}))
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                data = json.loads(msg.data)
                if "envelope_id" in data:
                    self._socket_acks[data["envelope_id"]] = (time.monotonic(), data.get("payload"))
        self._sockets.remove(ws)
        return ws

    async def socket_send(self, type_: str, payload: dict) -> str:
        """Deliver an envelope to the connected Socket Mode client; returns its envelope id."""
        await self.wait_for(lambda: self._sockets)
        envelope_id = uuid.uuid4().hex
        await self._sockets[0].send_str(
            json.dumps(
                {
                    "envelope_id": envelope_id,
                    "type": type_,
                    "payload": payload,
                    "accepts_response_payload": type_ != "events_api",
                }
            )
        )
        return envelope_id

    def socket_ack(self, envelope_id: str):
        return self._socket_acks.get(envelope_id)

    async def close_sockets(self) -> None:
        for ws in list(self._sockets):
            await ws.close()


async def start(stand_in: StandIn) -> web.AppRunner:
    runner = web.AppRunner(stand_in.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    stand_in.url = f"http://127.0.0.1:{port}"
    return runner


@contextlib.asynccontextmanager
async def running_stand(users=("U0ALICE", "U0BOB"), guests=(), groups=None):
    """A started stand-in with these workspace members (and guests, and user groups), stopped after:
    the fixture every Slack test folder uses."""
    s = StandIn()
    for u in users:
        s.add_user(u)
    for u in guests:
        s.add_user(u, guest=True)
    s.groups.update({"S0ONCALL": ["U0BOB"]} if groups is None else groups)
    runner = await start(s)
    try:
        yield s
    finally:
        await s.close_sockets()
        await runner.cleanup()
