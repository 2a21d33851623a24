"""Ask the bot a question the way the console does, in process, and time the answer.

The console (bot/console.py) builds one Context with the live gateway pool and hands each typed line
to framework.dispatch.answer; the lab does the same, with settings built in code that point at the
lab's cluster (so the engineer's own KBOT_* settings never leak into a lab run: no environment is
read), and judges the JSON form of the Reply from the outside.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

from bot.app import local_settings
from bot.render import render_json
from commands.registry import answer
from framework.context import Context
from kbot_settings import KbotSettings
from live.pool import GatewayPool
from runbook_kb import default_kb


def cluster_settings(cluster) -> KbotSettings:
    """What `kbot run` sets for the local cluster, for the lab's one, over every default."""

    return local_settings(KbotSettings(), cluster, "lab")


@dataclass
class Asked:
    question: str
    outcome: str  # framework.dispatch outcome: answered / bad_input / unavailable / failed
    reply: dict  # Reply.to_dict(), via the product's JSON renderer
    seconds: float  # from handing over the text to having the rendered JSON
    tries: int = 1  # asks it took (ask_until_read)


ASK_TRIES = 3
ASK_AGAIN_WITHIN_S = 60.0


class Asker:
    """One Context (like one console session) for every question of a lab run."""

    def __init__(self, cluster):
        self.settings = cluster_settings(cluster)
        self.ctx = Context(kb=default_kb(), live=GatewayPool(self.settings), settings=self.settings)

    async def ask(self, question: str) -> Asked:
        t0 = time.monotonic()
        result = await answer(question, self.ctx, user="kbot-lab")
        reply = json.loads(render_json(result.reply))
        return Asked(question, result.outcome, reply, round(time.monotonic() - t0, 3))

    async def ask_until_read(
        self, question: str, tries: int = ASK_TRIES, within_s: float = ASK_AGAIN_WITHIN_S
    ) -> Asked:
        """Ask, and ask again (as an engineer would) while the answer says an exporter did not
        answer (issue 35: on a loaded host an exporter can miss the live deadline, and the answer
        then says it could not tell): at most ``tries`` times within ``within_s``. The last answer
        is judged, and how many asks it took is kept with it."""
        started = time.monotonic()
        for n in range(1, tries + 1):
            asked = await self.ask(question)
            asked.tries = n
            unread = [
                s
                for s in asked.reply.get("sources", [])
                if s["source"].startswith("exporter ") and s["state"] == "no answer"
            ]
            if not unread or time.monotonic() - started > within_s:
                break
        return asked

    async def close(self) -> None:
        await self.ctx.live.close()


def ask_once(cluster, question: str) -> Asked:
    """Synchronous one-off (a fresh console session: the first question pays the connection)."""

    async def go():
        asker = Asker(cluster)
        try:
            return await asker.ask(question)
        finally:
            await asker.close()

    return asyncio.run(go())
