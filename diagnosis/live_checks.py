"""What the live cluster says about a symptom, for `why` and the category commands.

Each check reads the cluster, applies the pure rules of diagnosis.rules and returns
evidence, a verdict, and the runbook entries the data points at (in the runbook's triage order).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TypeVar, cast

from diagnosis import isr_churn
from diagnosis.durability import min_isr_fix
from diagnosis.entry_ids import (
    BROKER_LOSS,
    CONTROLLER_QUORUM_LOSS,
    GC_PAUSES,
    HANGING_TRANSACTION,
    LOG_DIR_FAILURE,
    METADATA_LAG,
    NETWORK_PARTITION,
    OFFLINE_PARTITIONS,
    PRODUCER_FENCING,
    SLOW_FOLLOWER,
    UNCLEAN_ELECTION,
    UNDER_MIN_ISR,
)
from diagnosis.findings import ExpectedCause, LiveFacts, LiveFindings, Undecided
from diagnosis.rules import (
    BrokerFacts,
    PartitionState,
    cut_off_registered,
    cut_off_silently,
    replicas_lost,
    urp_findings,
)
from diagnosis.snapshot import Snapshot, broker_list, config_value, name_partitions, snapshot
from diagnosis.txn_evidence import OpenTxn, TxnReport, describe_txn, read_open_transactions
from framework.partial import note_missing
from framework.reply import Action, Evidence, Severity, Step
from live.gateway import AdminGateway, GatewayError, NotAuthorized
from live.model import ConfigValue, LogDir, PartitionView, QuorumInfo, Reassignment, TransactionDescription
from live.probe import ProbeResult
from runbook_kb import KnowledgeBase, default_kb


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
    # the leaders too: followers leave the ISR of a leader they cannot reach (cut off by the network)
    leaders = {p.leader for p in snap.states if p.leader is not None and any(b not in p.isr for b in p.replicas)}
    suspects = out_of_isr | missing | (leaders & snap.brokers.registered)
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
    return throttle_lines(configs)


def throttle_lines(configs: dict[int, dict[str, ConfigValue]]) -> list[Evidence]:
    """Pure: a line per replication throttle setting, naming the brokers that have it (a throttle
    is usually set alike on every broker: one line, not one per broker)."""
    by_value: dict[str, list[int]] = {}
    for b, cfg in sorted(configs.items()):
        set_ = {
            k: v
            for k, v in ((k, cfg[k].value) for k in THROTTLE_KEYS if k in cfg)
            if v is not None and v not in ("", UNSET_RATE)
        }
        if set_:
            text = ", ".join(f"{k}={int(v):,} B/s" if v.isdigit() else f"{k}={v}" for k, v in set_.items())
            by_value.setdefault(text, []).append(b)
    return [
        Evidence(f"Broker {broker_list(bs)} replication throttle", text, "live: broker configs", "bad")
        for text, bs in by_value.items()
    ]


UNSET_RATE = "9223372036854775807"  # Long.MAX_VALUE: the broker's "no throttle"
REPLICA_LIST_KEYS = {
    "leader": "leader.replication.throttled.replicas",
    "follower": "follower.replication.throttled.replicas",
}


def _size(n: int) -> str:
    for size, unit in ((10**9, "GB"), (10**6, "MB"), (10**3, "kB")):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,} B"


def _rate(cfg: dict[str, ConfigValue], key: str) -> int | None:
    v = cfg.get(key)
    value = v.value if v is not None else None
    return int(value) if value and value.isdigit() and value != UNSET_RATE else None


def _lists(cfg: dict[str, ConfigValue], side: str, partition: int, broker: int) -> bool:
    """Whether a topic's leader/follower.replication.throttled.replicas names this replica ('*': all)."""
    v = cfg.get(REPLICA_LIST_KEYS[side])
    entries = {e.strip() for e in (v.value or "").split(",")} if v is not None else set()
    return "*" in entries or f"{partition}:{broker}" in entries


@dataclass(frozen=True)
class MoveProgress:
    """One partition a reassignment is moving: how much of the leader's log each new replica holds
    (DescribeLogDirs sizes, None when not read), and the throttles that apply to its copy."""

    part: PartitionState
    leader_bytes: int | None
    new_bytes: dict[int, int | None]
    throttles: tuple[tuple[int, str, int], ...]  # (broker, config key, bytes/s) holding this copy back

    def to_copy(self) -> int | None:
        if self.leader_bytes is None or any(v is None for v in self.new_bytes.values()):
            return None
        return sum(max(0, self.leader_bytes - (v or 0)) for v in self.new_bytes.values())

    def describe(self) -> str:
        p = self.part
        text = f"replicas {broker_list(p.replicas)}: adding {broker_list(p.adding)}"
        if p.removing:
            text += f", removing {broker_list(p.removing)}"
        if self.leader_bytes is not None:
            text += f"; leader {p.leader} holds {_size(self.leader_bytes)}"
            copied = [f"new replica {b} has {_size(v)}" for b, v in sorted(self.new_bytes.items()) if v is not None]
            if copied:
                text += ", " + ", ".join(copied)
            left = self.to_copy()
            if left is not None:
                text += f" ({_size(left)} still to copy)"
        return text


def move_progress(
    moving: list[PartitionState],
    dirs: list[LogDir] | None,
    broker_cfgs: dict[int, dict[str, ConfigValue]] | None,
    topic_cfgs: dict[str, dict[str, ConfigValue]] | None,
) -> list[MoveProgress]:
    """Pure: partitions under reassignment, the log dirs of their leaders and new replicas, and the
    brokers' and topics' configs -> each move's progress and the throttles that hold it back. A
    throttle holds a copy back where the rate is set on the broker and the topic lists the replica:
    the leader's leader.replication.throttled.rate for its own replica, the new replica's
    follower.replication.throttled.rate for the new one (Kafka throttles a follower only while it
    is out of the ISR, which a replica being added is)."""
    sizes: dict[tuple[str, int, int], int] = {}
    for d in dirs or []:
        for lp in d.partitions:
            if not lp.is_future:
                sizes[(lp.topic, lp.partition, d.broker)] = sizes.get((lp.topic, lp.partition, d.broker), 0) + lp.size
    out = []
    for p in moving:
        new = [b for b in p.adding if b not in p.isr]
        held: list[tuple[int, str, int]] = []
        tcfg = (topic_cfgs or {}).get(p.topic, {})
        if broker_cfgs is not None and p.leader is not None:
            rate = _rate(broker_cfgs.get(p.leader, {}), THROTTLE_KEYS[1])
            if rate is not None and _lists(tcfg, "leader", p.partition, p.leader):
                held.append((p.leader, THROTTLE_KEYS[1], rate))
            for b in new:
                rate = _rate(broker_cfgs.get(b, {}), THROTTLE_KEYS[0])
                if rate is not None and _lists(tcfg, "follower", p.partition, b):
                    held.append((b, THROTTLE_KEYS[0], rate))
        out.append(
            MoveProgress(
                p,
                sizes.get((p.topic, p.partition, p.leader)) if dirs is not None and p.leader is not None else None,
                {b: sizes.get((p.topic, p.partition, b), 0) if dirs is not None else None for b in new},
                tuple(held),
            )
        )
    return out


def _throttle_text(held: list[tuple[int, str, int]]) -> str:
    """'leader rate 1,000 B/s on broker 101, follower rate 1,000 B/s on broker 103'."""
    return ", ".join(f"{k.split('.')[0]} rate {r:,} B/s on broker {b}" for b, k, r in sorted(set(held)))


async def _reassignment_answer(
    gw: AdminGateway, moving: list[PartitionState], urp_count: int, notes: list[str]
) -> tuple[list[Evidence], str, ExpectedCause, list[Action]]:
    """Every replica out of sync is one a reassignment is adding: how far each copy is (the leader's
    and the new replica's log sizes), and the replication throttle that holds it back, with what to
    change. Nothing here is a fault, so no failure mode's steps apply."""
    brokers = sorted({p.leader for p in moving if p.leader is not None} | {b for p in moving for b in p.adding})
    topics = sorted({p.topic for p in moving})
    dirs_r, bcfg_r, tcfg_r = await asyncio.gather(
        asyncio.wait_for(gw.log_dirs(brokers), 2 * LOG_DIRS_BUDGET_S),
        gw.broker_configs(),
        gw.topic_configs(topics),
        return_exceptions=True,
    )
    for what, res in (
        ("the moving replicas' log sizes", dirs_r),
        ("the brokers' replication throttles", bcfg_r),
        ("the topics' throttled replicas", tcfg_r),
    ):
        if isinstance(res, NotAuthorized):
            note_missing(what, res)
        elif isinstance(res, asyncio.TimeoutError):
            notes.append(f"{what[0].upper()}{what[1:]} not read: no answer within {2 * LOG_DIRS_BUDGET_S:g} s.")
        elif isinstance(res, BaseException):
            notes.append(f"{what[0].upper()}{what[1:]} not read ({res}).")
    dirs = dirs_r if isinstance(dirs_r, list) else None
    bcfg = bcfg_r if isinstance(bcfg_r, dict) else None
    tcfg = tcfg_r if isinstance(tcfg_r, dict) else None
    progress = move_progress(moving, dirs, bcfg, tcfg)
    evidence = [
        Evidence(
            f"Reassignment of {m.part.topic}-{m.part.partition}",
            m.describe(),
            "live: list_partition_reassignments + describe_log_dirs",
            "neutral",
        )
        for m in progress[:4]
    ]
    if len(progress) > 4:
        evidence.append(Evidence("More partitions being moved", f"{len(progress) - 4:,}", "live", "neutral"))
    evidence += throttle_lines(bcfg or {})
    for t in topics:
        lists = {k: v.value for k in REPLICA_LIST_KEYS.values() if (v := (tcfg or {}).get(t, {}).get(k)) and v.value}
        if lists:
            evidence.append(
                Evidence(
                    f"Topic {t} throttled replicas",
                    "; ".join(f"{k}={v}" for k, v in lists.items()),
                    "live: topic configs",
                    "bad",
                )
            )
    held = sorted({h for m in progress for h in m.throttles})
    first = progress[0]
    p = first.part
    verdict = (
        f"{urp_count:,} partitions are under-replicated by a reassignment in progress; that is expected while it "
        f"copies: {p.topic}-{p.partition} is adding broker {broker_list(p.adding)}"
        + (f" and removing {broker_list(p.removing)}" if p.removing else "")
    )
    left = first.to_copy()
    if left is not None and first.leader_bytes:
        done = max(0.0, min(1.0, 1 - left / (first.leader_bytes * max(1, len(first.new_bytes)))))
        verdict += f", {done:.0%} copied ({_size(left)} to go)"
    verdict += "."
    if held:
        verdict += (
            f" A replication throttle holds it back ({_throttle_text(held)}): raise it to finish sooner "
            "(`throttle set <rate>`), or remove it (`throttle clear`) once client traffic no longer needs the headroom."
        )
    elif bcfg is not None:
        verdict += " No replication throttle applies to it: it copies as fast as the disks and the network allow."
    steps = [
        Step(
            "Let it finish: nothing failed; each new replica joins the ISR once it has copied the leader's log, "
            "and the replicas being removed are dropped then. Follow it until no partition lists adding replicas.",
            command="kafka-reassign-partitions.sh --bootstrap-server <broker:9092> --list",
        )
    ]
    if held:
        steps.append(
            Step(
                "Raise or remove the replication throttle that holds it back: `throttle set <rate>` or "
                "`throttle clear`, each previewed, then confirmed. "
                f"Now: {_throttle_text(held)}; the same by hand, per broker:",
                command="kafka-configs.sh --bootstrap-server <broker:9092> --alter --entity-type brokers --entity-name "
                f"<id> --add-config {','.join(sorted({f'{k}=50000000' for _, k, _ in held}))}",
            )
        )
    else:
        steps.append(
            Step(
                "If the copy competes with client traffic, throttle it (`throttle set <rate>`, previewed, then "
                "confirmed); no replication throttle applies to it now."
            )
        )
    steps.append(
        Step(
            "Only if the move must stop: cancel it. The partitions keep their original replicas and the new "
            "brokers' partial copies are deleted.",
            command="kafka-reassign-partitions.sh --bootstrap-server <broker:9092> --reassignment-json-file move.json --cancel",
        )
    )
    expected = ExpectedCause(
        topic="reassignment",
        title="Reassignment in progress",
        reason=f"live: {len(progress):,} partition(s) have replicas being added by a reassignment, and no other replica is out of sync",
        steps=steps,
        do_not=[
            "Follow the broker-loss steps or start another reassignment of these partitions: nothing is down, and "
            "a new reassignment of a moving partition replaces the one running.",
            "Restart the new replica's broker or raise replica.lag.time.max.ms to clear the URP: neither makes the "
            "copy faster; the new replica enters the ISR as soon as it has caught up.",
        ],
    )
    actions = (
        [
            Action("Raise the replication throttle", "throttle set 50MB/s", mutating=True),
            Action("Clear the replication throttle", "throttle clear", mutating=True),
        ]
        if held
        else []
    )
    return evidence, verdict, expected, actions


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


@dataclass(frozen=True)
class WhyStopped:
    """Why brokers that are down stopped, as far as it can be told from here (not at all: see
    ``why_stopped``)."""

    sentence: str  # for the verdict
    evidence: list[Evidence]
    lead: list[tuple[str, str]]  # the look-alikes, after the broker-loss line
    undecided: Undecided


def why_stopped(down: list[int], kb: KnowledgeBase | None = None) -> WhyStopped | None:
    """Brokers that are not registered and whose process does not run (the port refuses) or was
    not probed: a crash or a kill, and Kafka halting the broker itself once its log dirs failed,
    leave the same behind. The bot reads neither the broker's log (on its host) nor, while it is
    down, its log dirs, so it says which causes stay open and what decides between them (the
    runbook's look_alikes of broker loss), and `why` asks for that evidence before anything moves
    replicas away."""
    kb = kb or default_kb()
    entry = kb.failure_modes.get(BROKER_LOSS)
    if not down or entry is None or not entry.look_alikes:
        return None
    who = broker_list(down)
    one = down[0] if len(down) == 1 else None
    titles = [entry.title.lower()]
    evidence: list[Evidence] = []
    reasons: dict[str, str] = {}
    steps: list[Step] = []
    decides = []
    for alike in entry.look_alikes:
        other = kb.failure_modes[alike.entry]
        titles.append(other.title.lower())
        said = " ".join(alike.decides.split())
        decides.append(said)
        evidence.append(
            Evidence(
                f"Why broker {who} stopped",
                f"{entry.title} or {other.title}: cannot be told from here. {' '.join(alike.when.split())}",
                f"kb: {BROKER_LOSS} look-alikes",
                "neutral",
            )
        )
        reasons[alike.entry] = f"undecided: cannot be told from here while broker {who} is down: {said}"
        for st in alike.steps:
            steps.append(
                Step(
                    " ".join(st.action.split()),
                    command=st.command.replace("<broker-id>", str(one)) if st.command and one else st.command,
                    config=dict(st.config) if st.config else None,
                )
            )
    sentence = (
        f"Whether this is {' or '.join(titles)} cannot be told from here while "
        f"{'it is' if len(down) == 1 else 'they are'} down; what decides it: {'; '.join(decides)}."
    )
    lead = [(eid, why) for eid, why in reasons.items()]
    return WhyStopped(sentence, evidence, lead, Undecided(BROKER_LOSS, reasons, steps))


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
                replicas_lost(f.cause, f.broker, snap.brokers, len(f.partitions))
                + f" ({name_partitions(f.partitions, 4)})",
                "live: metadata" + (" + log dirs" if f.cause == LOG_DIR_FAILURE else ""),
                "bad",
            )
        )
    if any(f.cause == SLOW_FOLLOWER for f in findings):
        evidence += await _throttle_evidence(
            gw, sorted({f.broker for f in findings if f.cause == SLOW_FOLLOWER}), notes
        )
    lead: list[tuple[str, str]] = []
    for f in findings:
        if f.cause != "reassignment" and all(e != f.cause for e, _ in lead):
            lead.append((f.cause, f"live: {f.detail}"))
    facts = facts_of(snap)
    top_cause = findings[0].cause if findings else None
    # no URP now, or a live follower out of sync: the meters say whether it keeps happening
    churn = await churn_read.result(snap) if not urp or top_cause == SLOW_FOLLOWER else None
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
        if churn_read.unread:
            notes.append(f"Whether ISRs keep churning was not checked: no exporter answered ({churn_read.unread}).")
        return LiveFindings("No under-replicated partitions right now.", "ok", evidence, lead, notes=notes, facts=facts)
    top = findings[0] if findings else None
    expected: ExpectedCause | None = None
    undecided: Undecided | None = None
    more: list[Action] = []
    if top and top.cause == GC_PAUSES:
        verdict = (
            f"Broker {top.broker} is paused, not dead: its listener accepts connections but answers nothing "
            f"(a long GC pause, SIGSTOP or a hung JVM), so {len(urp):,} partitions lost it from their ISR. "
            "Do not reassign its replicas: find why it stalled (GC log, a stopped process, swapping); "
            "it rejoins the ISR by itself once it runs again."
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
            extra, verdict, expected, more = await _reassignment_answer(gw, moving, len(urp), notes)
            evidence += extra
    severity: Severity = "critical" if cats["UnderMinIsr"] or cats["Offline"] else "warning"
    example_topic = urp[0].topic
    actions = [
        *more,
        Action(f"Describe {example_topic}", f"describe {example_topic}"),
        Action("Cluster status", "status"),
    ]
    return LiveFindings(verdict, severity, evidence, lead, actions, notes, facts, expected, undecided)


def facts_of(snap: Snapshot) -> LiveFacts:
    cats = snap.by_category()
    return LiveFacts(
        under_replicated=sum(1 for p in snap.states if len(p.isr) < len(p.replicas) and p.has_leader),
        offline=len(cats["Offline"]),
        missing_brokers=frozenset(snap.brokers.expected - snap.brokers.registered),
        out_of_isr=Counter(b for p in snap.states for b in p.replicas if b not in p.isr),
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
        lead.append(
            (UNDER_MIN_ISR, f"live: {len(under):,} partitions have fewer in-sync replicas than min.insync.replicas")
        )
        down = sorted(snap.brokers.expected - snap.brokers.registered)
        if down:
            lead.append((BROKER_LOSS, f"live: broker(s) {broker_list(down)} are not registered"))
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
                f"{len(under):,} partition(s) are under min ISR: producers with acks=all get NotEnoughReplicas there. "
                f"On {names} min.insync.replicas equals the replication factor ({rf}), so one replica out of the ISR "
                f"stops every acks=all write. Restore the missing replica now; then give the topic a replica to spare: "
                f"{min_isr_fix(rf, rf)}"
            )
            actions.append(Action("Durability audit", "audit"))
        else:
            verdict = (
                f"{len(under):,} partition(s) are under min ISR: producers with acks=all get NotEnoughReplicas there. "
                "Restore the missing replicas; do not lower min.insync.replicas."
            )
        return LiveFindings(verdict, "critical", evidence, lead, actions)
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

    lead = [(HANGING_TRANSACTION, "live: " + describe_txn(t, now)) for t in shown[:1]]
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
    lead = [(CONTROLLER_QUORUM_LOSS, "live: " + view.verdict)] if view.lost else []
    verdict = view.verdict or "The controller quorum has an active leader and every voter answers."
    return LiveFindings(verdict, view.severity, view.evidence, lead, [Action("Cluster status", "status")])


# How long a broker may go without catching up with the metadata log before it counts as behind:
# the runbook entry's number (metadata-lag: checks.thresholds).
METADATA_STALE_KEY = "metadata_stale_ms"


def metadata_stale_ms(kb: KnowledgeBase | None = None) -> float:
    return (kb or default_kb()).failure_modes[METADATA_LAG].checks.thresholds[METADATA_STALE_KEY]


def metadata_lag_findings(
    quorum: QuorumInfo, registered: set[int], now_ms: int, stale_ms: float | None = None
) -> LiveFindings:
    """Pure: the quorum's observers (brokers) -> which registered broker is behind on metadata
    (``stale_ms``: the runbook's threshold unless given)."""
    stale_ms = metadata_stale_ms() if stale_ms is None else stale_ms
    evidence: list[Evidence] = []
    behind: list[tuple[int, int, int]] = []
    for o in quorum.observers:
        since = (
            now_ms - o.last_caught_up_timestamp
            if o.last_caught_up_timestamp and o.last_caught_up_timestamp > 0
            else None
        )
        stale = since is not None and since > stale_ms and o.lag > 0
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
        [(METADATA_LAG, f"live: broker {b} {lag:,} metadata records behind for {since / 1000:,.0f} s")],
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
                PRODUCER_FENCING,
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
