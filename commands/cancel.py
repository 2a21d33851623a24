"""cancel <token>: drop a previewed action. The Cancel button sends exactly this text.

The requester may cancel; so may anyone allowed to run that action (an approver saying no).
"""

from __future__ import annotations

from framework.context import Context
from framework.errors import Unavailable
from framework.reply import Reply
from framework.spec import Command, CommandRequest, CommandSpec, Param

SPEC = CommandSpec(
    words=("cancel",),
    summary="Cancel an action previewed earlier, by its token (the Cancel button does this for you).",
    params=(Param("token", "the token shown under the preview"),),
    examples=("cancel Xb3k...",),
)


async def run(request: CommandRequest, ctx: Context) -> Reply:
    if ctx.gate is None:
        raise Unavailable("Cancelling an action needs the confirmation gate, which is not set up here.")
    return await ctx.gate.cancel(str(request.args["token"]), request)


COMMAND = Command(SPEC, run)
