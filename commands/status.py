"""status: brokers registered vs expected, the controller quorum, the KIP-427 partition counts, and every
other active finding: open or hanging transactions, reassignments (running or stalled), client quotas."""

from __future__ import annotations

import asyncio

from diagnosis import observations, responsiveness
from diagnosis.active_findings import read_active
from diagnosis.entry_ids import UNDER_MIN_ISR
from diagnosis.live_common import brokers_evidence, stale_view_evidence
from diagnosis.quorum_checks import read_quorum
from diagnosis.recent_changes import with_recent_changes
from diagnosis.snapshot import Snapshot, at_min_isr_by_design, broker_list, name_partitions, snapshot
from framework.context import Context
from framework.gateways import gateway
from framework.reply import Action, Cell, Evidence, Reply, Severity, Table
from framework.spec import Command, CommandRequest, CommandSpec
from live.gateway import AdminGateway, GatewayError
from live.probe import ProbeResult

SPEC = CommandSpec(
    words=("status",),
    summary="Cluster health at a glance: brokers, controller quorum, UnderReplicated / AtMinIsr / UnderMinIsr / Offline "
    "counts, hanging transactions, reassignments and client quotas.",
    examples=("status", "status --cluster prod"),
)


async def run(request: CommandRequest, ctx: Context) -> Reply:
    gw = await gateway(ctx, request.cluster)
    await ctx.progress("reading brokers, partitions and the controller quorum")
    # cross-checked: "Healthy" must not rest on one broker's old view of the ISRs
    snap, quorum = await asyncio.gather(snapshot(gw, min_isr="all"), read_quorum(gw))
    cats = snap.by_category()
    evidence = [brokers_evidence(snap), *quorum.evidence, *stale_view_evidence(snap)]
    notes: list[str] = []
    for name, label in (
        ("UnderReplicated", "Under-replicated"),
        ("AtMinIsr", "At min ISR"),
        ("UnderMinIsr", "Under min ISR"),
        ("Offline", "Offline"),
    ):
        parts = cats[name]
        evidence.append(
            Evidence(
                label,
                f"{len(parts):,}" + (f": {name_partitions(parts)}" if parts else ""),
                "live: metadata + topic configs",
                "bad" if parts else "ok",
            )
        )
    missing = sorted(snap.brokers.expected - snap.brokers.registered)
    # a registered leader of a partition out of sync may be one its followers cannot reach
    leaders = sorted(
        {p.leader for p in snap.states if p.leader is not None and len(p.isr) < len(p.replicas)}
        & snap.brokers.registered
    )
    # every registered broker too: one that answers far later than the others is starved (issue 35)
    liveness, active = await asyncio.gather(
        _liveness(gw, sorted(set(missing) | set(leaders) | snap.brokers.registered)),
        read_active(gw, frozenset(snap.brokers.registered), snap.topics),
    )
    responsiveness.record_probes(liveness)
    slow = responsiveness.slow_listeners(liveness, snap.brokers.registered)
    for b in slow:
        evidence.insert(
            1, Evidence(f"Broker {b} listener", liveness[b].describe(), "live: TCP + ApiVersions probe", "bad")
        )
    evidence += active.evidence
    cut_off = [b for b in leaders if b in liveness and liveness[b].state == "unreachable"]
    for b, res in sorted(liveness.items(), reverse=True):
        if b in missing or b in cut_off:
            evidence.insert(1, Evidence(f"Broker {b} listener", res.describe(), "live: TCP + ApiVersions probe", "bad"))
    by_design = at_min_isr_by_design(cats["AtMinIsr"])
    lost = [p for p in cats["AtMinIsr"] if len(p.isr) < len(p.replicas)]
    problems = []
    if quorum.lost:
        problems.append("no active controller")
    elif quorum.verdict:
        problems.append(quorum.verdict.rstrip("."))
    for b in missing:
        state = liveness[b].state if b in liveness else None
        problems.append(
            f"broker {b} missing"
            + {
                "silent": " (paused or hung, not dead: it holds its port but answers nothing)",
                "refused": " (not running: its port refuses connections)",
                "answers": " (its process answers but it is fenced)",
            }.get(state or "", "")
        )
    for b in slow:
        problems.append(
            f"broker {b} answers far later than the others ({liveness[b].describe()}): alive but starved of CPU or "
            "disk, or paused (`why starved broker`)"
        )
    for b in cut_off:
        alone = [p for p in snap.states if p.leader == b and tuple(p.isr) == (b,) and len(p.replicas) > 1]
        problems.append(
            f"broker {b} registered but unreachable (its listener gives no TCP answer: cut off by the network"
            + (f"; {len(alone):,} partition(s) it leads are down to an ISR of {b} alone" if alone else "")
            + ")"
        )
    for parts, word in (
        (cats["Offline"], "offline"),
        (cats["UnderMinIsr"], "under min ISR"),
        (cats["UnderReplicated"], "under-replicated"),
        (lost, "at min ISR after losing a replica"),
    ):
        if parts:
            problems.append(f"{len(parts):,} {word}")
    problems += active.problems
    if not problems:
        problems += _churn_in_memory(gw.name)
    if by_design:
        notes.append(
            f"{len(by_design):,} partition(s) are at min ISR by configuration (replication factor = min ISR): "
            "one broker loss stops their acks=all writes. See /kafka audit."
        )
    severity: Severity = (
        "critical"
        if cats["Offline"] or cats["UnderMinIsr"] or quorum.severity == "critical" or active.critical
        else "warning"
        if problems
        else "ok"
    )
    topics = len({p.topic for p in snap.states})
    verdict = (
        f"Healthy: {len(snap.brokers.registered)} brokers, {topics:,} topic{'s' if topics != 1 else ''}, "
        f"{snap.partition_count:,} partitions all in sync."
        if not problems
        else "Not healthy: " + "; ".join(problems) + "."
    )
    if active.notices:
        verdict += " Also: " + "; ".join(active.notices) + "."
    if quorum.lost:
        # The partition counts below come from the brokers' cached metadata, which stops changing
        # without a controller: say so first, they are not evidence of health.
        others = problems[1:]
        verdict = quorum.verdict + (f" Also: {'; '.join(others)}." if others else "")
        notes.append(
            "Without an active controller the brokers' metadata is frozen: ISR and leader changes are not "
            "recorded, so the partition counts may look better than the cluster is."
        )
    actions = []
    if quorum.lost:
        actions.append(Action("Why no controller", "why no active controller"))
    if cats["Offline"]:
        actions.append(Action("Why offline", "why offline"))
    if cats["UnderMinIsr"]:
        actions.append(Action("Why under min ISR", f"why {UNDER_MIN_ISR}"))
    if cats["UnderReplicated"]:
        actions.append(Action("Why URP", "why URP"))
    actions += active.actions
    return Reply(
        title=f"Cluster status ({gw.name})",
        severity=severity,
        verdict=verdict,
        evidence=evidence,
        actions=actions,
        notes=notes,
        tables=[_brokers_table(snap, liveness)],
    )


def _brokers_table(snap: Snapshot, liveness: dict[int, ProbeResult]) -> Table:
    """One row per broker the cluster expects: registered or not, what its listener answered."""
    brokers = sorted(snap.brokers.expected | snap.brokers.registered)
    rows: list[list[Cell]] = [[b, "registered" if b in snap.brokers.registered else "missing"] for b in brokers]
    if not liveness:  # nothing was probed (every broker registered): no empty column
        return Table("Brokers", ["broker", "state"], rows)
    return Table(
        "Brokers",
        ["broker", "state", "listener probe"],
        [row + [liveness[b].describe() if b in liveness else None] for row, b in zip(rows, brokers)],
    )


# A broker held to a sliver of a core answers one probe promptly when the probe lands in its
# cgroup's running slice: the slowest of a few probes in a row tells (chaos trial 2911:42, broker
# 102 at 5 % of a core, was answered "Healthy" on one probe while its exporter did not answer).
PROBE_ROUNDS = 3


async def _liveness(gw: AdminGateway, brokers: list[int]) -> dict[int, ProbeResult]:
    """Probe the brokers' listeners: dead and paused need different responses, and one that answers
    far later than the others is starved. The brokers that answer are probed PROBE_ROUNDS times in
    a row and keep their slowest answer; one that does not answer once is not probed again."""
    if not brokers:
        return {}
    try:
        out = await gw.broker_liveness(brokers)
        for _ in range(PROBE_ROUNDS - 1):
            answering = [b for b, r in out.items() if r.state == "answers"]
            if not answering:
                break
            again = await gw.broker_liveness(answering)
            for b, r in again.items():
                if r.state != "answers" or r.seconds > out[b].seconds:
                    out[b] = r
        return out
    except GatewayError:
        return {}


COMMAND = Command(SPEC, with_recent_changes(run))


def _churn_in_memory(cluster: str) -> list[str]:
    """A churn warning the bot's last reading of the ISR meters gave: a broker that stalls again and
    again is back in every ISR between stalls, when a snapshot reads as healthy (chaos trial 2911:14:
    `why URP` warned that broker 103 keeps dropping out, `status` a moment later said Healthy)."""
    warned = observations.churn_warned(cluster)
    if warned is None:
        return []
    brokers, ago = warned
    who = f"broker {broker_list(brokers)}" if brokers else "a broker"
    return [
        f"{who} was dropping out of the ISRs and coming back when `why URP` read the ISR meters {ago:,.0f} s ago; "
        "every replica is in sync right now, as between two stalls (ask `why URP` again to count them)"
    ]
