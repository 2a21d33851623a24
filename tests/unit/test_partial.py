"""A read refused for want of a right leaves the rest of the answer standing: the missing part is
collected per request (commands/partial.py) and shown under the verdict by every renderer."""

from __future__ import annotations

import asyncio
import json

from bot.render import render_json, render_text
from bot.render_slack import render_blocks
from framework.partial import collecting, note_missing
from framework.reply import Reply
from live.gateway import NotAuthorized


def _refused() -> NotAuthorized:
    return NotAuthorized(
        "observer",
        "User:kbot-observer",
        "DESCRIBE_CONFIGS",
        "TOPIC",
        "orders",
        "describe_configs of topic 'orders'",
        "prod",
    )


def test_notes_reach_the_request_that_collects_them_across_gathered_tasks():
    async def read(part: str) -> None:
        await asyncio.sleep(0)
        note_missing(part, _refused())

    async def request() -> list[str]:
        with collecting() as missing:
            await asyncio.gather(read("the topics' configs"), read("the topics' configs"), read("throttles"))
        return missing

    missing = asyncio.run(request())
    assert missing == [
        "the topics' configs: the observer principal (User:kbot-observer) needs DESCRIBE_CONFIGS on TOPIC orders",
        "throttles: the observer principal (User:kbot-observer) needs DESCRIBE_CONFIGS on TOPIC orders",
    ]


def test_outside_a_request_a_note_is_returned_and_kept_nowhere():
    line = note_missing("x", _refused())
    assert line.startswith("x: the observer principal")
    with collecting() as missing:
        pass
    assert missing == []


def test_every_renderer_shows_the_missing_part_under_the_verdict():
    reply = Reply(
        title="Topic orders",
        severity="ok",
        verdict="orders: 3 partitions, RF 3, 0 out of sync.",
        missing=["the topics' configs: the observer principal needs DESCRIBE_CONFIGS on TOPIC orders"],
    )
    line = (
        "Missing from this answer: the topics' configs: the observer principal needs DESCRIBE_CONFIGS on TOPIC orders"
    )
    short = render_text(reply).splitlines()
    assert short[1:3] == [reply.verdict, line]
    assert line in render_text(reply, full=True)
    blocks = json.dumps(render_blocks(reply))
    assert "Missing from this answer:_ the topics' configs" in blocks
    assert json.loads(render_json(reply))["missing"] == reply.missing
