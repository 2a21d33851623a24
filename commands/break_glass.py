"""break-glass <token> <reason>: confirm a two-person action alone, on the record.

For the requester of a high-risk action (one that needs a second approver) when nobody else can
approve in time. The RBAC policy decides who may (its ``break_glass`` rules); the reason is
required, written to the audit log and shown in the incident timeline. Everyone else, and every
action that needs no second approver, is refused with what to do instead.
"""

from __future__ import annotations

from framework.context import Context
from framework.errors import Unavailable
from framework.reply import Reply
from framework.spec import Command, CommandRequest, CommandSpec, Param

SPEC = CommandSpec(
    words=("break-glass",),
    summary="Confirm a two-person action alone, with a reason that is audited (only if the policy allows you).",
    params=(
        Param("token", "the token shown under the preview"),
        Param("reason", "why it cannot wait for a second approver", kind="text", rest=True),
    ),
    examples=("break-glass Xb3k... approver unreachable, writes failing for 20 min",),
    details="The RBAC policy's break_glass rules name who may; the action's own requester only. "
    "The reason goes into the audit log and the incident timeline.",
)


async def run(request: CommandRequest, ctx: Context) -> Reply:
    if ctx.gate is None:
        raise Unavailable("Confirming an action needs the confirmation gate, which is not set up here.")
    return await ctx.gate.break_glass(str(request.args["token"]), str(request.args["reason"]), request, ctx)


COMMAND = Command(SPEC, run)
