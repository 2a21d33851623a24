"""The confirmation gate: nothing changes the cluster until the right person confirms, once.

    propose -> a Pending with an unguessable token, bound to the requester, expiring, stored durably
    confirm -> decide() (pure: token, expiry, state, user, second approver, RBAC verdict)
            -> atomically pending -> executing (single use across clicks, redeliveries, processes)
            -> ActionSpec.recheck (a precondition that no longer holds stops it, and says which)
            -> ActionSpec.execute -> executed | failed, with before / after for the audit log
    cancel  -> pending -> cancelled (the requester, or someone allowed to run that action)
    start-up: a record left "executing" by a crash is reconciled (ActionSpec.reconcile) to
              done / not_done / unknown, and never run again automatically.
    messages: the chat messages that show a record (a Slack preview with its buttons, the working
              message of a confirm) are stored with it; when the record is resolved anywhere (expiry
              sweep, a terminal confirm in another process, crash reconciliation) the transport finds
              them with ``unsettled_messages`` and edits them (``outcome_note``), so no Confirm button
              or hourglass is left that no longer means anything.

Who may confirm is asked of ``authorize(user, channel, record)``: rbac.Authorizer in Slack, and in
the terminal identity.TerminalAuthorizer (the OS account mapped through the policy's
``terminal_users``; never $USER), so a shell on the bot host cannot approve a Slack request
under a name it made up.

State lives in sqlite (KBOT_STATE_DIR/pending.sqlite3, opened by gate/state_db.py and shared with
the triage threads; 0600 in a 0700 folder, WAL, synchronous=FULL so every commit is fsync'd):
the Slack server and a terminal `kbot ask "confirm <token>"` share it, and the single-use transition is one conditional UPDATE,
so two processes cannot both win it. Within a process a per-token asyncio lock orders concurrent
clicks so the loser gets a clear "already being executed" instead of a race.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import sqlite3
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypedDict, TypeVar

from framework.actions import ActionPlan, ActionResult, ActionSpec, Gate, JsonObject, Pending, Reconciled
from framework.reply import Ask, Evidence, Reply, Section, error_reply
from framework.spec import CommandRequest
from gate.audit import AuditLog, token_id
from gate.rbac import Verdict
from gate.state_db import StateDb
from live.gateway import Timeout as GatewayTimeout

if TYPE_CHECKING:
    from framework.context import Context
    from framework.router import Router

log = logging.getLogger(__name__)

_P = ParamSpec("_P")
_T = TypeVar("_T")

DEFAULT_TTL_S = 15 * 60
# Reconciled outcomes are states of their own, so nobody mistakes "unknown" for "executed".
FINAL_STATES = ("executed", "failed", "aborted", "cancelled", "expired", "done", "not_done", "unknown")

# (user, channel of the confirm/cancel, the pending record) -> may this user act on it?
Authorize = Callable[[str, "str | None", "Record"], Awaitable[Verdict]]


@dataclass
class Record:
    token: str
    command: str  # the registry name that proposed it: how the gate finds its ActionSpec after a restart
    plan: ActionPlan
    requester: str
    channel: str | None
    created_at: float
    expires_at: float
    needs_second_approver: bool
    state: str = "pending"
    approvals: list[str] = field(default_factory=list)
    result: JsonObject | None = None
    updated_at: float = 0.0

    def pending(self) -> Pending:
        return Pending(self.token, self.plan, self.requester, self.expires_at, self.needs_second_approver)


# ---- the decision: pure, clock injected ----------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    action: Literal["execute", "approve", "refuse"]
    # ok | approved | break_glass | unknown | expired | used | cancelled | not_ready | rbac | wrong_user |
    # self_approval | already_approved | not_needed | no_break_glass | no_reason | wrong_cluster
    code: str
    reason: str


def _refuse(code: str, reason: str) -> Decision:
    return Decision("refuse", code, reason)


UNKNOWN_TOKEN = "No pending action has that token. Check it, or run the command again."


def _other_cluster(record: Record, cluster: str | None) -> Decision | None:
    """A token acts on the cluster its preview read; a confirm or cancel that names another
    cluster (``--cluster``, ``@name``) is refused rather than run where the user did not mean."""
    if cluster is None or cluster == record.plan.cluster:
        return None
    return _refuse(
        "wrong_cluster",
        f"This token is for cluster {record.plan.cluster}, not {cluster}: it was previewed there and can only "
        f"act there. Nothing was changed. To confirm it on {record.plan.cluster}, leave out the cluster (or name "
        f"{record.plan.cluster}); for {cluster}, run the command there for its own preview.",
    )


def _cannot_confirm(record: Record, now: float, permitted: Verdict | None) -> Decision | None:
    """What refuses any confirm of ``record`` (by its requester, an approver, or breaking the
    glass): its state, a failing precondition, or RBAC."""
    refusal = _state_refusal(record, now)
    if refusal is not None:
        return refusal
    if not record.plan.ready:
        return _refuse(
            "not_ready",
            "The preview showed a failing precondition, so it cannot be confirmed. "
            "Fix the cause and run the command again.",
        )
    if permitted is not None and not permitted.allowed:
        return _refuse("rbac", f"{permitted.reason} (rule: {permitted.rule})")
    return None


def _state_refusal(record: Record, now: float) -> Decision | None:
    if record.state == "cancelled":
        return _refuse("cancelled", "This action was cancelled; run the command again for a new preview.")
    if record.state == "executing":
        return _refuse("used", "This action is already being executed; it runs once.")
    if record.state == "expired" or (record.state == "pending" and now >= record.expires_at):
        return _refuse(
            "expired",
            f"This confirmation expired at {_utc(record.expires_at)} UTC; run the command again for a fresh preview.",
        )
    if record.state != "pending":
        return _refuse("used", f"This action was already used (state: {record.state}); a token works once.")
    return None


def decide(
    record: Record | None,
    user: str,
    now: float,
    approvals: list[str],
    *,
    permitted: Verdict | None = None,
    approvers_required: int = 1,
    cluster: str | None = None,
) -> Decision:
    """May ``user`` confirm ``record`` at ``now``? No I/O: the RBAC verdict is passed in;
    ``cluster`` is the one the confirm named, if any."""
    if record is None:
        return _refuse("unknown", UNKNOWN_TOKEN)
    refusal = _other_cluster(record, cluster) or _cannot_confirm(record, now, permitted)
    if refusal is not None:
        return refusal
    if not record.needs_second_approver:
        if user != record.requester:
            return _refuse(
                "wrong_user",
                f"Only {record.requester}, who asked for this action, can confirm it. "
                "Run the command yourself to get your own preview.",
            )
        return Decision("execute", "ok", "Confirmed by the requester.")
    if user == record.requester:
        return _refuse(
            "self_approval",
            "This is a high-risk action: someone other than the requester must approve it. Self-approval is refused.",
        )
    if user in approvals:
        return _refuse("already_approved", "You have already approved this action; it needs a different approver.")
    have = len(set(approvals) - {record.requester}) + 1
    if have >= approvers_required:
        return Decision("execute", "ok", f"Approved by {user} (requested by {record.requester}).")
    return Decision("approve", "approved", f"Approval recorded; {approvers_required - have} more approver(s) needed.")


# A break-glass reason must say something a reviewer can read later: not "x", not "ok".
MIN_BREAK_GLASS_REASON = 12


def decide_break_glass(
    record: Record | None,
    user: str,
    now: float,
    reason: str,
    *,
    permitted: Verdict | None = None,
    cluster: str | None = None,
) -> Decision:
    """May ``user`` confirm ``record`` alone, on the record, because nobody else can approve in time?
    Only a high-risk action's own requester, allowed to run it, named by a break_glass rule, with a reason."""
    if record is None:
        return _refuse("unknown", UNKNOWN_TOKEN)
    refusal = _other_cluster(record, cluster) or _cannot_confirm(record, now, permitted)
    if refusal is not None:
        return refusal
    if not record.needs_second_approver:
        return _refuse("not_needed", "This action needs no second approver: confirm it with its Confirm button.")
    if user != record.requester:
        return _refuse(
            "wrong_user", f"Break-glass is for the requester ({record.requester}); you can approve it with Confirm."
        )
    if permitted is None or not permitted.break_glass:
        return _refuse(
            "no_break_glass",
            f"No break_glass rule of the RBAC policy names you for '{record.command}', so it still needs a "
            "second approver.",
        )
    if len(" ".join(reason.split())) < MIN_BREAK_GLASS_REASON:
        return _refuse(
            "no_reason",
            f"Say why it cannot wait for a second approver (at least {MIN_BREAK_GLASS_REASON} characters): "
            "break-glass <token> <reason>. The reason is audited and shown in the incident timeline.",
        )
    return Decision("execute", "break_glass", f"Confirmed alone by {user} under {permitted.break_glass}.")


def decide_cancel(
    record: Record | None, user: str, now: float, *, permitted: Verdict | None = None, cluster: str | None = None
) -> Decision:
    """The requester may cancel; so may anyone allowed to run the action (an approver saying no)."""
    if record is None:
        return _refuse("unknown", "No pending action has that token.")
    refusal = _other_cluster(record, cluster) or _state_refusal(record, now)
    if refusal is not None:
        return refusal
    if user == record.requester or (permitted is not None and permitted.allowed):
        return Decision("execute", "ok", "Cancelled.")
    if permitted is not None and permitted.rule.startswith("terminal"):
        return _refuse("wrong_user", permitted.reason)  # says how to map the terminal user
    return _refuse(
        "wrong_user", f"Only {record.requester}, or someone allowed to run '{record.command}', can cancel it."
    )


def _utc(ts: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


# ---- durable store ---------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pending (
    token TEXT PRIMARY KEY, command TEXT NOT NULL, plan TEXT NOT NULL, requester TEXT NOT NULL,
    channel TEXT, created_at REAL NOT NULL, expires_at REAL NOT NULL, needs_second INTEGER NOT NULL,
    state TEXT NOT NULL, approvals TEXT NOT NULL, result TEXT, updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS pending_state ON pending(state);
CREATE TABLE IF NOT EXISTS messages (
    token TEXT NOT NULL, channel TEXT NOT NULL, ts TEXT NOT NULL, role TEXT NOT NULL, payload TEXT NOT NULL,
    settled_state TEXT, PRIMARY KEY (token, channel, ts)
);
"""
# A row of the pending table, in _SCHEMA's column order (needs_second is 0/1; approvals, plan and
# result are JSON text).
PendingRow = tuple[str, str, str, str, str | None, float, float, int, str, str, str | None, float]
# unsettled_messages' rows: a pending row, then the message's channel, ts, role and payload (JSON).
_MessageRow = tuple[str, str, str, str, str | None, float, float, int, str, str, str | None, float, str, str, str, str]


class MessageRef(TypedDict):
    """A chat message that shows a record (attach_message), as unsettled_messages returns it."""

    channel: str
    ts: str
    role: str  # "preview" (the message with its buttons) or "working" (a confirm in progress)
    payload: JsonObject  # what was posted: the transport's own page (Slack: text and blocks)


class PendingStore:
    """sqlite, one short connection per operation: safe from worker threads and other processes.
    The file (gate/state_db.py) is shared with the triage threads (commands/triage/store.py)."""

    def __init__(self, path: Path):
        # It holds live confirm tokens: StateDb makes the folder and file private before sqlite
        # writes to them.
        self.db = StateDb(path)
        self.path = self.db.path
        with self._connect() as conn:
            conn.executescript(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        return self.db.connect()

    @staticmethod
    def _row(row: PendingRow) -> Record:
        return Record(
            row[0],
            row[1],
            ActionPlan.from_dict(json.loads(row[2])),
            row[3],
            row[4],
            row[5],
            row[6],
            bool(row[7]),
            row[8],
            json.loads(row[9]),
            json.loads(row[10]) if row[10] else None,
            row[11],
        )

    def insert(self, r: Record) -> None:
        with self._connect() as conn:
            conn.execute(
                "INSERT INTO pending VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    r.token,
                    r.command,
                    json.dumps(r.plan.to_dict()),
                    r.requester,
                    r.channel,
                    r.created_at,
                    r.expires_at,
                    int(r.needs_second_approver),
                    r.state,
                    json.dumps(r.approvals),
                    json.dumps(r.result) if r.result is not None else None,
                    r.updated_at,
                ),
            )

    def get(self, token: str) -> Record | None:
        with self._connect() as conn:
            row: PendingRow | None = conn.execute("SELECT * FROM pending WHERE token = ?", (token,)).fetchone()
        return self._row(row) if row else None

    def transition(
        self,
        token: str,
        from_state: str,
        to_state: str,
        now: float,
        *,
        approvals: list[str] | None = None,
        result: JsonObject | None = None,
    ) -> bool:
        """Move one record from ``from_state`` to ``to_state``; False when it was not in ``from_state``."""
        sets: list[str] = ["state = ?", "updated_at = ?"]
        args: list[str | float] = [to_state, now]
        if approvals is not None:
            sets.append("approvals = ?")
            args.append(json.dumps(approvals))
        if result is not None:
            sets.append("result = ?")
            args.append(json.dumps(result, default=str))
        with self._connect() as conn:
            cur = conn.execute(
                f"UPDATE pending SET {', '.join(sets)} WHERE token = ? AND state = ?", (*args, token, from_state)
            )
            return cur.rowcount == 1

    def in_state(self, state: str) -> list[Record]:
        with self._connect() as conn:
            return [self._row(r) for r in conn.execute("SELECT * FROM pending WHERE state = ?", (state,))]

    def attach_message(self, token: str, channel: str, ts: str, role: str, payload: JsonObject) -> None:
        """Remember a chat message that shows this record (its preview with buttons, or the working
        message of a confirm), so whoever resolves the record, in any process, gets it edited."""
        with self._connect() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO messages VALUES (?,?,?,?,?,NULL)",
                (token, channel, ts, role, json.dumps(payload)),
            )

    def unsettled_messages(self) -> list[tuple[Record, MessageRef]]:
        """Messages of records that left "pending" (or moved on again) since their message was last edited."""
        with self._connect() as conn:
            rows: list[_MessageRow] = conn.execute(
                "SELECT p.*, m.channel, m.ts, m.role, m.payload FROM messages m JOIN pending p ON p.token = m.token "
                "WHERE p.state NOT IN ('pending', 'executing') AND (m.settled_state IS NULL OR "
                # a working message, once settled, became an answer: it is never edited again
                "(m.settled_state != p.state AND m.role != 'working'))"
            ).fetchall()
        return [
            (self._row(r[:12]), MessageRef(channel=r[12], ts=r[13], role=r[14], payload=json.loads(r[15])))
            for r in rows
        ]

    def mark_settled(self, token: str, channel: str, ts: str, state: str) -> None:
        with self._connect() as conn:
            conn.execute(
                "UPDATE messages SET settled_state = ? WHERE token = ? AND channel = ? AND ts = ?",
                (state, token, channel, ts),
            )

    def expired_pending(self, now: float) -> list[Record]:
        with self._connect() as conn:
            rows = conn.execute("SELECT * FROM pending WHERE state = 'pending' AND expires_at <= ?", (now,))
            return [self._row(r) for r in rows]


# ---- the second-approver rule -------------------------------------------------------------------


def needs_second_approver(plan: ActionPlan, command: str, high_risk_kinds: frozenset[str]) -> bool:
    """The one rule the gate applies at propose time: a second person (not the requester) must
    confirm when the command marked its plan high-risk (``ActionPlan.high_risk``: abort-txn always,
    retention when it lowers retention.ms or sets -1) or when KBOT_HIGH_RISK_KINDS lists the action."""
    return bool(plan.high_risk or plan.kind in high_risk_kinds or command in high_risk_kinds)


@dataclass(frozen=True)
class ApprovalRule:
    """When one action kind needs a second approver, and which part of the rule says so."""

    kind: str
    when: str  # "always", "when it lowers retention.ms or sets -1", "never"
    source: str  # why: "the command: ...", "KBOT_HIGH_RISK_KINDS lists it", both, or "-"
    principal: str  # the Kafka principal the action runs as (ActionSpec.principal)


def second_approver_rules(
    actions: Mapping[str, ActionSpec], high_risk_kinds: frozenset[str]
) -> tuple[list[ApprovalRule], list[str]]:
    """The effective rule per action kind (``actions``: command name -> its ActionSpec), as
    :func:`needs_second_approver` applies it, and the KBOT_HIGH_RISK_KINDS entries that name no
    action (they have no effect)."""
    rules = []
    for kind, spec in sorted(actions.items()):
        because = [f"the command: {spec.second_approver}"] if spec.second_approver else []
        if kind in high_risk_kinds:
            because.append("KBOT_HIGH_RISK_KINDS lists it")
            when = "always"
        else:
            when = spec.second_approver.split(":", 1)[0] if spec.second_approver else "never"
        rules.append(ApprovalRule(kind, when, "; ".join(because) or "-", spec.principal))
    unknown = sorted(high_risk_kinds - set(actions))
    return rules, unknown


def new_token() -> str:
    """~190 bits from secrets; never starting with '-', which the router refuses as an argument."""
    while True:
        token = secrets.token_urlsafe(24)
        if not token.startswith("-"):
            return token


# ---- the gate --------------------------------------------------------------------------------------


class ConfirmationGate(Gate):
    def __init__(
        self,
        store: PendingStore,
        audit: AuditLog,
        *,
        router: Router,
        clock: Callable[[], float] = time.time,
        ttl_s: float = DEFAULT_TTL_S,
        high_risk_kinds: frozenset[str] = frozenset({"abort-txn"}),
        approvers_required: int = 1,
        authorize: Authorize | None = None,
        transport: str = "terminal",
        actor: Mapping[str, Any] | None = None,
        acting_user: str | None = None,
        approvers: Callable[[str, str | None], tuple[list[str], list[str]]] | None = None,
    ):
        self.store, self.audit, self.router, self.clock = store, audit, router, clock
        self.ttl_s, self.high_risk_kinds, self.approvers_required = ttl_s, high_risk_kinds, approvers_required
        # None: no RBAC (tests of the gate alone); the terminal and Slack always pass one (default_gate).
        self.authorize = authorize
        self.transport = transport
        # who runs this process (the terminal's OS account), on every audit line
        self.actor: JsonObject = dict(actor or {})
        # The terminal's user as its authorizer sees it (bot/identity.py); bot/gate_setup.py passes it with
        # each command, so the requester and the approver are named the same way everywhere.
        self.acting_user = acting_user
        # (command, channel) -> (user ids, group ids) the policy lets approve it (Policy.approvers):
        # named to a requester who needs a second person. None: nobody can be named.
        self.approvers = approvers
        self._locks: dict[str, asyncio.Lock] = {}

    @property
    def state_db(self) -> StateDb:
        """The state database this gate keeps its records in; commands that keep state of their own
        (the triage threads) store it in the same file, reached through the context's gate."""
        return self.store.db

    # -- helpers --
    async def _answer_refusal(
        self,
        d: Decision,
        rec: Record | None,
        token: str,
        user: str,
        now: float,
        step: Literal["confirm", "cancel"],
        **rule: str | None,
    ) -> Reply:
        """A refused confirm or cancel: expire the record if that is why, audit the refusal (an
        unknown token by its hash only), answer with the reason."""
        if d.code == "expired" and rec is not None and rec.state == "pending":
            await self._expire(rec, now)
        await self._audit(
            "refusal",
            rec,
            user=user,
            step=step,
            code=d.code,
            reason=d.reason,
            **rule,
            token_id=None if rec else token_id(token),
        )
        return error_reply(d.reason, title="Not confirmed" if step == "confirm" else "Not cancelled")

    async def _db(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        return await asyncio.to_thread(fn, *args, **kwargs)  # sqlite commits fsync: keep them off the loop

    def _action(self, command: str) -> ActionSpec | None:
        cmd = self.router.find(command)
        return cmd.action if cmd is not None else None

    async def _audit(self, event: str, rec: Record | None, **fields: Any) -> None:
        base: JsonObject = {"transport": self.transport, **self.actor}
        if rec is not None:
            base.update(
                token_id=token_id(rec.token),
                command=rec.command,
                kind=rec.plan.kind,
                cluster=rec.plan.cluster,
                args=rec.plan.args,
                requester=rec.requester,
                channel=rec.channel,
            )
        await self.audit.write(event, **{**base, **{k: v for k, v in fields.items() if v is not None}})

    async def status(self, token: str) -> Record | None:
        return await self._db(self.store.get, token)

    # -- Gate API --
    async def propose(self, plan: ActionPlan, request: CommandRequest) -> Pending:
        now = self.clock()
        rec = Record(
            new_token(),
            request.spec.name,
            plan,
            request.user or "unknown",
            request.channel,
            now,
            now + self.ttl_s,
            needs_second_approver(plan, request.spec.name, self.high_risk_kinds),
            updated_at=now,
        )
        await self._db(self.store.insert, rec)
        await self._audit(
            "preview",
            rec,
            user=rec.requester,
            raw=request.raw,
            summary=plan.summary,
            changes=plan.changes,
            validation=plan.validation,
            ready=plan.ready,
            preconditions=[p.__dict__ for p in plan.preconditions],
            needs_second_approver=rec.needs_second_approver,
            expires_at=rec.expires_at,
        )
        return rec.pending()

    async def confirm(self, token: str, request: CommandRequest, ctx: Context) -> Reply:
        user = request.user or "unknown"
        rec = await self.status(token)
        verdict = await self.authorize(user, request.channel, rec) if (rec and self.authorize) else None
        lock = self._locks.setdefault(token, asyncio.Lock())
        async with lock:
            rec = await self.status(token)  # read again: a concurrent click may have moved it
            now = self.clock()
            d = decide(
                rec,
                user,
                now,
                rec.approvals if rec else [],
                permitted=verdict,
                approvers_required=self.approvers_required,
                cluster=request.cluster,
            )
            # decide() refuses a missing record; "rec is None" is here so the type checker sees it too.
            if d.action == "refuse" or rec is None:
                reply = await self._answer_refusal(
                    d, rec, token, user, now, "confirm", rule=verdict.rule if verdict else None
                )
                return self._who_can_approve(reply, rec, verdict) if d.code == "self_approval" and rec else reply
            approvals = [*rec.approvals, user] if rec.needs_second_approver else rec.approvals
            if d.action == "approve":
                await self._db(self.store.transition, token, "pending", "pending", now, approvals=approvals)
                await self._audit("approval", rec, user=user, approvals=approvals, complete=False)
                return Reply(
                    title=f"Approval recorded: {rec.plan.kind}",
                    severity="warning",
                    verdict=d.reason,
                    notes=[f"Requested by {rec.requester}; approved so far by {', '.join(approvals)}."],
                )
            # The single-use step: exactly one caller, in any process, moves it out of "pending".
            won = await self._db(self.store.transition, token, "pending", "executing", now, approvals=approvals)
            if not won:
                await self._audit("refusal", rec, user=user, step="confirm", code="used", reason="lost the race")
                return error_reply("This action is already being executed; it runs once.", title="Not confirmed")
        await self._audit("approval", rec, user=user, approvals=approvals, complete=True, reason=d.reason)
        return await self._execute(rec, user, ctx)

    async def break_glass(self, token: str, reason: str, request: CommandRequest, ctx: Context) -> Reply:
        """The requester confirms a high-risk action alone, with a reason, when a break_glass rule
        names them: the two-person rule's way out for someone alone at 03:00, on the record."""
        user = request.user or "unknown"
        reason = " ".join(reason.split())
        rec = await self.status(token)
        verdict = await self.authorize(user, request.channel, rec) if (rec and self.authorize) else None
        lock = self._locks.setdefault(token, asyncio.Lock())
        async with lock:
            rec = await self.status(token)
            now = self.clock()
            d = decide_break_glass(rec, user, now, reason, permitted=verdict, cluster=request.cluster)
            if d.action == "refuse" or rec is None or verdict is None:
                reply = await self._answer_refusal(
                    d, rec, token, user, now, "confirm", rule=verdict.rule if verdict else None
                )
                return self._who_can_approve(reply, rec, verdict) if d.code == "no_break_glass" and rec else reply
            won = await self._db(self.store.transition, token, "pending", "executing", now, approvals=[user])
            if not won:
                await self._audit("refusal", rec, user=user, step="confirm", code="used", reason="lost the race")
                return error_reply("This action is already being executed; it runs once.", title="Not confirmed")
        log.warning("break-glass: %s confirmed %s alone under %s", user, rec.plan.kind, verdict.break_glass)
        await self._audit(
            "approval",
            rec,
            user=user,
            approvals=[user],
            complete=True,
            reason=d.reason,
            break_glass=verdict.break_glass,
            break_glass_reason=reason,
        )
        reply = await self._execute(rec, user, ctx)
        reply.notes.insert(0, f'Break-glass: confirmed alone by {user} under {verdict.break_glass}: "{reason}".')
        return reply

    def _who_can_approve(self, reply: Reply, rec: Record, verdict: Verdict | None) -> Reply:
        """A requester who needs a second person learns who can approve, and the approvers are
        asked in the thread; a requester who holds break-glass learns how to use it."""
        users, groups = self.approvers(rec.command, rec.channel) if self.approvers else ([], [])
        users = [u for u in users if u != rec.requester]
        who = [*users, *(f"members of user group {g}" for g in groups)]
        if who:
            reply.notes.append(
                f"Who can approve it: {', '.join(who)} (the grants for '{rec.command}'). They confirm it with "
                "the Confirm button on the preview, or `confirm <token>`."
            )
        else:
            reply.notes.append(
                f"No approver is configured: the RBAC policy lets nobody but you run '{rec.command}' here, so "
                "nobody can approve it. To configure one, whoever runs this bot adds a grant naming a second "
                f"person (users: [<Slack user id>] or groups: [<user group id>], commands: [{rec.command}]) to "
                "the RBAC policy file (KBOT_RBAC_FILE; docs/security.md), or a break_glass rule naming you for "
                f"'{rec.command}' so you may confirm it alone with a reason. The token stays valid until it expires."
            )
        if verdict is not None and verdict.break_glass:
            reply.notes.append(
                f"Alone and it cannot wait? You may confirm it yourself under {verdict.break_glass}: "
                f"`break-glass {rec.token} <why it cannot wait>`; the reason is audited and shown in the timeline."
            )
        if who:
            reply.ask = Ask(
                users,
                groups,
                f"{rec.requester} needs a second approver for {rec.plan.kind} on {rec.plan.cluster} "
                f"({rec.plan.summary}). Review it and press Confirm on the preview in this thread before "
                f"{_utc(rec.expires_at)} UTC, or Cancel.",
            )
        return reply

    async def _execute(self, rec: Record, user: str, ctx: Context) -> Reply:
        started = time.monotonic()
        spec = self._action(rec.command)

        async def close(state: str, event: str, **fields: Any) -> None:
            result = {k: v for k, v in fields.items() if k in ("detail", "before", "after", "ok", "preconditions")}
            # Who confirmed, for the chat message edited later (possibly by another process: outcome_note).
            await self._db(
                self.store.transition, rec.token, "executing", state, self.clock(), result={**result, "by": user}
            )
            await self._audit(
                event, rec, user=user, state=state, latency_ms=round((time.monotonic() - started) * 1000, 1), **fields
            )

        if spec is None:
            await close(
                "aborted", "refusal", code="no_command", detail=f"'{rec.command}' is no longer a command of this bot."
            )
            return error_reply(
                f"'{rec.command}' is no longer a command of this bot; nothing was changed.", title="Not executed"
            )
        try:
            checks = await spec.recheck(rec.plan, ctx)
        except Exception as exc:
            log.exception("recheck of %s failed", rec.command)
            await close("aborted", "refusal", code="recheck_failed", detail=f"could not re-check preconditions: {exc}")
            return _failed(
                error_reply(f"Could not re-check the preconditions ({exc}); nothing was changed.", title="Not executed")
            )
        failing = [p for p in checks if not p.ok]
        if failing:
            detail = "; ".join(f"{p.name}: {p.detail}" for p in failing)
            await close(
                "aborted", "refusal", code="precondition", detail=detail, preconditions=[p.__dict__ for p in checks]
            )
            return Reply(
                title=f"Not executed: {rec.plan.kind}",
                severity="error",
                outcome="failed",
                verdict="A precondition no longer holds, so nothing was changed.",
                evidence=[Evidence(p.name, p.detail, "live: re-check", "ok" if p.ok else "bad") for p in checks],
                followups=[f"Run '{rec.command}' again for a fresh preview once the cause is fixed."],
            )
        try:
            result = await spec.execute(rec.plan, ctx)
        except Exception as exc:
            # We do not know whether the change landed: ask the cluster instead of guessing.
            unanswered = isinstance(exc, GatewayTimeout)
            if unanswered:  # the brokers' silence, not a bug: no traceback in the log
                log.warning("execute of %s was not answered in time: %s", rec.command, exc)
            else:
                log.exception("execute of %s raised", rec.command)
            outcome = await self._reconcile_one(spec, rec, ctx)
            await close(
                outcome,
                "execution",
                ok=False,
                detail=f"execute raised {type(exc).__name__}: {exc}; reconciled: {outcome}",
            )
            if unanswered:
                return _unconfirmed_reply(rec, exc, outcome)
            return _failed(
                error_reply(
                    f"The action raised an error ({type(exc).__name__}: {exc}). "
                    f"Checked the cluster afterwards: {outcome}.",
                    title=f"Execution error: {rec.plan.kind}",
                )
            )
        state = "executed" if result.ok else "failed"
        await close(state, "execution", ok=result.ok, detail=result.detail, before=result.before, after=result.after)
        return _result_reply(rec, user, result)

    async def _reconcile_one(self, spec: ActionSpec | None, rec: Record, ctx: Context) -> Reconciled:
        if spec is None:
            return "unknown"
        try:
            outcome = await spec.reconcile(rec.plan, ctx)
        except Exception:
            log.exception("reconcile of %s failed", rec.command)
            return "unknown"
        return outcome if outcome in ("done", "not_done", "unknown") else "unknown"

    async def cancel(self, token: str, request: CommandRequest) -> Reply:
        user = request.user or "unknown"
        rec = await self.status(token)
        verdict = await self.authorize(user, request.channel, rec) if (rec and self.authorize) else None
        now = self.clock()
        d = decide_cancel(rec, user, now, permitted=verdict, cluster=request.cluster)
        # decide_cancel() refuses a missing record; "rec is None" is here so the type checker sees it too.
        if d.action == "refuse" or rec is None:
            return await self._answer_refusal(d, rec, token, user, now, "cancel")
        if not await self._db(self.store.transition, token, "pending", "cancelled", now, result={"by": user}):
            return error_reply(
                "This action is no longer pending; it was confirmed or cancelled meanwhile.", title="Not cancelled"
            )
        await self._audit("cancel", rec, user=user)
        return Reply(
            title=f"Cancelled: {rec.plan.kind}",
            severity="info",
            verdict=f"{rec.plan.summary} — cancelled by {user}. Nothing changed.",
        )

    # -- housekeeping --
    async def _expire(self, rec: Record, now: float) -> bool:
        if await self._db(self.store.transition, rec.token, "pending", "expired", now):
            await self._audit("expiry", rec, expired_at=rec.expires_at)
            return True
        return False

    async def expire_due(self) -> list[Record]:
        """Mark every pending record past its expiry as expired (and audit it)."""
        now = self.clock()
        return [r for r in await self._db(self.store.expired_pending, now) if await self._expire(r, now)]

    # -- the chat messages that show a record (kept true when the record is resolved elsewhere) --
    async def attach_message(self, token: str, channel: str, ts: str, role: str, payload: JsonObject) -> None:
        await self._db(self.store.attach_message, token, channel, ts, role, payload)

    async def unsettled_messages(self) -> list[tuple[Record, MessageRef]]:
        return await self._db(self.store.unsettled_messages)

    async def mark_settled(self, token: str, channel: str, ts: str, state: str) -> None:
        await self._db(self.store.mark_settled, token, channel, ts, state)

    async def reconcile_incomplete(self, ctx: Context) -> list[tuple[Record, Reconciled]]:
        """At start-up: records a crash left "executing" are reconciled, never executed again."""
        out: list[tuple[Record, Reconciled]] = []
        for rec in await self._db(self.store.in_state, "executing"):
            outcome = await self._reconcile_one(self._action(rec.command), rec, ctx)
            if await self._db(
                self.store.transition,
                rec.token,
                "executing",
                outcome,
                self.clock(),
                result={"detail": f"reconciled after a restart: {outcome}"},
            ):
                await self._audit("reconciled", rec, outcome=outcome)
                out.append((rec, outcome))
        return out


_RECONCILED = {
    "done": "the bot stopped while this was executing; checked the cluster afterwards: the change is in place",
    "not_done": "the bot stopped while this was executing; checked the cluster afterwards: the change did not land "
    "(run the command again if it is still needed)",
    "unknown": "the bot stopped while this was executing; the cluster could not tell whether the change landed: "
    "check before running it again",
}


def outcome_note(rec: Record) -> str:
    """One line saying how a record was resolved, for the message that showed its preview: plain
    text (the transport escapes it). Names who acted when the gate recorded it."""
    by = (rec.result or {}).get("by")
    detail = (rec.result or {}).get("detail") or ""
    when = _utc(rec.updated_at) + " UTC" if rec.updated_at else ""
    if rec.state == "executed":
        return f"Executed{f' (confirmed by {by})' if by else ''} at {when}." + (f" {detail}" if detail else "")
    if rec.state == "failed":
        return f"Failed{f' (confirmed by {by})' if by else ''} at {when}: {detail or 'see the audit log'}"
    if rec.state == "aborted":
        return f"Not executed at {when}: {detail or 'a precondition no longer held'}. Nothing was changed."
    if rec.state == "cancelled":
        return f"Cancelled{f' by {by}' if by else ''} at {when}. Nothing was changed."
    if rec.state == "expired":
        return f"Expired unused at {_utc(rec.expires_at)} UTC; run the command again for a fresh preview."
    if rec.state in _RECONCILED:
        return f"Reconciled ({rec.state}) at {when}: {_RECONCILED[rec.state]}."
    return f"State: {rec.state}."


#: what the cluster showed after a change it did not confirm in time (``_unconfirmed_reply``)
_UNCONFIRMED = {
    "done": "but read back afterwards, the change is in place.",
    "not_done": (
        "Read back afterwards, it is not in place yet. The request may still be carried out: a "
        "paused or overloaded broker acts on what it has received once it runs again."
    ),
    "unknown": "Reading the cluster back afterwards could not tell whether it is in place.",
}


def _unconfirmed_reply(rec: Record, exc: Exception, outcome: Reconciled) -> Reply:
    """A change the brokers did not answer in time (the gateway's Timeout): sent, perhaps carried
    out, perhaps still waiting in a paused broker's socket.  Not "failed": the reconcile's read
    says what is in place now, and the user re-checks before running it again."""
    done = outcome == "done"
    now = _UNCONFIRMED.get(outcome, _UNCONFIRMED["unknown"])
    return Reply(
        title=f"{'Done' if done else 'Not confirmed'}: {rec.plan.kind}",
        severity="warning" if done else "error",
        outcome="answered" if done else "failed",
        verdict=f"{rec.plan.summary}: the cluster did not confirm it in time{', ' if done else '. '}{now}",
        evidence=[Evidence("cluster", str(exc), "live: the request", "bad")],
        followups=[]
        if done
        else [
            f"Before you retry, run '{rec.command}' again: its preview reads the cluster afresh and "
            "shows whether the change landed meanwhile."
        ],
        notes=[f"Requested by {rec.requester}; cluster {rec.plan.cluster}. Recorded in the audit log."],
    )


def _failed(reply: Reply) -> Reply:
    """An action that went wrong once confirmed is a failure (exit 1), not the user's bad input."""
    reply.outcome = "failed"
    return reply


def _result_reply(rec: Record, user: str, result: ActionResult) -> Reply:
    evidence = [Evidence(f"before: {k}", str(v), "live: before") for k, v in result.before.items()]
    evidence += [
        Evidence(f"after: {k}", str(v), "live: after", "ok" if result.ok else "bad") for k, v in result.after.items()
    ]
    return Reply(
        title=f"{'Done' if result.ok else 'Failed'}: {rec.plan.kind}",
        severity="ok" if result.ok else "error",
        outcome="answered" if result.ok else "failed",
        verdict=result.detail or rec.plan.summary,
        evidence=evidence,
        sections=[Section("Changed" if result.ok else "Attempted", rec.plan.changes or [rec.plan.summary])],
        notes=[
            f"Requested by {rec.requester}; confirmed by {user}; cluster {rec.plan.cluster}. Recorded in the audit log."
        ],
    )
