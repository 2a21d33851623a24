"""Durability settings that fail silently (the runbook's durability table as rules): min ISR at or
above RF, RF below 3, unclean leader election. Read by `audit`, the digest and the live checks."""

from __future__ import annotations

from dataclasses import dataclass

from diagnosis.entry_ids import OFFLINE_PARTITIONS, UNCLEAN_ELECTION, UNDER_MIN_ISR
from diagnosis.snapshot import config_value
from live.model import ConfigValue, TopicInfo


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
                UNDER_MIN_ISR,
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
                UNDER_MIN_ISR,
            )
        )
    if rf == 1:
        out.append(
            Finding(
                "critical",
                name,
                "RF=1: one broker or disk loss loses data and makes partitions offline",
                OFFLINE_PARTITIONS,
            )
        )
    elif rf == 2 and min_isr < 2:
        out.append(
            Finding(
                "warning",
                name,
                "RF=2 with min.insync.replicas=1: acks=all can be satisfied by one copy; a second failure loses data",
                UNDER_MIN_ISR,
            )
        )
    if rf >= 3 and min_isr == 1:
        out.append(
            Finding(
                "warning",
                name,
                f"min.insync.replicas=1 with RF={rf}: acks=all waits for the leader alone",
                UNDER_MIN_ISR,
            )
        )
    if unclean:
        out.append(
            Finding(
                "critical",
                name,
                "unclean.leader.election.enable=true: an out-of-sync replica may become leader and drop acknowledged writes",
                UNCLEAN_ELECTION,
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
