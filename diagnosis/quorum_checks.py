"""The controller quorum and the brokers' metadata lag behind it, read live."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from diagnosis.entry_ids import (
    CONTROLLER_QUORUM_LOSS,
    METADATA_LAG,
)
from diagnosis.findings import LiveFindings
from diagnosis.snapshot import broker_list
from framework.partial import note_missing
from framework.reply import Action, Evidence, Severity
from live.gateway import AdminGateway, GatewayError, NotAuthorized
from live.model import QuorumInfo
from live.probe import ProbeResult
from runbook_kb import KnowledgeBase, default_kb


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
