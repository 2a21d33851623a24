"""What the live cluster says about a symptom, for `why` and the category commands.

Each check reads the cluster, applies the pure rules of runbook_kb.diagnose and returns
evidence, a verdict, and the runbook entries the data points at (in the runbook's triage order).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TypeVar, cast

from live.gateway import AdminGateway, GatewayError, NotAuthorized
from live.model import LogDir, PartitionView, QuorumInfo, Reassignment, TransactionDescription
from live.probe import ProbeResult
from runbook_kb.diagnose import BrokerFacts, cut_off_silently, urp_findings

from . import isr_churn
from .evidence import Snapshot, broker_list, config_value, name_partitions, snapshot
from .findings import LiveFacts, LiveFindings
from .partial import note_missing
from .reply import Action, Evidence, Severity
from .txn_evidence import OpenTxn, TxnReport, describe_txn, read_open_transactions


def brokers_evidence(snap: Snapshot) -> Evidence:
    missing = sorted(snap.brokers.expected - snap.brokers.registered)
    registered = len(snap.brokers.registered)
    expected = len(snap.brokers.expected)
    value = f"{registered} of {expected}" + (f" (missing: {broker_list(missing)})" if missing else "")
    return Evidence("Brokers registered", value, "live: describe_cluster", "bad" if missing else "ok")


LOG_DIRS_BUDGET_S = 1.5  # a healthy broker answers DescribeLogDirs (and the reassignment listing) in milliseconds


T = TypeVar("T")


async def _none() -> None:
    return None


async def _value(v: T) -> T:
    return v


async def _enrich_suspects(
    gw: AdminGateway, snap: Snapshot, notes: list[str], evidence: list[Evidence], stalled: set[int]
) -> Snapshot:
    """Only when replicas are out of sync: probe the brokers they live on (a missing broker may be
    dead or paused; a registered one out of ISR may be hung), then ask for log-dir failures and
    reassignments, which can only explain a missing replica on a live broker. Skipped entirely in
    the common healthy case; a silent broker is not asked for its log dirs (it would not answer)."""
    out_of_isr = {b for p in snap.states for b in p.replicas if b not in p.isr}
    missing = snap.brokers.expected - snap.brokers.registered
    suspects = out_of_isr | missing
    if not suspects:
        return snap
    try:
        liveness = await gw.broker_liveness(sorted(suspects))
    except GatewayError as exc:
        liveness = {}
        notes.append(f"Could not probe the brokers' listeners ({exc}); a paused broker cannot be told from a dead one.")
    for b, res in sorted(liveness.items()):
        evidence.append(
            Evidence(
                f"Broker {b} listener",
                res.describe(),
                "live: TCP + ApiVersions probe",
                "ok" if res.state == "answers" and b in snap.brokers.registered else "bad",
            )
        )
    unprobed = sorted(missing - set(liveness))
    if unprobed:
        notes.append(
            f"Broker {broker_list(unprobed)}: address unknown to this process, so whether it is dead or "
            "paused was not checked."
            "[[terminal: `kill -0 <pid>` or its GC log on the host tell the two apart.]]"
            "[[slack: On its host, the process state (kill -0) or its GC log tells the two apart.]]"
        )
    registered_suspects = sorted(
        b for b in out_of_isr & snap.brokers.registered if liveness.get(b) is None or liveness[b].state != "silent"
    )
    failed: dict[int, tuple[str, ...]] = {}
    adding: dict[tuple[str, int], tuple[int, ...]] = {}
    if registered_suspects:
        # One DescribeLogDirs per broker, each on a short budget: the broker reads every log dir
        # to answer, so one whose disk is stalled does not answer at all - which is itself the
        # finding, and must not hold the whole diagnosis for the admin timeout.
        per_broker = [asyncio.wait_for(gw.log_dirs([b]), LOG_DIRS_BUDGET_S) for b in registered_suspects]
        # A broker with every replica in sync, asked the same on the same budget: if it is slow too,
        # the machine or the cluster is (a busy host), and a suspect's silence says nothing of its disk.
        control = next((b for b in sorted(snap.brokers.registered) if b not in suspects), None)
        control_ask = asyncio.wait_for(gw.log_dirs([control]), LOG_DIRS_BUDGET_S) if control is not None else _none()
        # The reassignment listing may be routed to that same stalled broker: same short budget.
        listing = asyncio.wait_for(gw.reassignments(), LOG_DIRS_BUDGET_S)
        *answers, control_answer, last = await asyncio.gather(*per_broker, control_ask, listing, return_exceptions=True)
        # gather's typing cannot tell its star arguments apart: the last answer is the listing
        dirs_by_broker = cast(list[list[LogDir] | BaseException], answers)
        moves = cast(list[Reassignment] | BaseException, last)
        everyone_slow = isinstance(control_answer, asyncio.TimeoutError)
        if everyone_slow:
            notes.append(
                f"DescribeLogDirs took over {LOG_DIRS_BUDGET_S:g} s on broker {control} too, whose replicas are all in "
                "sync: the cluster or its host is busy, so the suspects' log dirs were asked again with the full timeout."
            )
            dirs_by_broker = list(
                await asyncio.gather(
                    *(
                        gw.log_dirs([b]) if isinstance(d, asyncio.TimeoutError) else _value(d)
                        for b, d in zip(registered_suspects, dirs_by_broker)
                    ),
                    return_exceptions=True,
                )
            )
            if isinstance(moves, asyncio.TimeoutError):
                (moves,) = await asyncio.gather(gw.reassignments(), return_exceptions=True)
        for b, dirs in zip(registered_suspects, dirs_by_broker):
            if isinstance(dirs, asyncio.TimeoutError):
                evidence.append(
                    Evidence(
                        f"Broker {b} log dirs",
                        f"no answer to DescribeLogDirs within {LOG_DIRS_BUDGET_S:g} s "
                        "although its listener answers: a stalled or very slow disk",
                        "live: describe_log_dirs",
                        "bad",
                    )
                )
                stalled.add(b)
            elif isinstance(dirs, BaseException):
                notes.append(f"Could not read broker {b}'s log dirs ({dirs}); a failed disk cannot be ruled out.")
            else:
                for d in dirs:
                    if d.error:
                        failed[d.broker] = (*failed.get(d.broker, ()), d.path)
        if isinstance(moves, asyncio.TimeoutError):
            notes.append(f"Reassignments not listed: no answer within {LOG_DIRS_BUDGET_S:g} s.")
        elif isinstance(moves, BaseException):
            notes.append(f"Could not list reassignments ({moves}).")
        else:
            adding = {(r.topic, r.partition): tuple(r.adding) for r in moves}
    states = [replace(p, adding=adding.get((p.topic, p.partition), ())) for p in snap.states]
    facts = BrokerFacts(
        snap.brokers.registered, snap.brokers.expected, failed, {b: r.state for b, r in liveness.items()}
    )
    return replace(snap, states=states, brokers=facts)


THROTTLE_KEYS = ("follower.replication.throttled.rate", "leader.replication.throttled.rate")


async def _throttle_evidence(gw: AdminGateway, brokers: list[int], notes: list[str]) -> list[Evidence]:
    """A follower that is up but out of ISR is often throttled on purpose (a reassignment's
    replication quota): show the brokers' throttle rates, since lifting one is the fix."""
    try:
        configs = await gw.broker_configs()
    except NotAuthorized as exc:
        note_missing("the brokers' replication throttles", exc)
        return []
    except GatewayError as exc:
        notes.append(f"Replication throttles not read ({exc}).")
        return []
    out = []
    for b, cfg in sorted(configs.items()):
        set_ = {
            k: v
            for k, v in ((k, cfg[k].value) for k in THROTTLE_KEYS if k in cfg)
            if v is not None and v not in ("", "9223372036854775807")
        }
        if set_:
            out.append(
                Evidence(
                    f"Broker {b} replication throttle",
                    ", ".join(f"{k}={int(v):,} B/s" if v.isdigit() else f"{k}={v}" for k, v in set_.items()),
                    "live: broker configs",
                    "bad",
                )
            )
    return out


_CAUSE_TEXT = {
    "broker-loss": "not registered: its replicas are gone from {n:,} ISR(s)",
    "gc-pauses": "paused, not dead: holds its port but answers nothing; {n:,} replica(s) out of ISR",
    "network-partition": "fenced while its process answers (cut off from the controller); {n:,} replica(s) out of ISR",
    "unreachable": "not registered and gives no TCP answer (cut off, or its host is down); {n:,} replica(s) out of ISR",
    "log-dir-failure": "registered, but its log dir {dirs} failed; {n:,} replica(s) out of ISR",
    "slow-follower": "registered and alive, yet {n:,} of its replicas are out of ISR (not keeping up)",
    "reassignment": "being added by a reassignment in progress: {n:,} replica(s) still catching up",
}


def stale_view_evidence(snap: Snapshot) -> list[Evidence]:
    """A line per broker whose own metadata disagreed with most brokers' (``reconcile``)."""
    out = []
    for broker, parts in sorted(snap.stale_views.items()):
        (_, theirs, chosen) = parts[0]
        out.append(
            Evidence(
                f"Broker {broker}'s metadata",
                f"differs from most brokers' on {len(parts):,} partition(s) ({name_partitions([k for k, _, _ in parts], 4)}): "
                f"{_view_difference(theirs, chosen)}, whose view is used here. A broker that keeps an old view is "
                "not applying the controller's updates, often because a thread is stuck on a stalled disk; if it "
                "still differs when you ask again, suspect that broker.",
                "live: metadata from each broker",
                "bad",
            )
        )
    return out


def _view_difference(theirs: PartitionView, chosen: PartitionView) -> str:
    """'ISR 101, 102, 103 there, 101, 102 on the others', with the leaders when they differ."""
    if theirs[0] == chosen[0]:
        return f"ISR {broker_list(theirs[1])} there, {broker_list(chosen[1])} on the others"

    def view(v: PartitionView) -> str:
        return f"{'no leader' if v[0] is None else f'leader {v[0]}'}, ISR {broker_list(v[1])}"

    return f"{view(theirs)} there; {view(chosen)} on the others"


async def check_urp(gw: AdminGateway) -> LiveFindings:
    # The brokers' ISR meters, read beside the snapshot: a broker that flaps is back in the ISRs in
    # most snapshots, and only the meters remember it left (commands/isr_churn.py).
    churn_read = isr_churn.ChurnRead(gw)
    try:
        return await _check_urp(gw, churn_read)
    finally:
        await churn_read.close()


async def _check_urp(gw: AdminGateway, churn_read: isr_churn.ChurnRead) -> LiveFindings:
    # (cross-checked, as every snapshot: a stalled disk's broker kept calling its dropped
    # replicas in sync, and "no URP" from its view would be wrong)
    snap = await snapshot(gw, min_isr="unhealthy")
    notes: list[str] = []
    probes: list[Evidence] = []
    stalled: set[int] = set()
    snap = await _enrich_suspects(gw, snap, notes, probes, stalled)
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
        *stale_view_evidence(snap),
    ]
    if cats["UnderMinIsr"]:
        evidence.append(
            Evidence(
                "Under min ISR (acks=all producers fail)",
                f"{len(cats['UnderMinIsr']):,}: {name_partitions(cats['UnderMinIsr'])}",
                "live: metadata + topic configs",
                "bad",
            )
        )
    if cats["AtMinIsr"]:
        evidence.append(
            Evidence(
                "At min ISR (one more loss blocks writes)",
                f"{len(cats['AtMinIsr']):,}",
                "live: metadata + topic configs",
                "bad",
            )
        )
    if cats["Offline"]:
        evidence.append(
            Evidence(
                "Offline partitions",
                f"{len(cats['Offline']):,}: {name_partitions(cats['Offline'])}",
                "live: metadata",
                "bad",
            )
        )
    findings = urp_findings(snap.states, snap.brokers)
    evidence += probes
    for f in findings:
        evidence.append(
            Evidence(
                f"Broker {f.broker}",
                _CAUSE_TEXT["unreachable" if cut_off_silently(f.cause, f.broker, snap.brokers) else f.cause].format(
                    n=len(f.partitions), dirs=", ".join(snap.brokers.failed_log_dirs.get(f.broker, ()))
                )
                + f" ({name_partitions(f.partitions, 4)})",
                "live: metadata" + (" + log dirs" if f.cause == "log-dir-failure" else ""),
                "bad",
            )
        )
    if any(f.cause == "slow-follower" for f in findings):
        evidence += await _throttle_evidence(
            gw, sorted({f.broker for f in findings if f.cause == "slow-follower"}), notes
        )
    lead: list[tuple[str, str]] = []
    for f in findings:
        if f.cause != "reassignment" and all(e != f.cause for e, _ in lead):
            lead.append((f.cause, f"live: {f.detail}"))
    facts = facts_of(snap)
    top_cause = findings[0].cause if findings else None
    # no URP now, or a live follower out of sync: the meters say whether it keeps happening
    churn = await churn_read.result(snap) if not urp or top_cause == "slow-follower" else None
    if churn is not None:
        evidence += churn.evidence()
    if not urp:
        if churn is not None:
            return LiveFindings(
                churn.verdict(urp_now=False),
                "warning",
                evidence,
                [churn.lead],
                [Action("Cluster status", "status")],
                notes=notes,
                facts=facts,
            )
        return LiveFindings("No under-replicated partitions right now.", "ok", evidence, lead, notes=notes, facts=facts)
    top = findings[0] if findings else None
    if top and top.cause == "gc-pauses":
        verdict = (
            f"Broker {top.broker} is paused, not dead: its listener accepts connections but answers nothing "
            f"(a long GC pause, SIGSTOP or a hung JVM), so {len(urp):,} partitions lost it from their ISR. "
            "Do not reassign its replicas: find why it stalled (GC log, a stopped process, swapping); "
            "it rejoins the ISR by itself once it runs again."
        )
    elif top and cut_off_silently(top.cause, top.broker, snap.brokers):
        verdict = (
            f"Broker {top.broker} cannot be reached: its port gives no TCP answer at all, where a stopped process "
            f"would refuse at once, so the network, a firewall or its host being down cuts it off; {len(urp):,} "
            "partitions are under-replicated. Do not move its replicas on this: whether its host answers "
            "(ping, ssh, its other ports) decides between a network partition and a lost host."
        )
    elif top and top.cause == "network-partition":
        verdict = (
            f"Broker {top.broker} answers requests but is not registered with the controller (fenced): it is "
            f"cut off from the controller quorum or still recovering; {len(urp):,} partitions are under-replicated."
        )
    elif top and top.cause == "broker-loss":
        gone = sorted({f.broker for f in findings if f.cause == "broker-loss"})
        confirmed = all(snap.brokers.liveness.get(b) == "refused" for b in gone)
        verdict = (
            f"Broker {broker_list(gone)} is gone"
            + (" (its port refuses connections: the process is not running)" if confirmed else "")
            + f": {len(urp):,} partitions are under-replicated because its replicas left their ISRs."
        )
    elif top and top.cause == "log-dir-failure":
        dirs = ", ".join(snap.brokers.failed_log_dirs.get(top.broker, ())) or "a log directory"
        verdict = (
            f"Broker {top.broker} is up but lost its log directory {dirs}: its {len(top.partitions):,} replica(s) "
            "there are out of ISR. A full disk fails a directory exactly like a broken one (both are I/O "
            "errors to Kafka): check free space on that filesystem first, then the disk's health. Only a broker "
            "restart brings the directory back."
        )
    elif top and top.cause == "slow-follower":
        verdict = (
            f"Every broker is up, but broker {top.broker} is not keeping up: "
            f"{len(top.partitions):,} of its replicas are out of ISR."
        )
        if top.broker in stalled:
            verdict += (
                f" Broker {top.broker} does not answer DescribeLogDirs although it answers other requests: its "
                "disk is stalled or very slow, so its fetcher cannot append what it fetches. Check the disk "
                "(iostat, dmesg) before touching Kafka settings."
            )
        if any(e.label.endswith("replication throttle") for e in evidence):
            verdict += (
                " A replication throttle is set (see the evidence): a follower held under it falls out of the ISR "
                "under load. Raise or clear it (`throttle clear`) unless a reassignment still needs it."
            )
    else:
        verdict = f"{len(urp):,} partitions are under-replicated by a reassignment in progress; that is expected while it copies."
    severity: Severity = "critical" if cats["UnderMinIsr"] or cats["Offline"] else "warning"
    example_topic = urp[0].topic
    actions = [Action(f"Describe {example_topic}", f"describe {example_topic}"), Action("Cluster status", "status")]
    return LiveFindings(verdict, severity, evidence, lead, actions, notes, facts)


def facts_of(snap: Snapshot) -> LiveFacts:
    cats = snap.by_category()
    return LiveFacts(
        under_replicated=sum(1 for p in snap.states if len(p.isr) < len(p.replicas) and p.has_leader),
        offline=len(cats["Offline"]),
        missing_brokers=frozenset(snap.brokers.expected - snap.brokers.registered),
    )


async def check_offline(gw: AdminGateway) -> LiveFindings:
    snap = await snapshot(gw, min_isr="none")
    offline = [p for p in snap.states if not p.has_leader]
    evidence = [brokers_evidence(snap), *stale_view_evidence(snap)]
    if not offline:
        evidence.append(Evidence("Offline partitions", "0", "live: metadata", "ok"))
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
            "offline-partitions",
            f"live: {len(offline):,} partitions without a leader; replicas down on broker(s) {broker_list(down)}",
        )
    ]
    if unclean:
        lead.append(("unclean-election", "live: unclean.leader.election.enable=true on " + ", ".join(unclean)))
    verdict = (
        f"{len(offline):,} partition(s) have no leader: every replica that could lead is on broker(s) "
        f"{broker_list(down)}, which {'is' if len(down) == 1 else 'are'} down. Bring {'it' if len(down) == 1 else 'them'} back; do not force an unclean election."
    )
    return LiveFindings(verdict, "critical", evidence, lead, [Action("Cluster status", "status")], facts=facts_of(snap))


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
        lead.append(
            ("under-min-isr", f"live: {len(under):,} partitions have fewer in-sync replicas than min.insync.replicas")
        )
        down = sorted(snap.brokers.expected - snap.brokers.registered)
        if down:
            lead.append(("broker-loss", f"live: broker(s) {broker_list(down)} are not registered"))
        verdict = (
            f"{len(under):,} partition(s) are under min ISR: producers with acks=all get NotEnoughReplicas there. "
            "Restore the missing replicas; do not lower min.insync.replicas."
        )
        return LiveFindings(verdict, "critical", evidence, lead, [Action("Why URP", "why URP")])
    verdict = "No partition is under min ISR right now."
    if clamped:
        verdict += f" But {len(clamped)} topic(s) have min.insync.replicas above their replication factor: the floor you set is not the floor you get."
    return LiveFindings(verdict, "warning" if clamped else "ok", evidence, lead)


def transaction_findings(report: TxnReport, min_age_ms: int | None = None) -> LiveFindings:
    """Open transactions -> verdict. Severity: a transaction nothing will abort (past its timeout,
    or unknown to every coordinator) is critical; one its coordinator will abort on its own still
    blocks read_committed consumers until then (warning); none is ok, unless part of the cluster
    could not be read, in which case the answer says it is partial instead of claiming health."""
    now = report.now_ms
    shown = [t for t in report.open if min_age_ms is None or (t.age_ms(now) or 0) >= min_age_ms]
    evidence = [
        Evidence(
            f"{t.where}", describe_txn(t, now), "live: list_offsets + describe_producers + describe_transactions", "bad"
        )
        for t in shown
    ]
    for d in report.coordinator_only:
        evidence.append(
            Evidence(
                f"Transaction {d.transactional_id}",
                f"producer {d.producer_id}: its coordinator still lists it as {d.state}, but it holds no partition's LSO "
                "(aborted or completed on the partitions); the coordinator expires it"
                + (
                    f" at {time.strftime('%H:%M:%S UTC', time.gmtime((d.start_time_ms + d.timeout_ms) / 1000))}"
                    if d.start_time_ms >= 0
                    else ""
                ),
                "live: describe_transactions",
                "neutral",
            )
        )
    for what, why in sorted(report.unread.items()):
        evidence.append(Evidence(f"Not read: {what}", why, "live", "bad"))
    hanging = [t for t in shown if t.status(now) != "within-timeout"]

    def lag(t: OpenTxn) -> str:
        return f"{t.offsets.lso_lag:,}" if t.offsets is not None else "?"

    lead = [("hanging-transaction", "live: " + describe_txn(t, now)) for t in shown[:1]]
    actions = [
        Action(f"Abort on {t.where}", f"abort-txn {t.topic} {t.partition} --producer-id {t.producer_id}", mutating=True)
        for t in (hanging or shown)[:3]
    ]
    partial = (
        " This answer is partial: " + "; ".join(f"{k} not read" for k in sorted(report.unread)) + "."
        if report.partial
        else ""
    )
    if hanging:
        worst = hanging[0]
        verdict = (
            f"{len(hanging)} hanging transaction(s): producer {worst.producer_id} holds {worst.where}'s last stable "
            f"offset {lag(worst)} records behind and nothing will abort it; "
            "read_committed consumers are stuck there until it is aborted."
        )
        severity: Severity = "critical"
    elif shown:
        first = shown[0]
        at = first.abort_at_ms
        verdict = (
            f"{len(shown)} open transaction(s) hold read_committed consumers back: producer {first.producer_id} on "
            f"{first.where}, {lag(first)} records behind the high watermark. "
            + (
                f"Still within its timeout: its coordinator aborts it at "
                f"{time.strftime('%H:%M:%S UTC', time.gmtime(at / 1000))} if its producer does not finish it."
                if at is not None
                else ""
            )
        )
        severity = "warning"
    else:
        verdict = "No open transaction holds any partition's last stable offset back; read_committed consumers are not blocked by one."
        severity = "ok"
    if report.partial and severity == "ok":
        severity = "warning"
    return LiveFindings(verdict + partial, severity, evidence, lead, actions)


async def check_hanging(gw: AdminGateway) -> LiveFindings:
    return transaction_findings(await read_open_transactions(gw))


@dataclass
class QuorumView:
    """What the controller quorum looks like from outside: probes of every configured voter, and
    the quorum's own description when it answered."""

    severity: Severity
    verdict: str  # "" when healthy
    evidence: list[Evidence]
    lost: bool  # no active controller can exist (a majority of voters is down, or no leader)


def quorum_view(
    voters: dict[int, ProbeResult] | BaseException, quorum: QuorumInfo | BaseException | None
) -> QuorumView:
    """Pure: voter probes (id -> ProbeResult, or the error reading the voters) and the
    DescribeQuorum answer (None when it was not waited for) -> the quorum's health.

    A KRaft quorum needs a majority of its voters to elect a leader (Raft), so a majority that
    refuses connections or does not answer means no active controller, whatever the brokers'
    cached metadata still says."""
    evidence: list[Evidence] = []
    down: list[int] = []
    if isinstance(voters, dict) and voters:
        for vid, res in sorted(voters.items()):
            who = f"Controller {vid}" if vid >= 0 else f"Controller at {res.address}"
            bad = res.state != "answers"
            if bad:
                down.append(vid)
            evidence.append(Evidence(who, res.describe(), "live: TCP + ApiVersions probe", "bad" if bad else "ok"))
    majority_down = isinstance(voters, dict) and bool(voters) and (len(voters) - len(down)) * 2 <= len(voters)
    if majority_down and isinstance(voters, dict):
        names = ", ".join(str(v) if v >= 0 else voters[v].address for v in down)
        return QuorumView(
            "critical",
            f"No active controller: {len(down)} of {len(voters)} controller voter(s) ({names}) are down or not answering, "
            "so the KRaft quorum has no majority and cannot elect a leader. Brokers keep serving from "
            "cached metadata, but no leader election, ISR change or topic change can happen.",
            evidence,
            True,
        )
    if isinstance(quorum, QuorumInfo):
        lagging = [v for v in quorum.voters if v.lag > 0]
        ok = quorum.leader_id >= 0
        evidence.insert(
            0,
            Evidence(
                "Controller quorum",
                (
                    f"leader {quorum.leader_id} (epoch {quorum.leader_epoch}), voters {broker_list(v.id for v in quorum.voters)}"
                    if ok
                    else f"no leader (epoch {quorum.leader_epoch}), voters {broker_list(v.id for v in quorum.voters)}"
                )
                + (f"; lagging: {', '.join(f'{v.id} by {v.lag:,}' for v in lagging)}" if lagging else ""),
                "live: describe_metadata_quorum",
                "ok" if ok else "bad",
            ),
        )
        if not ok:
            return QuorumView("critical", "No active controller: the KRaft quorum reports no leader.", evidence, True)
    elif isinstance(quorum, BaseException):
        evidence.insert(
            0, Evidence("Controller quorum", f"not readable: {quorum}", "live: describe_metadata_quorum", "bad")
        )
    for part, refused in (("the controller quorum", quorum), ("the controller voters' addresses", voters)):
        if isinstance(refused, NotAuthorized):
            note_missing(part, refused)
    if isinstance(voters, BaseException):
        evidence.append(Evidence("Controller voters", f"not probed: {voters}", "live: broker config", "neutral"))
    if down and isinstance(voters, dict):
        names = ", ".join(str(v) if v >= 0 else voters[v].address for v in down)
        return QuorumView(
            "warning",
            f"Controller {names} is down; the quorum keeps its majority "
            f"({len(voters) - len(down)} of {len(voters)}) but tolerates no further loss.",
            evidence,
            False,
        )
    if isinstance(quorum, BaseException):
        return QuorumView(
            "warning", "The controller quorum did not describe itself; its health is unknown.", evidence, False
        )
    return QuorumView("ok", "", evidence, False)


async def read_quorum(gw: AdminGateway) -> QuorumView:
    """Probe the voters first (milliseconds); ask DescribeQuorum only when a majority answers,
    because with no controller that request waits for the whole admin timeout."""
    try:
        voters: dict[int, ProbeResult] | BaseException = await gw.controller_liveness()
    except GatewayError as exc:
        voters = exc
    first = quorum_view(voters, None)
    if first.lost:
        return first
    try:
        quorum: QuorumInfo | BaseException = await gw.metadata_quorum()
    except GatewayError as exc:
        quorum = exc
    return quorum_view(voters, quorum)


async def check_controller(gw: AdminGateway) -> LiveFindings:
    view = await read_quorum(gw)
    lead = [("controller-quorum-loss", "live: " + view.verdict)] if view.lost else []
    verdict = view.verdict or "The controller quorum has an active leader and every voter answers."
    return LiveFindings(verdict, view.severity, view.evidence, lead, [Action("Cluster status", "status")])


# A broker fetches metadata from the controller quorum about twice a second; one that has not
# caught up for this long is working from stale routing (the runbook's metadata-lag signature).
METADATA_STALE_MS = 5_000


def metadata_lag_findings(quorum: QuorumInfo, registered: set[int], now_ms: int) -> LiveFindings:
    """Pure: the quorum's observers (brokers) -> which registered broker is behind on metadata."""
    evidence: list[Evidence] = []
    behind: list[tuple[int, int, int]] = []
    for o in quorum.observers:
        since = (
            now_ms - o.last_caught_up_timestamp
            if o.last_caught_up_timestamp and o.last_caught_up_timestamp > 0
            else None
        )
        stale = since is not None and since > METADATA_STALE_MS and o.lag > 0
        evidence.append(
            Evidence(
                f"Broker {o.id} metadata",
                f"{o.lag:,} records behind the controller"
                + (f", last caught up {since / 1000:,.1f} s ago" if since is not None else ""),
                "live: describe_metadata_quorum (observers)",
                "bad" if stale else "ok",
            )
        )
        if stale and since is not None and o.id in registered:
            behind.append((o.id, o.lag, since))
    if not behind:
        return LiveFindings("Every registered broker is caught up with the controller's metadata.", "ok", evidence)
    b, lag, since = max(behind, key=lambda x: x[2])
    verdict = (
        f"Broker {broker_list(x[0] for x in behind)} is behind on metadata: broker {b} last caught up "
        f"{since / 1000:,.0f} s ago and is {lag:,} records behind, so it routes from stale leaders and ISRs "
        "(clients see NOT_LEADER_OR_FOLLOWER). Check that broker's load and its link to the controllers."
    )
    return LiveFindings(
        verdict,
        "warning",
        evidence,
        [("metadata-lag", f"live: broker {b} {lag:,} metadata records behind for {since / 1000:,.0f} s")],
    )


async def check_metadata_lag(gw: AdminGateway) -> LiveFindings:
    cluster, quorum = await asyncio.gather(gw.describe_cluster(), gw.metadata_quorum())
    return metadata_lag_findings(quorum, set(cluster.broker_ids), int(time.time() * 1000))


# How many transactional ids the fencing check describes (newest transactions first).
MAX_FENCING_IDS = 200


def fencing_findings(descs: list[TransactionDescription], now_ms: int) -> LiveFindings:
    """Pure: transactional ids as their coordinators describe them -> the ones whose producer was
    re-initialised. Every InitProducerId for a transactional.id bumps its epoch and fences the
    instance before it: an epoch above 0 means a second instance (or a restart) took the id over,
    and the one with the older epoch now fails with PRODUCER_FENCED."""
    bumped = sorted(
        (d for d in descs if d.producer_epoch >= 1),
        key=lambda d: (-(d.start_time_ms if d.start_time_ms >= 0 else 0), -d.producer_epoch),
    )
    evidence = []
    for d in bumped[:10]:
        age = (
            f", its current transaction began {(now_ms - d.start_time_ms) / 1000:,.0f} s ago"
            if d.start_time_ms >= 0
            else ""
        )
        evidence.append(
            Evidence(
                f"Transactional id {d.transactional_id}",
                f"producer id {d.producer_id}, epoch {d.producer_epoch} (initialised {d.producer_epoch + 1} "
                f"times), state {d.state}, coordinator {d.coordinator_id}{age}",
                "live: list/describe_transactions",
                "bad",
            )
        )
    if not bumped:
        return LiveFindings(
            f"No transactional id was re-initialised ({len(descs)} described): nothing shows one "
            "instance fencing another.",
            "ok",
            evidence,
        )
    top = bumped[0]
    verdict = (
        f"Transactional id {top.transactional_id} was taken over: producer id {top.producer_id} is at epoch "
        f"{top.producer_epoch}, so an instance initialised it after another one. With two live instances on "
        "one transactional.id every InitProducerId fences the other and the older one's sends and commits fail "
        "with PRODUCER_FENCED. Give each instance its own transactional.id; a fenced producer must be closed, "
        "not retried."
    )
    return LiveFindings(
        verdict,
        "warning",
        evidence,
        [
            (
                "producer-fencing",
                f"live: {top.transactional_id} re-initialised (producer {top.producer_id}, epoch {top.producer_epoch})",
            )
        ],
    )


async def check_fencing(gw: AdminGateway) -> LiveFindings:
    listings, unread = await gw.list_transactions_partial()
    ids = list(dict.fromkeys(t.transactional_id for t in listings))[:MAX_FENCING_IDS]
    descs = list((await gw.describe_transactions(ids)).values()) if ids else []
    found = fencing_findings(descs, int(time.time() * 1000))
    if unread:
        found.notes.append(
            f"Coordinators on broker(s) {broker_list(unread)} were not read: their transactional ids are missing."
        )
    return found


Check = Callable[[AdminGateway], Awaitable[LiveFindings]]


# Which live check answers a symptom, by the runbook entry the symptom resolves to first.
async def run_check(check: Check, gw: AdminGateway) -> LiveFindings:
    """A check whose cluster read fails still leaves the runbook answer standing."""
    try:
        return await check(gw)
    except NotAuthorized as exc:
        return LiveFindings(
            "The cluster refused the read this check needs, so whether it is happening now is "
            "unknown; ranked from the runbook alone.",
            "unknown",
            [Evidence("Live check", note_missing("the live check", exc), "live", "bad")],
        )
    except GatewayError as exc:
        return unreachable(exc)


def unreachable(exc: GatewayError) -> LiveFindings:
    """The cluster did not answer: the runbook's ranking stands, and whether the symptom is
    present is unknown."""
    return LiveFindings(
        "The cluster did not answer, so this is ranked from the runbook alone.",
        "unknown",
        [Evidence("Cluster", str(exc), "live", "bad")],
    )
