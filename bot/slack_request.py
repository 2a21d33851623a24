"""One request from Slack, typed from the listener to the answer.

A slash command, a button click, a mention and a plain thread message arrive as three payload
kinds; ``SlackRequest.of`` reads who sent it, from where, its /kafka text and where the answer
goes, the same way for the middleware and the listeners, and the bot passes that one object down
(intake, refusals, the answer, the audit) instead of a dict of keywords.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slack_bolt.context.respond.async_respond import AsyncRespond

_MENTION = re.compile(r"^\s*<@[A-Z0-9]+>\s*")


def _enterprise(body: dict) -> str | None:
    """The Enterprise Grid org of a slash command, interaction or event (None outside Grid)."""
    ent = body.get("enterprise")
    found = (
        body.get("enterprise_id")
        or (ent.get("id") if isinstance(ent, dict) else None)
        or ((body.get("team") or {}).get("enterprise_id") if isinstance(body.get("team"), dict) else None)
    )
    if not found:
        for auth in body.get("authorizations") or []:
            if isinstance(auth, dict) and auth.get("enterprise_id"):
                return auth["enterprise_id"]
    return found or None


@dataclass(frozen=True)
class SlackRequest:
    """Who sent a request, from where, its /kafka text, and how to answer it."""

    source: str  # "slash", "button", "mention" or "message" (the audit's name for it)
    text: str
    user: str | None
    channel: str | None
    team: str | None
    enterprise: str | None = None
    api_app_id: str | None = None
    thread_ts: str | None = None  # where the answer goes: a button's or a mention's thread
    # Bolt's respond (the request's response_url): a private answer where the bot cannot post
    respond: AsyncRespond | None = field(default=None, compare=False, repr=False)
    # the message a button was clicked on: its buttons are retired once the action is spent
    message: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, body: dict, respond: AsyncRespond | None = None) -> SlackRequest:
        common: dict[str, Any] = {"enterprise": _enterprise(body), "api_app_id": body.get("api_app_id")}
        common["respond"] = respond
        if body.get("type") == "block_actions":
            user, channel = body.get("user") or {}, body.get("channel") or {}
            message, container = body.get("message") or {}, body.get("container") or {}
            return cls(
                "button",
                body["actions"][0].get("value") or "",
                user=user.get("id"),
                channel=channel.get("id") or container.get("channel_id"),
                team=(body.get("team") or {}).get("id") or user.get("team_id"),
                thread_ts=message.get("thread_ts")
                or message.get("ts")
                or container.get("thread_ts")
                or container.get("message_ts"),
                message=message,
                **common,
            )
        if body.get("type") == "event_callback":
            event = body["event"]
            return cls(
                "mention" if event.get("type") == "app_mention" else "message",
                _MENTION.sub("", event.get("text") or "", count=1),
                user=event.get("user"),
                channel=event.get("channel"),
                team=body.get("team_id"),
                thread_ts=event.get("thread_ts") or event.get("ts"),
                **common,
            )
        return cls(
            "slash",
            body.get("text") or "",
            user=body.get("user_id"),
            channel=body.get("channel_id"),
            team=body.get("team_id"),
            **common,
        )
