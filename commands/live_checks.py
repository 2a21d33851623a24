"""What the live cluster says about a symptom, for `why` and the category commands.

Each check reads the cluster, applies the pure rules of runbook_kb.diagnose and returns
evidence, a verdict, and the runbook entries the data points at (in the runbook's triage order).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

from live.gateway import AdminGateway, GatewayError
from runbook_kb.diagnose import BrokerFacts, urp_findings

from .evidence import Snapshot, broker_list, config_value, name_partitions, snapshot
from .reply import Action, Evidence, Severity


@dataclass
class LiveFindings:
    verdict: str
    severity: Severity
    evidence: list[Evidence] = field(default_factory=list)
    lead: list[tuple[str, str]] = field(default_factory=list)  # (entry id, what the data showed)
    actions: list[Action] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def brokers_evidence(snap: Snapshot) -> Evidence:
    missing = sorted(snap.brokers.expected - snap.brokers.registered)
    registered = len(snap.brokers.registered)
    expected = len(snap.brokers.expected)
    value = f"{registered} of {expected}" + (f" (missing: {broker_list(missing)})" if missing else "")
    return Evidence("Brokers registered", value, "live: describe_cluster", "bad" if missing else "ok")


async def _enrich_registered_suspects(gw: AdminGateway, snap: Snapshot, notes: list[str]) -> Snapshot:
    """Log-dir failures and reassignments can only explain a missing replica on a live broker:
    ask for them only when such replicas exist (two extra calls, skipped in the common case)."""
    suspects = {
        b for p in snap.states for b in p.replicas if b not in p.isr and b in snap.brokers.registered
    }
    if not suspects:
        return snap
    dirs, moves = await asyncio.gather(gw.log_dirs(sorted(suspects)), gw.reassignments(), return_exceptions=True)
    failed: dict[int, tuple[str, ...]] = {}
    if isinstance(dirs, BaseException):
        notes.append(f"Could not read log dirs ({dirs}); a failed disk cannot be ruled out.")
    else:
        for d in dirs:
            if d.error:
                failed[d.broker] = (*failed.get(d.broker, ()), d.path)
    adding: dict[tuple[str, int], tuple[int, ...]] = {}
    if isinstance(moves, BaseException):
        notes.append(f"Could not list reassignments ({moves}).")
    else:
        adding = {(r.topic, r.partition): tuple(r.adding) for r in moves}
    states = [replace(p, adding=adding.get((p.topic, p.partition), ())) for p in snap.states]
    facts = BrokerFacts(snap.brokers.registered, snap.brokers.expected, failed)
    return replace(snap, states=states, brokers=facts)


_CAUSE_TEXT = {
    "broker-loss": "not registered: its replicas are gone from {n:,} ISR(s)",
    "log-dir-failure": "registered, but a log dir failed; {n:,} replica(s) out of ISR",
    "slow-follower": "registered and alive, yet {n:,} of its replicas are out of ISR (not keeping up)",
    "reassignment": "being added by a reassignment in progress: {n:,} replica(s) still catching up",
}


async def check_urp(gw: AdminGateway) -> LiveFindings:
    snap = await snapshot(gw, min_isr="unhealthy")
    notes: list[str] = []
    snap = await _enrich_registered_suspects(gw, snap, notes)
    cats = snap.by_category()
    urp = [p for p in snap.states if len(p.isr) < len(p.replicas) and p.has_leader]
    evidence = [
        brokers_evidence(snap),
        Evidence(
            "Under-replicated partitions",
            f"{len(urp):,} of {snap.partition_count:,}" + (f": {name_partitions(urp)}" if urp else ""),
            "live: metadata",
            "bad" if urp else "ok",
        ),
    ]
    if cats["UnderMinIsr"]:
        evidence.append(Evidence("Under min ISR (acks=all producers fail)", f"{len(cats['UnderMinIsr']):,}: {name_partitions(cats['UnderMinIsr'])}", "live: metadata + topic configs", "bad"))
    if cats["AtMinIsr"]:
        evidence.append(Evidence("At min ISR (one more loss blocks writes)", f"{len(cats['AtMinIsr']):,}", "live: metadata + topic configs", "bad"))
    if cats["Offline"]:
        evidence.append(Evidence("Offline partitions", f"{len(cats['Offline']):,}: {name_partitions(cats['Offline'])}", "live: metadata", "bad"))
    findings = urp_findings(snap.states, snap.brokers)
    for f in findings:
        evidence.append(
            Evidence(f"Broker {f.broker}", _CAUSE_TEXT[f.cause].format(n=len(f.partitions)) + f" ({name_partitions(f.partitions, 4)})",
                     "live: metadata" + (" + log dirs" if f.cause == "log-dir-failure" else ""), "bad")
        )
    lead: list[tuple[str, str]] = []
    for f in findings:
        if f.cause != "reassignment" and all(e != f.cause for e, _ in lead):
            lead.append((f.cause, f"live: {f.detail}"))
    if not urp:
        return LiveFindings("No under-replicated partitions right now.", "ok", evidence, lead, notes=notes)
    top = findings[0] if findings else None
    if top and top.cause == "broker-loss":
        verdict = (f"Broker {broker_list(sorted({f.broker for f in findings if f.cause == 'broker-loss'}))} is gone: "
                   f"{len(urp):,} partitions are under-replicated because its replicas left their ISRs.")
    elif top and top.cause == "log-dir-failure":
        verdict = f"Broker {top.broker} is up but lost a log directory: its replicas on that disk are out of ISR."
    elif top and top.cause == "slow-follower":
        verdict = (f"Every broker is up, but broker {top.broker} is not keeping up: "
                   f"{len(top.partitions):,} of its replicas are out of ISR.")
    else:
        verdict = f"{len(urp):,} partitions are under-replicated by a reassignment in progress; that is expected while it copies."
    severity: Severity = "critical" if cats["UnderMinIsr"] or cats["Offline"] else "warning"
    example_topic = urp[0].topic
    actions = [Action(f"Describe {example_topic}", f"describe {example_topic}"), Action("Cluster status", "status")]
    return LiveFindings(verdict, severity, evidence, lead, actions, notes)


async def check_offline(gw: AdminGateway) -> LiveFindings:
    snap = await snapshot(gw, min_isr="none")
    offline = [p for p in snap.states if not p.has_leader]
    evidence = [brokers_evidence(snap)]
    if not offline:
        evidence.append(Evidence("Offline partitions", "0", "live: metadata", "ok"))
        return LiveFindings("No offline partitions right now.", "ok", evidence)
    down = sorted({b for p in offline for b in p.replicas if b not in snap.brokers.registered})
    evidence.append(Evidence("Offline partitions", f"{len(offline):,}: {name_partitions(offline)}", "live: metadata", "bad"))
    evidence.append(Evidence("Their replicas on brokers that are down", broker_list(down), "live: metadata", "bad" if down else "neutral"))
    topics = sorted({p.topic for p in offline})
    configs = await gw.topic_configs(topics)
    unclean = [t for t in topics if config_value(configs.get(t, {}), "unclean.leader.election.enable") == "true"]
    if unclean:
        evidence.append(Evidence("Unclean election enabled on", ", ".join(unclean), "live: topic configs", "bad"))
    lead = [("offline-partitions", f"live: {len(offline):,} partitions without a leader; replicas down on broker(s) {broker_list(down)}")]
    if unclean:
        lead.append(("unclean-election", "live: unclean.leader.election.enable=true on " + ", ".join(unclean)))
    verdict = (f"{len(offline):,} partition(s) have no leader: every replica that could lead is on broker(s) "
               f"{broker_list(down)}, which {'is' if len(down) == 1 else 'are'} down. Bring {'it' if len(down) == 1 else 'them'} back; do not force an unclean election.")
    return LiveFindings(verdict, "critical", evidence, lead, [Action("Cluster status", "status")])


async def check_under_min_isr(gw: AdminGateway) -> LiveFindings:
    snap = await snapshot(gw, min_isr="all")
    cats = snap.by_category()
    under = cats["UnderMinIsr"]
    evidence = [brokers_evidence(snap),
                Evidence("Under min ISR", f"{len(under):,}" + (f": {name_partitions(under)}" if under else ""), "live: metadata + topic configs", "bad" if under else "ok"),
                Evidence("At min ISR", f"{len(cats['AtMinIsr']):,}", "live: metadata + topic configs", "bad" if cats["AtMinIsr"] else "ok")]
    clamped = sorted({p.topic for p in snap.states if p.min_isr > len(p.replicas)})
    if clamped:
        evidence.append(Evidence("min.insync.replicas > replication factor (silently clamped)", ", ".join(clamped), "live: topic configs", "bad"))
    lead: list[tuple[str, str]] = []
    if under:
        lead.append(("under-min-isr", f"live: {len(under):,} partitions have fewer in-sync replicas than min.insync.replicas"))
        down = sorted(snap.brokers.expected - snap.brokers.registered)
        if down:
            lead.append(("broker-loss", f"live: broker(s) {broker_list(down)} are not registered"))
        verdict = (f"{len(under):,} partition(s) are under min ISR: producers with acks=all get NotEnoughReplicas there. "
                   "Restore the missing replicas; do not lower min.insync.replicas.")
        return LiveFindings(verdict, "critical", evidence, lead, [Action("Why URP", "why URP")])
    verdict = "No partition is under min ISR right now."
    if clamped:
        verdict += f" But {len(clamped)} topic(s) have min.insync.replicas above their replication factor: the floor you set is not the floor you get."
    return LiveFindings(verdict, "warning" if clamped else "ok", evidence, lead)


async def check_hanging(gw: AdminGateway) -> LiveFindings:
    hanging = await gw.find_hanging_transactions()
    if not hanging:
        return LiveFindings("No hanging transactions found.", "ok",
                            [Evidence("Open transactions past the timeout cap", "0", "live: find_hanging_transactions", "ok")])
    evidence = [
        Evidence(f"Transaction {h.transactional_id or '(none)'}",
                 f"producer {h.producer_id} epoch {h.producer_epoch}, {h.state}, open {h.age_ms / 1000:,.0f} s on "
                 f"{name_partitions(h.partitions, 4)}",
                 "live: find_hanging_transactions", "bad")
        for h in hanging
    ]
    first = hanging[0]
    actions = [Action(f"Abort on {t}-{p}", f"abort-txn {t} {p} --producer-id {first.producer_id}", mutating=True)
               for t, p in first.partitions[:3]]
    return LiveFindings(f"{len(hanging)} hanging transaction(s): read_committed consumers are stuck behind them.",
                        "critical", evidence, [("hanging-transaction", "live: find_hanging_transactions")], actions)


Check = Callable[[AdminGateway], Awaitable[LiveFindings]]

# Which live check answers a symptom, by the runbook entry the symptom resolves to first.
CHECKS: dict[str, Check] = {
    "broker-loss": check_urp,
    "slow-follower": check_urp,
    "network-partition": check_urp,
    "gc-pauses": check_urp,
    "log-dir-failure": check_urp,
    "offline-partitions": check_offline,
    "unclean-election": check_offline,
    "under-min-isr": check_under_min_isr,
    "hanging-transaction": check_hanging,
}


async def run_check(check: Check, gw: AdminGateway) -> LiveFindings:
    """A check whose cluster read fails still leaves the runbook answer standing."""
    try:
        return await check(gw)
    except GatewayError as exc:
        return LiveFindings("The cluster did not answer, so this is ranked from the runbook alone.", "warning",
                            [Evidence("Cluster", str(exc), "live", "bad")])
