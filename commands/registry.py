"""The one explicit list of subcommands. Adding a command means adding its module here."""

from __future__ import annotations

from . import at_min_isr, audit, describe, hanging_txns, help, lag, runbook, status, why
from . import cancel, confirm  # the confirmation gate's commands
from . import abort_txn, digest, elect_leaders, retention, throttle, triage  # actions, triage, digest
from . import history, hot_partitions  # metric lake
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
]

ROUTER = Router(COMMANDS)
