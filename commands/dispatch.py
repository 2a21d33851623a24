"""Run one line of /kafka text end to end: parse, run, and turn every failure into a short Reply.

Transports (terminal, Slack) call ``answer``; they never see a traceback, only a Reply and an
outcome they can map to an exit code or an audit record.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from .actions import preview_reply
from .context import Context
from .errors import Unavailable
from .help import command_help
from live.gateway import GatewayError, UnknownGroup, UnknownTopic, UnknownTransactionalId
from .registry import ROUTER
from .reply import Reply, error_reply
from .router import BadInput, Router
from .spec import CommandRequest

log = logging.getLogger(__name__)

Outcome = Literal["answered", "bad_input", "unavailable", "failed"]
EXIT_CODES: dict[str, int] = {"answered": 0, "bad_input": 2, "unavailable": 1, "failed": 1}


@dataclass
class Answer:
    reply: Reply
    outcome: Outcome
    request: CommandRequest | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.outcome]


def parse(text: str, router: Router = ROUTER) -> CommandRequest:
    return router.parse(text)


async def run_request(request: CommandRequest, ctx: Context) -> Answer:
    if request.options.get("help"):
        return Answer(command_help(request.spec), "answered", request)
    try:
        if request.command.action is not None:
            reply = await _propose(request, ctx)
        else:
            reply = await request.command.run(request, ctx)
        return Answer(reply, "answered", request)
    except BadInput as exc:
        return Answer(error_reply(exc.message, exc.suggestions), "bad_input", request)
    except Unavailable as exc:
        return Answer(error_reply(str(exc), title="Evidence source unavailable"), "unavailable", request)
    except GatewayError as exc:
        if isinstance(exc, (UnknownTopic, UnknownGroup, UnknownTransactionalId)):
            return Answer(error_reply(str(exc), ["/kafka status"]), "bad_input", request)
        return Answer(error_reply(str(exc), title="Cannot reach the cluster"), "unavailable", request)
    except Exception:  # a bug: log it for us, give the user a short answer
        log.exception("command %r failed", request.spec.name)
        return Answer(
            error_reply("Something went wrong inside the bot while answering; the error is in the bot's log.",
                        ["help"], title="Internal error"),
            "failed",
            request,
        )


async def _propose(request: CommandRequest, ctx: Context) -> Reply:
    """A mutating command only ever previews here; the gate executes after confirmation."""
    if ctx.gate is None:
        raise Unavailable("Actions that change the cluster need the confirmation gate, which is not set up here.")
    plan = await request.command.action.plan(request, ctx)
    pending = await ctx.gate.propose(plan, request)
    return preview_reply(pending)


async def answer(text: str, ctx: Context, *, user: str | None = None, channel: str | None = None,
                 router: Router = ROUTER) -> Answer:
    try:
        request = router.parse(text)
    except BadInput as exc:
        return Answer(error_reply(exc.message, exc.suggestions), "bad_input")
    request.user, request.channel = user, channel
    return await run_request(request, ctx)
