"""hanging-txns: KIP-664 find-hanging, the producers holding each partition, and how far the LSO lags."""

from __future__ import annotations

from diagnosis.entries import diagnosis
from diagnosis.entry_ids import HANGING_TRANSACTION
from diagnosis.txn_checks import transaction_findings
from diagnosis.txn_evidence import read_open_transactions
from framework.context import Context
from framework.gateways import gateway
from framework.reply import Evidence, Reply
from framework.router import BadInput
from framework.spec import Command, CommandRequest, CommandSpec, Option

SPEC = CommandSpec(
    words=("hanging-txns",),
    summary="Open transactions that hold a partition's last stable offset back: producer, age, LSO lag, and whether "
    "they are hanging (past their timeout or unknown to every coordinator) or will be aborted by their coordinator.",
    options=(
        Option(
            "min-age-ms",
            "only report open transactions at least this old (default: every one that blocks a partition)",
            kind="int",
        ),
    ),
    examples=("hanging-txns", "hanging-txns --min-age-ms 60000"),
)


async def run(request: CommandRequest, ctx: Context) -> Reply:
    gw = await gateway(ctx, request.cluster)
    await ctx.progress("reading every partition's last stable offset and every transaction coordinator")
    min_age = request.options.get("min-age-ms")
    if min_age is not None and int(min_age) < 0:
        raise BadInput("--min-age-ms cannot be negative.")
    found = transaction_findings(await read_open_transactions(gw), int(min_age) if min_age is not None else None)
    diagnoses = (
        [diagnosis(ctx.kb, ctx.kb.failure_modes[HANGING_TRANSACTION], reason=found.lead[0][1])] if found.lead else []
    )
    return Reply(
        title="Open and hanging transactions",
        severity=found.severity,
        verdict=found.verdict,
        evidence=found.evidence or [Evidence("Open transactions", "0", "live: list_offsets + list_transactions", "ok")],
        diagnoses=diagnoses,
        actions=found.actions,
        notes=found.notes,
        followups=[f"/kafka runbook {HANGING_TRANSACTION}"],
    )


COMMAND = Command(SPEC, run)
