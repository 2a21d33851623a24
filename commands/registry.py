"""The one explicit list of subcommands. Adding a command means adding its module here."""

from __future__ import annotations

from . import help, runbook, why
from .router import Router
from .spec import Command

COMMANDS: list[Command] = [
    help.COMMAND,
    why.COMMAND,
    runbook.COMMAND,
]

ROUTER = Router(COMMANDS)
