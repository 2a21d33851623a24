"""ISR churn for `why URP` / `why IsrShrinksPerSec`: a broker that keeps leaving and rejoining the
ISRs looks healthy in any one snapshot taken while it is back. The brokers' own meters and the
controller remember what a snapshot cannot:

- every leader's IsrExpandsPerSec / IsrShrinksPerSec (one-minute rates): how often replicas came
  back, and whether the leaders dropped them themselves (a lagging follower) or the controller did
  (a fenced broker, which no leader meter counts);
- the active controller's BrokerRegistrationState and TimeSinceLastHeartbeatReceivedMs per broker:
  which broker is fenced, or has stopped heartbeating, right now;
- the broker's own exporter, which runs in its JVM: a stopped process does not answer it;
- the metadata: a live broker that leads none of the partitions it is the preferred leader of had
  its leaderships taken away (the controller does that when it fences it).

The read is started beside the snapshot and awaited only when the snapshot leaves the question
open (no URP right now, or a follower out of sync while its broker is up). The thresholds come from
the runbook's alert table (reference/signals.yaml); the rule is ``diagnosis.rules.isr_churn``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from diagnosis.entry_ids import GC_PAUSES
from diagnosis.exporter_reads import HostBusy, NodeReading, read_nodes
from diagnosis.rules import ChurnFacts, ChurnFinding, IsrMeters, isr_churn, preferred_leadership
from diagnosis.snapshot import Snapshot, broker_list
from diagnosis.thresholds import alert_bounds
from framework.reply import Evidence
from live import exporters
from live.gateway import AdminGateway

EXPANDS = "kafka_server_replicamanager_isrexpandspersec_oneminuterate"
# the same meter's cumulative count: two readings of it count the rejoins in between exactly
EXPANDS_TOTAL = "kafka_server_replicamanager_isrexpandspersec_total"
SHRINKS = "kafka_server_replicamanager_isrshrinkspersec_oneminuterate"
REGISTRATION = "kafka_controller_kafkacontroller_brokerregistrationstate"
HEARTBEAT_AGE = "kafka_controller_kafkacontroller_timesincelastheartbeatreceivedms"
ACTIVE = "kafka_controller_kafkacontroller_activecontrollercount"
STARTED = exporters.PROCESS_STARTED
NAMES = frozenset({EXPANDS, EXPANDS_TOTAL, SHRINKS, REGISTRATION, HEARTBEAT_AGE, ACTIVE, STARTED})
# A broker that started this recently lost its leaderships and ISR places to its restart too: the
# rejoins may be that one return, which the one-minute rates take minutes to forget.
RECENT_START_S = 600.0
FENCED_STATE = 10  # BrokerRegistrationState.FENCED (ACTIVE is 30, CONTROLLED_SHUTDOWN 20)
# A paused broker's exporter never answers, and a `why` answer must not wait for it: once every node
# but one has answered, the last one gets exporter_reads.LONE_SILENT_S from the start of the reads and is then
# reported as silent (alone in not answering, it is the finding: a stopped JVM). When they are all
# slow the host is busy, not one broker stalled, and they get Prometheus's own scrape timeout: in
# the lab at load 27-50 on 2 cores each exporter took 2 to more than 4 s, and an answer that gave
# up on them said "no URP" about a broker fenced every 10 s. An idle exporter answers in ~0.1 s.
CHURN_SCRAPE_TIMEOUT_S = exporters.SCRAPE_TIMEOUT_S
# A flap needs repeated transitions: fewer whole returns than this in the last minute is one stall.
MIN_RETURNS = 2.0
# Two readings of the rejoin counters closer than this say too little about a broker that stalls
# every few seconds to tens of seconds: the one-minute rate is all there is.
MIN_COUNTED_S = 20.0
# The leaders' own shrinks at most this share of the rejoins: the controller did the removing.
CONTROLLER_SHARE = 0.2
# Fallbacks when the runbook's alert table has no bound (it has: reference/signals.yaml).
MIN_REJOINS_PER_S = 0.05
LATE_HEARTBEAT_MS = 3000.0


class ChurnRead:
    """The exporters' read, started at once (nothing when the cluster has no metrics endpoints),
    awaited only if the answer needs it; ``close`` drops it otherwise. Each node is read on its own
    under one deadline (diagnosis/exporter_reads.py): a node still silent once every other one has
    answered is reported as silent (alone in not answering, it is the finding: a stopped JVM)."""

    def __init__(self, gw: AdminGateway) -> None:
        urls = getattr(gw.config, "metrics_urls", None) or {}
        self.started = time.monotonic()
        self.unread: str | None = None  # why no exporter could be read, when none could
        self.host_busy: HostBusy | None = None
        self.last: exporters.Reading | None = None  # the reading, once awaited
        self.keep = False  # left to finish after the answer (when_read)
        self.task: asyncio.Task[NodeReading] | None = (
            asyncio.ensure_future(read_nodes(urls, NAMES, CHURN_SCRAPE_TIMEOUT_S, self.started)) if urls else None
        )

    async def reading(self) -> exporters.Reading:
        """Every node's answer, or its silence."""
        if self.task is None:
            return exporters.Reading()
        read = await self.task
        self.host_busy = read.host_busy
        self.last = read.reading
        return read.reading

    def rejoin_totals(self) -> dict[int, float]:
        """Each node's cumulative ISR-rejoin count: from the reading once awaited, or once it is done
        (an answer about URP now does not wait for it, but the next answer counts from it)."""
        last = self.last
        if last is None and self.task is not None and self.task.done() and not self.task.cancelled():
            if self.task.exception() is None:
                last = self.task.result().reading
        return rejoin_totals(last) if last is not None else {}

    def started_s_ago(self) -> dict[int, float]:
        """Seconds since each node's process started, from the reading once it was awaited."""
        if self.last is None:
            return {}
        now = time.time()
        return {s.node: now - s.value for s in self.last.named(STARTED) if s.value > 0}

    async def result(self, snap: Snapshot) -> Churn | None:
        """The churn the meters show, read against ``snap`` (None: none, or nothing was read)."""
        if self.task is None:
            return None
        reading = await self.reading()
        if not reading.samples:
            self.unread = "; ".join(f"node {n}: {why}" for n, why in sorted(reading.failed.items())) or "no samples"
        facts = churn_facts(reading, snap)
        found = find(facts, snap.brokers.registered)
        if found is None:
            return None
        now = time.time()
        started = {s.node: now - s.value for s in reading.named(STARTED) if s.value > 0}
        return Churn(found, facts, reading, started)

    def when_read(self, record: Callable[[dict[int, float]], None]) -> None:
        """Let the read finish after the answer (it is bounded by its own deadline) and hand its
        rejoin counters to ``record``; ``close`` then leaves it running."""
        task = self.task
        if task is None or task.done():
            return
        self.keep = True

        def done(t: asyncio.Task[NodeReading]) -> None:
            if not t.cancelled() and t.exception() is None:
                record(rejoin_totals(t.result().reading))

        task.add_done_callback(done)

    async def close(self) -> None:
        task = self.task
        if task is not None and not task.done() and not self.keep:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def rejoin_totals(reading: exporters.Reading) -> dict[int, float]:
    """Each node's cumulative ISR-rejoin count in ``reading``."""
    return {s.node: s.value for s in reading.named(EXPANDS_TOTAL)}


@dataclass(frozen=True)
class Churn:
    finding: ChurnFinding
    facts: ChurnFacts
    reading: exporters.Reading
    started_s_ago: dict[int, float] = field(default_factory=dict)  # node -> seconds since its process started

    def evidence(self) -> list[Evidence]:
        return evidence(self.finding, self.facts, self.reading, self.started_s_ago)

    def verdict(self, urp_now: bool, returns: DropOuts | None = None, counted: Counted | None = None) -> str:
        return verdict(self.finding, self.facts, urp_now, self.started_s_ago, returns, counted)

    @property
    def lead(self) -> tuple[str, str]:
        return (self.finding.cause, lead_reason(self.finding))


def _bound(metric: str, fallback: float) -> float:
    bound = alert_bounds(metric).get("warning")
    return bound[1] if bound is not None else fallback


def churn_facts(reading: exporters.Reading, snap: Snapshot) -> ChurnFacts:
    """The exporters' reading and the snapshot as the pure rule's input."""
    registered = snap.brokers.registered
    expands = {s.node: s.value for s in reading.named(EXPANDS)}
    shrinks = {s.node: s.value for s in reading.named(SHRINKS)}
    meters = {b: IsrMeters(v, shrinks.get(b, 0.0)) for b, v in expands.items()}
    # The per-broker gauges of the active controller (a standby controller has no heartbeats to time).
    active = {s.node for s in reading.named(ACTIVE) if s.value >= 1}

    def per_broker(name: str) -> dict[int, float]:
        out: dict[int, float] = {}
        for s in reading.named(name):
            broker = s.label("broker")
            if broker is not None and broker.lstrip("-").isdigit() and (not active or s.node in active):
                out[int(broker)] = s.value
        return out

    states = per_broker(REGISTRATION)
    return ChurnFacts(
        meters=meters,
        # silence names a broker only when it alone is silent: several at once is a busy host
        silent=frozenset(b for b in reading.silent if b in registered)
        if len(reading.silent & registered) == 1
        else frozenset(),
        fenced=frozenset(b for b, v in states.items() if v == FENCED_STATE),
        heartbeat_age_ms={b: v for b, v in per_broker(HEARTBEAT_AGE).items() if b in registered},
        preferred=preferred_leadership(snap.states),
        out_of_isr=frozenset(b for p in snap.states for b in p.replicas if b not in p.isr),
    )


def find(facts: ChurnFacts, registered: frozenset[int]) -> ChurnFinding | None:
    return isr_churn(
        facts,
        registered,
        min_rejoins_per_s=_bound("IsrExpandsPerSec", MIN_REJOINS_PER_S),
        controller_share=CONTROLLER_SHARE,
        late_heartbeat_ms=_bound("TimeSinceLastHeartbeatReceivedMs", LATE_HEARTBEAT_MS),
    )


def per_min(rate: float) -> str:
    return f"{rate * 60:,.1f}"


def named_because(f: ChurnFinding, facts: ChurnFacts) -> str:
    """Why the finding's broker is the one: a clause for the verdict."""
    b = f.broker
    if b is None:
        return (
            "no one broker stands out now (the controller fences nobody, every broker heartbeats and leads its "
            "own partitions); the brokers the rejoined replicas live on are the suspects"
        )
    if f.named_by == "fenced":
        return f"the controller has broker {b} fenced right now"
    if f.named_by == "heartbeat":
        return f"the controller last heard a heartbeat from broker {b} {facts.heartbeat_age_ms[b] / 1000:,.1f} s ago"
    if f.named_by == "silent":
        return f"broker {b}'s metrics endpoint, which runs inside its JVM, does not answer"
    if f.named_by == "out-of-isr":
        return f"broker {b} has replicas out of ISR right now"
    own, _led = facts.preferred.get(b, (0, 0))
    return (
        f"broker {b} leads none of the {own:,} partition(s) it is the preferred leader of: the controller takes a "
        "broker's leaderships away when it fences it, and no preferred-leader election has given them back"
    )


def _restarted(f: ChurnFinding, started_s_ago: dict[int, float]) -> float | None:
    """Seconds since the named broker's process started, when recent enough to matter and the
    broker was named only by the leaderships it lacks (which a restart takes away too)."""
    age = started_s_ago.get(f.broker) if f.broker is not None else None
    return age if age is not None and age < RECENT_START_S and f.named_by == "lost-leadership" else None


def evidence(
    f: ChurnFinding, facts: ChurnFacts, reading: exporters.Reading, started_s_ago: dict[int, float] | None = None
) -> list[Evidence]:
    src = "live: JMX exporter (one-minute rate)"
    by = ", ".join(f"broker {b} {per_min(facts.meters[b].expands)}" for b in f.leaders)
    out = [
        Evidence(
            "ISR rejoins (IsrExpandsPerSec)",
            f"{per_min(f.rejoins_per_s)} a minute over the last minute" + (f" ({by})" if by else ""),
            src,
            "bad",
        ),
        Evidence(
            "ISR shrinks by the leaders (IsrShrinksPerSec)",
            f"{per_min(f.shrinks_per_s)} a minute"
            + (
                ": the leaders removed almost none of them, the controller did (it fences a broker that misses "
                "its heartbeats; no leader meter counts that)"
                if f.shrinks_per_s <= CONTROLLER_SHARE * f.rejoins_per_s
                else ": the leaders dropped followers for lagging"
            ),
            src,
            "neutral",
        ),
    ]
    for b in [x for x in (f.broker, *f.others) if x is not None]:
        age = facts.heartbeat_age_ms.get(b)
        if b in facts.fenced or age is not None:
            out.append(
                Evidence(
                    f"Broker {b} at the controller",
                    ("fenced" if b in facts.fenced else "not fenced")
                    + (f", last heartbeat {age / 1000:,.1f} s ago" if age is not None else ""),
                    "live: JMX exporter (controller: BrokerRegistrationState, TimeSinceLastHeartbeatReceivedMs)",
                    "bad" if f.named_by in ("fenced", "heartbeat") and b == f.broker else "ok",
                )
            )
        own, led = facts.preferred.get(b, (0, 0))
        if own:
            out.append(
                Evidence(
                    f"Broker {b} leadership",
                    f"leads {led:,} of the {own:,} partition(s) it is the preferred leader of",
                    "live: metadata",
                    "bad" if led == 0 else "ok",
                )
            )
        if b in reading.silent:
            out.append(
                Evidence(f"Broker {b} exporter", reading.failed.get(b, "no answer"), "live: JMX exporter", "bad")
            )
    age = _restarted(f, started_s_ago or {})
    if age is not None:
        out.append(
            Evidence(
                f"Broker {f.broker} process",
                f"started {age:,.0f} s ago: a restart also takes a broker's leaderships and ISR places away",
                "live: JMX exporter (process_start_time_seconds)",
                "neutral",
            )
        )
    return out


def returns_estimate(f: ChurnFinding, snap: Snapshot) -> float | None:
    """How many times the named broker's replicas rejoined in the last minute, as a whole: the
    leaders' rejoin rate (a minute's worth) over the replicas it follows. One return of a broker that
    follows 40 partitions shows ~40 rejoins in the one-minute rate; a broker that flaps every 8 s, 7x
    that. None when no one broker is named. An upper bound at best: the rate also carries the rejoins
    of partitions deleted or moved since and of other brokers' returns (seen: a burst of 120
    partitions deleted a minute before read as 25 returns of a broker that stalled once), and it lags
    the last returns (three in the lab read as 1.4): it decides nothing on its own."""
    if f.broker is None:
        return None
    followed = follows(f.broker, snap)
    return f.rejoins_per_s * 60 / followed if followed else None


def one_return_left(age_s: float) -> float:
    """The most of one return's worth (rejoins over the replicas followed, a minute's rate) the
    leaders' one-minute rate still shows ``age_s`` after it: one tick takes ~1/12 of a 5 s burst into
    a rate of bursts/5 s, i.e. ~0.96 of the burst a minute, then it decays by e each minute."""
    return math.exp(-max(0.0, age_s) / 60.0)


def follows(broker: int, snap: Snapshot) -> int:
    """The partitions ``broker`` holds a replica of and does not lead: one return rejoins each once."""
    return sum(1 for p in snap.states if broker in p.replicas and p.leader != broker)


def followers(snap: Snapshot) -> int:
    """Follower replicas in the cluster: at a cluster's start each may join its ISR once."""
    return sum(max(0, len(p.replicas) - 1) for p in snap.states)


@dataclass(frozen=True)
class ClusterStart:
    """Every broker's process started recently and the leaders' rejoin counters (which begin at
    each process's start) hold no more than one join per follower replica: the rates show the
    cluster's own start, not a broker dropping out."""

    age_s: float  # the youngest broker's process age
    oldest_s: float
    rejoins: float  # the leaders' counters, summed
    followers: int


def cluster_start(
    f: ChurnFinding, snap: Snapshot, started_s_ago: dict[int, float], totals: dict[int, float]
) -> ClusterStart | None:
    """The cluster's start as the explanation of the churn, when it is one. Seen on a fresh
    `scripts/run.sh` cluster: broker 102 counted 7 rejoins in its first seconds (replicas placed on a
    broker the controller had not yet unfenced join the ISR once it is), and a Yammer meter's first
    5 s tick sets its one-minute rate outright (7 / 5 s = 84 a minute), where a later burst adds a
    twelfth of that; 95 s after the start it still read 19 a minute: "a broker keeps dropping out".
    Only when no one broker stands out: one fenced, late with its heartbeats, silent or stripped of
    its leaderships may be a broker stopping again and again in a young cluster (the lab's flapping
    broker, the first trial on a fresh lab cluster), which the counters alone cannot tell from a
    start. Nor when a leader's counter was not read."""
    if f.named_by is not None:
        return None
    registered = snap.brokers.registered
    ages = [started_s_ago.get(b) for b in registered]
    if not registered or any(a is None or a >= RECENT_START_S for a in ages):
        return None
    if any(leader not in totals for leader in f.leaders):
        return None
    rejoins = sum(totals.get(b, 0.0) for b in registered)
    room = followers(snap)
    if not room or rejoins > room:
        return None
    known = [a for a in ages if a is not None]
    return ClusterStart(min(known), max(known), rejoins, room)


@dataclass(frozen=True)
class DropOuts:
    """How many times the named broker left the ISRs, and whether that is known: ``decided`` when
    counted (the bot's own readings, the rejoin counters between two of them, a stall caught right
    now); undecided on the one-minute rate alone (returns_estimate), which neither counts nor bounds
    the returns."""

    count: float
    decided: bool
    basis: str
    counted: bool = False  # from readings over time (not the one-minute rate)
    interval_s: float | None = None  # the seconds the counters were counted over
    in_interval: float | None = None  # of ``count``, the drop-outs within that interval

    @property
    def flap(self) -> bool:
        return self.decided and self.count >= MIN_RETURNS

    @property
    def once(self) -> bool:
        return self.decided and self.count < MIN_RETURNS


@dataclass(frozen=True)
class Counted:
    """The leaders' rejoins since an earlier reading of their counters, and what that reading saw."""

    rejoins: float
    seconds: float
    was_out: bool  # the broker was down or out of an ISR then
    was_churning: bool  # the ISR meters then showed it dropping out and back


def count_dropouts(f: ChurnFinding, snap: Snapshot, seen: int, counted: Counted | None) -> DropOuts | None:
    """The named broker's drop-outs from what there is: ``seen`` by the bot's own snapshots, the
    leaders' rejoin counters since an earlier reading, the one-minute rate last. None: no one
    broker named."""
    if f.broker is None:
        return None
    followed = follows(f.broker, snap)
    stalled_now = f.named_by in ("fenced", "heartbeat", "silent")
    if seen >= MIN_RETURNS:
        return DropOuts(float(seen), True, "seen leaving by the bot's own readings", counted=True)
    if counted is not None and followed and counted.seconds >= MIN_COUNTED_S:
        returns = counted.rejoins / followed
        # a return from an outage the earlier reading saw ends that drop-out, not a new one; one it
        # saw in the meters (churning, back in every ISR) came before, and counts on top
        in_interval = max(0.0, returns - (1.0 if counted.was_out else 0.0)) + (1.0 if stalled_now else 0.0)
        left = in_interval + (1.0 if counted.was_churning and not counted.was_out else 0.0)
        before = (
            ", returning from an outage that reading saw"
            if counted.was_out
            else ", after the drop-out that reading's meters showed"
            if counted.was_churning
            else ""
        )
        return DropOuts(
            max(left, float(seen)),
            True,
            f"its replicas rejoined {returns:.1f} time(s) over in the {counted.seconds:,.0f} s since the bot's last "
            f"reading (the leaders' rejoin counters){before}",
            counted=True,
            interval_s=counted.seconds,
            in_interval=in_interval,
        )
    estimate = returns_estimate(f, snap)
    if estimate is None:
        return None
    basis = "the last minute's ISR rejoins over the replicas it follows"
    if stalled_now and estimate >= 1.0:
        return DropOuts(estimate + 1.0, True, basis + ", and it is out again right now")
    # never decided on the rate alone, either way: it carries other rejoins (too many), and lags the
    # last returns (in the lab, three returns of a broker following 6 partitions read as 1.4)
    return DropOuts(estimate, False, basis)


def verdict(
    f: ChurnFinding,
    facts: ChurnFacts,
    urp_now: bool,
    started_s_ago: dict[int, float] | None = None,
    returns: DropOuts | None = None,
    counted: Counted | None = None,
) -> str:
    """The churn answer's verdict. ``returns``: the named broker's drop-outs; ``counted``: with no
    broker named, the leaders' rejoins since the bot's earlier reading (all brokers together)."""
    who = f"Broker {f.broker}"  # (no broker named: _nobody_named)
    now = (
        "some partitions are under-replicated right now, and"
        if urp_now
        else "no partition is under-replicated right now, but"
    )
    rates = (
        f"replicas rejoined ISRs {per_min(f.rejoins_per_s)} times a minute over the last minute "
        f"(IsrExpandsPerSec on broker{'s' if len(f.leaders) > 1 else ''} {broker_list(f.leaders)}), while the leaders removed {per_min(f.shrinks_per_s)} "
        "a minute themselves (IsrShrinksPerSec)"
    )
    because = named_because(f, facts)
    age = _restarted(f, started_s_ago or {})
    caveat = (
        f" But its process started {age:,.0f} s ago: if that was a restart, the rejoins may be its replicas coming "
        "back once; ask again in a few minutes (the one-minute rates fall by two thirds a minute when nothing new "
        "happens)."
        if age is not None and (returns is None or not returns.decided)  # counted returns need no "may be"
        else ""
    )
    if f.broker is None:
        return _nobody_named(f, because, now, rates, counted)
    if f.cause == GC_PAUSES and returns is not None and returns.once:
        return (
            f"{who} dropped out of the ISRs and came back once, it seems, not over and over: {now} {rates}; about "
            f"{returns.count:.1f} drop-out(s) ({returns.basis}). One stall (a pause, a stopped process resumed, a "
            "restart) is not a flap; if it keeps happening, the count rises when you ask again. "
            f"{because[:1].upper() + because[1:]}. Do not reassign its replicas: it is alive."
        )
    if f.cause == GC_PAUSES and returns is not None and not returns.decided:
        return (
            f"{who} dropped out of the ISRs and came back, maybe more than once: {now} {rates}, so the controller "
            f"took them out, as it does with a broker that misses its heartbeats; {because}. That rate is about "
            f"{returns.count:.1f} times its replicas' worth, but one reading cannot tell a broker that keeps stalling "
            "from one return (the rate also carries partitions deleted or moved since and other brokers' returns, "
            "and lags the last few seconds' returns). "
            "What decides it: ask again in a minute; the bot then counts the rejoins between the two readings. Do not "
            "reassign its replicas: it is alive. If it keeps stalling, find what stalls it (its GC log, the host's "
            "swap and CPU steal)." + caveat
        )
    if f.cause == GC_PAUSES:
        return (
            f"{who} keeps dropping out of the ISRs and coming back: {now} {rates}, so the controller took them out, "
            f"as it does with a broker that misses its heartbeats; {because}. A broker whose whole "
            "process stalls for seconds at a time (long GC pauses, a stopped process, a frozen VM, swapping) looks "
            "like this, and healthy between two stalls. Do not reassign its replicas: it is alive. Find what stalls "
            "it (its GC log, the host's swap and CPU steal)." + caveat
        )
    return (
        f"{who} keeps falling out of the ISRs and catching up again: {now} {rates}: the leaders drop a follower "
        f"that lags longer than replica.lag.time.max.ms; {because}. Check that broker's disk, "
        "network and replica fetchers; do not move its replicas while it is alive." + caveat
    )


def _nobody_named(f: ChurnFinding, because: str, now: str, rates: str, counted: Counted | None) -> str:
    """No one broker stands out: the rate cannot be turned into returns of a broker, so only the
    leaders' counters between two readings say whether it goes on."""
    how = (
        "so the controller took them out, as it does with a broker that misses its heartbeats"
        if f.cause == GC_PAUSES
        else "the leaders dropped followers that lagged longer than replica.lag.time.max.ms"
    )
    if counted is not None and counted.rejoins <= 0:
        return (
            f"Replicas dropped out of the ISRs and came back, but none has rejoined since the bot's reading "
            f"{counted.seconds:,.0f} s ago: {now} the one-minute rate still shows the earlier ones ({rates}); {because}. "
            "Whatever took them out is not doing it now; ask again if URP returns."
        )
    if counted is not None:
        return (
            f"Replicas are still dropping out of the ISRs and coming back: the leaders counted {counted.rejoins:,.0f} "
            f"more rejoin(s) in the {counted.seconds:,.0f} s since the bot's last reading; {now} {rates}, {how}; "
            f"{because}. Find which broker the rejoined replicas share (its GC log, the host's swap and CPU steal); "
            "do not reassign replicas while every broker is alive."
        )
    return (
        f"Replicas dropped out of the ISRs and came back, maybe more than once: {now} {rates}, {how}; {because}. "
        "One reading cannot tell a broker that keeps stalling from one event that took many replicas out at once "
        "(a broker's restart or single stall, partitions moved). What decides it: ask again in a minute; the bot "
        "then counts the rejoins between the two readings. Do not reassign replicas while every broker is alive."
    )


def lead_reason(f: ChurnFinding) -> str:
    who = f"broker {f.broker}" if f.broker is not None else "no one broker"
    return (
        f"live: ISR churn: {per_min(f.rejoins_per_s)} rejoins a minute (IsrExpandsPerSec), "
        f"{per_min(f.shrinks_per_s)} leader shrinks; {who}" + (f" ({f.named_by})" if f.named_by else "")
    )
