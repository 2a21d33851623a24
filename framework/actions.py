"""The contract between a command that changes the cluster and the confirmation gate.

A mutating command never changes anything when it runs: its ``run`` returns a preview Reply,
and its module exposes an ``ActionSpec`` the gate drives after a human confirms:

    plan(request, ctx)      -> ActionPlan    what will change, validate_only / dry-run result,
                                             preconditions as they are now (no side effects)
    recheck(plan, ctx)      -> [Precondition]  the same preconditions, read again right before execution
    execute(plan, ctx)      -> ActionResult  do it once; before / after state for the audit log
    reconcile(plan, ctx)    -> "done" | "not_done" | "unknown"
                                             after a crash between "executing" and "executed":
                                             did the change happen? (never re-run blindly)

The gate (gate/confirmation.py) owns tokens, expiry, who may confirm, second approvers and the audit
trail; commands own the Kafka side. Both the terminal and Slack use the same gate.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from framework.reply import Action, Evidence, Reply, Section

if TYPE_CHECKING:
    from framework.context import Context
    from framework.reply import Reply
    from framework.spec import CommandRequest

# A plan's arguments and an action's before / after states: JSON objects the gate stores and the
# audit log records. Their fields differ per action; each action reads its own.
JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Precondition:
    name: str
    ok: bool
    detail: str


@dataclass
class ActionPlan:
    kind: str  # the command name, e.g. "abort-txn"
    cluster: str
    args: JsonObject  # JSON-serialisable: everything execute() needs, resolved at preview time
    summary: str  # one line: what will change
    changes: list[str] = field(default_factory=list)  # before -> after, per resource
    validation: str = ""  # the validate_only / dry-run result, in words
    preconditions: list[Precondition] = field(default_factory=list)
    high_risk: bool = False  # needs a second approver who is not the requester

    @property
    def ready(self) -> bool:
        return all(p.ok for p in self.preconditions)

    def to_dict(self) -> JsonObject:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: JsonObject) -> "ActionPlan":
        data = dict(data)
        data["preconditions"] = [Precondition(**p) for p in data.get("preconditions", [])]
        return cls(**data)


@dataclass
class ActionResult:
    ok: bool
    detail: str
    before: JsonObject = field(default_factory=dict)
    after: JsonObject = field(default_factory=dict)


Reconciled = Literal["done", "not_done", "unknown"]


@dataclass(frozen=True)
class ActionSpec:
    plan: Callable[["CommandRequest", "Context"], Awaitable[ActionPlan]]
    recheck: Callable[[ActionPlan, "Context"], Awaitable[list[Precondition]]]
    execute: Callable[[ActionPlan, "Context"], Awaitable[ActionResult]]
    reconcile: Callable[[ActionPlan, "Context"], Awaitable[Reconciled]]
    # The principal the change runs as (live/config.py ROLES): "config" for config changes,
    # "operator" for what needs ALTER on the cluster (elections, transaction markers).
    principal: str = "operator"
    # When the command itself marks its plan high-risk (ActionPlan.high_risk: a second approver),
    # as "<when>: <why>" for `kbot config`; "" = never (KBOT_HIGH_RISK_KINDS can still add it).
    second_approver: str = ""


@dataclass(frozen=True)
class Pending:
    """A proposed action waiting for confirmation, as the gate recorded it."""

    token: str
    plan: ActionPlan
    requester: str
    expires_at: float
    needs_second_approver: bool


@runtime_checkable
class StateDatabase(Protocol):
    """The gate's sqlite database (gate/state_db.StateDb), which the triage threads share."""

    @property
    def path(self) -> Path: ...

    def connect(self) -> sqlite3.Connection: ...


class Gate:
    """What dispatch and the confirm / cancel / triage commands need from the confirmation gate.
    The real one is gate.confirmation.ConfirmationGate (durable, audited); tests may pass their own."""

    @property
    def state_db(self) -> StateDatabase | None:
        """The database the gate keeps its records in (the triage threads are stored beside
        them), or None for a gate that keeps none."""
        return None

    async def propose(self, plan: ActionPlan, request: "CommandRequest") -> Pending:  # pragma: no cover
        raise NotImplementedError

    async def confirm(self, token: str, request: "CommandRequest", ctx: "Context") -> "Reply":
        raise NotImplementedError  # pragma: no cover

    async def cancel(self, token: str, request: "CommandRequest") -> "Reply":
        raise NotImplementedError  # pragma: no cover

    async def break_glass(self, token: str, reason: str, request: "CommandRequest", ctx: "Context") -> "Reply":
        raise NotImplementedError  # pragma: no cover


def preview_reply(pending: Pending) -> "Reply":
    """The Reply a mutating command answers with: what would change, and Confirm / Cancel."""

    plan = pending.plan
    evidence = [Evidence(p.name, p.detail, "live: precondition", "ok" if p.ok else "bad") for p in plan.preconditions]
    sections = [Section("Will change", plan.changes or [plan.summary])]
    if plan.validation:
        sections.append(Section("Dry run", [plan.validation]))
    approver = (
        "a second approver (not the requester) must confirm"
        if pending.needs_second_approver
        else "the requester confirms"
    )
    actions = (
        [Action("Confirm", f"confirm {pending.token}", mutating=True), Action("Cancel", f"cancel {pending.token}")]
        if plan.ready
        else [Action("Cancel", f"cancel {pending.token}")]
    )
    verdict = plan.summary + (
        " Preconditions hold." if plan.ready else " A precondition fails: it cannot run as it stands."
    )
    return Reply(
        title=f"Preview: {plan.kind}",
        severity="warning" if plan.ready else "error",
        verdict=verdict,
        evidence=evidence,
        sections=sections,
        actions=actions,
        notes=[
            f"Nothing has changed yet. Token {pending.token}: {approver}; expires at "
            f"{_clock(pending.expires_at)} UTC; it can be used once."
        ],
    )


def _clock(ts: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%H:%M:%S")
