"""The Slack app: Bolt's AsyncApp in front of the same router and commands the terminal uses.

``KafkaBot`` assembles it and owns what its parts share (the Slack client, the audit log, the
gate, the thread memories, the delivery queues) and its background work. The parts, by concern:

    bot/slack_http.py       /slack/events: malformed or badly timestamped requests, retries
    bot/slack_listeners.py  Bolt's listeners and their middleware (repeats, origin allow-lists)
    bot/slack_intake.py     one request: audited, refused or admitted (identity, cluster, RBAC)
    bot/slack_answer.py     the admitted request answered in its thread
    bot/slack_messages.py   private answers; the messages of gated actions kept true
    bot/slack_digests.py    scheduled digests
    bot/delivery.py         every post through its channel's queue: paced, in order, retried

bot/slack_app.py runs it (``kbot serve``: HTTP or Socket Mode).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Coroutine

import aiohttp
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot import slack_answer, slack_digests, slack_http, slack_intake, slack_messages
from bot.alerts import install as install_alerts
from bot.cluster_routing import Routing
from bot.delivery import Coalescer, Delivery, make_client, queue_client
from bot.gate_setup import default_gate
from bot.health import install as install_health
from bot.slack_answer import Answering
from bot.slack_digests import Digests
from bot.slack_http import Deliveries, SlackHttp
from bot.slack_intake import Intake
from bot.slack_listeners import Listeners
from bot.slack_messages import ActionMessages
from bot.slack_settings import SlackSettings
from bot.slack_thread import SlackThread
from commands.registry import ROUTER
from framework.context import Context
from framework.followup import IncidentMemory, ThreadMemories
from framework.reply import Reply
from framework.router import Router
from gate.audit import AuditLog, RedactingFilter, open_audit
from gate.confirmation import ConfirmationGate
from gate.rbac import Authorizer, Directory, Policy, Verdict
from kbot_settings import KbotSettings
from live.config import ConfigError

log = logging.getLogger(__name__)

EXPIRY_SWEEP_S = 60.0
_OUR_LOGGERS = (
    log,
    *(logging.getLogger(m.__name__) for m in (slack_answer, slack_digests, slack_http, slack_intake, slack_messages)),
)


def _redact(logger: logging.Logger, secrets: list[str]) -> None:
    """One RedactingFilter per logger (loggers are process-global; apps come and go in tests)."""
    for f in logger.filters:
        if isinstance(f, RedactingFilter):
            f.secrets = tuple(dict.fromkeys((*f.secrets, *(s for s in secrets if s))))
            return
    logger.addFilter(RedactingFilter(secrets))


class KafkaBot:
    def __init__(
        self,
        settings: SlackSettings,
        *,
        ctx: Context | None = None,
        client: AsyncWebClient | None = None,
        router: Router | None = None,
        gate: ConfirmationGate | None = None,
        audit: AuditLog | None = None,
        policy: Policy | None = None,
        clock=time.time,
    ):
        self.settings, self.router, self.clock = settings, router or ROUTER, clock
        self._session = None
        if client is None:
            try:
                asyncio.get_running_loop()
                self._session = aiohttp.ClientSession()  # must be created on the loop that uses it
            except RuntimeError:
                pass  # no loop yet: slack_sdk then uses a session per call
        self.client = client or make_client(settings, self._session)
        self.audit = audit or open_audit(
            settings.state_dir,
            settings.audit_topic,
            settings.audit_cluster,
            tuple(settings.secrets()),
            settings=settings.kbot,
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
            router=self.router,
            transport="slack",
            audit=self.audit,
            clock=clock,
            approvers=self.authorizer.policy.approvers,
        )
        self.deliveries = Deliveries()
        # Each thread's incident (commands/followup.py): cluster, entities, window, leading cause,
        # so a follow-up in the thread starts from them; kept beside the gate's records, so a restart
        # keeps them.
        state_db = getattr(self.gate, "state_db", None)
        self.memories = ThreadMemories(state_db.connect if state_db is not None else None)
        # Every post to a channel: paced, in order, retried (bot/delivery.py). Its client leaves 429s to
        # the queue: a 429 retried inside slack_sdk would leave the queue's pace ignorant of it, and
        # the next post would meet the same limit.
        self.delivery = Delivery(queue_client(self.client))
        self.coalescer = Coalescer()
        self.ctx = dataclasses.replace(ctx or Context(), gate=self.gate)
        _ = self.ctx.lookup  # build the KB index once: every request's Context is a copy of this one
        self.routing = _routing(settings.kbot)
        self.tasks: set[asyncio.Task] = set()
        self.messages = ActionMessages(self.gate, self.delivery)
        self.answering = Answering(self)
        self.intake = Intake(self)
        self.digests = Digests(self, settings.digest_schedules)
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
        for logger in (bolt_log, *_OUR_LOGGERS, *made):
            _redact(logger, settings.secrets())
        self.app = AsyncApp(
            name="kbot",
            signing_secret=settings.signing_secret or "",
            client=self.client,
            process_before_response=False,
            logger=bolt_log,
            # Socket Mode has no HTTP endpoint to verify; HTTP mode always verifies.
            request_verification_enabled=settings.mode != "socket",
            # an unhandled request goes to Listeners.on_error (one short line), not Bolt's warning
            raise_error_for_unhandled_request=True,
        )
        Listeners(self).register(self.app)
        self.http = SlackHttp(self.app, settings.signing_secret or "")

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

    # ---- the thread memories, read by the intake and written by every answer in a thread --------------
    async def memory(self, channel: str | None, thread_ts: str | None) -> IncidentMemory | None:
        """The memory of the thread a request comes from (None at the top of a channel, or in a
        thread the bot has not answered in)."""
        if not channel or not thread_ts:
            return None
        return await asyncio.to_thread(self.memories.get, (channel, thread_ts))

    async def remember(self, request, reply: Reply, thread: SlackThread) -> None:
        """The answer joins its thread's memory (a top-level question starts one: its thread is
        the working message's). A failure to store it costs the follow-ups their context, not the answer."""
        root = thread.thread_ts or thread.ts
        if not root or not thread.channel:
            return
        try:
            await asyncio.to_thread(self.memories.update, (thread.channel, root), request, reply)
        except Exception as exc:  # sqlite unwritable: the answer is posted already
            log.warning("could not remember the answer in thread %s: %s", root, exc)

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
        self._background.append(asyncio.create_task(self.messages.settle_forever()))
        if self.digests.schedules:
            self._background.append(asyncio.create_task(self.digests.scheduler().run_forever()))

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
    def web_app(self, *, with_slack: bool | None = None) -> web.Application:
        """/slack/events (HTTP mode only: Socket Mode skips signature checks, so it must not listen) and /healthz."""
        app = web.Application(client_max_size=1024 * 1024)
        if with_slack is None:
            with_slack = self.settings.mode == "http"
        if with_slack:
            app.router.add_post("/slack/events", self.http.handle)
        install_routes(self, app)

        async def startup(_app):
            await self.start_background()

        async def cleanup(_app):
            await self.stop_background()

        app.on_startup.append(startup)
        app.on_cleanup.append(cleanup)
        return app


def install_routes(bot: KafkaBot, app: web.Application) -> None:
    """/healthz and /metrics (bot/health.py), and the Alertmanager webhook when configured (bot/alerts.py)."""

    install_health(bot, app)
    install_alerts(bot, app)


def _routing(settings: KbotSettings):
    """The cluster routing (bot/cluster_routing.py) when clusters are configured; None routes
    nothing (no cluster: the runbook still answers, and the commands say a cluster is missing)."""

    try:
        routing = Routing.from_settings(settings)
    except ConfigError as exc:
        log.error("cluster routing is off: %s", exc)
        return None
    return routing if routing.clusters else None
