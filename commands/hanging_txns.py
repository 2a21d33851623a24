"""hanging-txns: KIP-664 find-hanging, the producers holding each partition, and how far the LSO lags."""

from __future__ import annotations

from .context import Context
from .diagnosis import diagnosis
from .evidence import gateway
from .live_checks import transaction_findings
from .reply import Evidence, Reply
from .router import BadInput
from .spec import Command, CommandRequest, CommandSpec, Option
from .txn_evidence import read_open_transactions

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
        [diagnosis(ctx.kb, ctx.kb.failure_modes["hanging-transaction"], reason=found.lead[0][1])] if found.lead else []
    )
    return Reply(
        title="Open and hanging transactions",
        severity=found.severity,
        verdict=found.verdict,
        evidence=found.evidence or [Evidence("Open transactions", "0", "live: list_offsets + list_transactions", "ok")],
        diagnoses=diagnoses,
        actions=found.actions,
        notes=found.notes,
        followups=["/kafka runbook hanging-transaction"],
    )


COMMAND = Command(SPEC, run)
