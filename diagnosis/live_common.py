"""What every live check shares: the brokers line, the stale-view lines, why brokers that are down
stopped, and how a check that could not read the cluster still answers (run_check, unreachable)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from diagnosis.entry_ids import BROKER_LOSS
from diagnosis.findings import LiveFacts, LiveFindings, Undecided
from diagnosis.snapshot import Snapshot, broker_list, name_partitions
from framework.partial import note_missing
from framework.reply import Evidence, Step
from live.gateway import AdminGateway, GatewayError, NotAuthorized
from live.model import PartitionView
from runbook_kb import KnowledgeBase, default_kb


def brokers_evidence(snap: Snapshot) -> Evidence:
    missing = sorted(snap.brokers.expected - snap.brokers.registered)
    registered = len(snap.brokers.registered)
    expected = len(snap.brokers.expected)
    value = f"{registered} of {expected}" + (f" (missing: {broker_list(missing)})" if missing else "")
    return Evidence("Brokers registered", value, "live: describe_cluster", "bad" if missing else "ok")


LOG_DIRS_BUDGET_S = 1.5  # a healthy broker answers DescribeLogDirs (and the reassignment listing) in milliseconds


T = TypeVar("T")


async def nothing() -> None:
    """An awaitable stand-in for a read that is not made (gathered beside real reads)."""
    return None


async def ready(v: T) -> T:
    """An awaitable of a value already in hand (gathered beside reads that are retried)."""
    return v


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


def facts_of(snap: Snapshot) -> LiveFacts:
    cats = snap.by_category()
    return LiveFacts(
        under_replicated=sum(1 for p in snap.states if len(p.isr) < len(p.replicas) and p.has_leader),
        offline=len(cats["Offline"]),
        missing_brokers=frozenset(snap.brokers.expected - snap.brokers.registered),
        out_of_isr=Counter(b for p in snap.states for b in p.replicas if b not in p.isr),
    )


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
