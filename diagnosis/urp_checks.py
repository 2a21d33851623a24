"""Under-replicated partitions, read live: who is out of the ISR, whether that broker is dead, paused,
cut off, throttled or moving data, and the runbook entries that fit (`why URP`)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import cast

from diagnosis import churn_memory, isr_churn, observations
from diagnosis.entry_ids import (
    BROKER_LOSS,
    GC_PAUSES,
    LOG_DIR_FAILURE,
    NETWORK_PARTITION,
    SLOW_FOLLOWER,
)
from diagnosis.findings import ExpectedCause, LiveFindings, Undecided
from diagnosis.live_common import (
    LOG_DIRS_BUDGET_S,
    brokers_evidence,
    facts_of,
    nothing,
    ready,
    stale_view_evidence,
    why_stopped,
)
from diagnosis.reassignment_checks import reassignment_answer, throttle_evidence
from diagnosis.reassignment_findings import beside_fault
from diagnosis.rules import (
    BrokerFacts,
    PartitionState,
    cut_off_registered,
    cut_off_silently,
    replicas_lost,
    urp_findings,
)
from diagnosis.snapshot import Snapshot, broker_list, name_partitions, snapshot
from framework.reply import Action, Evidence, Severity, Step
from live.gateway import AdminGateway, GatewayError
from live.model import LogDir, Reassignment


async def _enrich_suspects(
    gw: AdminGateway, snap: Snapshot, notes: list[str], evidence: list[Evidence], stalled: set[int]
) -> tuple[Snapshot, list[Reassignment] | None]:
    """Only when replicas are out of sync: probe the brokers they live on (a missing broker may be
    dead or paused; a registered one out of ISR may be hung), then ask for log-dir failures and
    reassignments, which can only explain a missing replica on a live broker. Skipped entirely in
    the common healthy case; a silent broker is not asked for its log dirs (it would not answer).
    Returns the snapshot and the reassignments listed here (None when they were not), so the answer
    does not ask again: the listing may land on the stalled broker the next time."""
    out_of_isr = {b for p in snap.states for b in p.replicas if b not in p.isr}
    missing = snap.brokers.expected - snap.brokers.registered
    # the leaders too: followers leave the ISR of a leader they cannot reach (cut off by the network)
    leaders = {p.leader for p in snap.states if p.leader is not None and any(b not in p.isr for b in p.replicas)}
    suspects = out_of_isr | missing | (leaders & snap.brokers.registered)
    if not suspects:
        return snap, None
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
    # a follower out of the ISR only where its leader gives no TCP answer is not suspect itself: it
    # cannot fetch from that leader (a network partition), and its own disks are not the question
    cut_leaders = {b for b, r in liveness.items() if r.state == "unreachable" and b in snap.brokers.registered}
    out_of_isr_elsewhere = {b for p in snap.states if p.leader not in cut_leaders for b in p.replicas if b not in p.isr}
    registered_suspects = sorted(
        b
        for b in out_of_isr_elsewhere & snap.brokers.registered
        if liveness.get(b) is None or liveness[b].state not in ("silent", "unreachable")
    )
    failed: dict[int, tuple[str, ...]] = {}
    moving: dict[tuple[str, int], Reassignment] = {}
    moves: list[Reassignment] | BaseException | None = None  # listed only when a registered broker is suspect
    if registered_suspects:
        # One DescribeLogDirs per broker, each on a short budget: the broker reads every log dir
        # to answer, so one whose disk is stalled does not answer at all - which is itself the
        # finding, and must not hold the whole diagnosis for the admin timeout.
        per_broker = [asyncio.wait_for(gw.log_dirs([b]), LOG_DIRS_BUDGET_S) for b in registered_suspects]
        # A broker with every replica in sync, asked the same on the same budget: if it is slow too,
        # the machine or the cluster is (a busy host), and a suspect's silence says nothing of its disk.
        control = next((b for b in sorted(snap.brokers.registered) if b not in suspects), None)
        control_ask = asyncio.wait_for(gw.log_dirs([control]), LOG_DIRS_BUDGET_S) if control is not None else nothing()
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
                        gw.log_dirs([b]) if isinstance(d, asyncio.TimeoutError) else ready(d)
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
        elif moves is not None:
            moving = {(r.topic, r.partition): r for r in moves}
    states = [
        replace(p, adding=tuple(r.adding), removing=tuple(r.removing))
        if (r := moving.get((p.topic, p.partition))) is not None
        else p
        for p in snap.states
    ]
    facts = BrokerFacts(
        snap.brokers.registered, snap.brokers.expected, failed, {b: r.state for b, r in liveness.items()}
    )
    listed = moves if isinstance(moves, list) else None
    return replace(snap, states=states, brokers=facts), listed


def cut_off_answer(broker: int, urp: list[PartitionState], probed: str) -> tuple[str, list[Evidence]]:
    """The verdict on a broker that is registered and unfenced but gives no TCP answer (a network
    partition), what speaks for and against it, and the observation that would settle it."""
    led = [p for p in urp if p.leader == broker]
    alone = [p for p in led if tuple(p.isr) == (broker,)]
    verdict = (
        f"Broker {broker} is cut off by the network, not down: it is registered with the controller and "
        "unfenced (its own heartbeats get out), but its listener gives no TCP answer, where a stopped process "
        "would refuse at once; clients and the other brokers cannot reach it. "
        + (
            f"{len(alone):,} partition(s) it leads have shrunk their ISR to {broker} alone, and acks=all "
            "writes to them fail. "
            if alone
            else f"The followers of {len(led):,} partition(s) it leads left their ISRs. "
        )
        + f"Restore the network path to broker {broker}; do not move its replicas away, and do not stop or "
        "restart it"
        + (
            f": with the ISR = {{{broker}}} that would leave those partitions without an in-sync replica "
            "(offline, or data loss through an unclean election)."
            if alone
            else "."
        )
    )
    return verdict, [
        Evidence(
            f"For a network partition of broker {broker}",
            f"registered with the controller and unfenced, so its process runs and its own heartbeats get out; "
            f"its listener gave no TCP answer ({probed}), where a stopped process refuses at once and a paused "
            "one still completes the handshake; "
            + (
                f"{len(alone):,} of the {len(led):,} under-replicated partitions it leads have an ISR of {broker} "
                f"alone ({name_partitions(alone, 4)}): its followers cannot fetch from it either"
                if alone
                else f"the followers of the {len(led):,} partitions it leads left their ISRs ({name_partitions(led, 4)})"
            ),
            "live: describe_cluster + TCP probe + metadata",
            "bad",
        ),
        Evidence(
            f"Against it (broker {broker})",
            "its outbound connections still work (heartbeats, its fetches from other leaders), so it is not "
            "isolated entirely: what is cut is the path to its listener (a firewall rule, a security group, one "
            "direction of a link); and the probe ran from this bot's host, whose path may differ from the clients'",
            "live: describe_cluster",
            "neutral",
        ),
        Evidence(
            "What would decide it",
            f"connect to broker {broker}'s listener from its own host and from a peer broker (nc -vz <host> <port>): "
            "answers locally but not from a peer means the network or a firewall between them; times out locally "
            "too means the host's own firewall or a listener that stopped accepting",
            f"kb: {NETWORK_PARTITION} triage",
            "neutral",
        ),
    ]


async def check_urp(gw: AdminGateway) -> LiveFindings:
    # The brokers' ISR meters, read beside the snapshot: a broker that flaps is back in the ISRs in
    # most snapshots, and only the meters remember it left (diagnosis/isr_churn.py).
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
    snap, listed = await _enrich_suspects(gw, snap, notes, probes, stalled)
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
                replicas_lost(f.cause, f.broker, snap.brokers, len(f.partitions))
                + f" ({name_partitions(f.partitions, 4)})",
                "live: metadata" + (" + log dirs" if f.cause == LOG_DIR_FAILURE else ""),
                "bad",
            )
        )
    if any(f.cause == SLOW_FOLLOWER for f in findings):
        evidence += await throttle_evidence(gw, sorted({f.broker for f in findings if f.cause == SLOW_FOLLOWER}), notes)
    lead: list[tuple[str, str]] = []
    for f in findings:
        if f.cause != "reassignment" and all(e != f.cause for e, _ in lead):
            lead.append((f.cause, f"live: {f.detail}"))
    facts = facts_of(snap)
    top_cause = findings[0].cause if findings else None
    # no URP now, or a live follower out of sync: the meters say whether it keeps happening
    churn = await churn_read.result(snap) if not urp or top_cause == SLOW_FOLLOWER else None
    totals = churn_read.rejoin_totals()
    # the leaders' rejoins since the bot's earlier reading, read before this one is remembered
    since = observations.rejoins_since(gw.name, totals, isr_churn.MIN_COUNTED_S)
    returns = churn_memory.dropouts(gw.name, churn, snap, since)
    counted_all = churn_memory.counted_by_all(churn, since)
    started_s_ago = churn_read.started_s_ago()
    started = churn_memory.cluster_started(churn, snap, started_s_ago, totals, since)
    named = churn.finding.broker if churn is not None else None
    seen = observations.remember(
        gw.name, snap, rejoins=totals or None, churning=frozenset({named}) if named is not None else frozenset()
    )
    if not totals:  # an answer about URP now did not wait for the counters: the next answer counts from them
        churn_read.when_read(lambda later: observations.add_rejoins(gw.name, seen, later))
    restarted = churn_memory.restarted_brokers(gw.name, snap, started_s_ago)
    if churn is not None:
        evidence += churn.evidence()
    if churn is not None and returns is not None:
        evidence.append(
            Evidence(
                f"Broker {churn.finding.broker} drop-outs",
                f"about {returns.count:.1f} ({returns.basis}); a flap needs {isr_churn.MIN_RETURNS:g} or more"
                + ("" if returns.decided else ": not decided by one reading, ask again in a minute"),
                "live: JMX exporter + the bot's memory",
                "bad" if returns.flap else "neutral",
            )
        )
    if not urp:
        if churn is not None and started is not None:
            return LiveFindings(
                churn_memory.cluster_start_verdict(churn, started),
                "info",
                evidence,
                actions=[Action("Why URP", "why URP")],
                notes=notes,
                facts=facts,
                settled=True,
            )
        if (
            churn is not None
            and churn.finding.broker in restarted
            and churn_memory.restart_explains(gw.name, churn, returns, snap, restarted, totals)
        ):
            b = churn.finding.broker
            return LiveFindings(
                f"Recovered: broker {b} (re)started {restarted[b]:,.0f} s ago and its replicas have rejoined the ISRs; "
                "no partition is under-replicated now. The one-minute ISR rates still show its return; that is not a "
                "fault. Ask again in a few minutes if you want to see them settle.",
                "info",
                evidence,
                notes=notes,
                facts=facts,
                settled=True,
            )
        if churn is not None:
            once = returns is not None and returns.once
            over = counted_all is not None and counted_all.rejoins <= 0
            if not once and not over:  # `status` keeps it in view a while (observations.churn_warned)
                observations.warn_churn(gw.name, seen)
            return LiveFindings(
                churn.verdict(urp_now=False, returns=returns, counted=counted_all),
                "warning",
                evidence,
                [churn.lead],
                [Action("Cluster status", "status")],
                notes=notes,
                facts=facts,
                undecided=churn_memory.stall_or_flap(churn.finding.broker, returns is not None and returns.flap),
            )
        if churn_read.unread:
            notes.append(f"Whether ISRs keep churning was not checked: no exporter answered ({churn_read.unread}).")
        return LiveFindings("No under-replicated partitions right now.", "ok", evidence, lead, notes=notes, facts=facts)
    top = findings[0] if findings else None
    expected: ExpectedCause | None = None
    undecided: Undecided | None = None
    more: list[Action] = []
    # recovering: it (re)started recently, nothing else holds it back (a replication throttle is a
    # cause of its own), and the bot has not watched the count stay put for minutes
    throttled = any(e.label.endswith("replication throttle") for e in evidence)
    recovering = (
        top is not None
        and top.cause == SLOW_FOLLOWER
        and top.broker in restarted
        and not throttled
        and not observations.stuck(gw.name)
    )
    if top and recovering:
        trend = observations.urp_trend(gw.name)
        was = f" (it was {trend[0]:,} a moment ago)" if trend is not None and trend[0] > trend[1] else ""
        verdict = (
            f"Recovering: broker {top.broker} (re)started {restarted[top.broker]:,.0f} s ago and is catching up: "
            f"{len(top.partitions):,} of its replicas are still out of ISR, {len(urp):,} partitions under-replicated"
            f"{was}. Each replica rejoins once it has copied what it missed; that is not a fault. Ask again in a "
            "minute: it is one only if the count stops falling."
        )
        lead = []
        expected = ExpectedCause(
            topic="startup-recovery",
            title="Broker recovering after a restart",
            reason=f"live: broker {top.broker} started {restarted[top.broker]:,.0f} s ago; its replicas are catching up",
            steps=[
                Step(
                    f"Watch the under-replicated count fall as broker {top.broker} catches up (ask again in a minute).",
                    command="why URP",
                ),
                Step(
                    f"If it stops falling, read broker {top.broker}'s log for errors during its log recovery and check "
                    "its disk (iostat) before anything else."
                ),
            ],
            do_not=[
                f"Restart broker {top.broker} again or move its replicas: it is catching up, and either starts the copy over.",
                "Tune the heap or the garbage collector: nothing here points at GC.",
            ],
        )
    elif top and top.cause == GC_PAUSES:
        verdict = (
            f"Broker {top.broker} is paused, not dead: its listener accepts connections but answers nothing "
            f"(a long GC pause, SIGSTOP or a hung JVM), so {len(urp):,} partitions lost it from their ISR. "
            "Do not reassign its replicas: find why it stalled (GC log, a stopped process, swapping); "
            "it rejoins the ISR by itself once it runs again."
        )
        # no GC evidence is read from here: what decides comes first, not heap tuning or a restart
        undecided = Undecided(
            GC_PAUSES,
            {},
            [
                Step(
                    f"Find out why broker {top.broker} stalled before changing anything: on its host, whether the "
                    "process is stopped (`ps -o stat= -p <pid>` shows T) and its GC log's last pauses.",
                    command="ps -o stat= -p <pid>",
                ),
                Step("Check its host's CPU and memory (swapping, a cpu cgroup limit, steal) while it is stalled."),
            ],
        )
    elif top and cut_off_registered(top.cause, top.broker, snap.brokers):
        probed = next((e.value for e in probes if e.label == f"Broker {top.broker} listener"), "no TCP answer")
        verdict, partition = cut_off_answer(top.broker, urp, probed)
        evidence += partition
    elif top and cut_off_silently(top.cause, top.broker, snap.brokers):
        verdict = (
            f"Broker {top.broker} cannot be reached: its port gives no TCP answer at all, where a stopped process "
            f"would refuse at once, so the network, a firewall or its host being down cuts it off; {len(urp):,} "
            "partitions are under-replicated. Do not move its replicas on this: whether its host answers "
            "(ping, ssh, its other ports) decides between a network partition and a lost host."
        )
    elif top and top.cause == NETWORK_PARTITION:
        verdict = (
            f"Broker {top.broker} answers requests but is not registered with the controller (fenced): it is "
            f"cut off from the controller quorum or still recovering; {len(urp):,} partitions are under-replicated."
        )
    elif top and top.cause == BROKER_LOSS:
        gone = sorted({f.broker for f in findings if f.cause == BROKER_LOSS})
        confirmed = all(snap.brokers.liveness.get(b) == "refused" for b in gone)
        verdict = (
            f"Broker {broker_list(gone)} is gone"
            + (" (its port refuses connections: the process is not running)" if confirmed else "")
            + f": {len(urp):,} partitions are under-replicated because its replicas left their ISRs."
        )
        stopped = why_stopped(gone)
        if stopped is not None:
            verdict += " " + stopped.sentence
            evidence += stopped.evidence
            lead += [x for x in stopped.lead if all(e != x[0] for e, _ in lead)]
            undecided = stopped.undecided
    elif top and top.cause == LOG_DIR_FAILURE:
        dirs = ", ".join(snap.brokers.failed_log_dirs.get(top.broker, ())) or "a log directory"
        verdict = (
            f"Broker {top.broker} is up but lost its log directory {dirs}: its {len(top.partitions):,} replica(s) "
            "there are out of ISR. A full disk fails a directory exactly like a broken one (both are I/O "
            "errors to Kafka): check free space on that filesystem first, then the disk's health. Only a broker "
            "restart brings the directory back."
        )
    elif top and top.cause == SLOW_FOLLOWER:
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
        moving = [p for p in urp if any(b in p.adding for b in p.replicas if b not in p.isr)]
        verdict = f"{len(urp):,} partitions are under-replicated by a reassignment in progress; that is expected while it copies."
        if moving:
            extra, verdict, expected, more = await reassignment_answer(gw, moving, len(urp), notes)
            evidence += extra
    if expected is None:
        # a reassignment in flight is a finding of its own beside whatever else broke (issue 35)
        beside = await beside_fault(gw, frozenset(snap.brokers.registered), verdict, listed)
        verdict, evidence = beside.verdict, evidence + beside.evidence
        lead = [*beside.lead, *(x for x in lead if all(e != x[0] for e, _ in beside.lead))]
    elif top is not None and top.cause == "reassignment":
        beside = await beside_fault(gw, frozenset(snap.brokers.registered), verdict, listed)
        if beside.stalled:  # its target is dead: no longer an operation to wait for
            verdict, evidence, lead, expected = beside.verdict, evidence + beside.evidence, beside.lead, None
    severity: Severity = "critical" if cats["UnderMinIsr"] or cats["Offline"] else "warning"
    example_topic = urp[0].topic
    actions = [
        *more,
        Action(f"Describe {example_topic}", f"describe {example_topic}"),
        Action("Cluster status", "status"),
    ]
    return LiveFindings(verdict, severity, evidence, lead, actions, notes, facts, expected, undecided)
