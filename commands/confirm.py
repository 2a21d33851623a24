"""confirm <token>: confirm a previewed action. The Confirm button sends exactly this text.

The gate decides: only the requester confirms a normal action; a high-risk one needs someone
else's approval; a token works once and expires. Works from a terminal too
(`kbot ask "confirm <token>"`), since pending actions are stored durably.
"""

from __future__ import annotations

from framework.context import Context
from framework.errors import Unavailable
from framework.reply import Reply
from framework.spec import Command, CommandRequest, CommandSpec, Param

SPEC = CommandSpec(
    words=("confirm",),
    summary="Confirm an action previewed earlier, by its token (the Confirm button does this for you).",
    params=(Param("token", "the token shown under the preview"),),
    examples=("confirm Xb3k...",),
)


async def run(request: CommandRequest, ctx: Context) -> Reply:
    if ctx.gate is None:
        raise Unavailable("Confirming an action needs the confirmation gate, which is not set up here.")
    return await ctx.gate.confirm(str(request.args["token"]), request, ctx)


COMMAND = Command(SPEC, run)
