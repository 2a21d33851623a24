"""Answer now, the metric lake's part later: written once, for the terminal and Slack.

A command may answer before its slower evidence is in: ``run_request(..., early=True)`` returns that
first answer with ``reply.later`` set. The transport shows it at once, then what the complete answer
adds to it (``addition_reply``: the lake's evidence, or a changed verdict) when that comes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.render import addition_reply
from framework.dispatch import Answer, complete
from framework.reply import Reply


async def show_in_parts(
    result: Answer,
    show: Callable[[Answer], Awaitable[None]],
    add: Callable[[Reply], Awaitable[None]],
    *,
    complete_with: Callable[[Answer], Awaitable[Answer]] = complete,
) -> Answer:
    """``show`` the answer; when its lake part is still coming, wait for it (``complete_with``) and
    ``add`` what it adds to the answer shown. Returns the complete answer."""
    await show(result)
    if result.reply.later is None:
        return result
    early = result.reply
    final = await complete_with(result)
    await add(addition_reply(early, final.reply))
    return final
