"""The one explicit list of subcommands. Adding a command means adding its module here."""

from __future__ import annotations

from . import (  # the confirmation gate's commands  # actions, triage, digest  # metric lake
    abort_txn,
    at_min_isr,
    audit,
    break_glass,
    cancel,
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
from .router import Router
from .spec import Command

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
]

ROUTER = Router(COMMANDS)
