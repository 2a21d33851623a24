"""digest: a health digest for a channel: status, audit, hanging transactions, lag, lake trends.

Built for the scheduler as much as for people: every section is gathered on its own and a
failing call only turns its own section into "could not read: <why>", never the whole digest.

The lake's trends come through LakeService.query (diagnosis/lake_evidence.py, the commands' one way
into the lake), with its time limit: a timed-out query's Spark jobs are cancelled.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from diagnosis.durability import audit_topics
from diagnosis.groups import summarize_groups
from diagnosis.lake_evidence import FRESH_S
from diagnosis.lake_summary import lake_data_end, lake_rows
from diagnosis.live_common import brokers_evidence
from diagnosis.snapshot import Snapshot, name_partitions, snapshot
from diagnosis.thresholds import hot_rule
from diagnosis.txn_checks import transaction_findings
from diagnosis.txn_evidence import read_open_transactions
from framework.context import Context
from framework.gateways import gateway
from framework.reply import Action, Evidence, Reply, Section, Severity
from framework.router import BadInput, check_group
from framework.spec import Command, CommandRequest, CommandSpec, Option
from kbot_settings import KbotSettings
from live.gateway import AdminGateway, ClusterUnreachable

MAX_GROUPS = 20  # one coordinator round trip each; a digest is a summary, not a lag report
LISTED_GROUPS = 100  # groups read when none are named (batched per coordinator); the rest are counted
GROUPS_ENV = "KBOT_DIGEST_GROUPS"
_RANK: dict[str, int] = {"ok": 0, "info": 1, "warning": 2, "critical": 3, "error": 2}

SPEC = CommandSpec(
    words=("digest",),
    summary="Health digest: brokers and partition counts, audit findings, hanging transactions, group lag, lake trends.",
    options=(
        Option(
            "groups",
            f"comma-separated consumer groups to report lag for (default: ${GROUPS_ENV}, "
            f"else every group of the cluster, up to {LISTED_GROUPS})",
        ),
        Option("hours", "how far back the lake trends look (default 24)", kind="int"),
    ),
    examples=("digest", "digest --groups payments,billing"),
)


@dataclass
class Part:
    """One section of the digest, with how bad it is and the evidence lines it contributes."""

    section: Section
    severity: Severity = "ok"
    evidence: list[Evidence] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)


ReadSnapshot = Callable[[], Awaitable[Snapshot]]


def _snapshot_once(gw: AdminGateway) -> ReadSnapshot:
    """Status and Audit read the same metadata and topic configs: one read serves both. Only a
    read that succeeded is kept, so a section after a failed one asks the cluster again."""
    kept: list[Snapshot] = []

    async def read() -> Snapshot:
        if not kept:
            kept.append(await snapshot(gw, min_isr="all"))
        return kept[0]

    return read


async def _status(read_snapshot: ReadSnapshot) -> Part:
    snap = await read_snapshot()
    cats = snap.by_category()
    lines = [
        f"{label}: {len(cats[k]):,}" + (f" ({name_partitions(cats[k], 4)})" if cats[k] else "")
        for k, label in (
            ("UnderReplicated", "Under-replicated"),
            ("AtMinIsr", "At min ISR"),
            ("UnderMinIsr", "Under min ISR"),
            ("Offline", "Offline"),
        )
    ]
    brokers = brokers_evidence(snap)
    missing = sorted(snap.brokers.expected - snap.brokers.registered)
    # At min ISR by design (RF = min ISR) is the audit section's business, not a health problem.
    lost_to_floor = [p for p in cats["AtMinIsr"] if len(p.isr) < len(p.replicas)]
    sev: Severity = (
        "critical"
        if cats["Offline"] or cats["UnderMinIsr"]
        else "warning"
        if missing or cats["UnderReplicated"] or lost_to_floor
        else "ok"
    )
    actions = [Action("Why URP", "why URP")] if cats["UnderReplicated"] else []
    if missing:
        actions.append(Action("Triage", "triage URP"))
    return Part(
        Section(
            "Status",
            [
                f"Brokers registered: {brokers.value}",
                f"{snap.partition_count:,} partitions in {len(snap.topics):,} topic{'s' if len(snap.topics) != 1 else ''}",
                *lines,
            ],
        ),
        sev,
        [
            brokers,
            Evidence(
                "Partitions not fully in sync",
                f"{len(cats['UnderReplicated']):,}",
                "live: metadata",
                "bad" if cats["UnderReplicated"] else "ok",
            ),
        ],
        actions,
    )


async def _audit(read_snapshot: ReadSnapshot) -> Part:
    snap = await read_snapshot()
    topics = snap.topics
    findings = audit_topics(topics, snap.configs)
    critical = [f for f in findings if f.severity == "critical"]
    if not findings:
        every = f"All {len(topics):,} topics meet" if len(topics) != 1 else "The 1 topic meets"
        return Part(Section("Audit", [f"{every} the durability rules."]))
    lines = [
        f"{len(critical):,} critical, {len(findings) - len(critical):,} warning(s) on "
        f"{len({f.topic for f in findings}):,} topic(s)"
    ]
    lines += [
        f"[{f.severity}] {f.topic}: {f.text}" for f in (critical + [f for f in findings if f not in critical])[:5]
    ]
    return Part(
        Section("Audit", lines),
        "warning",
        [Evidence("Audit findings", f"{len(critical)} critical / {len(findings)} total", "audit", "bad")],
        [Action("Full audit", "audit")],
    )


async def _hanging(gw: AdminGateway, read_snapshot: ReadSnapshot) -> Part:
    snap = await read_snapshot()
    found = transaction_findings(await read_open_transactions(gw, topics=snap.topics))
    if found.severity == "ok":
        return Part(Section("Hanging transactions", ["No open transaction holds any partition back."]))
    lines = [found.verdict] + [f"{e.label}: {e.value}" for e in found.evidence[:10]]
    return Part(
        Section("Hanging transactions", lines),
        found.severity,
        [
            Evidence(
                "Open transactions blocking partitions",
                str(sum(1 for e in found.evidence if e.status == "bad")),
                "live: list_offsets + describe_producers + describe_transactions",
                "bad",
            )
        ],
        [Action("Hanging transactions", "hanging-txns")],
    )


def wanted_groups(option: object | None, settings: KbotSettings) -> list[str]:
    """Groups from --groups, else $KBOT_DIGEST_GROUPS; validated like any group id from a user."""
    raw = str(option) if option else (settings.kbot_digest_groups or "")
    groups = [check_group(g.strip()) for g in raw.split(",") if g.strip()]
    if len(groups) > MAX_GROUPS:
        raise BadInput(f"At most {MAX_GROUPS} groups per digest.")
    return list(dict.fromkeys(groups))


def lag_verdict(state: str, total: int, lagging: int) -> tuple[str, Severity]:
    """Lag now, in words. Whether it grows needs history (the lake's Burrow verdicts)."""
    if total == 0:
        return "caught up", "ok"
    if state in ("EMPTY", "DEAD"):
        return f"{total:,} behind with no members: nobody is consuming", "warning"
    return f"{total:,} behind on {lagging} partition(s)", "warning"


async def _lag(gw: AdminGateway, groups: list[str]) -> Part:
    if not groups:
        return await _lag_listed(gw)
    results = await asyncio.gather(*(gw.consumer_group_lag(g) for g in groups), return_exceptions=True)
    lines: list[str] = []
    worst: Severity = "ok"
    for g, r in zip(groups, results):
        if isinstance(r, BaseException):
            lines.append(f"{g}: could not read ({r})")
            continue
        text, sev = lag_verdict(r.state, r.total_lag, sum(1 for p in r.partitions if (p.lag or 0) > 0))
        lines.append(f"{g} ({r.state}): {text}")
        worst = max(worst, sev, key=_RANK.__getitem__)
    return Part(Section("Consumer lag (now)", lines), worst)


async def _lag_listed(gw: AdminGateway) -> Part:
    """No groups named: list the cluster's groups (ListGroups on every broker), read up to
    LISTED_GROUPS of them and show the lagging ones; the caught-up ones are counted."""

    listing = await gw.list_consumer_groups()
    summaries, skipped = await summarize_groups(gw, listing.groups, LISTED_GROUPS)
    lines: list[str] = []
    worst: Severity = "ok"
    hidden = 0
    for s in summaries:
        if not (s.error or s.lagging):
            continue
        text = f"could not read ({s.error})"
        if s.lagging:
            verdict, sev = lag_verdict(s.state, s.total_lag or 0, s.lagging_partitions)
            text = f"({s.state}): {verdict}"
            worst = max(worst, sev, key=_RANK.__getitem__)
        if len(lines) >= MAX_GROUPS:
            hidden += 1  # a digest is a summary: `lag` lists every group
            continue
        lines.append(f"{s.group}: {text}" if s.error else f"{s.group} {text}")
    if hidden:
        lines.append(f"{hidden} more group(s) behind or unread: `lag` lists them all.")
    quiet = [s.group for s in summaries if not s.error and not s.lagging]
    if quiet:
        lines.append(
            f"Caught up ({len(quiet)}): "
            + ", ".join(quiet[:10])
            + (f" and {len(quiet) - 10} more" if len(quiet) > 10 else "")
        )
    if not summaries:
        lines.append("No consumer groups in the cluster.")
    if skipped:
        lines.append(
            f"{skipped} more group(s) not read: at most {LISTED_GROUPS} per digest (name them with --groups "
            f"or ${GROUPS_ENV})."
        )
    if listing.failed_brokers:
        lines.append(
            "Not listed by broker(s) "
            + ", ".join(map(str, sorted(listing.failed_brokers)))
            + ": the groups they coordinate are missing."
        )
        worst = max(worst, "warning", key=_RANK.__getitem__)
    behind = sum(1 for s in summaries if s.lagging)
    actions = [Action("Consumer groups", "lag")] if behind else []
    return Part(
        Section("Consumer lag (now)", lines),
        worst,
        [
            Evidence(
                "Consumer groups behind",
                f"{behind} of {len(summaries)} read ({len(listing.groups)} listed)",
                "live: list_groups",
                "bad" if behind else "ok",
            )
        ],
        actions,
    )


def describe_age(seconds: float) -> str:
    """``35 s``, ``12 min``, ``3 h 5 min``, ``2 d 4 h``: how old the lake's data is."""
    s = max(0, int(seconds))
    if s < 120:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 2 * 86_400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86_400} d {s % 86_400 // 3600} h"


def freshness(data_end: dt.datetime | None, now: float) -> tuple[str, bool]:
    """("lake data to 10:42:10 UTC, 35 s old", stale?): stale past FRESH_S, the age at which the
    symptom commands stop trusting a healthy trend."""
    if data_end is None:
        return "no lake data in the window", True
    age = now - data_end.timestamp()
    return f"lake data to {data_end:%H:%M:%S} UTC, {describe_age(age)} old", age > FRESH_S


async def _lake(ctx: Context, cluster: str, hours: int) -> Part:
    if ctx.lake is None:
        return Part(Section("Trends (metric lake)", ["No lake data: no metric lake is configured."]), "info")
    hot = await lake_rows(ctx, cluster, hours, "hot_partitions", top=5)
    urp = await lake_rows(ctx, cluster, hours, "urp_trend")
    # "Hot" by the same rule as hot-partitions; idle partitions (0 rec/s) are not listed
    rule = hot_rule(ctx.kb)
    lines = [
        f"{'Hot' if rule.is_hot(r['records_per_sec'], r['skew']) else 'Busiest'}: {r['topic']}-{r['partition']} "
        f"{r['records_per_sec']:,.1f} rec/s" + (f" (skew {r['skew']:,.1f}x)" if r.get("skew") else "")
        for r in hot or []
        if (r["records_per_sec"] or 0) > 0
    ]
    shaped = [r for r in urp or [] if r["shape"] != "zero"]
    lines += [f"URP on broker {r['broker']}: {r['shape']} (max {r['max']:,.0f}, last {r['last']:,.0f})" for r in shaped]
    if not lines:
        lines = [
            f"No lake data for cluster {cluster} in the last {hours} h."
            if not hot and not urp
            else f"No hot partitions or URP in the last {hours} h."
        ]
    severity: Severity = "warning" if shaped else "ok"
    evidence: list[Evidence] = []
    if hot or urp:
        # how old the trends are: a quiet trend from a lake that stopped an hour ago says nothing
        age, stale = freshness(await lake_data_end(ctx, cluster, hours), ctx.clock())
        heading = f"Trends, last {hours} h (metric lake; {age})"
        evidence.append(
            Evidence(
                "Metric lake data",
                age + ("; is `kbot lake collect` running?" if stale else ""),
                "lake: freshness",
                "bad" if stale else "ok",
            )
        )
        if stale and severity == "ok":
            severity = "info"
    else:
        heading = f"Trends, last {hours} h (metric lake)"
    return Part(Section(heading, lines), severity, evidence)


async def _guard(heading: str, work: Awaitable[Part]) -> tuple[Part, Exception | None]:
    """One section's failure stays in that section."""
    try:
        return await work, None
    except Exception as exc:  # noqa: BLE001 - any failure, reported in place
        return Part(Section(heading, [f"Could not read: {type(exc).__name__}: {exc}"]), "error"), exc


async def run(request: CommandRequest, ctx: Context) -> Reply:
    groups = wanted_groups(request.options.get("groups"), ctx.settings)
    hours = int(request.options.get("hours") or 24)
    if not 1 <= hours <= 24 * 31:
        raise BadInput("--hours must be between 1 and 744 (31 days).")
    gw = await gateway(ctx, request.cluster)
    await ctx.progress("gathering the digest: status, audit, transactions, lag, lake")
    read_snapshot = _snapshot_once(gw)
    sections: list[tuple[str, Callable[[], Awaitable[Part]]]] = [
        ("Status", lambda: _status(read_snapshot)),
        ("Audit", lambda: _audit(read_snapshot)),
        ("Hanging transactions", lambda: _hanging(gw, read_snapshot)),
        ("Consumer lag", lambda: _lag(gw, groups)),
        ("Trends (metric lake)", lambda: _lake(ctx, gw.name, hours)),
    ]
    parts: list[Part] = []
    down: Exception | None = None
    # Sequential on purpose: a digest is not urgent, and once the cluster is found unreachable the
    # remaining live sections are skipped instead of each waiting out its own timeout.
    for heading, make in sections:
        if down is not None and heading != "Trends (metric lake)":
            parts.append(Part(Section(heading, [f"Skipped: the cluster did not answer ({down})."]), "error"))
            continue
        part, exc = await _guard(heading, make())
        if isinstance(exc, ClusterUnreachable):
            down = exc
        parts.append(part)
    worst = max((p.severity for p in parts), key=_RANK.__getitem__)
    failed = [p.section.heading for p in parts if p.severity == "error"]
    problems = [p.section.heading for p in parts if p.severity in ("warning", "critical")]
    verdict = "Healthy." if not problems else "Needs attention: " + ", ".join(problems) + "."
    if failed:
        verdict += f" Could not read: {', '.join(failed)}."
    severity: Severity = "critical" if worst == "critical" else "warning" if problems or failed else "ok"
    return Reply(
        title=f"Kafka digest ({gw.name})",
        severity=severity,
        verdict=verdict,
        evidence=[e for p in parts for e in p.evidence],
        sections=[p.section for p in parts],
        actions=[a for p in parts for a in p.actions][:5],
    )


COMMAND = Command(SPEC, run)
