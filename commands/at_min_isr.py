"""at-min-isr: every partition's KIP-427 category, the early warning before writes fail.

``--broker N`` asks about one broker: the partitions it holds a replica of, and what taking it
down (a restart, a roll) would do to them - which would fall under their min ISR (acks=all writes
fail there while it is down) or lose their last in-sync replica. A broker already gone is shown
with what its absence does now. The thread follow-up "is it safe to restart 103?" asks this."""

from __future__ import annotations

from dataclasses import replace

from diagnosis.entries import diagnosis
from diagnosis.entry_ids import UNDER_MIN_ISR
from diagnosis.live_common import stale_view_evidence
from diagnosis.rules import PartitionState, categories
from diagnosis.snapshot import Snapshot, name_partitions, snapshot
from framework.context import Context
from framework.gateways import gateway
from framework.reply import Cell, Evidence, Reply, Section, Severity, Table
from framework.spec import Command, CommandRequest, CommandSpec, Option, Param
from runbook_kb.schema import PartitionCategories

SPEC = CommandSpec(
    words=("at-min-isr",),
    summary="Partitions at, under and over their min ISR (KIP-427 categories), per topic.",
    params=(Param("topic", "limit to one topic", kind="topic", required=False),),
    options=(
        Option(
            "broker",
            "one broker: the partitions it holds and which would go under min ISR if it went down (a restart)",
            kind="int",
        ),
    ),
    examples=("at-min-isr", "at-min-isr orders", "at-min-isr --broker 103"),
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
    broker = request.options.get("broker")
    if isinstance(broker, int) and not isinstance(broker, bool):
        return _broker_reply(snap, broker, topic)
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


def without(p: PartitionState, broker: int) -> PartitionState:
    """``p`` as it would be with ``broker`` down: out of the ISR; a lost leader replaced by another
    in-sync replica (the controller elects from the ISR), or none when it was the last one."""
    isr = tuple(b for b in p.isr if b != broker)
    leader = p.leader
    if leader == broker:
        leader = isr[0] if isr else None
    return replace(p, isr=isr, leader=leader)


def _broker_reply(snap: Snapshot, broker: int, topic: str | None) -> Reply:
    held = [p for p in snap.states if broker in p.replicas]
    scope = f" ({topic})" if topic else ""
    title = f"Broker {broker}: its partitions and min ISR{scope}"
    registered = broker in snap.brokers.registered
    if not held:
        known = "registered" if registered else "not registered"
        return Reply(
            title=title,
            severity="ok" if registered else "warning",
            verdict=f"Broker {broker} ({known}) holds no replica{' of ' + topic if topic else ''}: "
            "taking it down changes no partition's ISR.",
        )
    # Gone already: what its absence does now. Registered: what taking it down would do.
    after = held if not registered else [without(p, broker) for p in held]
    offline = [p for p in after if "Offline" in categories(p)]
    under = [p for p in after if "UnderMinIsr" in categories(p)]
    at = [p for p in after if "AtMinIsr" in categories(p) and len(p.isr) < len(p.replicas)]
    in_isr = [p for p in held if broker in p.isr]
    evidence = [
        Evidence(
            f"Broker {broker}",
            "registered" if registered else "not registered (gone)",
            "live: metadata",
            "ok" if registered else "bad",
        ),
        Evidence("Replicas it holds", f"{len(held):,} ({len(in_isr):,} in sync)", "live: metadata", "neutral"),
    ]
    when = "now" if not registered else "if it went down"
    for label, parts in (("Offline", offline), ("Under min ISR", under), ("At min ISR", at)):
        evidence.append(
            Evidence(
                f"{label} {when}",
                f"{len(parts):,}" + (f": {name_partitions(parts)}" if parts else ""),
                "live: metadata + topic configs",
                "bad" if parts else "ok",
            )
        )
    severity: Severity
    if not registered:
        verdict = f"Broker {broker} is gone: {len(held):,} partition(s) it holds are without it"
        verdict += (
            f"; {len(under):,} under min ISR (acks=all writes fail), {len(offline):,} offline."
            if under or offline
            else "; none is under its min ISR."
        )
        severity = "critical" if under or offline else "warning"
    elif under or offline:
        verdict = (
            f"Not safe to take broker {broker} down now: {len(under):,} partition(s) would go under min ISR "
            f"(acks=all writes fail there until it is back) and {len(offline):,} would go offline. "
            "Bring their other replicas back into the ISR first."
        )
        severity = "critical"
    else:
        verdict = f"Taking broker {broker} down puts no partition under its min ISR" + (
            f"; {len(at):,} would be at min ISR while it is down (one more loss and their writes stop)." if at else "."
        )
        severity = "warning" if at else "ok"
    worst = sorted(offline + under + at, key=lambda p: (p.topic, p.partition))
    rows: list[list[Cell]] = [
        [
            f"{p.topic}-{p.partition}",
            ",".join(map(str, p.isr)) or "-",
            ",".join(map(str, p.replicas)),
            p.effective_min_isr,
            categories(p)[0],
        ]
        for p in worst[:MAX_ROWS]
    ]
    return Reply(
        title=title,
        severity=severity,
        verdict=verdict,
        evidence=evidence,
        tables=[
            Table(
                f"Partitions {when} without broker {broker}",
                ["partition", "ISR", "replicas", "min ISR", "category"],
                rows,
                more=len(worst) - len(rows),
            )
        ]
        if rows
        else [],
    )


COMMAND = Command(SPEC, run)
