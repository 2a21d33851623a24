"""Render a Reply as Slack Block Kit messages that Slack will accept.

By default an answer is short and ordered for acting (bot/layout.py); ``full=True`` renders
everything the Reply holds, as the long runbook form. Slack's limits are enforced here and nowhere
else. A reply that does not fit one message is split into several, each marked as a continuation,
never truncated silently.
"""

from __future__ import annotations

from bot.layout import EVIDENCE_ROWS, SECTION_LINES, SEVERITY_WORD, ShortAnswer, first_sentence, localize, short_answer
from bot.render import TEMPLATES, fmt_cell, numeric_columns, slack_escape
from framework.reply import Reply, Section, Table
from framework.sources import summary as sources_summary

# Slack Block Kit limits (https://docs.slack.dev/reference/block-kit/blocks).
MAX_BLOCKS_PER_MESSAGE = 50
MAX_SECTION_TEXT = 3000
MAX_HEADER_TEXT = 150
MAX_CONTEXT_ELEMENTS = 10
MAX_CONTEXT_TEXT = 2000  # per mrkdwn element of a context block
MAX_ACTION_ELEMENTS = 25
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2000
MAX_FALLBACK_TEXT = 3000  # chat.postMessage `text`; Slack cuts at 40,000, a notification needs far less
MAX_TABLE_ROWS = 100  # a table block: at most 100 rows of at most 20 cells, one table per message
MAX_TABLE_CELLS = 20
MAX_TABLE_CELL_TEXT = 500
# Slack refuses messages with `msg_blocks_too_long` well below its documented per-block limits
# (reports put the ceiling near 13,200 characters of block text): stay under 12,000 per message.
MAX_BLOCK_TEXT_PER_MESSAGE = 12_000
MARKER_ROOM = 300  # the "part n of m" context block added to split messages


SEVERITY_EMOJI = {
    "ok": ":large_green_circle:",
    "info": ":information_source:",
    "warning": ":warning:",
    "critical": ":red_circle:",
    "error": ":x:",
    "unknown": ":grey_question:",
}


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


def _context(texts: list[str]) -> list[dict]:
    return [
        {
            "type": "context",
            "elements": [
                {"type": "mrkdwn", "text": _clip(t, MAX_CONTEXT_TEXT)}
                for t in texts[start : start + MAX_CONTEXT_ELEMENTS]
            ],
        }
        for start in range(0, len(texts), MAX_CONTEXT_ELEMENTS)
    ]


def _cell(text: str) -> dict:
    return {"type": "raw_text", "text": _clip(text, MAX_TABLE_CELL_TEXT) or " "}


def _table_blocks(
    title: str, columns: list[str], rows: list[list[str]], numeric: list[bool], more: int = 0
) -> list[dict]:
    """A titled Block Kit table (raw text cells: nothing in them is mrkdwn), split at 100 rows."""
    columns, numeric = columns[:MAX_TABLE_CELLS], numeric[:MAX_TABLE_CELLS]
    rows = [[_clip(c, MAX_TABLE_CELL_TEXT) for c in row[:MAX_TABLE_CELLS]] for row in rows]
    # A piece is one table block, in a message of its own when need be: at most 100 rows (the
    # header repeats in every piece) and within the block-text ceiling with room for its title.
    budget = MAX_BLOCK_TEXT_PER_MESSAGE - MARKER_ROOM - 400 - sum(len(c) for c in columns)
    pieces: list[list[list[str]]] = []
    piece: list[list[str]] = []
    chars = 0
    for row in rows:
        size = sum(len(c) or 1 for c in row)
        if piece and (len(piece) >= MAX_TABLE_ROWS - 1 or chars + size > budget):
            pieces.append(piece)
            piece, chars = [], 0
        piece.append(row)
        chars += size
    pieces = pieces + [piece] if piece or not pieces else pieces
    blocks: list[dict] = []
    for n, piece in enumerate(pieces, 1):
        label = f"*{slack_escape(title)}*" + (f" ({n} of {len(pieces)})" if len(pieces) > 1 else "")
        blocks += _sections(label)
        blocks.append(
            {
                "type": "table",
                "column_settings": [{"align": "right" if num else "left", "is_wrapped": not num} for num in numeric],
                "rows": [[_cell(c) for c in columns]] + [[_cell(c) for c in row] for row in piece],
            }
        )
    if more:
        blocks += _context([f"+{more:,} more rows"])
    return blocks


def _reply_table_blocks(table: Table) -> list[dict]:
    return _table_blocks(
        table.title,
        table.columns,
        [[fmt_cell(v) for v in row] for row in table.rows],
        numeric_columns(table),
        table.more,
    )


def _evidence_blocks(reply: Reply, limit: int | None) -> list[dict]:
    shown = reply.evidence if limit is None else reply.evidence[:limit]
    if not shown:
        return []
    mark = {"ok": "✅", "bad": "❗", "neutral": "•"}
    blocks = _table_blocks(
        "Evidence",
        [" ", "What", "Value", "Source"],
        [[mark[e.status], e.label, e.value, e.source] for e in shown],
        [False] * 4,
    )
    if len(reply.evidence) > len(shown):
        blocks += _context([f"+{len(reply.evidence) - len(shown)} more (Show full answer)"])
    return blocks


def _buttons(reply: Reply, short: ShortAnswer | None) -> list[dict]:
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
    if short is not None and reply.more_command and (reply.diagnoses or short.shortened):
        buttons.append(
            {
                "type": "button",
                "text": {"type": "plain_text", "text": "Show full runbook" if reply.diagnoses else "Show full answer"},
                "action_id": f"kbot_action_{len(reply.actions)}",
                "value": _clip(reply.more_command, MAX_BUTTON_VALUE),
            }
        )
    return [
        {"type": "actions", "elements": buttons[start : start + MAX_ACTION_ELEMENTS]}
        for start in range(0, len(buttons), MAX_ACTION_ELEMENTS)
    ]


def _verdict_text(reply: Reply) -> str:
    sev = SEVERITY_WORD.get(reply.severity, reply.severity.upper())
    return (
        f"{SEVERITY_EMOJI.get(reply.severity, '')} *{sev}* {slack_escape(reply.verdict)}"
        + (f"\n_Window: {slack_escape(reply.window)}_" if reply.window else "")
        + "".join(f"\n:warning: _Missing from this answer:_ {slack_escape(m)}" for m in reply.missing)
        + (f"\n_Sources: {slack_escape(sources_summary(reply.sources))}_" if reply.sources else "")
    )


def _short_blocks(reply: Reply, short: ShortAnswer) -> list[dict]:
    blocks: list[dict] = [
        {"type": "header", "text": {"type": "plain_text", "text": _clip(reply.title, MAX_HEADER_TEXT), "emoji": True}}
    ]
    blocks += _sections(_verdict_text(reply))
    if short.heading:
        lines = [f"*{slack_escape(short.heading)}*"]
        for n, step in enumerate(short.steps, 1):
            lines.append(f"{n}. {slack_escape(step.text)}")
            if step.command:
                lines.append(f"    `{slack_escape(step.command)}`")
            lines += [f"    `{slack_escape(k)}={slack_escape(v)}`" for k, v in (step.config or {}).items()]
        blocks += _sections("\n".join(lines))
    if short.warnings:
        lines = [
            (
                f":warning: *Last resort, destroys data:* {slack_escape(w.what)}"
                if w.last_resort
                else f":no_entry: *Do not* {slack_escape(w.what[:1].lower() + w.what[1:])}"
                + (f" — {slack_escape(w.why)}" if w.why else "")
            )
            for w in short.warnings
        ]
        blocks += _sections("\n".join(lines))
    blocks += _evidence_blocks(reply, EVIDENCE_ROWS)
    for table in reply.tables:
        blocks += _reply_table_blocks(table)
    for section in reply.sections:
        shown = section.lines[:SECTION_LINES]
        left = len(section.lines) - len(shown)
        blocks += _sections(
            TEMPLATES.get_template("slack_section.j2").render(s=Section(section.heading, shown))
            + (f"\n_+{left} more (Show full answer)_" if left else "")
        )
    if short.why is not None:
        w = short.why
        blocks += _context(
            [
                f"*Why:* <{w.url}|{slack_escape(w.label)}> `{slack_escape(w.symbol)}`: "
                f"{slack_escape(first_sentence(w.does, 200))}"
            ]
        )
    elif short.why_note:
        blocks += _context([f"*Why:* {slack_escape(short.why_note)}"])
    if short.others:
        blocks += _sections(f"*{short.others_heading}*\n" + "\n".join(f"• {slack_escape(o)}" for o in short.others))
    blocks += _buttons(reply, short)
    footer = [f":memo: {slack_escape(n)}" for n in reply.notes]
    footer += [slack_escape(m) for m in short.more if not m.endswith("--full")]
    blocks += _context(footer)
    return blocks


def reply_blocks(reply: Reply, *, full: bool = False) -> list[dict]:
    """All blocks of a reply, each within its own limits, before splitting into messages."""
    if not full:
        return _short_blocks(reply, short_answer(reply))
    blocks: list[dict] = [
        {"type": "header", "text": {"type": "plain_text", "text": _clip(reply.title, MAX_HEADER_TEXT), "emoji": True}}
    ]
    blocks += _sections(TEMPLATES.get_template("slack_verdict.j2").render(reply=reply))
    blocks += _evidence_blocks(reply, None)
    for table in reply.tables:
        blocks += _reply_table_blocks(table)
    for i, d in enumerate(reply.diagnoses, 1):
        blocks.append({"type": "divider"})
        blocks += _sections(TEMPLATES.get_template("slack_diagnosis.j2").render(d=d, index=i))
    for s in reply.sections:
        blocks += _sections(TEMPLATES.get_template("slack_section.j2").render(s=s))
    blocks += _buttons(reply, None)
    blocks += _context(
        [*(f":memo: {slack_escape(n)}" for n in reply.notes), *(slack_escape(f) for f in reply.followups)]
    )
    return blocks


def block_text_chars(value: object) -> int:
    """Characters of text a block (or message) carries: every "text" string, at any depth. What
    Slack's `msg_blocks_too_long` counts is not documented; this errs on the large side."""
    if isinstance(value, dict):
        own = len(value["text"]) if isinstance(value.get("text"), str) else 0
        return own + sum(block_text_chars(v) for k, v in value.items() if not (k == "text" and isinstance(v, str)))
    if isinstance(value, list):
        return sum(block_text_chars(v) for v in value)
    return 0


def _paginate(blocks: list[dict]) -> list[list[dict]]:
    """Pages within Slack's block count, block-text ceiling and one table per message."""
    pages: list[list[dict]] = []
    page: list[dict] = []
    chars = tables = 0
    for block in blocks:
        size = block_text_chars(block)
        is_table = block["type"] == "table"
        full = (
            len(page) >= MAX_BLOCKS_PER_MESSAGE - 1
            or chars + size > MAX_BLOCK_TEXT_PER_MESSAGE - MARKER_ROOM
            or (is_table and tables >= 1)
        )
        if page and full:
            # Keep a table's title with its table.
            carry = [page.pop()] if is_table and page[-1]["type"] == "section" else []
            pages.append(page)
            page, chars, tables = carry, sum(block_text_chars(b) for b in carry), 0
        page.append(block)
        chars += size
        tables += is_table
    if page or not pages:
        pages.append(page)
    return [p for p in pages if p] or [[]]


def fallback_text(reply: Reply) -> str:
    # The fallback `text` is mrkdwn too (notifications, screen readers): a title or verdict that
    # echoes user text ("why <!here> URP") would ping the channel or show a disguised link.
    sev = SEVERITY_WORD.get(reply.severity, "")
    head = f"{sev} {reply.title}" if reply.severity not in ("info",) else reply.title
    return _clip(slack_escape(f"{head}: {reply.verdict}" if reply.verdict else head), MAX_FALLBACK_TEXT)


def render_blocks(reply: Reply, *, full: bool = False) -> list[dict]:
    """One or more chat.postMessage payloads (``blocks`` + fallback ``text``) that Slack accepts."""
    reply = localize(reply, "slack")
    pages = _paginate(reply_blocks(reply, full=full))
    fallback = fallback_text(reply)
    messages = []
    for n, page in enumerate(pages, 1):
        if len(pages) > 1:
            title = slack_escape(_clip(reply.title, MAX_HEADER_TEXT))
            marker = {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": f"_{title}: part {n} of {len(pages)}_"}],
            }
            page = [*page, marker] if n == 1 else [marker, *page]
        messages.append({"text": fallback if n == 1 else f"{fallback} (part {n} of {len(pages)})", "blocks": page})
    return messages
