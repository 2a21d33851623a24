"""Render a Reply to terminal text, JSON, or Slack Block Kit messages that Slack will accept.

Slack's limits are enforced here and nowhere else. A reply that does not fit one message is
split into several, each marked as a continuation, never truncated silently.
"""

from __future__ import annotations

import json
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from commands.reply import Reply

# Slack Block Kit limits (https://api.slack.com/reference/block-kit/blocks).
MAX_BLOCKS_PER_MESSAGE = 50
MAX_SECTION_TEXT = 3000
MAX_HEADER_TEXT = 150
MAX_CONTEXT_ELEMENTS = 10
MAX_CONTEXT_TEXT = 2000  # per mrkdwn element of a context block
MAX_ACTION_ELEMENTS = 25
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2000
MAX_FALLBACK_TEXT = 3000  # chat.postMessage `text`; Slack cuts at 40,000, a notification needs far less

_ENV = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    undefined=StrictUndefined,
    keep_trailing_newline=False,
    autoescape=False,  # Slack mrkdwn is not HTML; the `esc` filter applies Slack's own escaping
)


def slack_escape(text: object) -> str:
    """Slack's mrkdwn escaping: only &, < and > are control characters."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_ENV.filters["esc"] = slack_escape


def render_text(reply: Reply) -> str:
    return _ENV.get_template("text.j2").render(reply=reply).rstrip() + "\n"


def render_json(reply: Reply) -> str:
    return json.dumps(reply.to_dict(), indent=2, ensure_ascii=False)


# ---- Block Kit ----------------------------------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _split_text(text: str, limit: int = MAX_SECTION_TEXT) -> list[str]:
    """Split on line boundaries into chunks within ``limit``; a too-long line is split on spaces."""
    chunks: list[str] = []
    current = ""
    for line in text.splitlines():
        while len(line) > limit:
            cut = line.rfind(" ", 0, limit)
            cut = cut if cut > limit // 2 else limit
            piece, line = line[:cut], line[cut:].lstrip()
            if current:
                chunks.append(current)
                current = ""
            chunks.append(piece)
        candidate = f"{current}\n{line}" if current else line
        if len(candidate) > limit:
            chunks.append(current)
            current = line
        else:
            current = candidate
    if current.strip():
        chunks.append(current)
    return [c for c in chunks if c.strip()]


def _sections(text: str) -> list[dict]:
    return [{"type": "section", "text": {"type": "mrkdwn", "text": chunk}} for chunk in _split_text(text.strip())]


def reply_blocks(reply: Reply) -> list[dict]:
    """All blocks of a reply, each within its own limits, before splitting into messages."""
    blocks: list[dict] = [
        {"type": "header", "text": {"type": "plain_text", "text": _clip(reply.title, MAX_HEADER_TEXT), "emoji": True}}
    ]
    blocks += _sections(_ENV.get_template("slack_verdict.j2").render(reply=reply))
    if reply.evidence:
        blocks += _sections(_ENV.get_template("slack_evidence.j2").render(evidence=reply.evidence))
    for i, d in enumerate(reply.diagnoses, 1):
        blocks.append({"type": "divider"})
        blocks += _sections(_ENV.get_template("slack_diagnosis.j2").render(d=d, index=i))
    for s in reply.sections:
        blocks += _sections(_ENV.get_template("slack_section.j2").render(s=s))
    buttons = [
        {
            "type": "button",
            "text": {"type": "plain_text", "text": _clip(a.label, MAX_BUTTON_TEXT)},
            "action_id": f"kbot_action_{i}",
            "value": _clip(a.command, MAX_BUTTON_VALUE),
            **({"style": "danger"} if a.mutating else {}),
        }
        for i, a in enumerate(reply.actions)
    ]
    for start in range(0, len(buttons), MAX_ACTION_ELEMENTS):
        blocks.append({"type": "actions", "elements": buttons[start : start + MAX_ACTION_ELEMENTS]})
    footer = [*(f":memo: {slack_escape(n)}" for n in reply.notes), *(slack_escape(f) for f in reply.followups)]
    for start in range(0, len(footer), MAX_CONTEXT_ELEMENTS):
        blocks.append(
            {
                "type": "context",
                "elements": [
                    {"type": "mrkdwn", "text": _clip(t, MAX_CONTEXT_TEXT)} for t in footer[start : start + MAX_CONTEXT_ELEMENTS]
                ],
            }
        )
    return blocks


def render_blocks(reply: Reply) -> list[dict]:
    """One or more chat.postMessage payloads (``blocks`` + fallback ``text``) that Slack accepts."""
    blocks = reply_blocks(reply)
    # Leave room in every message after the first for a "continued" context block.
    per_message = MAX_BLOCKS_PER_MESSAGE - 1
    pages = [blocks[i : i + per_message] for i in range(0, len(blocks), per_message)] or [[]]
    # The fallback `text` is mrkdwn too (notifications, screen readers): a title or verdict that
    # echoes user text ("why <!here> URP") would ping the channel or show a disguised link.
    fallback = _clip(slack_escape(f"{reply.title}: {reply.verdict}" if reply.verdict else reply.title), MAX_FALLBACK_TEXT)
    messages = []
    for n, page in enumerate(pages, 1):
        if len(pages) > 1:
            title = slack_escape(_clip(reply.title, MAX_HEADER_TEXT))
            marker = {"type": "context", "elements": [{"type": "mrkdwn", "text": f"_{title}: part {n} of {len(pages)}_"}]}
            page = [*page, marker] if n == 1 else [marker, *page]
        messages.append({"text": fallback if n == 1 else f"{fallback} (part {n} of {len(pages)})", "blocks": page})
    return messages


RENDERERS = {"text": render_text, "json": render_json}
