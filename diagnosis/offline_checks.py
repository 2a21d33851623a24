"""Partitions without a leader (offline) and partitions under their topic's min.insync.replicas,
read live."""

from __future__ import annotations

from diagnosis.durability import min_isr_fix
from diagnosis.entry_ids import (
    BROKER_LOSS,
    OFFLINE_PARTITIONS,
    UNCLEAN_ELECTION,
    UNDER_MIN_ISR,
)
from diagnosis.findings import LiveFindings
from diagnosis.live_common import brokers_evidence, facts_of, stale_view_evidence, why_stopped
from diagnosis.rules import PartitionState
from diagnosis.snapshot import broker_list, config_value, name_partitions, snapshot
from framework.partial import note_missing
from framework.reply import Action, Evidence
from live.gateway import AdminGateway, NotAuthorized


async def check_offline(gw: AdminGateway) -> LiveFindings:
    snap = await snapshot(gw, min_isr="none")
    offline = [p for p in snap.states if not p.has_leader]
    evidence = [brokers_evidence(snap), *stale_view_evidence(snap)]
    if not offline:
        evidence.append(Evidence("Offline partitions", "0", "live: metadata", "ok"))
        gone = sorted(snap.brokers.expected - snap.brokers.registered)
        if gone:
            # every partition kept a leader, but a broker the cluster expects is missing: that is the
            # finding, not an evidence row under an OK (issue 35)
            return LiveFindings(
                f"No partition is offline, but broker {broker_list(gone)} {'is' if len(gone) == 1 else 'are'} missing "
                "from the cluster: the partitions it led moved their leadership to other replicas, and its replicas "
                "are out of their ISRs. One more loss on those partitions can take them offline.",
                "warning",
                evidence,
                [(BROKER_LOSS, f"live: broker(s) {broker_list(gone)} are not registered")],
                [Action("Why URP", "why URP"), Action("Cluster status", "status")],
                facts=facts_of(snap),
            )
        return LiveFindings("No offline partitions right now.", "ok", evidence, facts=facts_of(snap))
    down = sorted({b for p in offline for b in p.replicas if b not in snap.brokers.registered})
    evidence.append(
        Evidence("Offline partitions", f"{len(offline):,}: {name_partitions(offline)}", "live: metadata", "bad")
    )
    evidence.append(
        Evidence(
            "Their replicas on brokers that are down", broker_list(down), "live: metadata", "bad" if down else "neutral"
        )
    )
    topics = sorted({p.topic for p in offline})
    try:
        configs = await gw.topic_configs(topics)
    except NotAuthorized as exc:
        configs = {}
        note_missing("unclean.leader.election.enable of the offline partitions' topics", exc)
    unclean = [t for t in topics if config_value(configs.get(t, {}), "unclean.leader.election.enable") == "true"]
    if unclean:
        evidence.append(Evidence("Unclean election enabled on", ", ".join(unclean), "live: topic configs", "bad"))
    lead = [
        (
            OFFLINE_PARTITIONS,
            f"live: {len(offline):,} partitions without a leader; replicas down on broker(s) {broker_list(down)}",
        )
    ]
    if unclean:
        lead.append((UNCLEAN_ELECTION, "live: unclean.leader.election.enable=true on " + ", ".join(unclean)))
    verdict = (
        f"{len(offline):,} partition(s) have no leader: every replica that could lead is on broker(s) "
        f"{broker_list(down)}, which {'is' if len(down) == 1 else 'are'} down. Bring {'it' if len(down) == 1 else 'them'} back; do not force an unclean election."
    )
    stopped = why_stopped(down)
    if stopped is not None:
        verdict += " " + stopped.sentence
        evidence += stopped.evidence
        lead += [(BROKER_LOSS, f"live: broker(s) {broker_list(down)} are not registered"), *stopped.lead]
    return LiveFindings(
        verdict,
        "critical",
        evidence,
        lead,
        [Action("Cluster status", "status")],
        facts=facts_of(snap),
        undecided=stopped.undecided if stopped is not None else None,
    )


async def check_under_min_isr(gw: AdminGateway) -> LiveFindings:
    snap = await snapshot(gw, min_isr="all")
    if snap.floors_unread:  # counting against an assumed floor of 1 would call this healthy
        return LiveFindings(
            "Whether any partition is under min ISR is unknown: the topics' min.insync.replicas could not be read.",
            "unknown",
            [brokers_evidence(snap)],
        )
    cats = snap.by_category()
    under = cats["UnderMinIsr"]
    evidence = [
        brokers_evidence(snap),
        *stale_view_evidence(snap),
        Evidence(
            "Under min ISR",
            f"{len(under):,}" + (f": {name_partitions(under)}" if under else ""),
            "live: metadata + topic configs",
            "bad" if under else "ok",
        ),
        Evidence(
            "At min ISR",
            f"{len(cats['AtMinIsr']):,}",
            "live: metadata + topic configs",
            "bad" if cats["AtMinIsr"] else "ok",
        ),
    ]
    clamped = sorted({p.topic for p in snap.states if p.min_isr > len(p.replicas)})
    if clamped:
        evidence.append(
            Evidence(
                "min.insync.replicas > replication factor (silently clamped)",
                ", ".join(clamped),
                "live: topic configs",
                "bad",
            )
        )
    lead: list[tuple[str, str]] = []
    if under:
        topics = topics_named(under)
        lead.append(
            (
                UNDER_MIN_ISR,
                f"live: {len(under):,} partitions of topic(s) {topics} have fewer in-sync replicas than "
                "min.insync.replicas",
            )
        )
        evidence.insert(1, Evidence("Topics under min ISR", topics, "live: metadata + topic configs", "bad"))
        down = sorted(snap.brokers.expected - snap.brokers.registered)
        if down:
            lead.append((BROKER_LOSS, f"live: broker(s) {broker_list(down)} are not registered"))
        gone = f" Broker(s) {broker_list(down)} {'is' if len(down) == 1 else 'are'} down." if down else ""
        # A floor equal to the replica count leaves none to spare: one replica out stops acks=all
        # (the audit's finding; here it is the reason this partition is under min ISR at all).
        no_spare = {p.topic: len(p.replicas) for p in under if len(p.replicas) > 1 and p.min_isr == len(p.replicas)}
        actions = [Action("Why URP", "why URP")]
        if no_spare:
            evidence.append(
                Evidence(
                    "min.insync.replicas = replication factor (no replica to spare)",
                    ", ".join(f"{t} ({rf} = {rf})" for t, rf in sorted(no_spare.items())),
                    "live: topic configs",
                    "bad",
                )
            )
            (topic, rf), *more = sorted(no_spare.items())
            names = topic + (f" and {len(more)} more topic(s)" if more else "")
            verdict = (
                f"{len(under):,} partition(s) of topic(s) {topics} are under min ISR: producers with acks=all get "
                f"NotEnoughReplicas there.{gone} "
                f"On {names} min.insync.replicas equals the replication factor ({rf}), so one replica out of the ISR "
                f"stops every acks=all write. Restore the missing replica now; then give the topic a replica to spare: "
                f"{min_isr_fix(rf, rf)}"
            )
            actions.append(Action("Durability audit", "audit"))
        else:
            verdict = (
                f"{len(under):,} partition(s) of topic(s) {topics} are under min ISR: producers with acks=all get "
                f"NotEnoughReplicas there.{gone} Restore the missing replicas; do not lower min.insync.replicas."
            )
        return LiveFindings(verdict, "critical", evidence, lead, actions)
    verdict = "No partition is under min ISR right now."
    if clamped:
        verdict += f" But {len(clamped)} topic(s) have min.insync.replicas above their replication factor: the floor you set is not the floor you get."
    return LiveFindings(verdict, "warning" if clamped else "ok", evidence, lead)


def topics_named(parts: list[PartitionState], limit: int = 6) -> str:
    """The topics of ``parts``, the operator's own before internal ones (__consumer_offsets ...),
    each with its partition count: 'urp3 (3), orders (1), __consumer_offsets (50)'."""
    counts: dict[str, int] = {}
    for p in parts:
        counts[p.topic] = counts.get(p.topic, 0) + 1
    names = sorted(counts, key=lambda t: (t.startswith("__"), t))
    shown = ", ".join(f"{t} ({counts[t]})" for t in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
