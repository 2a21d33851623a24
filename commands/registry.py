"""The one explicit list of subcommands, and the dispatcher bound to it. Adding a command means adding
its module here."""

from __future__ import annotations

from commands import (
    abort_txn,
    at_min_isr,
    audit,
    break_glass,
    cancel,
    changes,
    confirm,
    describe,
    digest,
    elect_leaders,
    hanging_txns,
    help,
    history,
    hot_partitions,
    lag,
    retention,
    runbook,
    status,
    throttle,
    timeline,
    triage,
    why,
)
from framework import dispatch
from framework.context import Context
from framework.router import Router
from framework.spec import Command, CommandRequest

COMMANDS: list[Command] = [
    help.COMMAND,
    why.COMMAND,
    runbook.COMMAND,
    status.COMMAND,
    at_min_isr.COMMAND,
    audit.COMMAND,
    hanging_txns.COMMAND,
    lag.COMMAND,
    describe.COMMAND,
    confirm.COMMAND,
    break_glass.COMMAND,
    cancel.COMMAND,
    abort_txn.COMMAND,
    elect_leaders.COMMAND,
    throttle.SET,
    throttle.CLEAR,
    retention.COMMAND,
    triage.COMMAND,
    triage.ANSWER,
    digest.COMMAND,
    hot_partitions.COMMAND,
    history.COMMAND,
    timeline.COMMAND,
    changes.COMMAND,
]

ROUTER = Router(COMMANDS)


def parse(text: str, router: Router = ROUTER) -> CommandRequest:
    return dispatch.parse(text, router)


def parse_request(
    text: str, *, user: str | None = None, channel: str | None = None, router: Router = ROUTER
) -> CommandRequest | dispatch.Answer:
    return dispatch.parse_request(text, router=router, user=user, channel=channel)


async def answer(
    text: str,
    ctx: Context,
    *,
    user: str | None = None,
    channel: str | None = None,
    router: Router = ROUTER,
    early: bool = False,
) -> dispatch.Answer:
    """One line of /kafka text answered with every command (``framework.dispatch.answer``)."""
    return await dispatch.answer(text, ctx, router=router, user=user, channel=channel, early=early)
