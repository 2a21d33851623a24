"""at-min-isr: every partition's KIP-427 category, the early warning before writes fail."""

from __future__ import annotations

from diagnosis.entries import diagnosis
from diagnosis.entry_ids import UNDER_MIN_ISR
from diagnosis.live_common import stale_view_evidence
from diagnosis.snapshot import name_partitions, snapshot
from framework.context import Context
from framework.gateways import gateway
from framework.reply import Cell, Evidence, Reply, Section, Severity, Table
from framework.spec import Command, CommandRequest, CommandSpec, Param
from runbook_kb.schema import PartitionCategories

SPEC = CommandSpec(
    words=("at-min-isr",),
    summary="Partitions at, under and over their min ISR (KIP-427 categories), per topic.",
    params=(Param("topic", "limit to one topic", kind="topic", required=False),),
    examples=("at-min-isr", "at-min-isr orders"),
)


async def run(request: CommandRequest, ctx: Context) -> Reply:
    gw = await gateway(ctx, request.cluster)
    topic = request.arg_text("topic")
    snap = await snapshot(gw, topics=[topic] if topic else None, min_isr="all")
    if snap.floors_unread:  # the categories need each topic's floor (the missing part says which grant)
        return Reply(
            title="Partitions by ISR category" + (f" ({topic})" if topic else ""),
            severity="unknown",
            verdict="Unknown: min.insync.replicas could not be read, so no partition can be placed at or under it.",
        )
    cats = snap.by_category()
    evidence = [
        Evidence(
            name,
            f"{len(cats[name]):,}" + (f": {name_partitions(cats[name])}" if cats[name] else ""),
            "live: metadata + topic configs",
            "bad" if cats[name] else "ok",
        )
        for name in ("AtMinIsr", "UnderMinIsr", "UnderReplicated", "Offline")
    ]
    evidence += stale_view_evidence(snap)
    rows: list[list[Cell]] = []
    found = sorted(cats["AtMinIsr"] + cats["UnderMinIsr"], key=lambda p: (p.topic, p.partition))
    for p in found[:MAX_ROWS]:
        clamped = p.min_isr if p.min_isr > len(p.replicas) else None
        rows.append(
            [
                f"{p.topic}-{p.partition}",
                ",".join(map(str, p.isr)),
                ",".join(map(str, p.replicas)),
                p.effective_min_isr,
                clamped,
            ]
        )
    at, under = len(cats["AtMinIsr"]), len(cats["UnderMinIsr"])
    severity: Severity
    if under:
        verdict, severity = f"{under:,} partition(s) under min ISR: acks=all writes fail there now.", "critical"
    elif at:
        verdict, severity = (
            f"{at:,} partition(s) at min ISR: one more replica lost and acks=all writes stop.",
            "warning",
        )
    else:
        verdict, severity = "No partition is at or under its min ISR.", "ok"
    cat_ref = ctx.kb.reference["partition_categories"]
    legend = (
        [f"{c.name}: {c.definition}" for c in cat_ref.categories] if isinstance(cat_ref, PartitionCategories) else []
    )
    diagnoses = (
        [diagnosis(ctx.kb, ctx.kb.failure_modes[UNDER_MIN_ISR], reason="live: partitions at or under min ISR")]
        if (at or under)
        else []
    )
    return Reply(
        title="Partitions by ISR category" + (f" ({topic})" if topic else ""),
        severity=severity,
        verdict=verdict,
        evidence=evidence,
        diagnoses=diagnoses,
        tables=[
            Table(
                "At or under min ISR",
                ["partition", "ISR", "replicas", "min ISR", "configured min ISR (clamped to RF)"],
                rows,
                more=len(found) - len(rows),
            )
        ]
        if rows
        else [],
        notes=[f"{len(found) - len(rows):,} more partitions: name a topic to narrow."]
        if len(found) > len(rows)
        else [],
        sections=[Section("Categories (KIP-427)", legend)] if request.full else [],
    )


MAX_ROWS = 200


COMMAND = Command(SPEC, run)
