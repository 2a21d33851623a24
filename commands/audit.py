"""audit: durability settings that fail silently, per topic, and the brokers' transaction cap.
audit --principals: the bot's own Kafka principals against what its actions need (diagnosis/principals.py)."""

from __future__ import annotations

from diagnosis.durability import audit_topics
from diagnosis.principals import audit_principals
from diagnosis.snapshot import config_value, snapshot
from framework.context import Context
from framework.gateways import gateway
from framework.reply import Evidence, Reply, Section, Severity
from framework.spec import Command, CommandRequest, CommandSpec, Option

SPEC = CommandSpec(
    words=("audit",),
    summary="Audit every topic's durability settings (min ISR at or above RF, RF < 3, unclean election) and the brokers' transaction cap.",
    options=(
        Option(
            "principals",
            "audit the bot's own Kafka principals instead: rights beyond need, escalation paths, missing principals",
            takes_value=False,
        ),
    ),
    examples=("audit", "audit --principals"),
)


async def run(request: CommandRequest, ctx: Context) -> Reply:
    if request.options.get("principals"):
        return await audit_principals(ctx, request.cluster)
    gw = await gateway(ctx, request.cluster)
    await ctx.progress("reading topic and broker configs")
    snap = await snapshot(gw, min_isr="all")  # every topic, internal ones too, with its configs
    topics = snap.topics
    broker_cfgs = await gw.broker_configs(snap.cluster.broker_ids)
    findings = audit_topics(topics, snap.configs)
    caps = {b: config_value(c, "transaction.max.timeout.ms") for b, c in broker_cfgs.items()}
    cap_values = sorted({v for v in caps.values() if v is not None})
    evidence = [
        Evidence("Topics audited", f"{len(topics):,}", "live: metadata + topic configs"),
        Evidence(
            "Critical findings",
            f"{sum(f.severity == 'critical' for f in findings):,}",
            "audit",
            "bad" if any(f.severity == "critical" for f in findings) else "ok",
        ),
        Evidence(
            "Warnings",
            f"{sum(f.severity == 'warning' for f in findings):,}",
            "audit",
            "bad" if any(f.severity == "warning" for f in findings) else "ok",
        ),
        Evidence(
            "transaction.max.timeout.ms per broker",
            ", ".join(f"{b}: {v if v is not None else 'unknown'}" for b, v in sorted(caps.items())) or "unknown",
            "live: broker configs",
            "neutral" if len(cap_values) <= 1 else "bad",
        ),
    ]
    notes = []
    if len(cap_values) > 1:
        notes.append(
            "Brokers disagree on transaction.max.timeout.ms: a producer's timeout may be accepted by one coordinator and refused by another."
        )
    lines = [f"[{f.severity}] {f.topic}: {f.text} (see /kafka runbook {f.entry})" for f in findings]
    entries = list(dict.fromkeys(f.entry for f in findings))
    severity: Severity = (
        "critical" if any(f.severity == "critical" for f in findings) else "warning" if findings else "ok"
    )
    every = f"All {len(topics):,} topics meet" if len(topics) != 1 else "The 1 topic meets"
    verdict = (
        f"{len(findings):,} finding(s) across {len({f.topic for f in findings}):,} topic(s)."
        if findings
        else f"{every} the runbook's durability rules (RF >= 3, min ISR from 2 to RF - 1, unclean election off)."
    )
    return Reply(
        title="Durability audit",
        severity=severity,
        verdict=verdict,
        evidence=evidence,
        # The findings are settings to change, not an incident: the runbook entries they point at are
        # follow-ups, not diagnoses (a diagnosis would head the answer with that entry's "Do now"
        # mitigation - "bring back the down broker" - on a cluster where nothing is down).
        sections=[Section("Findings", lines)] if lines else [],
        notes=notes,
        followups=[f"/kafka runbook {e}" for e in entries],
    )


COMMAND = Command(SPEC, run)
