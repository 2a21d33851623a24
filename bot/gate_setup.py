"""The confirmation gate (gate/) as the terminal and the Slack server assemble it: on the state
folder, with the audit log and, in the terminal, the OS account's identity (bot/identity.py)."""

from __future__ import annotations

import time
from collections.abc import Callable

from bot.identity import TerminalAuthorizer
from bot.slack_settings import SlackSettings
from commands.registry import ROUTER
from framework.router import Router
from gate.audit import AuditLog, open_audit
from gate.confirmation import Authorize, ConfirmationGate, PendingStore
from gate.state_db import FILENAME as STATE_DB_FILE


def default_gate(
    settings: SlackSettings,
    *,
    authorize: Authorize | None = None,
    router: Router = ROUTER,
    transport: str = "terminal",
    audit: AuditLog | None = None,
    clock: Callable[[], float] = time.time,
    approvers: Callable[[str, str | None], tuple[list[str], list[str]]] | None = None,
) -> ConfirmationGate:
    """The gate on KBOT_STATE_DIR, as both the terminal and the Slack server use it. ``approvers``
    (the RBAC policy's ``Policy.approvers``) names who can approve for a requester who needs a second person."""
    actor = acting_user = None
    if authorize is None and transport == "terminal":
        terminal = TerminalAuthorizer.from_settings(settings)
        authorize, actor, acting_user = terminal, terminal.identity.audit_fields(), terminal.identity.user
        approvers = approvers or terminal.policy.approvers
    audit = audit or open_audit(
        settings.state_dir,
        settings.audit_topic,
        settings.audit_cluster,
        tuple(settings.secrets()),
        settings=settings.kbot,
    )
    return ConfirmationGate(
        PendingStore(settings.state_dir / STATE_DB_FILE),
        audit,
        router=router,
        ttl_s=settings.confirm_ttl_s,
        high_risk_kinds=settings.high_risk_kinds,
        approvers_required=settings.approvers_required,
        authorize=authorize,
        transport=transport,
        clock=clock,
        actor=actor,
        acting_user=acting_user,
        approvers=approvers,
    )
