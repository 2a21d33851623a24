"""Slack's limits on one chat.postMessage, checked independently of the renderer's own constants.

Sources: https://docs.slack.dev/reference/block-kit/blocks (per-block limits; one table block per
message, 100 rows of 20 cells) and the `msg_blocks_too_long` refusals seen below the documented
limits (a report puts the ceiling near 13,200 characters of block text; we hold answers to 12,000).
"""

from __future__ import annotations

KNOWN_BLOCKS = {"header", "section", "divider", "context", "actions", "table", "image", "rich_text"}
BLOCK_TEXT_CEILING = 12_000


def _texts(value) -> int:
    if isinstance(value, dict):
        return sum(len(v) if k == "text" and isinstance(v, str) else _texts(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(_texts(v) for v in value)
    return 0


def violations(message: dict) -> list[str]:
    """Every way ``message`` (``text`` + ``blocks``) breaks a Slack limit; empty when it fits."""
    out: list[str] = []
    blocks = message.get("blocks") or []
    if not message.get("text"):
        out.append("no fallback text")
    if len(message.get("text", "")) > 40_000:
        out.append("fallback text over 40,000")
    if not 0 < len(blocks) <= 50:
        out.append(f"{len(blocks)} blocks")
    if _texts(blocks) > BLOCK_TEXT_CEILING:
        out.append(f"{_texts(blocks)} characters of block text")
    if sum(b.get("type") == "table" for b in blocks) > 1:
        out.append("more than one table")
    action_ids: list[str] = []
    for i, b in enumerate(blocks):
        kind = b.get("type")
        where = f"block {i} ({kind})"
        if kind not in KNOWN_BLOCKS:
            out.append(f"{where}: unknown type")
        if kind == "header" and len(b["text"]["text"]) > 150:
            out.append(f"{where}: header over 150")
        if kind == "section":
            if "text" in b and not 0 < len(b["text"]["text"]) <= 3000:
                out.append(f"{where}: section text {len(b['text']['text'])}")
            fields = b.get("fields") or []
            if len(fields) > 10 or any(len(f["text"]) > 2000 for f in fields):
                out.append(f"{where}: fields")
        if kind == "context":
            els = b.get("elements") or []
            if not 0 < len(els) <= 10 or any(len(e.get("text", "")) > 2000 for e in els):
                out.append(f"{where}: context elements")
        if kind == "actions":
            els = b.get("elements") or []
            if not 0 < len(els) <= 25:
                out.append(f"{where}: {len(els)} elements")
            for e in els:
                action_ids.append(e.get("action_id", ""))
                if len(e["text"]["text"]) > 75 or len(e.get("value", "")) > 2000:
                    out.append(f"{where}: button text/value too long")
        if kind == "table":
            rows = b.get("rows") or []
            if not 0 < len(rows) <= 100:
                out.append(f"{where}: {len(rows)} rows")
            widths = {len(r) for r in rows}
            if len(widths) != 1 or max(widths) > 20:
                out.append(f"{where}: ragged or over 20 cells")
            if any(c.get("type") != "raw_text" or not c.get("text") for r in rows for c in r):
                out.append(f"{where}: a cell that is not non-empty raw_text")
            if len(b.get("column_settings") or []) > 20:
                out.append(f"{where}: column_settings over 20")
    if len(action_ids) != len(set(action_ids)):
        out.append("duplicate action_id")
    return out
