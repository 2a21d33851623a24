"""Run one line of /kafka text end to end: parse, run, and turn every failure into a short Reply.

Transports (terminal, Slack) call ``answer`` through ``commands.registry``, which binds it to the
router of every command; they never see a traceback, only a Reply and an outcome they can map to an
exit code or an audit record. The framework knows no command: the router is always passed in.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from framework import partial, sources
from framework.actions import ActionSpec, preview_reply
from framework.context import Context
from framework.errors import NothingToDo, Unavailable
from framework.gateways import require_principal
from framework.help_text import command_help
from framework.reply import Outcome as ReplyOutcome
from framework.reply import Reply, error_reply
from framework.router import BadInput, Router
from framework.spec import CommandRequest
from live.gateway import (
    AuthenticationFailed,
    GatewayError,
    NotAuthorized,
    UnknownGroup,
    UnknownTopic,
    UnknownTransactionalId,
)

log = logging.getLogger(__name__)

Outcome = Literal["answered", "bad_input", "unavailable", "failed"]
# The exit-code contract of `kbot ask` (README): 0 answered; 1 an evidence source or the bot failed,
# or an action failed or cannot go ahead (its execution failed, or its preview shows a failing
# precondition); 2 bad input, or a request refused as asked (a confirm the gate refuses).
EXIT_CODES: dict[str, int] = {"answered": 0, "bad_input": 2, "unavailable": 1, "failed": 1}


@dataclass
class Answer:
    reply: Reply
    outcome: Outcome
    request: CommandRequest | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.outcome]


def parse(text: str, router: Router) -> CommandRequest:
    return router.parse(text)


# The Reply's own outcome (its JSON form) for each way a request ends.
_REPLY_OUTCOME: dict[str, ReplyOutcome] = {"bad_input": "bad_input", "unavailable": "source_down", "failed": "failed"}


async def run_request(request: CommandRequest, ctx: Context, *, early: bool = False) -> Answer:
    """Run a parsed request. A command may answer before its slower evidence is in (``reply.later``):
    with ``early`` the transport gets that first answer and shows the rest when it comes (see
    ``complete``); without it, this waits and returns the complete answer."""
    answer = _by_reply_outcome(await _run(request, ctx))
    if not early and answer.reply.later is not None:
        answer = await complete(answer)
    reply = answer.reply
    if request.context_note and request.context_note not in reply.notes:
        reply.notes.insert(0, request.context_note)  # what a follow-up took from its thread: never silent
    if answer.outcome != "answered":
        reply.outcome = _REPLY_OUTCOME[answer.outcome]
    elif not request.full and reply.more_command is None and _offers_full(request):
        reply.more_command = _with_full(request.raw)
    return answer


# A command's own Reply can say it did not answer (a refused confirm, a failed action, a preview
# whose precondition fails): the request's outcome, and so the exit code, follows what it says.
_ANSWER_OUTCOME: dict[str, Outcome] = {"bad_input": "bad_input", "source_down": "unavailable", "failed": "failed"}


def _by_reply_outcome(answer: Answer) -> Answer:
    if answer.outcome == "answered" and answer.reply.outcome in _ANSWER_OUTCOME:
        answer.outcome = _ANSWER_OUTCOME[answer.reply.outcome]
    return answer


async def complete(answer: Answer) -> Answer:
    """The complete answer once the evidence still coming is in; the early one if that failed."""
    later, answer.reply.later = answer.reply.later, None
    if later is None:
        return answer
    try:
        reply = await later
    except Exception:  # the lake's own errors become notes inside ``later``; this is a bug
        log.exception("the rest of the answer to %r failed", answer.request.spec.name if answer.request else "?")
        answer.reply.notes = [n for n in answer.reply.notes if "still coming" not in n]
        answer.reply.notes.append("The metric lake's evidence could not be added; the bot's log has the error.")
        return answer
    reply = sources.honest(reply, answer.reply.sources)  # the lake's reads joined the same list
    if answer.request is not None and not answer.request.full and reply.more_command is None:
        reply.more_command = answer.reply.more_command
    return Answer(reply, answer.outcome, answer.request)


def _offers_full(request: CommandRequest) -> bool:
    # Actions, the gate's commands and a triage answer carry a token in their text: never echo it
    # into a button other people can see (and a triage answer asked again is answered already).
    return request.command.action is None and all(p.name != "token" for p in request.spec.params)


def _with_full(raw: str) -> str:
    text = " ".join(raw.split())
    return text if " --full" in f" {text}" else f"{text} --full"


async def _run(request: CommandRequest, ctx: Context) -> Answer:
    if request.options.get("help"):
        return Answer(command_help(request.spec), "answered", request)
    try:
        with partial.collecting() as missing, sources.collecting() as reads:
            if request.command.action is not None:
                reply = await _propose(request, request.command.action, ctx)
            else:
                assert request.command.run is not None  # Command: a read-only command has a run
                reply = await request.command.run(request, ctx)
        reply.missing += [m for m in missing if m not in reply.missing]
        reply = sources.honest(reply, reads)
        return Answer(reply, "answered", request)
    except BadInput as exc:
        return Answer(error_reply(exc.message, exc.suggestions), "bad_input", request)
    except Unavailable as exc:
        return Answer(error_reply(str(exc), title="Evidence source unavailable"), "unavailable", request)
    except GatewayError as exc:
        if isinstance(exc, (UnknownTopic, UnknownGroup, UnknownTransactionalId)):
            return Answer(error_reply(str(exc), ["/kafka status"]), "bad_input", request)
        if isinstance(exc, NotAuthorized):  # the cluster answered: the bot's principal lacks a right
            return Answer(error_reply(str(exc), title="Not authorized"), "failed", request)
        if isinstance(exc, AuthenticationFailed):
            return Answer(error_reply(str(exc), title="Cannot log in to the cluster"), "unavailable", request)
        return Answer(error_reply(str(exc), title="Cannot reach the cluster"), "unavailable", request)
    except Exception:  # a bug: log it for us, give the user a short answer
        log.exception("command %r failed", request.spec.name)
        return Answer(
            error_reply(
                "Something went wrong inside the bot while answering; the error is in the bot's log.",
                ["help"],
                title="Internal error",
            ),
            "failed",
            request,
        )


async def _propose(request: CommandRequest, action: ActionSpec, ctx: Context) -> Reply:
    """A mutating command only ever previews here; the gate executes after confirmation."""
    if ctx.gate is None:
        raise Unavailable("Actions that change the cluster need the confirmation gate, which is not set up here.")
    require_principal(ctx, request.cluster, action.principal)  # its principal configured, or say what to set
    try:
        plan = await action.plan(request, ctx)
    except NothingToDo as exc:
        return Reply(title=f"Nothing to do: {request.spec.name}", severity="ok", verdict=str(exc))
    pending = await ctx.gate.propose(plan, request)
    reply = preview_reply(pending)
    if not plan.ready:  # nothing can be confirmed: the request did not get what it asked for
        reply.outcome = "failed"
    return reply


def parse_request(
    text: str, *, router: Router, user: str | None = None, channel: str | None = None
) -> CommandRequest | Answer:
    """The request the text asks for, or the bad_input Answer saying why it is not one. Every
    transport parses here, so a mistake reads the same in the terminal and in Slack."""
    try:
        request = router.parse(text)
    except BadInput as exc:
        return Answer(error_reply(exc.message, exc.suggestions), "bad_input")
    request.user, request.channel = user, channel
    return request


async def answer(
    text: str,
    ctx: Context,
    *,
    user: str | None = None,
    router: Router,
    channel: str | None = None,
    early: bool = False,
) -> Answer:
    parsed = parse_request(text, user=user, channel=channel, router=router)
    if isinstance(parsed, Answer):
        return parsed
    return await run_request(parsed, ctx, early=early)
