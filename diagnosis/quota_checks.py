"""Client quotas as a cause: the limits the brokers enforce per user / client id
(DescribeClientQuotas), read for `why` (the client-quota-throttling entry), `status` and the
composite answers. A throttled client is slow with idle brokers, so the quota must be named
before any broker-side cause is considered."""

from __future__ import annotations

from dataclasses import dataclass, field

from diagnosis.entry_ids import CLIENT_QUOTA_THROTTLING
from diagnosis.findings import LiveFindings
from framework.reply import Action, Evidence
from live.gateway import AdminGateway, GatewayError
from live.model import ClientQuota

SOURCE = "live: describe_client_quotas"
# the keys that throttle a client's produce / fetch rate or its request time
THROTTLING_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")


@dataclass
class QuotaRead:
    """The quotas that can throttle a client, or why they could not be read."""

    quotas: list[ClientQuota] = field(default_factory=list)
    error: str | None = None

    @property
    def throttling(self) -> list[ClientQuota]:
        return [q for q in self.quotas if any(k in q.values for k in THROTTLING_KEYS)]


async def read_quotas(gw: AdminGateway) -> QuotaRead:
    try:
        return QuotaRead(await gw.client_quotas())
    except GatewayError as exc:
        return QuotaRead(error=str(exc))


def _limit_text(q: ClientQuota) -> str:
    parts = []
    for k, v in q.values.items():
        unit = " B/s per broker" if k.endswith("byte_rate") else "% of a thread" if k == "request_percentage" else ""
        parts.append(f"{k}={v:,.0f}{unit}")
    return ", ".join(parts)


def quota_evidence(read: QuotaRead) -> list[Evidence]:
    if read.error is not None:
        return [Evidence("Client quotas", f"not read ({read.error})", SOURCE, "bad")]
    return [Evidence(f"Client quota {q.entity_label}", _limit_text(q), SOURCE, "bad") for q in read.throttling]


def quota_sentence(read: QuotaRead) -> str:
    """One sentence naming every throttling quota (entity and value), '' when none is set."""
    qs = read.throttling
    if not qs:
        return ""
    named = "; ".join(f"{q.entity_label} ({_limit_text(q)})" for q in qs[:4]) + (" ..." if len(qs) > 4 else "")
    return f"Client quota{'s' if len(qs) > 1 else ''} in force: {named}."


def quota_findings(read: QuotaRead) -> LiveFindings:
    """Pure: the client-quota answer from what was read."""
    evidence = quota_evidence(read)
    if read.error is not None:
        return LiveFindings(
            f"The client quotas could not be read ({read.error}), so whether a quota throttles the client is "
            "unknown; its produce-throttle-time-avg / fetch-throttle-time-avg say whether the brokers hold it back.",
            "warning",
            evidence,
        )
    qs = read.throttling
    if not qs:
        return LiveFindings(
            "No client quota is set on this cluster (no user, client-id or default quota), so a quota is not "
            "what slows the client; with throttle time still reported, check the brokers' request handlers.",
            "info",
            [Evidence("Client quotas", "none set", SOURCE, "ok")],
        )
    first = qs[0]
    verdict = (
        quota_sentence(read)
        + " A client above its quota is not refused: each broker delays its responses and mutes its connection "
        "for the throttle time it reports (produce-throttle-time-avg / fetch-throttle-time-avg), so the client "
        "runs at the quota's pace while the brokers stay idle. Raise or remove the quota if the rate is legitimate."
    )
    name = first.entity.get("client-id") or first.entity.get("user") or ""
    actions = [Action(f"Runbook: {CLIENT_QUOTA_THROTTLING}", f"runbook {CLIENT_QUOTA_THROTTLING}")]
    lead = [(CLIENT_QUOTA_THROTTLING, f"live: quota {first.entity_label}: {_limit_text(first)}")]
    notes = [] if name else ["The quota is a default one: it applies to every client without a quota of its own."]
    return LiveFindings(verdict, "warning", evidence, lead, actions, notes)


async def check_client_quotas(gw: AdminGateway) -> LiveFindings:
    return quota_findings(await read_quotas(gw))
