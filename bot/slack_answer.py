"""Answering one admitted Slack request: a working message, the command, the answer in its thread.

A top-level question gets a working message in the channel and its answer in that message's
thread (bot/slack_thread.py); the metric lake's part, when slower, follows in the same thread
(bot/answer_parts.py). A working message Slack will not take is answered privately instead; a
delivery that fails after the queue's retries is reported (audit and log, with the request id)
and the working message is marked, so no hourglass is left behind. A question already being
answered in the channel is pointed to the first asker's thread (``point_to``).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING

from slack_sdk.errors import SlackApiError

from bot.answer_parts import show_in_parts
from bot.delivery import DeliveryFailed, slack_error
from bot.render import slack_escape
from bot.slack_messages import action_token, tell_privately
from bot.slack_request import SlackRequest
from bot.slack_thread import SlackThread
from commands.timeline import answer_summary
from framework.dispatch import Answer, run_request
from framework.reply import Reply
from gate.audit import scrub, token_id
from gate.rbac import SLACK_USER_ID

if TYPE_CHECKING:
    from bot.slack_bot import KafkaBot

log = logging.getLogger(__name__)

AUDIT_TEXT_CHARS = 500  # what of a request's text or error the audit keeps
POINTER = "the same question here moments ago; the answer is in"  # the private pointer's words (point_to)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


class Answering:
    def __init__(self, bot: KafkaBot):
        self.bot = bot

    async def in_thread(self, request, req: SlackRequest, *, rid: str, started: float, entry) -> bool:
        """Working message, the command, the answer in its thread; True when the answer was delivered.
        A delivery that fails after its retries is reported (audit + log, with the request id), and
        the working message is marked, so no hourglass is left behind."""
        bot = self.bot
        user, channel, team, text, thread_ts = req.user, req.channel, req.team, req.text, req.thread_ts
        # Slash command text is private until we echo it: never echo a token someone pasted, nor the
        # gate's or a triage thread's token (confirm <token>), a capability for whoever reads the channel.
        token = request.args.get("token")
        shown = text.replace(token, "…") if isinstance(token, str) and token else text
        label = f"`/kafka {slack_escape(_clip(scrub(shown), 200))}` for <@{user}>"
        thread = SlackThread(bot.delivery, channel, thread_ts=thread_ts, label=label)
        try:
            await thread.start(f":hourglass_flowing_sand: Working on {label}…")
            await bot.messages.remember_working_message(request, thread)
        except (SlackApiError, DeliveryFailed) as exc:
            # Slack's answer (not in the channel, a DM we cannot post to), or Slack still failing
            # after the queue's retries: answer privately where Slack lets us.
            log.warning("request %s: cannot post in %s (%s); answering privately", rid, channel, slack_error(exc))
            result = await run_request(request, bot.ctx)
            told = await tell_privately(
                bot.client, result.reply, user=user, channel=channel, thread_ts=thread_ts, respond=req.respond
            )
            if not told:
                await self._delivery_failed(
                    exc, request, rid, started, user, channel, team, step="working message and private answer"
                )
                return False
            where = {"delivered": "private", "thread_root": thread_ts}
        else:
            result = await self._answer_in(thread, request, req, rid, started, entry)
            if result is None:
                return False
            # the thread's first message: the timeline's key
            where = {"delivered": "thread", "thread_ts": thread.ts, "thread_root": thread.thread_ts or thread.ts}
        await self.audit_answer(
            request, result.outcome, started, user, channel, team, request_id=rid, reply=result.reply, **where
        )
        if where["delivered"] == "private":
            return False
        if req.message:
            await bot.messages.retire_clicked(req.message, channel, request, result.outcome, user)
        return True

    async def _answer_in(
        self, thread: SlackThread, request, req: SlackRequest, rid: str, started: float, entry
    ) -> Answer | None:
        """The command's answer posted in the started ``thread``; None when it failed (reported)."""
        bot = self.bot
        if entry is not None:
            bot.coalescer.started(entry, (thread.channel, thread.ts))
        posted: list[str] = []

        async def show(first: Answer) -> None:
            posted.extend(await thread.finish(first.reply, full=first.request is not None and first.request.full))
            await thread.attach(first.reply)  # files an answer carries (a timeline's exports)

        async def add(addition: Reply) -> None:
            posted.extend(await thread.add(addition))

        try:
            result = await run_request(request, dataclasses.replace(bot.ctx, progress=thread.progress), early=True)
            result = await show_in_parts(result, show, add)
            await bot.messages.remember_answer_messages(request, result.reply, thread, posted, req.message)
            await bot.remember(request, result.reply, thread)
        except Exception as exc:
            await thread.fail(
                "the answer could not be posted; it is in the bot's log and audit"
                if isinstance(exc, DeliveryFailed)
                else "the request failed; it is in the bot's log and audit"
            )
            await self._delivery_failed(exc, request, rid, started, req.user, req.channel, req.team, step="answer")
            return None
        return result

    async def point_to(self, entry, request, req: SlackRequest, *, rid: str, started: float) -> bool:
        """Point a repeated question to the thread that answers it (privately: one line for the asker,
        none in the channel). False when the first asker could not start a thread."""
        user, channel, team = req.user, req.channel, req.team
        where = await entry.where
        if where is None:
            return False
        thread_channel, ts = where
        link = None
        try:
            link = await self.bot.delivery.permalink(thread_channel, ts)  # asked once per message
        except SlackApiError as exc:
            log.info("no permalink for %s/%s: %s", thread_channel, ts, slack_error(exc))
        # Our own mrkdwn, so not a Reply (its verdict is escaped, which would show "&lt;@U…&gt;"): the
        # mention and the link are built from a checked user id and Slack's permalink.
        if not entry.leader or entry.leader == user:
            asked = "You asked"
        else:
            asked = f"<@{entry.leader}> asked" if SLACK_USER_ID.match(entry.leader) else "Someone asked"
        place = f"<{slack_escape(link)}|this thread>" if link else "the thread of that question in this channel"
        line = f":information_source: {asked} {POINTER} {place}."
        pointer = [{"text": line, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": line}}]}]
        told = await tell_privately(self.bot.client, pointer, user=user, channel=channel, respond=req.respond)
        await self.audit_answer(
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
        await self.audit_answer(
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

    async def audit_answer(
        self, request, outcome: str, started: float, user, channel, team, *, reply: Reply | None = None, **extra
    ) -> None:
        if reply is not None:  # what the timeline shows of it (commands/timeline.py); a preview by its token's hash
            token = action_token(reply) if request.command.action is not None else None
            extra = {**answer_summary(reply), **extra, **({"action_token_id": token_id(token)} if token else {})}
        await self.bot.audit.write(
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
