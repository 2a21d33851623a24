"""Intake of one Slack request: audited on arrival, refused or admitted, then answered.

    identity     a guest or an account Slack cannot vouch for is refused
    cluster      which cluster (bot/cluster_routing.py): `@name`, else the channel's mapping, else
                 the only one; with several and neither, the bot asks with a button per cluster
    command      parsed with the thread's memory (commands/followup.py) when asked in a thread
    RBAC         the policy's verdict for this user, channel and command

A refusal is answered privately and audited. An admitted read-only question asked again in the
channel while it is answered (or up to 30 s after) is pointed to the first asker's thread instead
of being built again (``Coalescer``); everything else is answered in its thread (bot/slack_answer.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING

from slack_sdk.errors import SlackApiError

from bot.cluster_routing import names_cluster, route
from bot.delivery import slack_error
from bot.slack_answer import AUDIT_TEXT_CHARS
from bot.slack_messages import tell_privately
from bot.slack_request import SlackRequest
from commands.timeline import parse_thread
from framework import plain_words
from framework.dispatch import Answer
from framework.followup import parse_request as parse_followup
from framework.reply import Reply, error_reply
from framework.router import BadInput
from framework.spec import CommandRequest
from gate.rbac import Verdict

if TYPE_CHECKING:
    from bot.slack_bot import KafkaBot

log = logging.getLogger(__name__)


class Intake:
    def __init__(self, bot: KafkaBot):
        self.bot = bot
        self._slots = asyncio.Semaphore(bot.settings.max_in_flight)

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
        await self.bot.audit.write(
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
            await self.bot.audit.write(
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
        request = await self.admit(req)
        if request is None:
            return
        key = _coalesce_key(request, req.channel) if req.thread_ts is None else None
        entry = None
        if key is not None:
            leader, entry = self.bot.coalescer.join(key, req.user)
            if not leader:
                if await self.bot.answering.point_to(entry, request, req, rid=rid, started=started):
                    return
                entry = None  # the first asker could not start a thread: answer this one ourselves
        ok = False
        try:
            ok = await self.bot.answering.in_thread(request, req, rid=rid, started=started, entry=entry)
        finally:
            if entry is not None:
                self.bot.coalescer.finished(key, entry, ok)

    async def admit(self, req: SlackRequest) -> CommandRequest | None:
        """The parsed request when its sender may run it: a known member of the workspace, a valid
        command, allowed by RBAC. None once it has been refused (privately, and audited)."""
        user, channel, text = req.user, req.channel, req.text
        try:
            identity = await self.bot.authorizer.identity(user)
        except SlackApiError as exc:
            identity = Verdict.no(
                "identity: Slack error",
                f"Could not check your account with Slack ({slack_error(exc)}); try again.",
            )
        if not identity.allowed:
            await self.refuse(identity, "identity", req)
            return None
        memory = await self.bot.memory(channel, req.thread_ts)
        cluster = None
        if self.bot.routing is not None:
            # Which cluster: `@name` first, else the channel's mapping; with several clusters and
            # neither, ask (with a button per cluster) rather than answer about the wrong one.
            routed = route(text, channel, self.bot.routing)
            if isinstance(routed, Reply):
                if memory is None or not memory.cluster or names_cluster(text):
                    await self.refuse(Verdict.no("cluster", routed.verdict), "cluster", req, reply=routed)
                    return None
                # a follow-up in a thread about one cluster: the thread's memory binds it on the request
            else:
                text, cluster = routed.text, routed.cluster
        request = parse_followup(text, memory, user=user, channel=channel, router=self.bot.router, cluster=cluster)
        if isinstance(request, Answer):  # not a command: dispatch's answer says why, as in the terminal
            await self.refuse(Verdict.no("bad_input", request.reply.verdict), "bad_input", req, reply=request.reply)
            return None
        if request.spec.name == "timeline" and not request.args.get("thread") and channel and req.thread_ts:
            request.args["thread"] = f"{channel}/{req.thread_ts}"  # `timeline` in a thread: that thread
        elsewhere = _timeline_elsewhere(request, channel)
        if elsewhere is not None:
            await self.refuse(Verdict.no("timeline: another channel", elsewhere), "scope", req, command="timeline")
            return None
        verdict = await self.bot.authorizer.command(user, channel, request.spec.name, request.spec.mutating)
        if not verdict.allowed:
            await self.refuse(verdict, "rbac", req, command=request.spec.name)
            return None
        return request

    async def handle_thread_message(self, req: SlackRequest) -> None:
        """A plain message in a thread: answered as a follow-up when the bot answers in that
        thread and the message starts with a command or is one of the plain-words follow-ups
        (framework/plain_words.py: "and broker 102?"); other talk in threads is left alone."""
        memory = await self.bot.memory(req.channel, req.thread_ts)
        if memory is None:
            return  # a thread the bot did not start or answer in
        if self.bot.router.command_for(req.text) is None and plain_words.read(req.text, memory) is None:
            return  # talk between people ("thanks, looking"): only a mention gets "I can answer: ..."
        await self.handle_text(req)

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
        await tell_privately(
            self.bot.client, reply, user=req.user, channel=req.channel, thread_ts=req.thread_ts, respond=req.respond
        )

    async def audit_refusal(self, step: str, verdict: Verdict, req: SlackRequest, **extra) -> None:
        await self.bot.audit.write(
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


def _timeline_elsewhere(request: CommandRequest, channel: str | None) -> str | None:
    """Why a `timeline` of a thread in another channel is refused here, or None. A thread's
    timeline carries its whole incident (questions, verdicts, actions, files): it is shown where the
    incident was worked, not wherever someone names it (the terminal's `kbot incident timeline` is
    the way for people with access to the host)."""
    given = request.arg_text("thread") if request.spec.name == "timeline" else None
    if not given:
        return None
    try:
        ref = parse_thread(given)
    except BadInput:
        return None  # the command itself says what is wrong with it
    if ref[0] == channel:
        return None
    return (
        f"That thread is in channel {ref[0]}: its timeline is shown only there. "
        f"Run `/kafka timeline` in that thread (or `/kafka timeline {ref[0]}/{ref[1]}` in that channel)."
    )


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
