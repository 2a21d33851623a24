"""Partition reassignments as a finding of their own (ListPartitionReassignments): which partitions
are moving, to which brokers, under which replication throttle, and whether a target broker is gone,
which stalls the move until it returns or the move is cancelled. Read by `why` (the
stalled-reassignment entry), `status` and the broker-loss answer, so a reassignment is never lost
from an answer about something else that broke at the same time."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from diagnosis.entry_ids import BROKER_LOSS, STALLED_REASSIGNMENT
from diagnosis.findings import LiveFindings
from diagnosis.snapshot import broker_list, name_partitions
from framework.reply import Action, Evidence, Severity
from live.gateway import AdminGateway, GatewayError
from live.model import ConfigValue, Reassignment

SOURCE = "live: list_partition_reassignments"
THROTTLE_RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
NO_THROTTLE = "9223372036854775807"  # Long.MAX_VALUE: the broker's "no throttle"


@dataclass
class ReassignmentRead:
    moves: list[Reassignment] = field(default_factory=list)
    registered: frozenset[int] = frozenset()
    throttles: dict[int, dict[str, int]] = field(default_factory=dict)  # broker -> rate key -> B/s
    error: str | None = None

    @property
    def dead_targets(self) -> list[int]:
        return sorted({b for m in self.moves for b in m.adding if b not in self.registered})

    @property
    def stalled(self) -> list[Reassignment]:
        return [m for m in self.moves if any(b not in self.registered for b in m.adding)]


async def _ready(listed: list[Reassignment]) -> list[Reassignment]:
    return listed


def _rates(cfg: dict[str, ConfigValue]) -> dict[str, int]:
    out = {}
    for k in THROTTLE_RATE_KEYS:
        v = cfg[k].value if k in cfg else None
        if v and v != NO_THROTTLE and v.isdigit():
            out[k] = int(v)
    return out


async def read_reassignments(
    gw: AdminGateway, registered: frozenset[int] | None = None, listed: list[Reassignment] | None = None
) -> ReassignmentRead:
    """The reassignments in progress (``listed``: already read by the caller), the registered
    brokers (read here unless given) and, when something is moving, the replication throttles of
    the registered brokers."""
    try:
        if registered is None:
            moves, cluster = await asyncio.gather(
                gw.reassignments() if listed is None else _ready(listed), gw.describe_cluster()
            )
            registered = frozenset(b.id for b in cluster.brokers)
        else:
            moves = await gw.reassignments() if listed is None else listed
    except GatewayError as exc:
        return ReassignmentRead(error=str(exc))
    throttles: dict[int, dict[str, int]] = {}
    if moves:
        try:
            configs = await gw.broker_configs(sorted(registered))
        except GatewayError:
            configs = {}
        throttles = {b: r for b, cfg in configs.items() if (r := _rates(cfg))}
    return ReassignmentRead(moves, registered, throttles)


def throttle_text(read: ReassignmentRead) -> str:
    if not read.throttles:
        return "no replication throttle set"
    by_value: dict[str, list[int]] = {}
    for b, rates in sorted(read.throttles.items()):
        text = ", ".join(f"{k}={v:,} B/s" for k, v in rates.items())
        by_value.setdefault(text, []).append(b)
    return "; ".join(f"{t} on broker {broker_list(bs)}" for t, bs in by_value.items())


def _move_text(moves: list[Reassignment]) -> str:
    topics = sorted({m.topic for m in moves})
    targets = sorted({b for m in moves for b in m.adding})
    return (
        f"{len(moves)} partition(s) of topic {', '.join(topics)} ({name_partitions([(m.topic, m.partition) for m in moves], 4)}) "
        f"moving to broker {broker_list(targets)}"
    )


def reassignment_sentence(read: ReassignmentRead) -> str:
    """One sentence naming the reassignment, its topics, targets and throttle ('' when none runs)."""
    if not read.moves:
        return ""
    if read.stalled:
        dead = read.dead_targets
        return (
            f"A reassignment is stalled: {_move_text(read.stalled)}, but broker {broker_list(dead)} "
            f"{'is' if len(dead) == 1 else 'are'} gone, so it cannot complete until {'it returns' if len(dead) == 1 else 'they return'} "
            f"or the move is cancelled; throttle: {throttle_text(read)}."
        )
    return f"A reassignment is running: {_move_text(read.moves)}; throttle: {throttle_text(read)}."


def reassignment_evidence(read: ReassignmentRead) -> list[Evidence]:
    if read.error is not None:
        return [Evidence("Reassignments", f"not read ({read.error})", SOURCE, "bad")]
    if not read.moves:
        return []
    out = [
        Evidence(
            "Reassignment" + (" (stalled)" if read.stalled else ""),
            _move_text(read.stalled or read.moves),
            SOURCE,
            "bad",
        )
    ]
    if read.dead_targets:
        out.append(
            Evidence(
                "Reassignment target gone",
                f"broker {broker_list(read.dead_targets)} not registered",
                "live: describe_cluster",
                "bad",
            )
        )
    out.append(
        Evidence(
            "Replication throttle", throttle_text(read), "live: broker configs", "bad" if read.throttles else "neutral"
        )
    )
    return out


def reassignment_findings(read: ReassignmentRead) -> LiveFindings:
    """Pure: the answer about reassignments from what was read."""
    evidence = reassignment_evidence(read)
    if read.error is not None:
        return LiveFindings(f"The reassignments in progress could not be read ({read.error}).", "warning", evidence)
    if not read.moves:
        return LiveFindings(
            "No partition reassignment is in progress.", "ok", [Evidence("Reassignments", "none", SOURCE, "ok")]
        )
    severity: Severity = "critical" if read.stalled else "info"
    lead = [(STALLED_REASSIGNMENT, "live: " + reassignment_sentence(read))] if read.stalled else []
    actions = [Action(f"Runbook: {STALLED_REASSIGNMENT}", f"runbook {STALLED_REASSIGNMENT}")] if read.stalled else []
    return LiveFindings(reassignment_sentence(read), severity, evidence, lead, actions)


async def check_reassignments(gw: AdminGateway) -> LiveFindings:
    return reassignment_findings(await read_reassignments(gw))


@dataclass
class BesideFault:
    """What a reassignment in flight adds to an answer about another fault (`why URP`)."""

    verdict: str
    evidence: list[Evidence]
    lead: list[tuple[str, str]]
    stalled: bool  # a target broker is gone: the move is no expected operation any more


# ListPartitionReassignments goes to one broker, which may be the one whose request threads hang on a
# stalled disk: then it waits the whole admin timeout (10 s), and an answer about another fault must not
BESIDE_BUDGET_S = 3.0


async def beside_fault(
    gw: AdminGateway, registered: frozenset[int], verdict: str, listed: list[Reassignment] | None = None
) -> BesideFault:
    """The answer's verdict with the reassignment in flight named in it (its topics, targets and
    throttle), so a broker lost in the middle of a move does not hide the move, and the move does
    not hide the lost broker. Unchanged when nothing moves; a failed or late read is one evidence
    row. ``listed``: the reassignments the caller already read (not asked again)."""
    try:
        read = await asyncio.wait_for(read_reassignments(gw, registered, listed), BESIDE_BUDGET_S)
    except asyncio.TimeoutError:
        late = f"not read within {BESIDE_BUDGET_S:g} s: the broker asked did not answer"
        return BesideFault(verdict, [Evidence("Reassignments", late, SOURCE, "bad")], [], False)
    evidence = reassignment_evidence(read)
    if read.error is not None or not read.moves:
        return BesideFault(verdict, evidence, [], False)
    sentence = reassignment_sentence(read)
    if not read.stalled:
        return BesideFault(f"{verdict} {sentence}", evidence, [], False)
    dead = read.dead_targets
    gone = f"Broker {broker_list(dead)} is gone"
    lead = [
        (BROKER_LOSS, f"live: broker {broker_list(dead)} not registered"),
        (STALLED_REASSIGNMENT, "live: " + sentence),
    ]
    text = f"{verdict} {sentence}" if gone in verdict else f"{gone}. {sentence}"
    return BesideFault(text, evidence, lead, True)
