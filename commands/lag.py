"""lag <group>: per-partition consumer lag now, and with the metric lake the window verdict (Burrow's rules: OK, WARN, STALL, STOP, REWIND)."""

from __future__ import annotations

import asyncio

from . import lake_evidence
from .context import Context
from .diagnosis import diagnosis
from .evidence import gateway
from .reply import Evidence, Reply, Section
from .spec import Command, CommandRequest, CommandSpec, Param

SPEC = CommandSpec(
    words=("lag",),
    summary="Consumer group lag per partition: committed offset, log end offset, lag; with the metric lake, the window verdict (OK/WARN/STALL/STOP/REWIND).",
    params=(Param("group", "the consumer group id", kind="group"),),
    options=(lake_evidence.SINCE_OPTION,),
    examples=("lag payments-service", "lag payments-service --since 1h"),
)


async def run(request: CommandRequest, ctx: Context) -> Reply:
    group = str(request.args["group"])
    window = lake_evidence.window_for(request, ctx)
    # the lake's window verdict is computed while the cluster is read
    lake_task = asyncio.ensure_future(lake_evidence.group_lag_or_note(ctx, request, group, window))
    try:
        gw = await gateway(ctx, request.cluster)
        g = await gw.consumer_group_lag(group)
    except BaseException:
        lake_task.cancel()
        raise
    lake = await lake_task
    rows = sorted(g.partitions, key=lambda p: -(p.lag or 0))
    lines = [
        f"{p.topic}-{p.partition}: committed {p.committed if p.committed is not None else 'none'}, "
        f"end {p.log_end if p.log_end is not None else '?'}, lag {p.lag if p.lag is not None else '?'}"
        + (f" ({p.error})" if p.error else "")
        for p in rows
    ]
    lagging = [p for p in rows if (p.lag or 0) > 0]
    evidence = [
        Evidence("Group state", g.state, "live: describe_consumer_groups", "neutral"),
        Evidence("Total lag", f"{g.total_lag:,} records over {len(rows)} partition(s)", "live: list_consumer_group_offsets + list_offsets",
                 "bad" if g.total_lag else "ok"),
    ]
    if lagging:
        worst = lagging[0]
        evidence.append(Evidence("Largest", f"{worst.topic}-{worst.partition}: {worst.lag:,}", "live", "bad"))
    no_commit = [p for p in rows if p.committed is None]
    if no_commit:
        evidence.append(Evidence("Partitions without a committed offset", str(len(no_commit)), "live", "neutral"))
    verdict = (f"Group {group} is {g.total_lag:,} records behind on {len(lagging)} partition(s)." if lagging
               else f"Group {group} is caught up.")
    diagnoses = [diagnosis(ctx.kb, ctx.kb.failure_modes["rebalance-storm"], reason="lag > 0: check for a rebalance storm", first_steps=2)] if lagging else []
    severity = "warning" if lagging else "ok"
    sections = [Section("Per partition (largest first)", lines)]
    notes = ["Lag now only; whether it is growing needs the metric lake's window."]
    if lake is not None:
        evidence += lake.evidence
        notes = lake.notes if lake.available else notes + lake.notes
        if lake.details:
            sections.append(Section(f"Window verdict per partition ({lake.window.label})", lake.details))
        if lake.severity == "critical":
            severity = "critical"
    return Reply(title=f"Lag of {group}", severity=severity, verdict=verdict, evidence=evidence,
                 diagnoses=diagnoses, sections=sections, notes=notes,
                 window=lake.window.label if lake is not None and lake.available else None)


COMMAND = Command(SPEC, run)
