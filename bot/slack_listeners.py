"""The Slack app's Bolt listeners, and the listener middleware each of them runs first.

    /kafka <text>   ack at once (empty, so Slack shows nothing yet), then answer off the ack path
    buttons         every Reply button's value is /kafka text; a click runs it as the clicking user,
                    in the thread the button lives in
    @mention        "@kbot why URP" works like /kafka, answered in a thread
    thread message  a plain message in a thread the bot answers in, starting with a command
                    ("describe it"), is a follow-up, as a mention there is; every other message
                    (the bot's own, edits, channel chatter, other threads) is acked, not answered

A question in a thread the bot answers in is a follow-up: it starts from the thread's incident
(framework/followup.py; bot/slack_bot.py keeps one memory per thread).

Before a listener runs, its middleware (Bolt's ``middleware=[...]``, in this order):

    drop_retries    Slack retries a request it thinks we missed; a repeat of one we already
                    received (an event: the same event_id) is acked again and not run again, a
                    retry whose first delivery never reached us runs (``Deliveries`` in bot/slack_http.py)
    check_origin    a workspace, Enterprise Grid org or app outside the allow-lists is refused:
                    acked, answered privately where Slack lets us, audited; its listener never runs

A middleware that stops a request returns the ack's response itself: Bolt sends what a listener
middleware returns when it does not call ``next``.

A signed request no listener takes (a button whose action_id is not one of ours, an event type
the app does not subscribe to) is acked empty and logged as one short line naming its type only:
Bolt's own warning spans lines and quotes the sender's action_id back as a code suggestion.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import TYPE_CHECKING

from slack_bolt.async_app import AsyncApp
from slack_bolt.error import BoltUnhandledRequestError
from slack_bolt.response import BoltResponse

from bot.slack_request import SlackRequest

if TYPE_CHECKING:
    from bot.slack_bot import KafkaBot

ACTION_ID = re.compile(r"^kbot_action_\d+$")  # bot/render_slack.py names every Reply button this way
_KIND = re.compile(r"^[a-z_]{1,40}$")  # a payload or event type as Slack names them; anything else is not echoed

log = logging.getLogger(__name__)


class Listeners:
    def __init__(self, bot: KafkaBot):
        self.bot = bot

    def register(self, app: AsyncApp) -> None:
        first = [self.drop_retries, self.check_origin]
        app.command("/kafka", middleware=first)(self.slash)
        app.action(ACTION_ID, middleware=first)(self.button)
        app.event("app_mention", middleware=first)(self.mention)
        app.event("message", middleware=[self.only_thread_messages, *first])(self.message)
        app.error(self.on_error)  # needs AsyncApp(raise_error_for_unhandled_request=True): bot/slack_bot.py

    async def on_error(self, error: Exception, body: dict) -> BoltResponse | None:
        """Bolt's error handler: an unhandled request is one short line and an empty ack (nothing
        the sender wrote is logged or answered); any other error is logged as Bolt would."""
        if isinstance(error, BoltUnhandledRequestError):
            kind = str(body.get("type") or "") if isinstance(body, dict) else ""
            event = body.get("event") if isinstance(body, dict) else None
            if kind == "event_callback" and isinstance(event, dict):
                kind = f"event {event.get('type') or ''}"
            shown = kind if all(_KIND.match(w) for w in kind.split(" ", 1) if w) and kind else "unknown"
            log.info("unhandled Slack request (%s): no listener of this app takes it; acked, nothing run", shown)
            return BoltResponse(status=200, body="")
        log.error("a Slack listener failed: %s", type(error).__name__, exc_info=error)
        return None

    # ---- middleware -----------------------------------------------------------------------------
    async def only_thread_messages(self, body: dict, context, ack, next_) -> BoltResponse | None:
        """A message event goes on only when a person wrote it, in a thread, without mentioning
        the bot (the app_mention event of the same message answers that one); everything else
        (channel chatter, edits and deletions, bots, the bot itself) is acked here and dropped
        before the dedup and origin checks, so chatter leaves no trace."""
        event = body.get("event") or {}
        bot_user = getattr(context, "bot_user_id", None)
        text = event.get("text") or ""
        thread_ts = event.get("thread_ts")
        if (
            event.get("subtype")
            or event.get("bot_id")
            or not event.get("user")
            or event.get("user") == bot_user
            or not thread_ts
            or thread_ts == event.get("ts")
            or (bot_user and f"<@{bot_user}>" in text)
        ):
            return await ack()
        await next_()
        return None

    async def drop_retries(self, request, ack, next_) -> BoltResponse | None:
        # Not the retry header alone: a mention sent while we restarted comes back as a retry whose
        # first delivery never reached us, and must run.
        if not self.bot.deliveries.first(request):
            return await ack()
        await next_()
        return None

    async def check_origin(self, body: dict, ack, respond, next_) -> BoltResponse | None:
        sender = SlackRequest.of(body)
        verdict = self.bot.authorizer.origin(sender.team, sender.api_app_id, sender.enterprise)
        if verdict.allowed:
            await next_()
            return None
        # How the sender hears of it: a slash command's ack text is shown to the caller alone, with
        # no Web API call into a workspace we do not serve; a click is answered privately in its
        # thread (through the response_url where the bot cannot post); a mention is only audited.
        response = await ack(text=f":no_entry: {verdict.reason}") if sender.source == "slash" else await ack()
        if sender.source == "button":
            origin = dataclasses.replace(sender, respond=respond)
            self.bot.spawn(self.bot.intake.refuse(verdict, "origin", origin, api_app_id=sender.api_app_id))
        else:
            self.bot.spawn(self.bot.intake.audit_refusal("origin", verdict, sender, api_app_id=sender.api_app_id))
        return response

    # ---- listeners ----------------------------------------------------------------------------------
    async def slash(self, ack, body: dict, respond) -> None:
        await ack()
        self.bot.spawn(self.bot.intake.handle_text(SlackRequest.of(body, respond=respond)))

    async def button(self, ack, body: dict, respond) -> None:
        await ack()
        self.bot.spawn(self.bot.intake.handle_text(SlackRequest.of(body, respond=respond)))

    async def mention(self, body: dict) -> None:
        self.bot.spawn(self.bot.intake.handle_text(SlackRequest.of(body)))

    async def message(self, body: dict) -> None:
        self.bot.spawn(self.bot.intake.handle_thread_message(SlackRequest.of(body)))
