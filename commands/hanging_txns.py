"""hanging-txns: KIP-664 find-hanging, the producers holding each partition, and how far the LSO lags."""

from __future__ import annotations

import asyncio

from .context import Context
from .diagnosis import diagnosis
from .evidence import gateway
from .reply import Action, Evidence, Reply
from .spec import Command, CommandRequest, CommandSpec, Option

SPEC = CommandSpec(
    words=("hanging-txns",),
    summary="Find hanging transactions (KIP-664): open past the timeout cap, blocking read_committed consumers.",
    options=(Option("min-age-ms", "report open transactions older than this (default: the brokers' transaction.max.timeout.ms)", kind="int"),),
    examples=("hanging-txns", "hanging-txns --min-age-ms 60000"),
)


async def run(request: CommandRequest, ctx: Context) -> Reply:
    gw = await gateway(ctx, request.cluster)
    await ctx.progress("asking every transaction coordinator for open transactions")
    min_age = request.options.get("min-age-ms")
    hanging = await gw.find_hanging_transactions(min_age_ms=int(min_age) if min_age is not None else None)
    evidence: list[Evidence] = []
    actions: list[Action] = []
    # For each partition a hanging transaction touches: which producer holds it open, and the
    # distance between the log end and the last stable offset (what read_committed cannot see).
    pairs = list(dict.fromkeys(tp for h in hanging for tp in h.partitions))[:20]
    producers = await asyncio.gather(*(gw.describe_producers(t, p) for t, p in pairs), return_exceptions=True)
    for h in hanging:
        evidence.append(Evidence(
            f"Transaction {h.transactional_id}",
            f"producer id {h.producer_id}, epoch {h.producer_epoch}, state {h.state}, open {h.age_ms / 1000:,.0f} s, "
            f"coordinator {h.coordinator_id}, partitions {', '.join(f'{t}-{p}' for t, p in h.partitions)}",
            "live: list/describe_transactions", "bad"))
    for (topic, partition), states in zip(pairs, producers):
        if isinstance(states, BaseException):
            evidence.append(Evidence(f"{topic}-{partition}", f"producers not readable: {states}", "live: describe_producers", "neutral"))
            continue
        for s in states:
            if s.has_open_transaction:
                evidence.append(Evidence(
                    f"{topic}-{partition}",
                    f"producer {s.producer_id} (epoch {s.producer_epoch}, coordinator epoch {s.coordinator_epoch}) "
                    f"holds a transaction open from offset {s.current_txn_start_offset:,}",
                    "live: describe_producers", "bad"))
                actions.append(Action(f"Abort {topic}-{partition}", f"abort-txn {topic} {partition} --producer-id {s.producer_id}", mutating=True))
    entry = ctx.kb.failure_modes["hanging-transaction"]
    if not hanging:
        return Reply(title="Hanging transactions", severity="ok",
                     verdict="No transaction is open past the threshold; read_committed consumers are not blocked by one.",
                     evidence=[Evidence("Hanging transactions", "0", "live: list/describe_transactions", "ok")],
                     followups=["/kafka runbook hanging-transaction"])
    return Reply(
        title="Hanging transactions", severity="critical",
        verdict=f"{len(hanging)} hanging transaction(s): read_committed consumers cannot pass their first offset until aborted.",
        evidence=evidence, diagnoses=[diagnosis(ctx.kb, entry, reason="live: find_hanging_transactions")],
        actions=actions[:10],
    )


COMMAND = Command(SPEC, run)
