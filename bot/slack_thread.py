"""One answer in Slack: a short "working on it" message, progress edits, then the answer in a thread.

A top-level request (the slash command) gets a working message in the channel; when the answer is
ready that message becomes a one-line summary and the full answer goes into its thread, so a busy
incident channel shows one line per question. A request already inside a thread (a button, a
mention in a thread) answers in that thread: the working reply becomes the answer's first page.

Every message goes through the channel's delivery queue (bot/delivery.py): in order, paced, and
retried after a 429. Progress edits are throttled (chat.update is rate limited) and not waited for,
so a busy channel's queue never slows the command down; the queue's order makes the final answer
land after any progress edit.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from slack_sdk.errors import SlackApiError

from bot.charts import chart_png
from bot.delivery import Delivery, slack_error
from bot.layout import for_transport
from bot.render import render_text, slack_escape
from bot.render_slack import MAX_SECTION_TEXT, render_blocks
from framework.reply import Ask, Reply
from gate.audit import scrub
from gate.rbac import SLACK_GROUP_ID, SLACK_USER_ID

log = logging.getLogger(__name__)

SEVERITY_EMOJI = {
    "ok": ":white_check_mark:",
    "info": ":information_source:",
    "warning": ":warning:",
    "critical": ":rotating_light:",
    "error": ":x:",
    "unknown": ":grey_question:",
}
MIN_PROGRESS_INTERVAL_S = 3.0  # chat.update is Tier 3 (about 50 a minute), shared by every answer in the channel
MAX_SUMMARY_VERDICT = 300


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


class SlackThread:
    def __init__(
        self,
        sender: Delivery | object,
        channel: str,
        *,
        thread_ts: str | None = None,
        label: str = "",
        min_interval_s: float = MIN_PROGRESS_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        # A Delivery shared by the whole app; a bare client (a test, a one-off) gets queues of its own.
        self.delivery = sender if isinstance(sender, Delivery) else Delivery(sender)
        self.channel = channel
        self.thread_ts = thread_ts  # set: answer inside this existing thread
        self.label = label  # what was asked, already escaped for mrkdwn
        self.ts: str | None = None  # the working message
        self.min_interval_s = min_interval_s
        self.clock = clock
        self._last_edit = float("-inf")
        self._done = False
        self._lock = asyncio.Lock()

    async def start(self, text: str) -> str:
        resp = await self.delivery.post(self.channel, text=text, thread_ts=self.thread_ts)
        self.ts = resp["ts"]
        self.channel = resp.get("channel") or self.channel  # a #name becomes the channel id
        return self.ts

    async def progress(self, message: str) -> None:
        """Context.progress: edit the working message, at most once per ``min_interval_s``."""
        if self.ts is None or self._done or self.clock() - self._last_edit < self.min_interval_s:
            return
        async with self._lock:
            if self._done:
                return
            self._last_edit = self.clock()
            sent = self.delivery.submit(
                "chat_update",
                self.channel,
                ts=self.ts,
                text=_clip(f":hourglass_flowing_sand: {self.label} — {slack_escape(message)}", 3000),
            )
            sent.add_done_callback(_progress_sent)

    async def finish(self, reply: Reply, *, full: bool = False) -> list[str]:
        """Post the answer (short, or the whole runbook form with ``full``); returns the ts of every
        message that carries it."""
        async with self._lock:
            self._done = True
        # A token pasted into a private slash command must not be echoed into the channel.
        pages = [scrub(p) for p in render_blocks(reply, full=full)]
        posted: list[str] = []
        if self.thread_ts is None:
            summary = scrub(
                f"{SEVERITY_EMOJI.get(reply.severity, '')} {self.label} — *{slack_escape(_clip(reply.title, 150))}*"
                + (
                    f": {slack_escape(_clip(for_transport(reply.verdict, 'slack'), MAX_SUMMARY_VERDICT))}"
                    if reply.verdict
                    else ""
                )
                + " (answer in the thread)"
            )
            await self.delivery.update(self.channel, ts=self.ts, text=_clip(summary, MAX_SECTION_TEXT))
            for page in pages:
                posted.append(await self._post(page, thread_ts=self.ts, reply=reply))
        else:
            await self.delivery.update(self.channel, ts=self.ts, **pages[0])
            posted.append(self.ts)
            for page in pages[1:]:
                posted.append(await self._post(page, thread_ts=self.thread_ts, reply=reply))
        if reply.series:
            await self._chart(reply, thread_ts=self.thread_ts or self.ts)
        if reply.ask is not None:
            await self._ask(reply.ask, thread_ts=self.thread_ts or self.ts)
        return posted

    async def _ask(self, ask: Ask, *, thread_ts: str | None) -> None:
        """Ask people in the thread, as a new message: Slack notifies mentions in new messages, not
        in edits (the answer itself edits the working message). Only well-formed ids become
        mentions; the text is escaped. A failure is one log line: the answer already names them."""
        mentions = [f"<@{u}>" for u in ask.users if SLACK_USER_ID.match(u)]
        mentions += [f"<!subteam^{g}>" for g in ask.groups if SLACK_GROUP_ID.match(g)]
        if not mentions:
            return
        line = _clip(f":raising_hand: {' '.join(mentions)} {slack_escape(ask.text)}", MAX_SECTION_TEXT)
        try:
            await self.delivery.post(
                self.channel,
                thread_ts=thread_ts,
                text=line,
                blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": line}}],
            )
        except Exception as exc:  # noqa: BLE001 - the answer is already posted and names them
            log.warning("could not ask %s in the thread: %s", ", ".join(mentions), slack_error(exc))

    async def add(self, reply: Reply) -> list[str]:
        """More of the same answer (the metric lake's part), posted in the answer's thread."""
        thread_ts = self.thread_ts or self.ts
        posted = [await self._post(scrub(page), thread_ts=thread_ts, reply=reply) for page in render_blocks(reply)]
        if reply.series:
            await self._chart(reply, thread_ts=thread_ts)
        return posted

    async def _chart(self, reply: Reply, *, thread_ts: str | None) -> None:
        """The reply's trend as a PNG in the thread. A chart is a courtesy beside the answer: a
        failure is one log line and a note in the thread, never a lost answer."""

        title = reply.series[0].title if len({s.title for s in reply.series}) == 1 else reply.title
        try:
            png = await asyncio.get_running_loop().run_in_executor(None, chart_png, reply.series, title)
            await self.delivery.call(
                "files_upload_v2",
                self.channel,
                thread_ts=thread_ts,
                file=png,
                filename="kbot-chart.png",
                title=_clip(title, 200),
                alt_txt=_clip(f"Chart: {title}", 1000),
            )
        except Exception as exc:  # noqa: BLE001 - the answer is already posted
            log.warning("could not post the chart for %s: %s", reply.title, exc)

    async def attach(self, reply: Reply) -> None:
        """The files an answer carries (the timeline's Markdown and JSON exports: its
        ``attachments()``), uploaded into the answer's thread. A courtesy beside the answer, as a
        chart is: a failure is one log line and never a lost answer."""
        files = getattr(reply, "attachments", None)
        if files is None:
            return
        try:
            uploads = [
                {"content": scrub(text), "filename": name, "title": _clip(title, 200)} for name, title, text in files()
            ]
            if uploads:
                await self.delivery.call(
                    "files_upload_v2", self.channel, thread_ts=self.thread_ts or self.ts, file_uploads=uploads
                )
        except Exception as exc:  # noqa: BLE001 - the answer is already posted
            log.warning("could not attach the files of %s: %s", reply.title, slack_error(exc))

    async def _post(self, page: dict, *, thread_ts: str, reply: Reply) -> str:
        try:
            resp = await self.delivery.post(self.channel, thread_ts=thread_ts, **page)
        except SlackApiError as exc:
            # Blocks Slack refuses (a limit we missed) must not swallow the answer: fall back to text.
            error = slack_error(exc)  # any body: a proxy's plain text has no error code
            if error not in ("invalid_blocks", "msg_too_long", "msg_blocks_too_long", "invalid_blocks_format"):
                raise
            log.error("Slack refused the rendered blocks (%s); posting the answer as text", error)
            resp = await self.delivery.post(
                self.channel, thread_ts=thread_ts, text=_clip(scrub(render_text(reply)), 39000)
            )
        return resp["ts"]

    async def fail(self, text: str) -> None:
        """Best effort: the working message says the answer could not be delivered, so no hourglass stays."""
        if self.ts is None:
            return
        async with self._lock:
            self._done = True
        try:
            await self.delivery.update(
                self.channel, ts=self.ts, text=_clip(f":x: {self.label} — {text}", MAX_SECTION_TEXT)
            )
        except Exception as exc:  # the caller already reports the failure; this is the courtesy edit
            log.warning("could not mark the working message as failed: %s", exc)


def _progress_sent(done) -> None:
    """Progress is a courtesy; the answer still comes. A failed edit is one log line, never a traceback."""
    if not done.cancelled() and done.exception() is not None:
        exc = done.exception()
        log.warning("progress update failed: %s", slack_error(exc))
