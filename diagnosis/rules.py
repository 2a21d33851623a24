"""Pure diagnosis: cluster evidence in, categories and ranked causes out. No clock, and no I/O but
the runbook's (the packaged KB, loaded once), which states each cause and orders them.

The rules mirror the broker's own code, as the runbook cites it:
- a partition is under-replicated when RF - |ISR| > 0 on its leader (Partition.scala:232);
- under min ISR when |ISR| < the *effective* min ISR (Partition.scala:237), which is
  min(min.insync.replicas, replica count) (Partition.scala:246) - so RF=1 with
  min.insync.replicas=2 is silently a floor of 1;
- at min ISR (KIP-427) when |ISR| equals that floor; offline when there is no leader.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal

from diagnosis.entry_ids import BROKER_LOSS, GC_PAUSES, LOG_DIR_FAILURE, NETWORK_PARTITION, SLOW_FOLLOWER
from runbook_kb import default_kb
from runbook_kb.schema import MissingReplicas

Category = Literal["InSync", "UnderReplicated", "AtMinIsr", "UnderMinIsr", "Offline"]


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int | None  # None (or -1 from the wire) when the partition has no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_isr: int = 1  # the topic's configured min.insync.replicas
    adding: tuple[int, ...] = ()  # replicas being added by a reassignment
    removing: tuple[int, ...] = ()

    @property
    def has_leader(self) -> bool:
        return self.leader is not None and self.leader >= 0

    @property
    def effective_min_isr(self) -> int:
        return effective_min_isr(self.min_isr, len(self.replicas))


def effective_min_isr(min_isr: int, replica_count: int) -> int:
    """The floor the leader really enforces: never more than the replicas that exist."""
    return min(min_isr, replica_count)


def categories(p: PartitionState) -> list[Category]:
    """KIP-427 categories as its worked examples state them: the worst first, AtMinIsr alongside."""
    if not p.has_leader:
        return ["Offline"]
    isr = len(p.isr)
    floor = p.effective_min_isr
    if isr < floor:
        return ["UnderMinIsr"]
    out: list[Category] = []
    if isr < len(p.replicas):
        out.append("UnderReplicated")
    if isr == floor:
        out.append("AtMinIsr")
    return out or ["InSync"]


def is_under_replicated(p: PartitionState) -> bool:
    """The gauge's own rule: counted on a leader whose ISR is smaller than its replica set."""
    return p.has_leader and len(p.replicas) - len(p.isr) > 0


@dataclass(frozen=True)
class BrokerFacts:
    registered: frozenset[int]  # brokers the cluster currently lists (alive, unfenced)
    expected: frozenset[int]  # brokers that should be there (config, or every replica's broker)
    failed_log_dirs: dict[int, tuple[str, ...]] = field(default_factory=dict)  # broker -> failed dirs
    # broker -> what its listener did when probed (live.probe): "refused" (no process), "silent"
    # (the port is held but nothing answers: paused / GC / hung), "answers", "unreachable".
    liveness: dict[int, str] = field(default_factory=dict)


URPCause = Literal["broker-loss", "gc-pauses", "network-partition", "log-dir-failure", "reassignment", "slow-follower"]


@dataclass(frozen=True)
class MissingReplica:
    topic: str
    partition: int
    broker: int
    cause: URPCause


@dataclass(frozen=True)
class URPFinding:
    cause: URPCause
    broker: int
    partitions: tuple[tuple[str, int], ...]
    detail: str


def missing_replicas(partitions: list[PartitionState], brokers: BrokerFacts) -> list[MissingReplica]:
    """Every replica that is out of its ISR, with the runbook's triage order applied to it:
    a reassignment first (expected, not a fault); then a broker whose process is there but does
    not answer (paused: a GC pause, SIGSTOP, a hung JVM - registered or already fenced), which
    must not be mistaken for a dead one; then a broker that is not registered (dead, or fenced
    while its process answers: cut off from the controller); then a broker whose log directory
    failed; else a live follower that is not keeping up.

    One exception to "the replica's own broker": a leader that is registered (its heartbeats reach
    the controller) but gives no TCP answer on its listener is cut off from everyone who would
    connect to it, its followers included, and they leave its ISRs for that - so those missing
    replicas are the leader's network partition, listed under the leader, not a slow follower."""
    out: list[MissingReplica] = []
    for p in partitions:
        for b in p.replicas:
            if b in p.isr:
                continue
            alive = brokers.liveness.get(b)
            if b in p.adding:
                cause: URPCause = "reassignment"
            elif p.leader is not None and unreachable_but_registered(p.leader, brokers):
                out.append(MissingReplica(p.topic, p.partition, p.leader, NETWORK_PARTITION))
                continue
            elif alive == "silent":
                cause = GC_PAUSES
            elif b not in brokers.registered:
                # A stopped process refuses at once; a port that answers, or gives no TCP answer at
                # all (dropped packets), is cut off, not dead: never the broker-loss steps on that.
                cause = NETWORK_PARTITION if alive in ("answers", "unreachable") else BROKER_LOSS
            elif brokers.failed_log_dirs.get(b):
                cause = LOG_DIR_FAILURE
            else:
                cause = SLOW_FOLLOWER
            out.append(MissingReplica(p.topic, p.partition, b, cause))
    return out


def replica_causes() -> MissingReplicas:
    """Why a replica is out of its ISR, cause by cause: how answers state it and which to chase
    first (the runbook's reference/missing_replicas.yaml)."""
    table = default_kb().reference["missing_replicas"]
    if not isinstance(table, MissingReplicas):  # the loader validates it against this model
        raise TypeError("reference/missing_replicas.yaml is not a table of causes")
    return table


def unreachable_but_registered(broker: int, brokers: BrokerFacts) -> bool:
    """Registered (and so unfenced: its heartbeats reach the controller) while its listener gives
    no TCP answer at all: packets to it are dropped, where a dead process would refuse at once and
    a paused one would still complete the handshake."""
    return broker in brokers.registered and brokers.liveness.get(broker) == "unreachable"


def cut_off_silently(cause: str, broker: int, brokers: BrokerFacts) -> bool:
    """A network-partition finding whose broker is not registered and gave no TCP answer at all
    (dropped packets), not one that answers but is fenced: the two are told in different words."""
    return (
        cause == NETWORK_PARTITION
        and broker not in brokers.registered
        and brokers.liveness.get(broker) == "unreachable"
    )


def cut_off_registered(cause: str, broker: int, brokers: BrokerFacts) -> bool:
    """A network-partition finding whose broker is still registered and unfenced but unreachable:
    its own connections out work (heartbeats, fetches), connections to it do not."""
    return cause == NETWORK_PARTITION and unreachable_but_registered(broker, brokers)


def cause_key(cause: str, broker: int, brokers: BrokerFacts) -> str:
    """The row of reference/missing_replicas.yaml that states a finding: its cause, or for a network
    partition what the probe saw of the broker's listener (no TCP answer, registered or not)."""
    if cut_off_registered(cause, broker, brokers):
        return "unreachable-registered"
    return "unreachable" if cut_off_silently(cause, broker, brokers) else cause


def broker_state(cause: str, broker: int, brokers: BrokerFacts) -> str:
    """What the cause says of the broker ("not registered with the cluster"), to follow "broker <id> is"."""
    row = replica_causes().cause(cause_key(cause, broker, brokers))
    return row.state.format(dirs=", ".join(brokers.failed_log_dirs.get(broker, ())))


def replicas_lost(cause: str, broker: int, brokers: BrokerFacts, n: int) -> str:
    """The broker's state and what it costs, for the evidence beside it: "...; 3 replica(s) out of ISR"."""
    row = replica_causes().cause(cause_key(cause, broker, brokers))
    return f"{broker_state(cause, broker, brokers)}; {row.count.format(n=n)}"


def urp_findings(partitions: list[PartitionState], brokers: BrokerFacts) -> list[URPFinding]:
    """Missing replicas grouped by (cause, broker), most urgent cause first, then most partitions."""
    grouped: dict[tuple[URPCause, int], list[tuple[str, int]]] = defaultdict(list)
    for m in missing_replicas(partitions, brokers):
        grouped[(m.cause, m.broker)].append((m.topic, m.partition))
    findings = [
        URPFinding(
            cause=cause,
            broker=b,
            partitions=tuple(sorted(set(tps))),
            detail=f"broker {b} is {broker_state(cause, b, brokers)}",
        )
        for (cause, b), tps in grouped.items()
    ]
    table = replica_causes()
    return sorted(findings, key=lambda f: (table.cause(f.cause).rank, -len(f.partitions), f.broker))


def missing_brokers(brokers: BrokerFacts) -> list[int]:
    return sorted(brokers.expected - brokers.registered)


# ---- ISR churn: a broker that keeps dropping out and coming back ---------------------------------
# A snapshot of the ISRs taken while a flapping broker is back in them shows nothing wrong. The
# brokers' own meters remember: a leader marks IsrExpandsPerSec each time it adds a replica back
# (Partition.scala, after its AlterPartition commits), and IsrShrinksPerSec only when it removes a
# lagging follower itself. The controller removes a fenced broker's replicas without either leader
# meter ticking, so rejoins with (almost) no leader-side shrink mean the removals were the
# controller's: the broker missed its heartbeats, its whole process stalled (GC, SIGSTOP, a frozen
# VM). Shrinks that match the rejoins mean the leaders dropped a live follower for lagging.

ChurnCause = Literal["gc-pauses", "slow-follower"]
# How a broker was picked out as the one that flaps, strongest first (see isr_churn).
NamedBy = Literal["fenced", "heartbeat", "silent", "out-of-isr", "lost-leadership"]
# A silent exporter comes last: on a loaded host one busy broker's exporter can be the only one late
# (seen in the lab at load 28), while the controller's view and the metadata do not depend on load.
_NAMED_ORDER: tuple[NamedBy, ...] = ("fenced", "heartbeat", "out-of-isr", "lost-leadership", "silent")


@dataclass(frozen=True)
class IsrMeters:
    """One broker's ISR meters as leader: one-minute rates, per second."""

    expands: float
    shrinks: float


@dataclass(frozen=True)
class ChurnFacts:
    meters: dict[int, IsrMeters]  # brokers whose exporter answered
    silent: frozenset[int] = frozenset()  # registered brokers whose exporter did not answer in time
    fenced: frozenset[int] = frozenset()  # brokers the controller reports fenced now
    heartbeat_age_ms: dict[int, float] = field(
        default_factory=dict
    )  # the controller's time since each one's last heartbeat
    # broker -> (partitions it is the preferred leader of, how many of those it leads now)
    preferred: dict[int, tuple[int, int]] = field(default_factory=dict)
    out_of_isr: frozenset[int] = frozenset()  # brokers with a replica out of some ISR now


@dataclass(frozen=True)
class ChurnFinding:
    cause: ChurnCause
    broker: int | None  # None: the meters show churn but nothing picks out one broker
    named_by: NamedBy | None
    rejoins_per_s: float  # every leader's IsrExpandsPerSec, summed
    shrinks_per_s: float  # every leader's IsrShrinksPerSec, summed
    leaders: tuple[int, ...]  # brokers whose meters show the rejoins, busiest first
    others: tuple[int, ...] = ()  # further brokers named on the same grounds


def preferred_leadership(partitions: list[PartitionState]) -> dict[int, tuple[int, int]]:
    """broker -> (partitions whose preferred leader it is, how many of those it leads now). The
    controller takes every leadership away from a broker it fences; only a preferred-leader
    election gives them back, so a live broker that leads none of its own was fenced (or restarted)
    since the last one."""
    own: dict[int, list[bool]] = defaultdict(list)
    for p in partitions:
        if p.replicas:
            own[p.replicas[0]].append(p.leader == p.replicas[0])
    return {b: (len(led), sum(led)) for b, led in own.items()}


def isr_churn(
    facts: ChurnFacts,
    registered: frozenset[int],
    *,
    min_rejoins_per_s: float,
    controller_share: float,
    late_heartbeat_ms: float,
) -> ChurnFinding | None:
    """The churn the leaders' ISR meters show, the broker it centres on and its likely cause; None
    below ``min_rejoins_per_s`` (every leader's IsrExpandsPerSec summed).

    The broker: the one the controller has fenced now, else whose last heartbeat is older than
    ``late_heartbeat_ms``, else that has a replica out of an ISR now, else a live broker that leads
    none of the partitions it is the preferred leader of, else the one whose exporter (in its JVM)
    alone does not answer. The cause: GC pauses (the whole process stalls) when the broker was named
    by the controller's view or its silence, or when the leaders' own shrinks are at most
    ``controller_share`` of the rejoins (the controller did the removing: fencing); a slow follower
    when the leaders dropped it themselves for lagging."""
    rejoins = sum(m.expands for m in facts.meters.values())
    if rejoins < min_rejoins_per_s:
        return None
    shrinks = sum(m.shrinks for m in facts.meters.values())
    leaders = tuple(b for b, m in sorted(facts.meters.items(), key=lambda kv: (-kv[1].expands, kv[0])) if m.expands > 0)
    lost = {
        b
        for b, (own, led) in facts.preferred.items()
        if own > 0 and led == 0 and b in registered and b not in facts.out_of_isr
    }
    groups: dict[NamedBy, set[int]] = {
        "fenced": set(facts.fenced),
        "heartbeat": {b for b, age in facts.heartbeat_age_ms.items() if age >= late_heartbeat_ms},
        "silent": set(facts.silent) & registered,
        "out-of-isr": set(facts.out_of_isr),
        "lost-leadership": lost,
    }
    named_by = next((how for how in _NAMED_ORDER if groups[how]), None)
    picked = sorted(groups[named_by], key=lambda b: (-facts.preferred.get(b, (0, 0))[0], b)) if named_by else []
    by_controller = shrinks <= controller_share * rejoins
    stalled = named_by in ("fenced", "heartbeat", "silent") or by_controller
    return ChurnFinding(
        cause=GC_PAUSES if stalled else SLOW_FOLLOWER,
        broker=picked[0] if picked else None,
        named_by=named_by,
        rejoins_per_s=rejoins,
        shrinks_per_s=shrinks,
        leaders=leaders,
        others=tuple(picked[1:]),
    )
