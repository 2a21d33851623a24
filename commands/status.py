"""status: brokers registered vs expected, the controller quorum, and the KIP-427 partition counts."""

from __future__ import annotations

import asyncio

from live.gateway import GatewayError

from .context import Context
from .evidence import at_min_isr_by_design, broker_list, gateway, name_partitions, snapshot
from .live_checks import brokers_evidence
from .reply import Action, Evidence, Reply
from .spec import Command, CommandRequest, CommandSpec

SPEC = CommandSpec(
    words=("status",),
    summary="Cluster health at a glance: brokers, controller quorum, UnderReplicated / AtMinIsr / UnderMinIsr / Offline counts.",
    examples=("status", "status --cluster prod"),
)


async def run(request: CommandRequest, ctx: Context) -> Reply:
    gw = await gateway(ctx, request.cluster)
    await ctx.progress("reading brokers, partitions and the controller quorum")
    snap, quorum = await asyncio.gather(snapshot(gw, min_isr="all"), gw.metadata_quorum(), return_exceptions=True)
    if isinstance(snap, BaseException):
        raise snap
    cats = snap.by_category()
    evidence = [brokers_evidence(snap)]
    notes: list[str] = []
    if isinstance(quorum, GatewayError):
        notes.append(f"Controller quorum not readable: {quorum}")
    elif isinstance(quorum, BaseException):
        raise quorum
    else:
        lagging = [v for v in quorum.voters if v.lag > 0]
        evidence.append(Evidence(
            "Controller quorum",
            f"leader {quorum.leader_id} (epoch {quorum.leader_epoch}), voters {broker_list(v.id for v in quorum.voters)}"
            + (f"; lagging: {', '.join(f'{v.id} by {v.lag:,}' for v in lagging)}" if lagging else ""),
            "live: describe_metadata_quorum", "ok" if quorum.leader_id >= 0 else "bad"))
    for name, label in (("UnderReplicated", "Under-replicated"), ("AtMinIsr", "At min ISR"),
                        ("UnderMinIsr", "Under min ISR"), ("Offline", "Offline")):
        parts = cats[name]
        evidence.append(Evidence(label, f"{len(parts):,}" + (f": {name_partitions(parts)}" if parts else ""),
                                 "live: metadata + topic configs", "bad" if parts else "ok"))
    missing = sorted(snap.brokers.expected - snap.brokers.registered)
    by_design = at_min_isr_by_design(cats["AtMinIsr"])
    lost = [p for p in cats["AtMinIsr"] if len(p.isr) < len(p.replicas)]
    problems = []
    if missing:
        problems.append(f"broker {broker_list(missing)} missing")
    for parts, word in ((cats["Offline"], "offline"), (cats["UnderMinIsr"], "under min ISR"),
                        (cats["UnderReplicated"], "under-replicated"), (lost, "at min ISR after losing a replica")):
        if parts:
            problems.append(f"{len(parts):,} {word}")
    if by_design:
        notes.append(f"{len(by_design):,} partition(s) are at min ISR by configuration (replication factor = min ISR): "
                     "one broker loss stops their acks=all writes. See /kafka audit.")
    severity = "critical" if cats["Offline"] or cats["UnderMinIsr"] else "warning" if problems else "ok"
    topics = len({p.topic for p in snap.states})
    verdict = (f"Healthy: {len(snap.brokers.registered)} brokers, {topics:,} topic{'s' if topics != 1 else ''}, "
               f"{snap.partition_count:,} partitions all in sync."
               if not problems else "Not healthy: " + "; ".join(problems) + ".")
    actions = []
    if cats["Offline"]:
        actions.append(Action("Why offline", "why offline"))
    if cats["UnderMinIsr"]:
        actions.append(Action("Why under min ISR", "why under-min-isr"))
    if cats["UnderReplicated"]:
        actions.append(Action("Why URP", "why URP"))
    return Reply(title=f"Cluster status ({gw.name})", severity=severity, verdict=verdict, evidence=evidence,
                 actions=actions, notes=notes)


COMMAND = Command(SPEC, run)
