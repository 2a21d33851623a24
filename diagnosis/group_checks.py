"""Consumer lag as a cause, for `why` (the lag-beyond-retention and consumers-slower-than-producers entries): every
group of the cluster read once, the lagging ones watched for a few reads and ranked by
``diagnosis.groups.rank``, so the answer names the group and its cause rather than the runbook's
first guess for "lag"."""

from __future__ import annotations

import asyncio

from diagnosis.findings import LiveFindings
from diagnosis.groups import Ranking, facts_from_reads, rank, summarize_groups, watch_group
from framework.reply import Action, Evidence, Severity
from live.gateway import AdminGateway, GatewayError

WATCHED = 3  # lagging groups watched (the largest lag first); the rest are listed
LISTED = 200  # groups read once
_ORDER: dict[str, int] = {"ok": 0, "info": 1, "warning": 2, "error": 3, "critical": 4}


async def _watch(gw: AdminGateway, group: str) -> Ranking | GatewayError:
    try:
        reads = await watch_group(gw, group)
    except GatewayError as exc:
        return exc
    return rank(facts_from_reads(group, reads))


async def check_group_lag(gw: AdminGateway) -> LiveFindings:
    listing = await gw.list_consumer_groups()
    summaries, skipped = await summarize_groups(gw, listing.groups, LISTED)
    lagging = [s for s in summaries if s.lagging]
    evidence = [
        Evidence("Consumer groups", f"{len(summaries):,} read, {len(lagging):,} behind", "live: list_groups", "neutral")
    ]
    notes = [f"{skipped} group(s) not read (at most {LISTED} per answer)."] if skipped else []
    failed = [s for s in summaries if s.error]
    for s in failed:
        evidence.append(Evidence(f"Group {s.group}", f"not read ({s.error})", "live", "bad"))
    if not lagging:
        verdict = (
            f"No consumer group is behind ({len(summaries)} read)."
            if summaries
            else "The cluster has no consumer groups with committed offsets."
        )
        severity: Severity = "warning" if failed else "ok"
        if failed:
            verdict += f" {len(failed)} group(s) could not be read, so this is partial."
        return LiveFindings(verdict, severity, evidence, notes=notes)
    # data lost first, then the largest lag
    watched = sorted(lagging, key=lambda s: (not s.deleted_unread, -(s.total_lag or 0)))[:WATCHED]
    results = await asyncio.gather(*(_watch(gw, s.group) for s in watched))
    lead: list[tuple[str, str]] = []
    sentences: list[str] = []
    severity = "info"
    for s, r in zip(watched, results):
        if isinstance(r, GatewayError):
            evidence.append(
                Evidence(f"Group {s.group}", f"{s.total_lag:,} behind; watching it failed ({r})", "live", "bad")
            )
            continue
        sentences.append(r.verdict)
        severity = max(severity, r.severity, key=_ORDER.__getitem__)
        evidence.append(
            Evidence(f"Group {s.group}", f"{r.status}: {r.lag:,} behind ({r.change:+,} while watched)", "live", "bad")
        )
        for c in r.causes:
            if c.considered or c.entry_id is None or any(e == c.entry_id for e, _ in lead):
                continue
            lead.append((c.entry_id, f"live: group {s.group}: {c.reason}"))
    others = len(lagging) - len(watched)
    if others:
        notes.append(f"{others} more group(s) are behind; `lag` lists them all.")
    actions = [Action(f"Lag of {s.group}", f"lag {s.group}") for s in watched]
    return LiveFindings(
        " ".join(sentences) or "Lagging groups could not be watched.", severity, evidence, lead, actions, notes
    )
