"""A console session as an incident: what `timeline` typed in `kbot console` shows.

A Slack thread's timeline is read from the audit log (commands/timeline.py); the console writes no
audit record per question, so the session keeps its own: each question and its answer, in the
shape the audit log gives them (``request`` / ``answer`` records with an evidence snapshot and,
for a previewed action, its token's hash), so the same ``build`` turns them into the timeline. The
gate's records of actions previewed in the session (preview, approval, execution) come from the
gate's audit log, found by those tokens' hashes as in a thread.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.slack_messages import action_token
from commands.timeline import TimelineReply, answer_summary, build, incident_chart, timeline_reply
from framework.context import Context
from framework.dispatch import Answer
from framework.followup import IncidentMemory
from framework.reply import Reply, error_reply
from framework.spec import CommandRequest
from gate.audit import token_id
from gate.files import private_dir

CHANNEL = "console"  # where the session's records say they were asked
MAX_RECORDS = 2000  # a long session keeps its newest questions


class ConsoleSession:
    """The records of one console session's questions and answers, for its timeline."""

    def __init__(self, user: str | None, *, home: Path | None = None, clock: Callable[[], float] = time.time):
        self.clock = clock
        self.home = home
        self.user = user or "console"
        self.started = clock()
        self.id = f"{self.started:.6f}"  # the session's "thread": its start time, as a Slack root ts
        self.records: list[dict[str, Any]] = []

    def chart_path(self) -> Path:
        """Where the session's timeline chart is written (the console's stand-in for Slack's upload)."""
        folder = private_dir(self.home) if self.home is not None else Path(".")
        return folder / f"timeline-console-{self.id.replace('.', '-')}.png"

    def note(self, text: str, result: Answer, asked_at: float) -> None:
        """One question and its answer (the gate's own commands and `timeline` are kept too: the
        timeline leaves them out of the questions, as in a thread)."""
        request = result.request
        rid = uuid.uuid4().hex[:12]
        self.records.append(
            {
                "ts": asked_at,
                "event": "request",
                "channel": CHANNEL,
                "thread_ts": self.id,
                "text": text[:500],
                "request_id": rid,
                "user": self.user,
                "transport": "terminal",
            }
        )
        answer: dict[str, Any] = {
            "ts": self.clock(),
            "event": "answer",
            "channel": CHANNEL,
            "thread_root": self.id,
            "request_id": rid,
            "user": self.user,
            "transport": "terminal",
            "command": request.spec.name if request is not None else None,
            "args": dict(request.args) if request is not None else {},
            "outcome": result.outcome,
            "latency_ms": round((self.clock() - asked_at) * 1000, 1),
            **answer_summary(result.reply),
        }
        token = action_token(result.reply) if request is not None and request.command.action is not None else None
        if token:
            answer["action_token_id"] = token_id(token)
        self.records.append(answer)
        del self.records[:-MAX_RECORDS]

    async def timeline(self, request: CommandRequest, ctx: Context, memory: IncidentMemory) -> Reply:
        """The session's timeline, with the chart of its metric over the session's incident."""
        gate_records = await asyncio.to_thread(_gate_records, ctx)
        records = sorted([*gate_records, *self.records], key=lambda r: float(r.get("ts") or 0))
        doc = build(records, (CHANNEL, self.id), memory.to_dict())
        doc["thread"] = "this console session"
        if not doc["events"]:
            return error_reply("This console session has no question yet: ask something first (`why URP`).")
        reply: TimelineReply = timeline_reply(doc)
        series, said = await incident_chart(request, ctx, doc, memory.metric)
        reply.series = series
        reply.notes.append(said)
        return reply


def _gate_records(ctx: Context) -> list[dict[str, Any]]:
    """The gate's audit records (previews and what became of them), when the console has a gate."""
    audit = getattr(ctx.gate, "audit", None)
    if audit is None:
        return []
    return [r for r in audit.read() if r.get("token_id")]
