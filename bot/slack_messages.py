"""The bot's messages besides the answer pages: private answers, and the messages of gated actions
kept true.

A private answer (a refusal, a pointer to another asker's thread, an answer where the bot cannot
post) is ephemeral; where the bot cannot post in the channel it goes through Bolt's respond (the
request's response_url), which works even where the bot is not a member.

An action's preview carries buttons and its confirm posts a working message; both are stored with
the action's record (gate/confirmation.py). Once the record is resolved - by a click here, a
confirm in a terminal, the expiry sweep or the start-up reconciliation - the message loses its
buttons and says what happened (``_settle``): at once for the message clicked, within
``SETTLE_INTERVAL_S`` for the others.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.delivery import Delivery, DeliveryFailed, slack_error
from bot.render import slack_escape
from bot.render_slack import render_blocks
from framework.reply import Reply
from gate.audit import scrub
from gate.confirmation import outcome_note
from gate.rbac import SLACK_USER_ID

if TYPE_CHECKING:
    from slack_bolt.context.respond.async_respond import AsyncRespond

    from bot.slack_thread import SlackThread

log = logging.getLogger(__name__)

MAX_RESPONSE_URL_POSTS = 5  # Slack's limit per response_url (within 30 minutes)
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


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


async def tell_privately(
    client: AsyncWebClient,
    reply: Reply | list[dict],
    *,
    user,
    channel,
    thread_ts=None,
    respond: AsyncRespond | None = None,
) -> bool:
    """Ephemeral, page by page; through ``respond`` when the bot cannot post in the channel.
    ``reply``: a Reply, or pages already rendered. True when Slack took it."""
    pages = render_blocks(reply) if isinstance(reply, Reply) else reply
    try:
        for page in pages:
            await client.chat_postEphemeral(channel=channel, user=user, thread_ts=thread_ts, **page)
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


def action_token(reply: Reply) -> str | None:
    """The gate token a preview's buttons carry ("cancel <token>" is on every preview)."""
    for a in reply.actions:
        words = a.command.split()
        if len(words) == 2 and words[0] in ("confirm", "cancel"):
            return words[1]
    return None


def _slack_note(rec) -> str:

    by = (rec.result or {}).get("by")
    text = slack_escape(outcome_note(rec))
    if by and SLACK_USER_ID.match(by):  # a Slack user (a terminal mapped to one, too): mention them
        text = text.replace(slack_escape(by), f"<@{by}>", 1)
    return f"{_STATE_EMOJI.get(rec.state, ':information_source:')} {text}"


def _without_buttons(page: dict, note: str, text: str) -> dict:
    """The message as it was, its buttons replaced by ``note``."""
    blocks = [b for b in page.get("blocks") or [] if b.get("type") != "actions"]
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _clip(note, 3000)}]})
    return {"text": page.get("text") or text, "blocks": blocks}


class ActionMessages:
    """The messages of the gate's records: stored as they are posted, edited once resolved."""

    def __init__(self, gate, delivery: Delivery):
        self.gate, self.delivery = gate, delivery
        # Tokens whose confirm this process is answering right now (a crash empties it, as it should).
        self.in_flight: set[str] = set()
        # one settle sweep at a time in this process: two that overlap both read a record as
        # unsettled and edit its message twice
        self.settling = asyncio.Lock()

    async def remember_working_message(self, request, thread: SlackThread) -> None:
        """A confirm's working message belongs to its record: a crash while executing leaves it
        behind, and the reconciliation at start-up must find it to replace the hourglass."""
        if request.spec.name != "confirm" or not thread.ts:
            return
        token = str(request.args.get("token", ""))
        if await self.gate.status(token) is not None:
            # While this request runs, its own answer will replace the working message: the settling
            # must not edit it meanwhile (its edit could land after the answer and hide it).
            self.in_flight.add(token)
            await self.gate.attach_message(token, thread.channel, thread.ts, "working", {})

    async def remember_answer_messages(
        self, request, reply: Reply, thread: SlackThread, posted: list[str], message: dict | None
    ) -> None:
        """After an answer is posted: store a preview's message (the page with the buttons) with its
        record; for a confirm / cancel that resolved its record, mark the messages this answer
        already made true (its own working message, now the answer; the clicked preview, which
        ``retire_clicked`` edits)."""
        if request.command.action is not None:
            token = action_token(reply)
            if token is None:
                return
            # Rendered as SlackThread.finish rendered it, so the pages line up with the ts it returned.
            pages = (scrub(p) for p in render_blocks(reply, full=bool(getattr(request, "full", False))))
            for page, ts in zip(pages, posted):
                if any(b.get("type") == "actions" for b in page.get("blocks") or []):
                    await self.gate.attach_message(token, thread.channel, ts, "preview", page)
            return
        if request.spec.name not in ("confirm", "cancel"):
            return
        token = str(request.args.get("token", ""))
        # Out of flight only once its messages are marked, and not in the middle of a sweep that
        # read them unsettled: either would edit the clicked preview a second time.
        async with self.settling:
            try:
                rec = await self.gate.status(token)
                if rec is None:
                    return
                if thread.ts:  # the working message is this answer now: never edited again
                    await self.gate.mark_settled(token, thread.channel, thread.ts, rec.state)
                if (message or {}).get("ts") and rec.state not in ("pending", "executing"):
                    await self.gate.mark_settled(token, thread.channel, message["ts"], rec.state)
            finally:
                self.in_flight.discard(token)

    async def retire_clicked(self, message: dict, channel: str, request, outcome: str, user: str) -> None:
        """Take the buttons off the message clicked once they are spent, so nobody clicks a dead
        token or an answered triage question; the message keeps its content and says what happened."""
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
        if message.get("ts"):
            await self._settle(channel, message["ts"], _without_buttons(message, note, name), "the answered message")

    async def settle_pending(self) -> int:
        """Edit every stored message whose record was resolved since: the preview loses its buttons
        and says what happened; a working message left by a crash says how it was reconciled."""
        async with self.settling:
            edited = 0
            for rec, msg in await self.gate.unsettled_messages():
                if rec.token in self.in_flight:
                    continue  # its confirm is being answered in this process; the answer makes it true
                note = _slack_note(rec)
                if msg["role"] == "preview":
                    edit = _without_buttons(msg["payload"], note, rec.plan.kind)
                else:
                    edit = {"text": _clip(note, 3000), "blocks": []}
                if not await self._settle(msg["channel"], msg["ts"], edit, f"action {rec.plan.kind}"):
                    continue  # Slack unreachable: the next round tries again
                await self.gate.mark_settled(rec.token, msg["channel"], msg["ts"], rec.state)
                edited += 1
            return edited

    async def settle_forever(self, interval_s: float | None = None) -> None:
        """``settle_pending`` every ``interval_s``, for records resolved anywhere (a terminal
        confirm in another process, the expiry sweep, the start-up reconciliation)."""
        while True:
            try:
                await self.settle_pending()
            except Exception:
                log.exception("settling the messages of resolved actions failed")
            await asyncio.sleep(interval_s or SETTLE_INTERVAL_S)

    async def _settle(self, channel: str, ts: str, edit: dict, what: str) -> bool:
        """Edit one message to say how its action ended. False when Slack could not be reached
        (worth another try); a refusal (message deleted, channel archived) is final."""
        try:
            await self.delivery.update(channel, ts=ts, **edit)
        except DeliveryFailed as exc:
            log.warning("could not edit the message of %s: %s", what, exc)
            return False
        except SlackApiError as exc:
            log.warning("could not edit the message of %s: %s", what, slack_error(exc))
        return True
