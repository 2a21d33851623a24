"""The Slack app itself: Bolt AsyncApp in front of the same router and commands the terminal uses.

    listeners         /kafka, Reply buttons and @mentions (bot/slack_listeners.py): a retry of a
                      request already acked, or a request from a workspace, org or app outside the
                      allow-lists, is stopped in Bolt listener middleware before its listener runs;
                      the listener acks and hands the text to ``handle_text``, off the ack path
    one request       identity (guest? unknown?) -> parse -> RBAC -> working message ->
                      framework.dispatch.run_request -> answer in its thread
    scheduler         KBOT_DIGEST_SCHEDULES posts the digest to channels

Refusals (bad input, RBAC, guests, other workspaces, orgs or apps) are answered privately and audited;
where the bot cannot post, privately through Bolt's ``respond`` (the request's response_url).
Slack retries a request it thinks we missed (X-Slack-Retry-Num); a repeat of one we already received
(an event: the same event_id) is acked again and not run again (``Deliveries``). A request that is
not a Slack payload gets 401 unsigned, 400 signed, and one short log line, never a traceback;
request bodies and response URLs never reach the logs.
Every Web API call goes through one AsyncWebClient with retry handlers, so a 429 is retried after
its Retry-After and a dropped connection or a 5xx (any body) is retried, for our calls and Bolt's
alike. Posts and edits in a channel also go through that channel's delivery queue (bot/delivery.py):
paced at Slack's per-channel rate, in order, retried until delivered or reported (audit + log, with
the request id); a working message Slack will not take is answered privately instead.
The same read-only question asked again in a channel while it is answered (or up to 30 s after) is
pointed to the first asker's thread instead of being built again (``Coalescer``).

bot/slack_app.py runs it (``kbot serve``: HTTP or Socket Mode).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
import logging
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.cluster_routing import names_cluster, route
from bot.delivery import Coalescer, Delivery, DeliveryFailed, server_error, slack_error
from bot.gate import default_gate
from bot.render import addition_reply, render_blocks, slack_escape
from bot.scheduler import Schedule, Scheduler, parse_schedules
from bot.settings import Settings
from bot.slack_listeners import Listeners
from bot.slack_request import SlackRequest
from bot.slack_thread import SlackThread
from commands.registry import answer, parse_request
from commands.timeline import answer_summary
from framework.context import Context
from framework.dispatch import Answer, complete, run_request
from framework.followup import IncidentMemory, ThreadMemories
from framework.followup import parse_request as parse_followup
from framework.reply import Reply, error_reply
from framework.router import Router
from framework.spec import CommandRequest
from gate.audit import AuditLog, RedactingFilter, open_audit, scrub, token_id
from gate.confirmation import ConfirmationGate
from gate.rbac import Authorizer, Directory, Policy, Verdict

log = logging.getLogger(__name__)

AUDIT_TEXT_CHARS = 500  # what of a request's text the audit keeps (with its full length)
EXPIRY_SWEEP_S = 60.0
MAX_RESPONSE_URL_POSTS = 5  # Slack's limit per response_url (within 30 minutes)
RETRY_MEMORY_S = 30 * 60.0  # Slack retries within minutes; remember acked requests well past that
RETRY_MEMORY_MAX = 50_000  # bounded: a flood of distinct requests cannot grow memory without end
SIGNATURE_MAX_AGE_S = 5 * 60  # Slack's rule: an older timestamp is a replay
_TIMESTAMP = re.compile(r"[0-9]{1,12}")  # ASCII digits only: int() would also take "١٧٠٠" or " 17"


class Deliveries:
    """Requests received recently: an event by its event_id, anything else by a digest of its signed
    body. Slack resends the same body when it retries (X-Slack-Retry-Num: 1..3), so a retry whose
    body we already acked is a duplicate; an event is one event_id however often it comes (a retry,
    or a duplicate delivery without the header). A retry of a request that never reached us (sent
    while we restarted) is the first delivery and runs.

    In memory: a retry reaching a freshly restarted process runs once more; the gate's single-use
    transition still keeps a confirm from executing twice."""

    def __init__(
        self,
        ttl_s: float = RETRY_MEMORY_S,
        max_entries: int = RETRY_MEMORY_MAX,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.ttl_s, self.max_entries, self.clock = ttl_s, max_entries, clock
        self._seen: OrderedDict[str, float] = OrderedDict()
        self.duplicates = 0

    def first(self, request) -> bool:
        """Record this delivery; False when it repeats one already received."""
        now = self.clock()
        while self._seen and (
            len(self._seen) >= self.max_entries or now - next(iter(self._seen.values())) > self.ttl_s
        ):
            self._seen.popitem(last=False)
        body = request.body if isinstance(request.body, dict) else {}
        event_id = body.get("event_id") if body.get("type") == "event_callback" else None
        if isinstance(event_id, str) and event_id:
            key, repeat = "event:" + event_id, True
        else:
            key = "body:" + hashlib.sha256((request.raw_body or "").encode()).hexdigest()
            repeat = bool(request.headers.get("x-slack-retry-num"))
        if repeat and key in self._seen:
            self.duplicates += 1
            return False
        self._seen[key] = now
        self._seen.move_to_end(key)
        return True


# Fields the bot or Bolt reads, which Slack always sends as strings (object: its fields): anything
# else there is not Slack's payload, and would fail deep in a listener instead of earning a 400.
_STRING_FIELDS: dict[str, tuple[str, ...]] = {
    "": (
        "type",
        "command",
        "text",
        "user_id",
        "channel_id",
        "team_id",
        "enterprise_id",
        "api_app_id",
        "response_url",
        "event_id",
    ),
    "user": ("id", "team_id"),
    "team": ("id", "enterprise_id"),
    "channel": ("id",),
    "container": ("channel_id", "message_ts", "thread_ts"),
    "message": ("ts", "thread_ts", "text"),
    "enterprise": ("id",),
    "event": ("type",),
}
_MENTION_FIELDS = ("user", "channel", "text", "ts", "thread_ts")  # what a mention's listener reads


def _not_strings(obj: dict, keys, where: str = "") -> str:
    for key in keys:
        if obj.get(key) is not None and not isinstance(obj[key], str):
            return f"'{where}{key}' is not a string"
    return ""


def malformed(body) -> str:
    """Why a (signed) body is not a Slack payload we can act on, or "" when it is."""
    if not isinstance(body, dict):
        return f"the payload is a JSON {type(body).__name__}, not an object"
    for key in _STRING_FIELDS:
        if key and body.get(key) is not None and not isinstance(body[key], dict):
            return f"'{key}' is not an object"
    for key, fields in _STRING_FIELDS.items():
        part = body.get(key) if key else body
        problem = _not_strings(part, fields, f"{key}." if key else "") if isinstance(part, dict) else ""
        if problem:
            return problem
    auths = body.get("authorizations")
    if auths is not None and not (isinstance(auths, list) and all(isinstance(a, dict) for a in auths)):
        return "'authorizations' is not a list of objects"
    kind = body.get("type")
    if kind == "block_actions":
        actions = body.get("actions")
        if not isinstance(actions, list) or not actions or not all(isinstance(a, dict) for a in actions):
            return "block_actions without a list of actions"
        if not isinstance(body.get("user"), dict):
            return "block_actions without a user"
        if not all(isinstance(a.get("action_id"), str) and isinstance(a.get("value", ""), str) for a in actions):
            return "an action's action_id or value is not a string"
    if kind == "event_callback":
        event = body.get("event")
        if not isinstance(event, dict):
            return "event_callback without an event"
        if event.get("type") in ("app_mention", "message"):
            return _not_strings(event, _MENTION_FIELDS + ("subtype", "bot_id"), "event.")
    return ""


def _redact(logger: logging.Logger, secrets: list[str]) -> None:
    """One RedactingFilter per logger (loggers are process-global; apps come and go in tests)."""
    for f in logger.filters:
        if isinstance(f, RedactingFilter):
            f.secrets = tuple(dict.fromkeys((*f.secrets, *(s for s in secrets if s))))
            return
    logger.addFilter(RedactingFilter(secrets))


class AsyncServerErrorRetryHandler(AsyncRetryHandler):
    """A 5xx, whatever its body (Slack's JSON, a proxy's plain text or HTML page), is retried like a
    dropped connection; slack_sdk's own server-error handler knows 500 and 503 only."""

    async def _can_retry_async(self, *, state, request, response=None, error=None) -> bool:
        if response is not None:
            return response.status_code >= 500
        return error is not None and server_error(error)  # a 5xx whose JSON did not parse


def make_client(settings: Settings, session: aiohttp.ClientSession | None = None) -> AsyncWebClient:
    return AsyncWebClient(
        token=settings.bot_token,
        base_url=settings.api_url,
        timeout=30,
        # One shared session keeps connections to Slack alive; without it slack_sdk opens (and
        # TLS-handshakes) a new connection for every call, which dominates a burst's CPU time.
        session=session,
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(max_retry_count=2),
            AsyncServerErrorRetryHandler(max_retry_count=2),
            AsyncRateLimitErrorRetryHandler(max_retry_count=3),
        ],
    )


def _queue_client(client: AsyncWebClient) -> AsyncWebClient:
    """The same client (token, URL, session), minus the rate-limit and 5xx retry handlers: the
    delivery queue retries those itself, paced and reported per channel."""
    return AsyncWebClient(
        token=client.token,
        base_url=client.base_url,
        timeout=client.timeout,
        session=client.session,
        retry_handlers=[
            h
            for h in client.retry_handlers
            if not isinstance(h, (AsyncRateLimitErrorRetryHandler, AsyncServerErrorRetryHandler))
        ],
    )


class KafkaBot:
    def __init__(
        self,
        settings: Settings,
        *,
        ctx: Context | None = None,
        client: AsyncWebClient | None = None,
        router: Router | None = None,
        gate: ConfirmationGate | None = None,
        audit: AuditLog | None = None,
        policy: Policy | None = None,
        clock=time.time,
    ):
        if router is None:
            from commands.registry import ROUTER as router
        self.settings, self.router, self.clock = settings, router, clock
        self._session = None
        if client is None:
            try:
                asyncio.get_running_loop()
                self._session = aiohttp.ClientSession()  # must be created on the loop that uses it
            except RuntimeError:
                pass  # no loop yet: slack_sdk then uses a session per call
        self.client = client or make_client(settings, self._session)
        self.audit = audit or open_audit(
            settings.state_dir, settings.audit_topic, settings.audit_cluster, tuple(settings.secrets())
        )
        policy = policy or (Policy.load(settings.rbac_file) if settings.rbac_file else Policy())
        self.authorizer = Authorizer(
            policy,
            Directory(self.client),
            settings.allowed_team_ids,
            settings.allowed_api_app_ids,
            settings.allowed_enterprise_ids,
        )
        self.gate = gate or default_gate(
            settings,
            authorize=self._authorize_action,
            router=router,
            transport="slack",
            audit=self.audit,
            clock=clock,
            approvers=self.authorizer.policy.approvers,
        )
        self.deliveries = Deliveries()
        # Each thread's incident (framework/followup.py): cluster, entities, window, leading cause,
        # so a follow-up in the thread starts from them; kept beside the gate's records, so a restart
        # keeps them.
        state_db = getattr(self.gate, "state_db", None)
        self.memories = ThreadMemories(state_db.connect if state_db is not None else None)
        # Every post to a channel: paced, in order, retried (bot/delivery.py). Its client leaves 429s to
        # the queue: a 429 retried inside slack_sdk would leave the queue's pace ignorant of it, and
        # the next post would meet the same limit.
        self.delivery = Delivery(_queue_client(self.client))
        self.coalescer = Coalescer()
        self.ctx = dataclasses.replace(ctx or Context(), gate=self.gate)
        _ = self.ctx.lookup  # build the KB index once: every request's Context is a copy of this one
        self.routing = _routing(settings.env or None)
        self.schedules = parse_schedules(settings.digest_schedules)
        self._check_schedules()
        self.tasks: set[asyncio.Task] = set()
        self._slots = asyncio.Semaphore(settings.max_in_flight)
        # one settle sweep at a time in this process: two that overlap both read a record as
        # unsettled and edit its message twice (seen when a sweep ran beside the periodic one)
        self.settling = asyncio.Lock()
        self._background: list[asyncio.Task] = []
        bolt_log = logging.getLogger("kbot.bolt")
        # Bolt reads SLACK_BOT_TOKEN from the environment even when given a client, then warns that
        # it ignores it: true and expected here (the client carries the token), so not worth a line.
        bolt_log.addFilter(lambda r: "will be unused" not in r.getMessage())
        # Bolt logs a rejected request's whole body (response_url, the user's text) at INFO. Bolt
        # copies the filters of the logger it is given to each of its own loggers, so one filter
        # added here, before the app exists, covers them all.
        # Loggers Bolt or slack_sdk made earlier (another app in this process) get it directly.
        made = [
            lg
            for n, lg in logging.Logger.manager.loggerDict.items()
            if n.startswith(("slack_bolt", "slack_sdk")) and isinstance(lg, logging.Logger)
        ]
        for logger in (bolt_log, log, *made):
            _redact(logger, settings.secrets())
        self.app = AsyncApp(
            name="kbot",
            signing_secret=settings.signing_secret or "",
            client=self.client,
            process_before_response=False,
            logger=bolt_log,
            # Socket Mode has no HTTP endpoint to verify; HTTP mode always verifies.
            request_verification_enabled=settings.mode != "socket",
        )
        Listeners(self).register(self.app)

    def _check_schedules(self) -> None:
        for s in self.schedules:
            req = parse_request(s.text, router=self.router)
            if isinstance(req, Answer):
                log.warning(
                    "schedule %r: %s (it will post that error until the command exists)", s.source, req.reply.verdict
                )
                continue
            if req.spec.mutating:
                raise ValueError(
                    f"schedule {s.source!r}: '{req.spec.name}' changes the cluster; schedules run read-only commands only"
                )

    # ---- background work, off the ack path --------------------------------------------------------
    def spawn(self, coro: Coroutine) -> asyncio.Task:
        task = asyncio.create_task(coro)
        self.tasks.add(task)  # keep a reference: the loop only holds weak ones

        def done(t: asyncio.Task) -> None:
            self.tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("background request failed", exc_info=t.exception())

        task.add_done_callback(done)
        return task

    async def drain(self, timeout_s: float | None = None) -> None:
        """Wait for every request in flight (tests, shutdown)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self.tasks:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            await asyncio.wait(set(self.tasks), timeout=left)
            if deadline is not None and time.monotonic() >= deadline:
                break

    async def _authorize_action(self, user: str, channel: str | None, record) -> Verdict:
        return await self.authorizer.for_action(user, channel, record.command)

    # ---- one request --------------------------------------------------------------------------------
    async def handle_text(self, req: SlackRequest) -> None:
        # A bounded number of requests work at once. Every request still gets its ack at once (the
        # ack path never waits here); the bound keeps a burst's background work from queueing in
        # front of the next acks on the event loop.
        started = time.monotonic()
        rid = uuid.uuid4().hex[:12]  # ties the request's audit records and log lines together
        async with self._slots:
            await self._handle_text(req, started=started, rid=rid)

    async def _handle_text(self, req: SlackRequest, *, started: float, rid: str) -> None:
        user, channel, team, text = req.user, req.channel, req.team, req.text
        await self.audit.write(
            "request",
            transport="slack",
            source=req.source,
            user=user,
            team=team,
            channel=channel,
            text=text[:AUDIT_TEXT_CHARS],
            text_len=len(text),
            request_id=rid,
            thread_ts=req.thread_ts,  # asked inside a thread (a mention, a click): the timeline finds it by it
        )
        try:
            await self._handle_request(req, rid=rid, started=started)
        except Exception as exc:
            # Nothing below expected it (a bug, or a Slack failure no step handles): the request still
            # ends in the audit, so nobody reads it as unanswered-but-pending.
            log.error("request %s failed: %s", rid, exc, exc_info=True)
            await self.audit.write(
                "answer",
                transport="slack",
                user=user,
                team=team,
                channel=channel,
                command=None,
                outcome="failed",
                latency_ms=round((time.monotonic() - started) * 1000, 1),
                delivered="failed",
                step="request",
                error=f"{type(exc).__name__}: {exc}"[:AUDIT_TEXT_CHARS],
                request_id=rid,
            )

    async def _handle_request(self, req: SlackRequest, *, rid: str, started: float) -> None:
        request = await self._admit(req)
        if request is None:
            return
        key = _coalesce_key(request, req.channel) if req.thread_ts is None else None
        entry = None
        if key is not None:
            leader, entry = self.coalescer.join(key, req.user)
            if not leader:
                if await self._point_to(entry, request, req, rid=rid, started=started):
                    return
                entry = None  # the first asker could not start a thread: answer this one ourselves
        ok = False
        try:
            ok = await self._answer_in_thread(request, req, rid=rid, started=started, entry=entry)
        finally:
            if entry is not None:
                self.coalescer.finished(key, entry, ok)

    async def _admit(self, req: SlackRequest) -> CommandRequest | None:
        """The parsed request when its sender may run it: a known member of the workspace, a valid
        command, allowed by RBAC. None once it has been refused (privately, and audited)."""
        user, channel, text = req.user, req.channel, req.text
        try:
            identity = await self.authorizer.identity(user)
        except SlackApiError as exc:
            identity = Verdict.no(
                "identity: Slack error",
                f"Could not check your account with Slack ({slack_error(exc)}); try again.",
            )
        if not identity.allowed:
            await self.refuse(identity, "identity", req)
            return None
        memory = await self._memory(channel, req.thread_ts)
        if self.routing is not None:
            # Which cluster: `@name` first, else the channel's mapping; with several clusters and
            # neither, ask (with a button per cluster) rather than answer about the wrong one.
            routed = route(text, channel, self.routing)
            if isinstance(routed, Reply):
                if memory is None or not memory.cluster or names_cluster(text):
                    await self.refuse(Verdict.no("cluster", routed.verdict), "cluster", req, reply=routed)
                    return None
                # a follow-up in a thread about one cluster: the thread's memory binds it on the request
            else:
                text = routed.text
        request = parse_followup(text, memory, user=user, channel=channel, router=self.router)
        if isinstance(request, Answer):  # not a command: dispatch's answer says why, as in the terminal
            await self.refuse(Verdict.no("bad_input", request.reply.verdict), "bad_input", req, reply=request.reply)
            return None
        if request.spec.name == "timeline" and not request.args.get("thread") and channel and req.thread_ts:
            request.args["thread"] = f"{channel}/{req.thread_ts}"  # `timeline` in a thread: that thread
        verdict = await self.authorizer.command(user, channel, request.spec.name, request.spec.mutating)
        if not verdict.allowed:
            await self.refuse(verdict, "rbac", req, command=request.spec.name)
            return None
        return request

    async def _memory(self, channel: str | None, thread_ts: str | None) -> IncidentMemory | None:
        """The memory of the thread a request comes from (None at the top of a channel, or in a
        thread the bot has not answered in)."""
        if not channel or not thread_ts:
            return None
        return await asyncio.to_thread(self.memories.get, (channel, thread_ts))

    async def _remember(self, request, reply: Reply, thread: SlackThread) -> None:
        """The answer joins its thread's memory (a top-level question starts one: its thread is
        the working message's). A failure to store it costs the follow-ups their context, not the answer."""
        root = thread.thread_ts or thread.ts
        if not root or not thread.channel:
            return
        try:
            await asyncio.to_thread(self.memories.update, (thread.channel, root), request, reply)
        except Exception as exc:  # sqlite unwritable: the answer is posted already
            log.warning("could not remember the answer in thread %s: %s", root, exc)

    async def handle_thread_message(self, req: SlackRequest) -> None:
        """A plain message in a thread: answered as a follow-up when the bot answers in that
        thread and the message starts with a command; other talk in threads is left alone."""
        if self.router.command_for(req.text) is None:
            return
        if await self._memory(req.channel, req.thread_ts) is None:
            return  # a thread the bot did not start or answer in
        await self.handle_text(req)

    async def _answer_in_thread(self, request, req: SlackRequest, *, rid: str, started: float, entry) -> bool:
        """Working message, the command, the answer in its thread; True when the answer was delivered.
        A delivery that fails after its retries is reported (audit + log, with the request id), and
        the working message is marked, so no hourglass is left behind."""
        user, channel, team, text, thread_ts = req.user, req.channel, req.team, req.text, req.thread_ts
        # Slash command text is private until we echo it: never echo a token someone pasted, nor the
        # gate's or a triage thread's token (confirm <token>), a capability for whoever reads the channel.
        token = request.args.get("token")
        shown = text.replace(token, "…") if isinstance(token, str) and token else text
        label = f"`/kafka {slack_escape(_clip(scrub(shown), 200))}` for <@{user}>"
        thread = SlackThread(self.delivery, channel, thread_ts=thread_ts, label=label)
        try:
            await thread.start(f":hourglass_flowing_sand: Working on {label}…")
            await remember_working_message(self, request, thread)
        except (SlackApiError, DeliveryFailed) as exc:
            # Slack's answer (not in the channel, a DM we cannot post to), or Slack still failing
            # after the queue's retries: answer privately where Slack lets us.
            log.warning("request %s: cannot post in %s (%s); answering privately", rid, channel, slack_error(exc))
            result = await run_request(request, self.ctx)
            told = await self._tell_privately(
                result.reply, user=user, channel=channel, thread_ts=thread_ts, respond=req.respond
            )
            if told:
                await self._audit_answer(
                    request,
                    result.outcome,
                    started,
                    user,
                    channel,
                    team,
                    delivered="private",
                    request_id=rid,
                    thread_root=thread_ts,
                    reply=result.reply,
                )
            else:
                await self._delivery_failed(
                    exc, request, rid, started, user, channel, team, step="working message and private answer"
                )
            return False
        if entry is not None:
            self.coalescer.started(entry, (thread.channel, thread.ts))
        try:
            result = await run_request(request, dataclasses.replace(self.ctx, progress=thread.progress), early=True)
            full = result.request is not None and result.request.full
            posted = await thread.finish(result.reply, full=full)
            await thread.attach(result.reply)  # files an answer carries (a timeline's exports)
            if result.reply.later is not None:
                # The live answer is up; the metric lake's part follows in the same thread.
                early_reply = result.reply
                result = await complete(result)
                posted += await thread.add(addition_reply(early_reply, result.reply))
            await remember_answer_messages(self, request, result.reply, thread, posted, req.message)
            await self._remember(request, result.reply, thread)
        except Exception as exc:
            await thread.fail(
                "the answer could not be posted; it is in the bot's log and audit"
                if isinstance(exc, DeliveryFailed)
                else "the request failed; it is in the bot's log and audit"
            )
            await self._delivery_failed(exc, request, rid, started, user, channel, team, step="answer")
            return False
        await self._audit_answer(
            request,
            result.outcome,
            started,
            user,
            channel,
            team,
            delivered="thread",
            thread_ts=thread.ts,
            thread_root=thread.thread_ts or thread.ts,  # the thread's first message: the timeline's key
            request_id=rid,
            reply=result.reply,
        )
        if req.message:
            await self._settle(req.message, channel, request, result.outcome, user)
        return True

    async def _point_to(self, entry, request, req: SlackRequest, *, rid: str, started: float) -> bool:
        """Point a repeated question to the thread that answers it (privately: one line for the asker,
        none in the channel). False when the first asker could not start a thread."""
        user, channel, team = req.user, req.channel, req.team
        where = await entry.where
        if where is None:
            return False
        thread_channel, ts = where
        link = None
        try:
            link = (await self.client.chat_getPermalink(channel=thread_channel, message_ts=ts)).get("permalink")
        except SlackApiError as exc:
            log.info("no permalink for %s/%s: %s", thread_channel, ts, slack_error(exc))
        # Our own mrkdwn, so not a Reply (its verdict is escaped, which would show "&lt;@U…&gt;"): the
        # mention and the link are built from a checked user id and Slack's permalink.
        if not entry.leader or entry.leader == user:
            asked = "You asked"
        else:
            asked = f"<@{entry.leader}> asked" if _SLACK_USER.match(entry.leader) else "Someone asked"
        place = f"<{slack_escape(link)}|this thread>" if link else "the thread of that question in this channel"
        line = f":information_source: {asked} the same question here moments ago; the answer is in {place}."
        pointer = [{"text": line, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": line}}]}]
        told = await self._tell_privately(pointer, user=user, channel=channel, respond=req.respond)
        await self._audit_answer(
            request,
            "coalesced",
            started,
            user,
            channel,
            team,
            delivered="pointer" if told else "failed",
            thread_ts=ts,
            request_id=rid,
            **({} if told else {"step": "pointer"}),
        )
        return True

    async def _delivery_failed(
        self, exc: Exception, request, rid: str, started: float, user, channel, team, *, step: str
    ) -> None:
        log.error(
            "request %s (%s in %s): %s failed: %s",
            rid,
            request.spec.name,
            channel,
            step,
            exc,
            exc_info=not isinstance(exc, (DeliveryFailed, SlackApiError)),
        )  # a bug gets its traceback
        await self._audit_answer(
            request,
            "failed",
            started,
            user,
            channel,
            team,
            delivered="failed",
            step=step,
            error=str(exc)[:AUDIT_TEXT_CHARS],
            request_id=rid,
        )

    async def _audit_answer(
        self, request, outcome: str, started: float, user, channel, team, *, reply: Reply | None = None, **extra
    ) -> None:
        if reply is not None:  # what the timeline shows of it (commands/timeline.py); a preview by its token's hash
            token = _action_token(reply) if request.command.action is not None else None
            extra = {**answer_summary(reply), **extra, **({"action_token_id": token_id(token)} if token else {})}
        await self.audit.write(
            "answer",
            transport="slack",
            user=user,
            team=team,
            channel=channel,
            command=request.spec.name,
            args=request.args,
            options=request.options,
            cluster=request.cluster,
            outcome=outcome,
            latency_ms=round((time.monotonic() - started) * 1000, 1),
            **extra,
        )

    async def _settle(self, message: dict, channel: str, request, outcome: str, user: str) -> None:
        """Take the buttons off a message once they are spent, so nobody clicks a dead token or an
        answered triage question; the message keeps its content and says what happened."""
        name = request.spec.name
        if name in ("confirm", "cancel"):
            rec = await self.gate.status(str(request.args.get("token", "")))
            if rec is None or rec.state == "pending":
                return  # still open (e.g. waiting for a second approver): keep the buttons
            note = f"*{rec.state}* (last action by <@{user}>)"
        elif name == "triage answer" and outcome == "answered":
            note = f"Answered *{slack_escape(request.args.get('choice'))}* by <@{user}>"
        else:
            return
        if not message.get("ts"):
            return
        blocks = [b for b in message.get("blocks") or [] if b.get("type") != "actions"]
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": note}]})
        try:
            await self.delivery.update(channel, ts=message["ts"], text=message.get("text") or name, blocks=blocks)
        except (SlackApiError, DeliveryFailed) as exc:
            log.warning("could not update the answered message: %s", slack_error(exc))

    async def refuse(
        self,
        verdict: Verdict,
        step: str,
        req: SlackRequest,
        *,
        reply: Reply | None = None,
        command: str | None = None,
        **extra,
    ) -> None:
        """Answer a refused request privately and audit it (``extra``: more fields for the audit record)."""
        reply = reply or error_reply(verdict.reason, title="Not allowed")
        await self.audit_refusal(step, verdict, req, command=command, **extra)
        await self._tell_privately(
            reply, user=req.user, channel=req.channel, thread_ts=req.thread_ts, respond=req.respond
        )

    async def audit_refusal(self, step: str, verdict: Verdict, req: SlackRequest, **extra) -> None:
        await self.audit.write(
            "refusal",
            transport="slack",
            step=step,
            rule=verdict.rule,
            reason=verdict.reason,
            user=req.user,
            team=req.team,
            channel=req.channel,
            text=req.text[:AUDIT_TEXT_CHARS],
            text_len=len(req.text),
            **extra,
        )

    async def _tell_privately(
        self,
        reply: Reply | list[dict],
        *,
        user,
        channel,
        thread_ts=None,
        respond: AsyncRespond | None = None,
    ) -> bool:
        """Ephemeral, page by page; through Bolt's respond() (the request's response_url) when the bot
        cannot post in the channel: that works even where the bot is not a member. ``reply``: a Reply,
        or pages already rendered. True when Slack took it."""
        pages = render_blocks(reply) if isinstance(reply, Reply) else reply
        try:
            for page in pages:
                await self.client.chat_postEphemeral(channel=channel, user=user, thread_ts=thread_ts, **page)
            return True
        except (SlackApiError, aiohttp.ClientError, asyncio.TimeoutError) as exc:
            if respond is None or respond.response_url is None:  # events carry no response_url
                log.warning("could not answer %s privately: %s", user, slack_error(exc))
                return False
        try:
            for page in pages[:MAX_RESPONSE_URL_POSTS]:
                sent = await respond(
                    text=page["text"], blocks=page["blocks"], response_type="ephemeral", replace_original=False
                )
                if sent.status_code != 200:  # the webhook client answers a 5xx, it does not raise it
                    log.warning("could not answer %s through the response_url: HTTP %s", user, sent.status_code)
                    return False
            return True
        except Exception as exc:
            log.warning("could not answer %s through the response_url: %s", user, exc)
            return False

    # ---- scheduled digests ----------------------------------------------------------------------------
    async def post_scheduled(self, schedule: Schedule, due) -> None:
        """A schedule's command in its channel: about the channel's cluster; with several clusters
        and no mapping, one post per cluster (a digest of each)."""
        texts = [schedule.text]
        if self.routing is not None:
            routed = route(schedule.text, schedule.channel, self.routing)
            texts = (
                [routed.text]
                if not isinstance(routed, Reply)
                else [f"{schedule.text} --cluster {name}" for name in self.routing.clusters]
            )
        for text in texts:
            await self._post_scheduled(schedule, due, text)

    async def _post_scheduled(self, schedule: Schedule, due, text: str) -> None:
        started = time.monotonic()
        result = await answer(text, self.ctx, user="scheduler", channel=schedule.channel, router=self.router)
        pages = render_blocks(result.reply, full=True)  # a digest is read at leisure: all of it
        first = await self.delivery.post(schedule.channel, **pages[0])
        for page in pages[1:]:
            await self.delivery.post(first.get("channel") or schedule.channel, thread_ts=first["ts"], **page)
        await self.audit.write(
            "scheduled",
            transport="slack",
            schedule=schedule.source,
            channel=schedule.channel,
            text=text,
            due=due.isoformat(),
            outcome=result.outcome,
            latency_ms=round((time.monotonic() - started) * 1000, 1),
        )

    # ---- life cycle -----------------------------------------------------------------------------------
    async def start_background(self) -> None:
        """Reconcile what a crash left executing, then run the expiry sweep and the scheduler."""
        for rec, outcome in await self.gate.reconcile_incomplete(self.ctx):
            log.warning(
                "action %s (%s) was executing when the bot stopped: reconciled as %s",
                rec.plan.kind,
                rec.command,
                outcome,
            )
        self._background.append(asyncio.create_task(self._sweep_expired()))
        self._background.append(asyncio.create_task(settle_forever(self)))
        if self.schedules:
            self._background.append(
                asyncio.create_task(Scheduler(self.schedules, self.post_scheduled, clock=self.clock).run_forever())
            )

    async def _sweep_expired(self) -> None:
        while True:
            try:
                await self.gate.expire_due()
            except Exception:
                log.exception("expiry sweep failed")
            await asyncio.sleep(EXPIRY_SWEEP_S)

    async def stop_background(self, drain_s: float = 20.0) -> None:
        for t in self._background:
            t.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        self._background.clear()
        await self.drain(drain_s)
        await self.delivery.close()
        close = getattr(self.ctx.live, "close", None)  # any evidence pool with a close()
        if close is not None:
            await close()
        if self._session is not None:
            await self._session.close()
        self.audit.close()

    # ---- HTTP ---------------------------------------------------------------------------------------
    async def handle_http(self, request: web.Request) -> web.Response:
        raw = await request.read()
        ts = request.headers.get("X-Slack-Request-Timestamp")
        if ts is not None and not _TIMESTAMP.fullmatch(ts):
            # Bolt would fail on it (a 500 and a traceback) before checking the signature; a missing
            # one stays Bolt's to answer (401, or 200 to Slack's SSL check).
            log.info("rejected a Slack request (%d bytes): its timestamp is missing or not a number", len(raw))
            return web.json_response({"error": "invalid request"}, status=401)
        try:
            bolt_request = await to_bolt_request(request)
            problem = malformed(bolt_request.body)
        except Exception as exc:  # Bolt parses while building the request: "payload=not json", not UTF-8
            bolt_request, problem = None, f"unparseable {request.content_type} body ({type(exc).__name__})"
        if problem:
            # Unsigned garbage stays a 401, as Bolt answers it; only Slack-signed garbage earns a 400.
            if not self._signed(raw, request.headers):
                log.info("rejected an unsigned malformed Slack request (%d bytes)", len(raw))
                return web.json_response({"error": "invalid request"}, status=401)
            log.warning("rejected a signed but malformed Slack request (%d bytes): %s", len(raw), problem)
            return web.json_response({"error": "malformed request"}, status=400)
        return await to_aiohttp_response(await self.app.async_dispatch(bolt_request))

    def _signed(self, raw: bytes, headers) -> bool:
        """Slack's signature (v0=HMAC-SHA256 of "v0:<timestamp>:<body>") over the raw bytes, which
        need not be UTF-8 here; slack_sdk's verifier decodes the body first and would raise."""
        ts, signature = headers.get("X-Slack-Request-Timestamp", ""), headers.get("X-Slack-Signature", "")
        if not _TIMESTAMP.fullmatch(ts) or abs(time.time() - int(ts)) > SIGNATURE_MAX_AGE_S:
            return False
        secret = (self.settings.signing_secret or "").encode()
        expected = "v0=" + hmac.new(secret, b"v0:" + ts.encode() + b":" + raw, hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected.encode(), signature.encode("utf-8", "surrogateescape"))

    def web_app(self, *, with_slack: bool | None = None) -> web.Application:
        """/slack/events (HTTP mode only: Socket Mode skips signature checks, so it must not listen) and /healthz."""
        app = web.Application(client_max_size=1024 * 1024)
        if with_slack is None:
            with_slack = self.settings.mode == "http"
        if with_slack:
            app.router.add_post("/slack/events", self.handle_http)
        install_routes(self, app)

        async def startup(_app):
            await self.start_background()

        async def cleanup(_app):
            await self.stop_background()

        app.on_startup.append(startup)
        app.on_cleanup.append(cleanup)
        return app


def _coalesce_key(request, channel: str | None):
    """What makes two questions the same: channel, cluster, command and its arguments. Only read-only
    commands: an action must be previewed and confirmed for each requester."""
    if request.spec.mutating or channel is None:
        return None
    return (
        channel,
        request.cluster,
        request.spec.name,
        repr(sorted(request.args.items())),
        repr(sorted(request.options.items())),
    )


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


# ---- pending actions' messages kept true, and the routes of bot/alerts.py and bot/health.py -------
# (functions rather than KafkaBot methods: added by the alerts/health work, called from a few lines above)
SETTLE_INTERVAL_S = 5.0  # a terminal confirm or an expiry shows in Slack within this (sqlite read, cheap)
_STATE_EMOJI = {
    "executed": ":white_check_mark:",
    "done": ":white_check_mark:",
    "failed": ":x:",
    "aborted": ":no_entry:",
    "cancelled": ":heavy_multiplication_x:",
    "expired": ":hourglass:",
    "not_done": ":warning:",
    "unknown": ":warning:",
}
_SLACK_USER = re.compile(r"^[UW][A-Z0-9]{2,}$")


def _in_flight(bot: KafkaBot) -> set[str]:
    """Tokens whose confirm this process is answering right now (a crash empties it, as it should)."""
    if not hasattr(bot, "_confirms_in_flight"):
        bot._confirms_in_flight = set()
    return bot._confirms_in_flight


def _action_token(reply: Reply) -> str | None:
    """The gate token a preview's buttons carry ("cancel <token>" is on every preview)."""
    for a in reply.actions:
        words = a.command.split()
        if len(words) == 2 and words[0] in ("confirm", "cancel"):
            return words[1]
    return None


async def remember_working_message(bot: KafkaBot, request, thread: SlackThread) -> None:
    """A confirm's working message belongs to its record: a crash while executing leaves it behind,
    and the reconciliation at start-up must find it to replace the hourglass."""
    if request.spec.name != "confirm" or not thread.ts:
        return
    token = str(request.args.get("token", ""))
    if await bot.gate.status(token) is not None:
        # While this request runs, its own answer will replace the working message: the settling
        # must not edit it meanwhile (its edit could land after the answer and hide it).
        _in_flight(bot).add(token)
        await bot.gate.attach_message(token, thread.channel, thread.ts, "working", {})


async def remember_answer_messages(
    bot: KafkaBot, request, reply: Reply, thread: SlackThread, posted: list[str], message: dict | None
) -> None:
    """After an answer is posted: store a preview's message (the page with the buttons) with its
    record; for a confirm / cancel that resolved its record, mark the messages this answer already
    made true (its own working message, now the answer; the clicked preview, which _settle edits)."""
    if request.command.action is not None:
        token = _action_token(reply)
        if token is None:
            return
        # Rendered as SlackThread.finish rendered it, so the pages line up with the ts it returned.
        pages = (scrub(p) for p in render_blocks(reply, full=bool(getattr(request, "full", False))))
        for page, ts in zip(pages, posted):
            if any(b.get("type") == "actions" for b in page.get("blocks") or []):
                await bot.gate.attach_message(token, thread.channel, ts, "preview", page)
        return
    if request.spec.name not in ("confirm", "cancel"):
        return
    token = str(request.args.get("token", ""))
    _in_flight(bot).discard(token)
    rec = await bot.gate.status(token)
    if rec is None:
        return
    if thread.ts:  # the working message is this answer now: never edited again (the gate skips settled ones)
        await bot.gate.mark_settled(token, thread.channel, thread.ts, rec.state)
    if (message or {}).get("ts") and rec.state not in ("pending", "executing"):
        await bot.gate.mark_settled(token, thread.channel, message["ts"], rec.state)


def _slack_note(rec) -> str:
    from gate.confirmation import outcome_note

    by = (rec.result or {}).get("by")
    text = slack_escape(outcome_note(rec))
    if by and _SLACK_USER.match(by):  # a Slack user (a terminal mapped to one, too): mention them
        text = text.replace(slack_escape(by), f"<@{by}>", 1)
    return f"{_STATE_EMOJI.get(rec.state, ':information_source:')} {text}"


async def settle_pending_messages(bot: KafkaBot) -> int:
    """Edit every stored message whose record was resolved since: the preview loses its buttons and
    says what happened; a working message left by a crash says how it was reconciled."""
    async with bot.settling:
        return await _settle(bot)


async def _settle(bot: KafkaBot) -> int:
    edited = 0
    for rec, msg in await bot.gate.unsettled_messages():
        if rec.token in _in_flight(bot):
            continue  # its confirm is being answered in this process; the answer makes it true
        note = _slack_note(rec)
        if msg["role"] == "preview":
            page = msg["payload"]
            blocks = [b for b in page.get("blocks") or [] if b.get("type") != "actions"]
            blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _clip(note, 3000)}]})
            edit = {"text": page.get("text") or rec.plan.kind, "blocks": blocks}
        else:
            edit = {"text": _clip(note, 3000), "blocks": []}
        try:
            await bot.delivery.update(msg["channel"], ts=msg["ts"], **edit)
        except DeliveryFailed as exc:  # Slack unreachable: the next round tries again
            log.warning("could not edit the message of action %s: %s", rec.plan.kind, exc)
            continue
        except SlackApiError as exc:  # Slack's answer (message deleted, channel archived): retrying cannot help
            log.warning("could not edit the message of action %s: %s", rec.plan.kind, slack_error(exc))
        await bot.gate.mark_settled(rec.token, msg["channel"], msg["ts"], rec.state)
        edited += 1
    return edited


async def settle_forever(bot: KafkaBot, interval_s: float | None = None) -> None:
    """Edit the messages of records resolved anywhere (a terminal confirm in another process, the
    expiry sweep, the start-up reconciliation), every ``interval_s``."""
    while True:
        try:
            await settle_pending_messages(bot)
        except Exception:
            log.exception("settling the messages of resolved actions failed")
        await asyncio.sleep(interval_s or SETTLE_INTERVAL_S)


def install_routes(bot: KafkaBot, app: web.Application) -> None:
    """/healthz and /metrics (bot/health.py), and the Alertmanager webhook when configured (bot/alerts.py)."""
    from bot.alerts import install as install_alerts
    from bot.health import install as install_health

    install_health(bot, app)
    install_alerts(bot, app, bot.settings.env or None)


def _routing(env: Mapping[str, str] | None):
    """The cluster routing (bot/cluster_routing.py) when clusters are configured; None routes
    nothing (no cluster: the runbook still answers, and the commands say a cluster is missing)."""
    from bot.cluster_routing import Routing
    from live.config import ConfigError

    try:
        routing = Routing.from_env(env)
    except ConfigError as exc:
        log.error("cluster routing is off: %s", exc)
        return None
    return routing if routing.clusters else None
