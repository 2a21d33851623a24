"""audit: durability settings that fail silently, per topic, and the brokers' transaction cap.
audit --principals: the bot's own Kafka principals against what its actions need (commands/principals.py)."""

from __future__ import annotations

from dataclasses import dataclass

from live.model import ConfigValue, TopicInfo

from .context import Context
from .evidence import config_value, gateway, snapshot
from .reply import Evidence, Reply, Section, Severity
from .spec import Command, CommandRequest, CommandSpec, Option

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


@dataclass(frozen=True)
class Finding:
    severity: str  # "critical" | "warning"
    topic: str
    text: str
    entry: str  # runbook entry that explains it


def audit_topic(name: str, rf: int, min_isr: int, unclean: bool) -> list[Finding]:
    """Pure rules from the runbook's durability table; RF is the topic's largest replica set and
    ``min_isr`` the topic's effective min.insync.replicas (its own, else the brokers' default)."""
    out: list[Finding] = []
    if min_isr > rf:
        # The broker enforces min(min.insync.replicas, replicas) without a warning (under-min-isr's
        # clamp), so the floor written down is not the one enforced; past RF 1 it also leaves the
        # enforced floor at RF, with the same single-loss stop as min ISR = RF below.
        stop = (
            "" if rf == 1 else "; that floor is every replica, so one replica out of the ISR stops every acks=all write"
        )
        out.append(
            Finding(
                "critical",
                name,
                f"min.insync.replicas={min_isr} > RF={rf}: silently clamped to {rf}, "
                f"so acks=all is satisfied by {rf} cop{'y' if rf == 1 else 'ies'}{stop}. "
                f"Change: {min_isr_fix(rf, min_isr)}",
                "under-min-isr",
            )
        )
    elif min_isr == rf and rf > 1:
        out.append(
            Finding(
                "critical",
                name,
                f"min.insync.replicas={min_isr} = RF={rf}: acks=all needs every replica in sync, so one broker "
                f"down, restarting or lagging stops every acks=all write (NOT_ENOUGH_REPLICAS). "
                f"Change: {min_isr_fix(rf, min_isr)}",
                "under-min-isr",
            )
        )
    if rf == 1:
        out.append(
            Finding(
                "critical",
                name,
                "RF=1: one broker or disk loss loses data and makes partitions offline",
                "offline-partitions",
            )
        )
    elif rf == 2 and min_isr < 2:
        out.append(
            Finding(
                "warning",
                name,
                "RF=2 with min.insync.replicas=1: acks=all can be satisfied by one copy; a second failure loses data",
                "under-min-isr",
            )
        )
    if rf >= 3 and min_isr == 1:
        out.append(
            Finding(
                "warning",
                name,
                f"min.insync.replicas=1 with RF={rf}: acks=all waits for the leader alone",
                "under-min-isr",
            )
        )
    if unclean:
        out.append(
            Finding(
                "critical",
                name,
                "unclean.leader.election.enable=true: an out-of-sync replica may become leader and drop acknowledged writes",
                "unclean-election",
            )
        )
    return out


def min_isr_fix(rf: int, min_isr: int) -> str:
    """What to change for a min ISR at or above RF: a floor that leaves a replica to spare."""
    if rf >= 3:
        return (
            f"set min.insync.replicas to {rf - 1} (RF - 1), or raise the replication factor to {min_isr + 1} "
            "with a reassignment."
        )
    # RF 1 or 2: a floor of RF - 1 would be a single copy; more replicas are the fix.
    return (
        "raise the replication factor to 3 with a reassignment and set min.insync.replicas to 2; "
        "lowering min.insync.replicas instead lets acks=all succeed on a single copy."
    )


def audit_topics(topics: list[TopicInfo], configs: dict[str, dict[str, ConfigValue]]) -> list[Finding]:
    """:func:`audit_topic` for every topic, from its describe_configs result."""
    findings: list[Finding] = []
    for t in topics:
        cfg = configs.get(t.name, {})
        min_isr = int(config_value(cfg, "min.insync.replicas", "1"))
        unclean = config_value(cfg, "unclean.leader.election.enable") == "true"
        findings += audit_topic(t.name, t.replication_factor, min_isr, unclean)
    return findings


async def run(request: CommandRequest, ctx: Context) -> Reply:
    if request.options.get("principals"):
        from .principals import audit_principals

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
